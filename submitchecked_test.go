package gpusched_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/gpusched/gpusched"
)

// checkedTasks is a small batch with what prepare normalizes or drops: a
// dependency, a priority, an environment, a budget on a task whose memory
// is not auto (the scheduler's to say, so dropped).
func checkedTasks() []gpusched.TaskSpec {
	return []gpusched.TaskSpec{
		{ID: "a", Payload: []string{"true"}, Priority: 3, Env: map[string]string{"K": "v"}},
		{ID: "b", Payload: []string{"echo", "b"}, Dependencies: []string{"a"}},
		{ID: "c", Payload: []string{"true"}, Dependencies: []string{"a", "b"}, Priority: -1},
	}
}

// SubmitChecked stores and admits the tasks CheckTasks accepted as
// SubmitWith does the same tasks, and the CheckedTasks is emptied.
func TestSubmitCheckedAsSubmitWith(t *testing.T) {
	ctx := context.Background()
	c, err := gpusched.CheckTasks(checkedTasks())
	if err != nil {
		t.Fatal(err)
	}
	checked, err := gpusched.New(t.TempDir(), gpusched.Scheduling{})
	if err != nil {
		t.Fatal(err)
	}
	defer checked.Close()
	if _, err := checked.SubmitChecked(ctx, c, gpusched.SubmitOptions{}); err != nil {
		t.Fatalf("SubmitChecked: %v", err)
	}
	plain, err := gpusched.New(t.TempDir(), gpusched.Scheduling{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.SubmitWith(ctx, checkedTasks(), gpusched.SubmitOptions{}); err != nil {
		t.Fatalf("SubmitWith: %v", err)
	}
	for _, id := range []string{"a", "b", "c"} {
		got, ok, err := checked.Lookup(id)
		if err != nil || !ok {
			t.Fatalf("Lookup(%s) after SubmitChecked: %v, %v", id, ok, err)
		}
		want, _, _ := plain.Lookup(id)
		if !reflect.DeepEqual(got.Spec, want.Spec) || got.Record.State != want.Record.State {
			t.Errorf("task %s: SubmitChecked stored %+v (%s), SubmitWith %+v (%s)", id, got.Spec, got.Record.State, want.Spec, want.Record.State)
		}
	}
	// c was the first scheduler's: a second submission of it adds nothing.
	again, err := gpusched.New(t.TempDir(), gpusched.Scheduling{})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := again.SubmitChecked(ctx, c, gpusched.SubmitOptions{}); err != nil {
		t.Fatalf("SubmitChecked again: %v", err)
	}
	if n := len(again.Records()); n != 0 {
		t.Errorf("SubmitChecked of a submitted CheckedTasks added %d tasks, want none", n)
	}
}

// refusing is a command handler of its own, which refuses one payload:
// a check CheckTasks, with the built-in handler, did not make.
type refusing struct{ gpusched.CommandHandler }

var errNoB = errors.New("no b")

func (refusing) ValidatePayload(t *gpusched.TaskSpec) error {
	if p, _ := t.Payload.([]string); len(p) > 1 && p[1] == "b" {
		return errNoB
	}
	return nil
}

// A scheduler whose checks differ from CheckTasks' (another handler for
// the default kind) checks the checked tasks again, and refuses the
// batch as SubmitWith would, storing nothing.
func TestSubmitCheckedChecksWithOwnHandlers(t *testing.T) {
	c, err := gpusched.CheckTasks(checkedTasks())
	if err != nil {
		t.Fatal(err)
	}
	s, err := gpusched.New(t.TempDir(), gpusched.Scheduling{}, gpusched.WithHandler("command", refusing{}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.SubmitChecked(context.Background(), c, gpusched.SubmitOptions{})
	if !errors.Is(err, errNoB) {
		t.Fatalf("SubmitChecked = %v, want the handler's %v", err, errNoB)
	}
	if n := len(s.Records()); n != 0 {
		t.Errorf("%d tasks submitted, want none", n)
	}
}
