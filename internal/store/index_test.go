package store

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

// Briefs gives every task in submission order with the index fields of its
// definition, and the summary of the finished ones only.
func TestBriefs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := OpenSQLite(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Unix(1700000000, 0)
	exit := 3
	b := &Batch{Tasks: []TaskWrite{
		{ID: "b", Seq: 2, Kind: "command", State: task.Pending, Submitted: t0,
			Spec: []byte(`{"id":"b","kind":"command","dependencies":["a"],"payload":["echo","hi"],"dir":"/w","owner":"1001","env":{"HOME":"/h"}}`)},
		{ID: "a", Seq: 1, Kind: "command", State: task.Failed, ExitCode: &exit, Error: "exit 3", Submitted: t0,
			Spec: []byte(`{"id":"a","kind":"command","payload":["false"],"env":{"X":"1"}}`)},
	}, Attempts: []AttemptWrite{
		{TaskID: "a", Attempt: task.Attempt{Number: 1, Start: t0, End: t0.Add(time.Second), ExitCode: &exit}},
		{TaskID: "a", Attempt: task.Attempt{Number: 2, Start: t0.Add(2 * time.Second), End: t0.Add(3 * time.Second), ExitCode: &exit}},
	}}
	if err := s.Apply(b); err != nil {
		t.Fatal(err)
	}
	got, err := s.Briefs()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "a" || got[1].ID != "b" {
		t.Fatalf("briefs = %+v, want a then b", got)
	}
	a, p := got[0], got[1]
	if a.State != task.Failed || a.Attempts != 2 || a.Last == nil || a.Last.Number != 2 || !a.Last.End.Equal(t0.Add(3*time.Second)) ||
		a.ExitCode == nil || *a.ExitCode != 3 || a.Error != "exit 3" || !a.Submitted.Equal(t0) || !slices.Equal(a.Argv, []string{"false"}) {
		t.Errorf("finished brief = %+v (last %+v)", a, a.Last)
	}
	if p.State != task.Pending || p.Owner != "1001" || p.Dir != "/w" || !slices.Equal(p.Argv, []string{"echo", "hi"}) ||
		!slices.Equal(p.Dependencies, []string{"a"}) {
		t.Errorf("unfinished brief = %+v", p)
	}
	if p.Attempts != 0 || p.Last != nil || !p.Submitted.IsZero() {
		t.Errorf("unfinished brief has a summary: %+v", p.Summary)
	}
}
