package engine

import (
	"encoding/json"
	"testing"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// writes records the task writes of every batch applied, by id.
type writes struct {
	store.Store
	tasks map[string][]store.TaskWrite
}

func (w *writes) Apply(b *store.Batch) error {
	for _, tw := range b.Tasks {
		w.tasks[tw.ID] = append(w.tasks[tw.ID], tw)
	}
	return w.Store.Apply(b)
}

// A task submitted again with the definition it is stored with is not
// written with it again (the row keeps it); one whose definition changed
// is, and either way the store ends up holding the definition and
// fingerprint submitted.
func TestResubmitWritesOnlyChangedDefinitions(t *testing.T) {
	st := store.NewMemory()
	submit := func(fps map[string]string, specs ...*task.Spec) *writes {
		t.Helper()
		w := &writes{Store: keepOpen{st}, tasks: map[string][]store.TaskWrite{}}
		e, err := Open(Config{MaxParallel: 1, Store: w, Runner: &fakeRunner{store: st, script: map[string][]step{}}, LogDir: "/logs"})
		if err != nil {
			t.Fatal(err)
		}
		sub := Submission{Specs: specs}
		for _, s := range specs {
			s.Normalize()
			b, _ := json.Marshal(s)
			sub.JSON = append(sub.JSON, b)
			sub.Fingerprint = append(sub.Fingerprint, fps[s.ID])
		}
		if err := e.Submit(sub); err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		return w
	}
	submit(map[string]string{"a": "fa", "b": "fb"}, spec("a"), spec("b", "a"))
	w := submit(map[string]string{"a": "fa", "b": "fb2"}, spec("a"), withPriority(spec("b", "a"), 3))

	a, b := w.tasks["a"], w.tasks["b"]
	if len(a) == 0 || len(b) == 0 {
		t.Fatalf("writes of the second submission: a %d, b %d; want both written (new submission numbers)", len(a), len(b))
	}
	if a[0].Spec != nil || a[0].Fingerprint != "" {
		t.Errorf("a, unchanged, written with spec %q and fingerprint %q; want neither (kept)", a[0].Spec, a[0].Fingerprint)
	}
	if b[0].Spec == nil || b[0].Fingerprint != "fb2" {
		t.Errorf("b, changed, written with spec %q and fingerprint %q; want its new ones", b[0].Spec, b[0].Fingerprint)
	}
	rows, err := st.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		var got task.Spec
		if err := json.Unmarshal(r.Spec, &got); err != nil {
			t.Fatalf("%s: stored definition %q: %v", r.ID, r.Spec, err)
		}
		want := map[string]struct {
			prio int
			fp   string
		}{"a": {0, "fa"}, "b": {3, "fb2"}}[r.ID]
		if got.Priority != want.prio || r.Fingerprint != want.fp {
			t.Errorf("%s stored: priority %d, fingerprint %q; want %d, %q", r.ID, got.Priority, r.Fingerprint, want.prio, want.fp)
		}
		if r.Seq < 2 {
			t.Errorf("%s stored with submission number %d, want the second submission's (2 or more)", r.ID, r.Seq)
		}
	}
}
