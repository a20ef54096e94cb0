package engine

import (
	"errors"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// batches records the ids of the task writes of every batch applied, in
// the batch's order.
type batches struct {
	store.Store
	ids [][]string
}

func (b *batches) Apply(batch *store.Batch) error {
	var ids []string
	for _, w := range batch.Tasks {
		ids = append(ids, w.ID)
	}
	b.ids = append(b.ids, ids)
	return b.Store.Apply(batch)
}

// A batch's rows go to the store in submission order, each once, though
// its tasks are admitted in dependency order; and every row is whole.
func TestSubmitWritesRowsInSubmissionOrder(t *testing.T) {
	st := store.NewMemory()
	rec := &batches{Store: keepOpen{st}}
	e, err := Open(Config{MaxParallel: 1, Store: rec, Runner: &fakeRunner{store: st, script: map[string][]step{}}, LogDir: "/logs"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// Admitted in the order d, e, c, b, a: each of a, b, c waits for the
	// next.
	h := &harness{Engine: e}
	if err := h.submit(t, spec("a", "b"), spec("b", "c"), spec("c", "d"), spec("d"), spec("e")); err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "b", "c", "d", "e"}
	if len(rec.ids) == 0 || !slices.Equal(rec.ids[len(rec.ids)-1], want) {
		t.Fatalf("batches' task writes %q; want the last %q", rec.ids, want)
	}
	rows, err := st.Load()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]task.State{}
	for _, r := range rows {
		if r.Spec == nil || r.Kind != task.DefaultKind || r.Submitted.IsZero() {
			t.Errorf("%s stored without its definition, kind or submission time: %+v", r.ID, r)
		}
		got[r.ID] = r.State
	}
	for _, id := range want {
		if got[id] != task.Pending {
			t.Errorf("%s stored %v; want pending", id, got[id])
		}
	}
}

// A refused batch leaves nothing behind, whichever check refused it: the
// same tasks, fixed, are accepted next, and only they are held.
func TestRefusedBatchLeavesNothing(t *testing.T) {
	cpus := func(s *task.Spec, n int) *task.Spec { s.Resources.CPUs = n; return s }
	cases := []struct {
		name  string
		batch []*task.Spec
		want  error
	}{
		{"duplicate of a held task", []*task.Spec{spec("x"), spec("held")}, task.ErrDuplicateTask},
		{"duplicate in the batch", []*task.Spec{spec("x"), spec("y"), spec("x")}, task.ErrDuplicateTask},
		{"unknown dependency", []*task.Spec{spec("x"), spec("y", "nowhere")}, task.ErrUnknownDependency},
		{"cycle", []*task.Spec{spec("x", "y"), spec("y", "x")}, nil},
		{"more cores than the machine", []*task.Spec{spec("x", "held"), cpus(spec("y", "x"), 99)}, task.ErrInvalidTask},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Config{MaxParallel: 1, Host: HostConfig{CPUs: 4}}, nil)
				defer h.Close()
				h.mustSubmit(t, spec("held"))
				err := h.submit(t, c.batch...)
				var cycle *task.CycleError
				switch {
				case err == nil:
					t.Fatal("accepted; want refused")
				case c.want == nil && !errors.As(err, &cycle):
					t.Fatalf("refused with %v; want a cycle", err)
				case c.want != nil && !errors.Is(err, c.want):
					t.Fatalf("refused with %v; want %v", err, c.want)
				}
				h.mustSubmit(t, spec("x", "held"), spec("y", "x"))
				var ids []string
				for _, r := range h.Records() {
					ids = append(ids, r.ID)
				}
				if want := []string{"held", "x", "y"}; !slices.Equal(ids, want) {
					t.Errorf("records %q after the refused batch and a good one; want %q", ids, want)
				}
				recs := h.run(t)
				for _, id := range []string{"held", "x", "y"} {
					if recs[id].State != task.Complete {
						t.Errorf("%s ended %v; want complete", id, recs[id].State)
					}
				}
			})
		})
	}
}
