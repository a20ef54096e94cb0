package engine

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// runningRow writes task sp as an earlier scheduler left it when it died:
// running, attempt 1 started at start, with a handle.
func runningRow(t *testing.T, st *store.Memory, sp *task.Spec, start time.Time, gpuCard *int, mib int64) {
	t.Helper()
	b, err := json.Marshal(sp)
	if err != nil {
		t.Fatal(err)
	}
	a := task.Attempt{Number: 1, Start: start, LogPath: "/logs/" + sp.ID + "/attempt-1.log", GPU: gpuCard, MemRequestedMiB: mib}
	if gpuCard != nil {
		a.GPUUUID = "GPU-0"
	}
	if err := st.Apply(&store.Batch{
		Tasks:    []store.TaskWrite{{ID: sp.ID, Seq: 1, Kind: "command", Spec: b, State: task.Running, Fingerprint: sp.Fingerprint()}},
		Attempts: []store.AttemptWrite{{TaskID: sp.ID, Attempt: a, Handle: executor.Handle{Executor: "fake", Version: 1, Data: []byte("99")}}},
	}); err != nil {
		t.Fatal(err)
	}
}

// stillRunning answers Recover: every orphan still runs, started at since,
// and ends with exit code when end is closed.
func stillRunning(since time.Time, end <-chan struct{}, code int) func([]Orphan) []executor.Recovery {
	return func(orphans []Orphan) []executor.Recovery {
		out := make([]executor.Recovery, len(orphans))
		for i := range orphans {
			out[i] = executor.Recovery{
				Running: executor.Running{Since: since, PID: 4242},
				Wait: func(ctx context.Context) executor.Result {
					select {
					case <-end:
						return executor.Result{Reason: executor.Exited, Started: true, ExitCode: code, Start: since, End: time.Now()}
					case <-ctx.Done():
						return executor.Result{Reason: executor.Cancelled, Started: true, Signal: 15, Start: since, End: time.Now()}
					}
				},
			}
		}
		return out
	}
}

func TestAdoptRunningAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		since := time.Now().Add(-time.Hour)
		runningRow(t, st, spec("train"), since, nil, 0)
		end := make(chan struct{})
		r := &fakeRunner{recovered: stillRunning(since, end, 0)}
		h := newHarness(t, Config{Runner: r}, st)
		defer h.Close()
		recs := h.Records()
		if len(recs) != 1 || recs[0].State != task.Running || !recs[0].Attempts[0].Adopted || !recs[0].Attempts[0].Start.Equal(since) {
			t.Fatalf("after Open: %+v, want train running, adopted, since its real start", recs)
		}
		if len(h.events) != 1 || h.events[0].Kind != Adopted || h.events[0].TaskID != "train" || h.events[0].Ended {
			t.Errorf("events at Open = %+v, want one adopted", h.events)
		}
		h.mustSubmit(t, spec("train"), spec("eval", "train"))
		time.AfterFunc(10*time.Second, func() { close(end) })
		got := h.run(t)
		if tr := got["train"]; tr.State != task.Complete || len(tr.Attempts) != 1 || tr.Attempts[0].EndReason != "exited" {
			t.Errorf("train = %+v, want complete after its one adopted attempt", tr)
		}
		if ev := got["eval"]; ev.State != task.Complete {
			t.Errorf("eval = %s, want complete", ev.State)
		}
		if slices.ContainsFunc(r.starts, func(s string) bool { return strings.HasPrefix(s, "train#") }) {
			t.Errorf("starts = %v: the adopted task was started again", r.starts)
		}
		if want := []string{"eval#1"}; !slices.Equal(r.starts, want) {
			t.Errorf("starts = %v, want %v", r.starts, want)
		}
	})
}

func TestAdoptEndedMeanwhile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		code    int
		retries int
		state   task.State
		tries   int
	}{
		{"complete", 0, 0, task.Complete, 1},
		{"failed, no retry", 3, 0, task.Failed, 1},
		{"failed, retried", 3, 1, task.Complete, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := store.NewMemory()
				sp := spec("t")
				sp.Retries = tc.retries
				if tc.retries == 0 {
					sp.Retries = task.NoRetries
				}
				since := time.Now().Add(-time.Hour)
				runningRow(t, st, sp, since, nil, 0)
				r := &fakeRunner{recovered: func(o []Orphan) []executor.Recovery {
					return []executor.Recovery{{Result: executor.Result{Reason: executor.Exited, Started: true, ExitCode: tc.code,
						Start: since, End: since.Add(time.Minute)}}}
				}}
				h := newHarness(t, Config{Runner: r}, st)
				defer h.Close()
				h.mustSubmit(t, sp)
				got := h.run(t)["t"]
				if got.State != tc.state || len(got.Attempts) != tc.tries {
					t.Fatalf("t = %s with %d attempts, want %s with %d", got.State, len(got.Attempts), tc.state, tc.tries)
				}
				a := got.Attempts[0]
				if !a.Adopted || a.ExitCode == nil || *a.ExitCode != tc.code || !a.End.Equal(since.Add(time.Minute)) {
					t.Errorf("attempt 1 = %+v, want adopted, exit %d, its real end", a, tc.code)
				}
				if len(h.events) == 0 || h.events[0].Kind != Adopted || !h.events[0].Ended {
					t.Errorf("first event = %+v, want adopted (ended)", h.events)
				}
			})
		})
	}
}

// An adopted GPU attempt holds its card's memory before anything new is
// admitted: a task that fits only beside nothing waits for its end.
func TestAdoptedGPUHoldsItsCard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		since := time.Now().Add(-time.Hour)
		card := 0
		runningRow(t, st, gspec("big", 30000), since, &card, 30000)
		end := make(chan struct{})
		probe := newFakeProbe(40000)
		r := &fakeRunner{recovered: stillRunning(since, end, 0)}
		h := newHarness(t, Config{Runner: r, GPU: GPUConfig{Probe: probe, Settings: gpuSettings(), ReserveAfter: time.Hour}}, st)
		r.gpus = probe
		defer h.Close()
		// The adopted task has not allocated yet (or nvidia-smi does not
		// show it): only the ledger keeps the card's memory for it.
		h.mustSubmit(t, gspec("big", 30000), gspec("other", 20000))
		time.AfterFunc(time.Minute, func() { close(end) })
		got := h.run(t)
		if got["big"].State != task.Complete || got["other"].State != task.Complete {
			t.Fatalf("states: big %s, other %s", got["big"].State, got["other"].State)
		}
		if len(probe.ooms) > 0 {
			t.Errorf("over-commits: %v", probe.ooms)
		}
		o := got["other"].Attempts[0]
		if o.Start.Before(since.Add(time.Hour).Add(time.Minute)) {
			t.Errorf("other started at %v, before the adopted task ended", o.Start)
		}
	})
}

// A task adopted but not submitted again still has its end recorded.
func TestAdoptedUnclaimedIsRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		since := time.Now().Add(-time.Hour)
		runningRow(t, st, spec("old"), since, nil, 0)
		end := make(chan struct{})
		close(end)
		h := newHarness(t, Config{Runner: &fakeRunner{recovered: stillRunning(since, end, 5)}}, st)
		defer h.Close()
		h.mustSubmit(t, spec("new"))
		got := h.run(t)
		if got["old"].State != task.Failed || got["new"].State != task.Complete {
			t.Errorf("old %s, new %s; want failed (exit 5), complete", got["old"].State, got["new"].State)
		}
		rows, _ := st.Load()
		for _, r := range rows {
			if r.ID == "old" && (r.State != task.Failed || r.ExitCode == nil || *r.ExitCode != 5) {
				t.Errorf("stored old = %s exit %v", r.State, r.ExitCode)
			}
		}
	})
}
