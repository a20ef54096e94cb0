package daemon

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/gpusched/gpusched/client"
)

// The hand-written queue is what encoding/json writes, byte for byte.
func TestQueueJSONIsEncodingJSONs(t *testing.T) {
	code, card := 3, 0
	at := time.Date(2026, 12, 2, 21, 23, 31, 123456789, time.FixedZone("x", 3600))
	plain := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tricky := "a\"b\\c\n\r\t\b\f\x00\x1f<tag>&amp; é 日本 \u2028\u2029 \xff\xfe end"
	tasks := []client.TaskInfo{
		{},
		{ID: "12", Run: "12", Kind: "command", Name: "sh", Owner: "alice", UID: 1000, State: "pending", Submitted: plain},
		{ID: "13/train", Run: "13", Kind: "workflow", Name: tricky, Owner: tricky, UID: 1001, State: "failed", Attempts: 2,
			ExitCode: &code, GPU: &card, GPUs: []int{0, 3, 12}, Waiting: tricky, WaitingKind: "gpu-memory", Paused: true, Error: tricky, BlockedBy: "13/prep", NotNeeded: true, Submitted: at, Started: &at, Ended: &plain,
			GPUMiB: 12544, GPUMiBSource: "history", GPUBudget: tricky,
			MemoryMiBHost: 768, MemoryMiBHostSource: "max", HostBudget: tricky,
			Job:     &client.Job{System: "Slurm", ID: "4242", State: "PENDING", Node: tricky, Reason: "Priority", Queued: true},
			Command: []string{"python", tricky, ""}, Dir: "/home/a b"},
		{ID: "14", Run: "14", State: "running", Job: &client.Job{ID: "7", Reason: "submission waits"}},
		{ID: "15", Run: "15", State: "running", Job: &client.Job{}},
	}
	full := reflect.ValueOf(tasks[2])
	for i := range full.NumField() {
		if full.Field(i).IsZero() {
			t.Errorf("the test leaves TaskInfo.%s unset: set it, and write it in queuejson.go", full.Type().Field(i).Name)
		}
	}
	for _, tasks := range [][]client.TaskInfo{{}, tasks} {
		want, err := json.Marshal(client.Queue{Tasks: tasks})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, '\n')
		var got bytes.Buffer
		if err := writeQueue(&got, tasks); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("hand-written:\n%s\nencoding/json:\n%s", got.Bytes(), want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "<&>", "\x00\x7f\xff", "\u2028", "é\xe9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	})
}
