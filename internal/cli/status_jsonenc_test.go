package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

// filler sets values to random ones, every field of every struct,
// recursively: strings JSON escapes or not, numbers of every size,
// absent and empty lists, maps and pointers, times in several zones.
type filler struct{ r *rand.Rand }

var fillStrings = []string{"", "a", "task-000001", "/run/logs/t/attempt-1.log", "<&>", "dé", "日本", "\u2028\u2029", "\x00\x1f",
	`"q"\`, "\xff\xc3", "line\nbreak\ttab", "exit code 1", "gpu-memory"}

var fillZones = []*time.Location{time.UTC, time.Local, time.FixedZone("", 5*3600+1800), time.FixedZone("X", -(23*3600 + 59*60))}

func (f filler) fill(v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(fillStrings[f.r.IntN(len(fillStrings))])
	case reflect.Bool:
		v.SetBool(f.r.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		switch f.r.IntN(4) {
		case 0:
			v.SetInt(0)
		case 1:
			v.SetInt(int64(f.r.IntN(200) - 100))
		default:
			n := f.r.Int64() >> (f.r.IntN(64 - v.Type().Bits() + 1))
			if f.r.IntN(2) == 0 {
				n = -n
			}
			if !v.OverflowInt(n) {
				v.SetInt(n)
			}
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(f.r.IntN(24))) // enums: their names, and past them
	case reflect.Float32, reflect.Float64:
		v.SetFloat(f.r.NormFloat64() * 1e3)
	case reflect.Pointer:
		if depth > 6 || f.r.IntN(3) == 0 {
			return
		}
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		if depth > 6 || f.r.IntN(4) == 0 {
			return
		}
		s := reflect.MakeSlice(v.Type(), f.r.IntN(4), 4)
		for i := range s.Len() {
			f.fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		if depth > 6 || f.r.IntN(4) == 0 {
			return
		}
		m := reflect.MakeMap(v.Type())
		for range f.r.IntN(4) {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			f.fill(k, depth+1)
			f.fill(e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			if f.r.IntN(5) > 0 {
				t := time.Unix(0, f.r.Int64()>>f.r.IntN(3)).In(fillZones[f.r.IntN(len(fillZones))])
				v.Set(reflect.ValueOf(t))
			}
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i), depth+1)
			}
		}
	}
}

// encodeBoth writes doc by hand and through encoding/json.
func encodeBoth(doc *statusJSON) (got, want []byte, gotErr, wantErr error) {
	var g, w bytes.Buffer
	gotErr = writeStatusDoc(&g, doc, len(doc.Tasks), func(i int) taskJSON { return doc.Tasks[i] })
	enc := json.NewEncoder(&w)
	enc.SetIndent("", "  ")
	wantErr = enc.Encode(doc)
	return g.Bytes(), w.Bytes(), gotErr, wantErr
}

// The status document is written as encoding/json writes it, whatever
// its tasks and cards hold: 3,000 random documents.
func TestStatusJSONAsEncodingJSON(t *testing.T) {
	t.Parallel()
	f := filler{rand.New(rand.NewPCG(1, 2))}
	for i := range 3000 {
		var doc statusJSON
		f.fill(reflect.ValueOf(&doc).Elem(), 0)
		if doc.Tasks == nil {
			doc.Tasks = []taskJSON{} // as status has it: a list, perhaps empty
		}
		got, want, gotErr, wantErr := encodeBoth(&doc)
		if gotErr != nil || wantErr != nil {
			t.Fatalf("document %d: errors %v and %v", i, gotErr, wantErr)
		}
		if !bytes.Equal(got, want) {
			at := firstDifference(got, want)
			t.Fatalf("document %d differs at byte %d:\n got …%s\nwant …%s", i, at, got[max(0, at-200):min(len(got), at+100)], want[max(0, at-200):min(len(want), at+100)])
		}
	}
}

// A time JSON cannot hold fails as it fails through encoding/json.
func TestStatusJSONTimeOutOfRange(t *testing.T) {
	t.Parallel()
	late := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, doc := range []statusJSON{
		{Tasks: []taskJSON{{ID: "a", RetryAt: &late}}},
		{Tasks: []taskJSON{{ID: "a", Started: &late}}},
		{Tasks: []taskJSON{}, GPUsAsOf: &late},
		{Tasks: []taskJSON{{ID: "a", History: []task.Attempt{{Number: 1, Start: late}}}}},
		{Tasks: []taskJSON{{ID: "a", History: []task.Attempt{{Number: 1, ReadyAt: late}}}}},
		{Tasks: []taskJSON{{ID: "a", History: []task.Attempt{{Number: 1, End: late}}}}},
	} {
		_, _, gotErr, wantErr := encodeBoth(&doc)
		if gotErr == nil || wantErr == nil || gotErr.Error() != wantErr.Error() {
			t.Errorf("errors %v, want %v", gotErr, wantErr)
		}
	}
}

// An error of the writer comes back.
func TestStatusJSONWriteError(t *testing.T) {
	t.Parallel()
	doc := statusJSON{Tasks: make([]taskJSON, 3000)}
	for i := range doc.Tasks {
		doc.Tasks[i].ID = strings.Repeat("t", 100)
	}
	full := errors.New("disk full")
	err := writeStatusDoc(failingWriter{full}, &doc, len(doc.Tasks), func(i int) taskJSON { return doc.Tasks[i] })
	if !errors.Is(err, full) {
		t.Errorf("error %v, want %v", err, full)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }
