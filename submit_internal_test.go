package gpusched

import (
	"context"
	"errors"
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

// recordingValidator records the tasks whose payloads it is asked to
// validate, in the order asked; it refuses payload "bad".
type recordingValidator struct {
	CommandHandler
	asked []string // not guarded: prepare must call it from one goroutine
}

func (v *recordingValidator) ValidatePayload(t *TaskSpec) error {
	v.asked = append(v.asked, t.ID)
	if t.Payload == "bad" {
		return &TaskError{TaskID: t.ID, Field: "payload", Reason: "bad", Kind: ErrInvalidTask}
	}
	return nil
}

// prepare checks a batch's tasks across the processors, yet says what a
// check in task order says: the first problem of the batch, whatever its
// kind; a handler's ValidatePayload (the caller's code) is asked in task
// order, one task at a time, and never about a task after the first
// invalid one.
func TestPrepareInParallelSaysTheFirstProblem(t *testing.T) {
	defer func(n int) { parallelMin = n }(parallelMin)
	parallelMin = 1
	for _, c := range []struct {
		name    string
		invalid map[int]string // task index: what is wrong with it ("args", "id", "bad", "kind")
		first   string         // the task the error names
	}{
		{"none", nil, ""},
		{"a command's args, then an id", map[int]string{12: "args", 20: "id"}, "t12"},
		{"a payload its handler refuses, then args", map[int]string{9: "bad", 5: "", 25: "args"}, "t09"},
		{"an unknown kind, then a refused payload", map[int]string{7: "kind", 11: "bad"}, "t07"},
	} {
		v := &recordingValidator{}
		handlers := map[string]Handler{"command": CommandHandler{}, "rec": v}
		var tasks []TaskSpec
		var wantAsked []string
		stop := 30
		for i := range 30 {
			ts := TaskSpec{ID: fmt.Sprintf("t%02d", i), Payload: []string{"true"}}
			if i%3 == 0 {
				ts.Kind, ts.Payload = "rec", "fine"
			}
			switch c.invalid[i] {
			case "args":
				ts.Kind, ts.Payload = "", []string{}
			case "id":
				ts.ID = "not an id!"
			case "bad":
				ts.Kind, ts.Payload = "rec", "bad"
			case "kind":
				ts.Kind = "nobody"
			}
			if _, ok := c.invalid[i]; ok && c.invalid[i] != "" && i < stop {
				stop = i
			}
			tasks = append(tasks, ts)
		}
		for i, ts := range tasks {
			if ts.Kind == "rec" && i <= stop {
				wantAsked = append(wantAsked, ts.ID)
			}
		}
		specs, blobs, err := prepare(tasks, handlers, false, true)
		var te *TaskError
		switch {
		case c.first == "" && (err != nil || len(specs) != 30 || len(blobs) != 30 || blobs[29] == nil):
			t.Errorf("%s: %d specs, %d blobs, %v", c.name, len(specs), len(blobs), err)
		case c.first != "" && (!errors.As(err, &te) || te.TaskID != c.first):
			t.Errorf("%s: %v; want the error of %s", c.name, err, c.first)
		}
		if !slices.Equal(v.asked, wantAsked) {
			t.Errorf("%s: ValidatePayload asked about %v; want %v", c.name, v.asked, wantAsked)
		}
	}
}
