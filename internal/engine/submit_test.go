package engine

import (
	"slices"
	"testing"

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
