package gpusched

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Tasks are judged against their earlier runs across the processors
// (submitWith); what a submission says of them comes in task order all
// the same: the tasks whose artifacts were edited, kept or not, and
// which of them run again. The batch is small, spread as a large one is.
func TestJudgingInParallelKeepsTaskOrder(t *testing.T) {
	defer func(n int) { parallelMin = n }(parallelMin)
	parallelMin = 1
	dir, runDir := t.TempDir(), t.TempDir()
	var tasks []TaskSpec
	for i := range 40 {
		art := fmt.Sprintf("a%02d.txt", i)
		if err := os.WriteFile(filepath.Join(dir, art), []byte("made"), 0o644); err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, TaskSpec{ID: fmt.Sprintf("t%02d", i), Dir: dir, Payload: []string{"true"}, Artifacts: []string{art}})
	}
	resume := func(opts SubmitOptions) ([]EditedTask, []Record) {
		t.Helper()
		s, err := New(runDir, Scheduling{MaxParallelTasks: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		edited, err := s.SubmitWith(context.Background(), tasks, opts)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := s.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return edited, recs
	}
	if _, recs := resume(SubmitOptions{}); len(recs) != 40 || recs[39].State != StateComplete {
		t.Fatalf("first run: %d records, the last %+v", len(recs), recs[len(recs)-1])
	}
	edit := []int{31, 3, 17} // in no order
	for _, i := range edit {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("a%02d.txt", i)), []byte("edited by hand"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, keep := range []bool{true, false} {
		edited, recs := resume(SubmitOptions{KeepEdited: keep})
		var ids []string
		for _, e := range edited {
			ids = append(ids, e.ID)
			if e.Kept != keep || !slices.Equal(e.Artifacts, []string{"a" + e.ID[1:] + ".txt"}) {
				t.Errorf("keep %v: %+v", keep, e)
			}
		}
		if want := []string{"t03", "t17", "t31"}; !slices.Equal(ids, want) {
			t.Errorf("keep %v: edited tasks %v, want %v", keep, ids, want)
		}
		var ran []string
		for _, r := range recs {
			if r.State != StateComplete {
				t.Errorf("keep %v: %s %s", keep, r.ID, r.State)
			}
			if len(r.Attempts) > 1 {
				ran = append(ran, r.ID)
			}
		}
		if want := []string{"t03", "t17", "t31"}; !keep && !slices.Equal(ran, want) || keep && len(ran) > 0 {
			t.Errorf("keep %v: ran again %v", keep, ran)
		}
	}
}
