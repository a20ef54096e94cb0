package store

import (
	"cmp"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/task"
)

// LoadJudged reads the same ids, definitions, states,
// fingerprints, GPU requests, attempts, handles, artifacts and inputs as
// Load, and leaves every other column zero.
func TestLoadJudgedReadsWhatJudgingNeeds(t *testing.T) {
	s, err := OpenSQLite(filepath.Join(t.TempDir(), "state.db"), "/run")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Unix(1_700_000_000, 0)
	code, one := 0, 1
	batch := &Batch{
		Tasks: []TaskWrite{
			{ID: "b", Seq: 2, Kind: "command", Spec: []byte(`{"id":"b"}`), State: task.Complete, ExitCode: &code,
				Fingerprint: "fb", GPURequestMiB: 4096, Submitted: at, Rerun: "forced",
				Artifacts: []task.Artifact{{Path: "out/b.bin", Size: 12, ModTime: at, SHA256: "ab"}}, ArtifactsSet: true},
			{ID: "a", Seq: 1, Kind: "shell", Spec: []byte(`{"id":"a"}`), State: task.Failed, ExitCode: &one,
				Fingerprint: "fa", Error: "exit status 1", Submitted: at},
			{ID: "c", Seq: 3, Kind: "command", Spec: []byte(`{"id":"c"}`), State: task.Blocked, BlockedBy: "a", NotNeeded: true},
			{ID: "d", Seq: 4, Kind: "command", Spec: []byte(`{"id":"d"}`), State: task.Pending, Paused: true,
				WaitKind: task.WaitRetryDelay, WaitDetail: "retry 2", RetryAt: at.Add(time.Minute)},
		},
		Attempts: []AttemptWrite{
			{TaskID: "b", Attempt: task.Attempt{Number: 1, Start: at, End: at.Add(time.Second), ExitCode: &code, PID: 7, MemPeakMiB: 3000},
				Handle: executor.Handle{Executor: "local", Version: 1, Data: []byte("h")}},
			{TaskID: "a", Attempt: task.Attempt{Number: 1, Start: at, End: at.Add(time.Second), ExitCode: &one, PID: 8}},
		},
		Inputs: []InputsWrite{{TaskID: "b", Inputs: []task.Input{{Path: "in/p.json", Size: 3, ModTime: at}}}},
	}
	if err := s.Apply(batch); err != nil {
		t.Fatal(err)
	}
	all, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadJudged()
	if err != nil {
		t.Fatal(err)
	}
	want := make([]Row, len(all))
	for i, r := range all {
		want[i] = Row{Spec: r.Spec, GPURequestMiB: r.GPURequestMiB, Fingerprint: r.Fingerprint,
			Inputs: r.Inputs, Handles: r.Handles,
			Record: task.Record{ID: r.ID, State: r.State, Attempts: r.Attempts, Artifacts: r.Artifacts}}
	}
	slices.SortFunc(got, func(a, b Row) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(want, func(a, b Row) int { return cmp.Compare(a.ID, b.ID) })
	if !reflect.DeepEqual(got, want) {
		t.Errorf("LoadJudged:\n%+v\nwant (Load's, other columns zero):\n%+v", got, want)
	}
	// The fixture must exercise what LoadJudged leaves out and keeps.
	if b := want[1]; b.GPURequestMiB != 4096 || len(b.Artifacts) != 1 || len(b.Inputs) != 1 || len(b.Handles) != 1 {
		t.Fatalf("fixture: task b read back as %+v", b)
	}
	if all[0].Error == "" || !all[3].Paused || !all[2].NotNeeded {
		t.Fatalf("fixture: other columns not set: %+v", all)
	}
}
