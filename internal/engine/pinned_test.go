package engine

import (
	"slices"
	"testing"
	"testing/synctest"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// A pinned task (Resume.Pinned: its caller keeps it as it is) stays
// complete though a task it depends on runs again, and what depends on it
// only is not run on its account; an intact task that is not pinned runs
// again as usual.
func TestPinnedTaskKeptThoughUpstreamReruns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		h := newHarness(t, Config{}, st)
		h.mustSubmit(t, spec("prepare"), spec("train", "prepare"), spec("evaluate", "train"), spec("report", "prepare"))
		h.run(t)
		h.Close()

		h2 := newHarness(t, Config{}, st)
		defer h2.Close()
		specs := []*task.Spec{spec("prepare"), spec("train", "prepare"), spec("evaluate", "train"), spec("report", "prepare")}
		blobs := make([][]byte, len(specs))
		for i, s := range specs {
			s.Normalize()
			blobs[i] = []byte(`{}`)
		}
		resume := []Resume{{Why: "input changed: data.csv"}, {Intact: true, Pinned: true}, {Intact: true}, {Intact: true}}
		if err := h2.Submit(Submission{Specs: specs, JSON: blobs, Resume: resume}); err != nil {
			t.Fatal(err)
		}
		recs := h2.run(t)
		if got, want := h2.runner.startOrder(), []string{"prepare#2", "report#2"}; !slices.Equal(got, want) {
			t.Errorf("ran %v, want %v: train is pinned, evaluate depends on it only", got, want)
		}
		for _, id := range []string{"train", "evaluate"} {
			if recs[id].State != task.Complete || recs[id].Rerun != "" {
				t.Errorf("%s: %s, rerun %q; want kept complete", id, recs[id].State, recs[id].Rerun)
			}
		}
		if recs["report"].Rerun != "upstream prepare reruns" {
			t.Errorf("report: rerun %q, want upstream prepare reruns", recs["report"].Rerun)
		}
	})
}
