package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// gatedRunner is a fakeRunner that honours AttemptRequest.Gate: it starts
// (fakeRunner.Run, which checks that the start is committed) only once
// the gate returned nil.
type gatedRunner struct {
	*fakeRunner

	mu       sync.Mutex // guards the fields below
	noGate   []string   // attempts whose request had no gate
	refused  []string   // attempts whose gate returned an error
	gateErrs []error
}

func (g *gatedRunner) HonoursGate() {}

var _ GatedRunner = (*gatedRunner)(nil)

func (g *gatedRunner) Run(ctx context.Context, req AttemptRequest, hooks executor.Hooks) Outcome {
	name := req.Spec.ID
	if req.Gate == nil {
		g.mu.Lock()
		g.noGate = append(g.noGate, name)
		g.mu.Unlock()
	} else if err := req.Gate(); err != nil {
		g.mu.Lock()
		if again := req.Gate(); again != err {
			g.gateErrs = append(g.gateErrs, errors.New("a second call of the gate returned another error"))
		}
		g.refused = append(g.refused, name)
		g.gateErrs = append(g.gateErrs, err)
		g.mu.Unlock()
		return Outcome{Verdict: errors.New("the runner's own verdict, which the engine must not use")}
	}
	return g.fakeRunner.Run(ctx, req, hooks)
}

// TestGatedRunnerStartsAfterCommit: a GatedRunner gets a gate with every
// attempt, and nothing it starts once the gate opens is uncommitted.
func TestGatedRunnerStartsAfterCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := store.NewMemory()
		r := &gatedRunner{fakeRunner: &fakeRunner{store: mem, script: map[string][]step{"b": {{exit: 1}, {exit: 0}}}}}
		e, err := Open(Config{MaxParallel: 2, Store: mem, Runner: r, LogDir: "/l", DefaultRetryDelay: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		specs := []*task.Spec{spec("a"), spec("b"), spec("c", "a"), spec("d")}
		specs[1].Retries = 1
		js := make([][]byte, len(specs))
		for i, s := range specs {
			s.Normalize()
			js[i] = []byte(`{}`)
		}
		if err := e.Submit(Submission{Specs: specs, JSON: js}); err != nil {
			t.Fatal(err)
		}
		recs, err := e.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			if rec.State != task.Complete {
				t.Errorf("%s is %s, want complete", rec.ID, rec.State)
			}
		}
		if len(r.problems) > 0 {
			t.Errorf("runner saw: %v", r.problems)
		}
		if len(r.noGate) > 0 || len(r.refused) > 0 {
			t.Errorf("attempts without a gate %v, refused by it %v; want none", r.noGate, r.refused)
		}
		if got := len(r.startOrder()); got != 5 {
			t.Errorf("%d attempts started, want 5 (b twice)", got)
		}
	})
}

// TestGatedRunnerStoreFailure: when the commit of a start fails, the
// attempt's gate returns the error, it never runs, and the Run reports
// the broken store as with a plain Runner.
func TestGatedRunnerStoreFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := store.NewMemory()
		st := &store.Failing{Store: mem}
		r := &gatedRunner{fakeRunner: &fakeRunner{script: map[string][]step{"a": {{dur: 10 * time.Second}}}}}
		e, err := Open(Config{MaxParallel: 1, Store: st, Runner: r, LogDir: "/l"})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		a, b := spec("a"), spec("b")
		for _, s := range []*task.Spec{a, b} {
			s.Normalize()
		}
		if err := e.Submit(Submission{Specs: []*task.Spec{a, b}, JSON: [][]byte{[]byte(`{}`), []byte(`{}`)}}); err != nil {
			t.Fatal(err)
		}
		diskFull := errors.New("disk full")
		time.AfterFunc(time.Second, func() { st.Fail(diskFull) })
		recs, err := e.Run(context.Background())
		if err == nil || err.Error() != "save state: disk full" {
			t.Errorf("Run error = %v, want save state: disk full", err)
		}
		if got := r.startOrder(); !slices.Equal(got, []string{"a#1"}) {
			t.Errorf("started %v after the store broke, want only a#1", got)
		}
		if !slices.Equal(r.refused, []string{"b"}) {
			t.Errorf("gates refused %v, want b's (its start was decided when a ended, and not committed)", r.refused)
		}
		for _, err := range r.gateErrs {
			if !errors.Is(err, diskFull) {
				t.Errorf("gate returned %v, want the store's error", err)
			}
		}
		for _, rec := range recs {
			if rec.ID == "b" && rec.State == task.Complete {
				t.Errorf("b = %+v, want not complete: it never ran", rec)
			}
		}
	})
}
