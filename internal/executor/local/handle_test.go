package local

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/gpusched/gpusched/internal/executor"
)

// TestEncodeHandleIsJSON: the handle's data are byte for byte what
// json.Marshal wrote before, so that handles saved by either read alike.
func TestEncodeHandleIsJSON(t *testing.T) {
	for _, p := range []executor.Process{
		{},
		{PID: 1, PGID: 1, StartTicks: 1},
		{PID: 4194303, PGID: 4194303, StartTicks: math.MaxUint64},
		{PID: 30581, PGID: 30500, StartTicks: 6070709},
	} {
		want, _ := json.Marshal(handleData{PID: p.PID, PGID: p.PGID, StartTicks: p.StartTicks})
		h := EncodeHandle(p)
		if string(h.Data) != string(want) {
			t.Errorf("EncodeHandle(%+v) = %s, want %s", p, h.Data, want)
		}
		got, err := DecodeHandle(h)
		if err != nil || got != p {
			t.Errorf("DecodeHandle(EncodeHandle(%+v)) = %+v, %v", p, got, err)
		}
	}
}

// TestDecodeHandleOtherJSON: data written otherwise (other order, spaces,
// extra fields) still read through encoding/json; broken data fail.
func TestDecodeHandleOtherJSON(t *testing.T) {
	for _, c := range []struct {
		data string
		want executor.Process
		bad  bool
	}{
		{data: `{"pgid":7,"pid":8,"start_ticks":9}`, want: executor.Process{PID: 8, PGID: 7, StartTicks: 9}},
		{data: `{"pid": 8, "pgid": 7, "start_ticks": 9}`, want: executor.Process{PID: 8, PGID: 7, StartTicks: 9}},
		{data: `{"pid":8,"pgid":7,"start_ticks":9,"more":1}`, want: executor.Process{PID: 8, PGID: 7, StartTicks: 9}},
		{data: `{"pid":8,"pgid":7}`, want: executor.Process{PID: 8, PGID: 7}},
		{data: `{"pid":-8,"pgid":7,"start_ticks":9}`, want: executor.Process{PID: -8, PGID: 7, StartTicks: 9}},
		{data: `{"pid":8,"pgid":7,"start_ticks":9}x`, bad: true},
		{data: `{"pid":8,"pgid":7,"start_ticks":-9}`, bad: true},
		{data: `{"pid":"8"}`, bad: true},
		{data: ``, bad: true},
	} {
		got, err := DecodeHandle(executor.Handle{Executor: Name, Version: HandleVersion, Data: []byte(c.data)})
		if (err != nil) != c.bad || !c.bad && got != c.want {
			t.Errorf("DecodeHandle(%s) = %+v, %v; want %+v (error: %v)", c.data, got, err, c.want, c.bad)
		}
	}
}

func FuzzDecodeHandle(f *testing.F) {
	f.Add([]byte(`{"pid":30581,"pgid":30581,"start_ticks":6070709}`))
	f.Add([]byte(`{"pid":1,"pgid":2,"start_ticks":3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, ok := decodeWritten(b)
		if !ok {
			return
		}
		// What the short way reads, encoding/json reads alike.
		var j handleData
		if err := json.Unmarshal(b, &j); err != nil || j != d {
			t.Errorf("decodeWritten(%q) = %+v; json: %+v, %v", b, d, j, err)
		}
	})
}
