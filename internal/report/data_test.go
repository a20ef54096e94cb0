package report

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// Runs built by hand for the tests; synth_test.go builds big ones.

func ip(v int) *int { return &v }

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// att is an ended attempt from start to end seconds after t0, ready at ready.
func att(n int, ready, start, end float64, exit int) task.Attempt {
	return task.Attempt{Number: n, ReadyAt: at(ready), Start: at(start), End: at(end), ExitCode: ip(exit)}
}

func onCard(a task.Attempt, card int, asked, peak int64) task.Attempt {
	a.GPU, a.GPUUUID, a.MemRequestedMiB, a.MemPeakMiB = ip(card), fmt.Sprintf("GPU-%d", card), asked, peak
	return a
}

func row(id string, st task.State, gpuMiB int64, atts ...task.Attempt) store.Row {
	sp := map[string]any{"id": id}
	if gpuMiB > 0 {
		sp["resources"] = map[string]any{"device": "cuda", "memory_mib": gpuMiB}
	}
	spec, _ := json.Marshal(sp)
	r := store.Row{Spec: spec, Record: task.Record{ID: id, State: st, Submitted: t0, Attempts: atts}}
	if a := r.LastAttempt(); a != nil {
		r.ExitCode = a.ExitCode
	}
	return r
}

// small is a run with one attempt of every outcome: CPU tasks a..d that
// need two lanes, GPU tasks on cards 0 and 1, card 2 idle.
func small() Data {
	to := att(1, 0, 1, 4, 0)
	to.ExitCode, to.Signal, to.TimedOut = nil, "SIGKILL", true
	cancelled := att(1, 0, 6, 7, 0)
	cancelled.ExitCode, cancelled.Signal, cancelled.Cancelled = nil, "SIGTERM", true
	interrupted := att(1, 0, 2, 3, 0)
	interrupted.ExitCode, interrupted.Interrupted = nil, true
	running := onCard(att(1, 8, 9, 0, 0), 1, 30000, 0)
	running.End, running.ExitCode = time.Time{}, nil

	rows := []store.Row{
		row("a", task.Complete, 0, att(1, 0, 0, 10, 0)),
		row("b", task.Complete, 0, att(1, 0, 2, 5, 0)),
		row("c", task.Complete, 0, att(1, 5, 5, 8, 0)), // starts as b ends: b's lane
		row("d", task.Complete, 0, att(1, 10, 11, 12, 0)),
		row("train", task.Complete, 20000,
			onCard(att(1, 1, 1.5, 3, 1), 0, 20000, 20000),
			onCard(att(2, 3, 4.5, 9, 0), 0, 26000, 25000)),
		row("slow", task.Failed, 10000, onCard(to, 1, 10000, 9000)),
		row("stopped", task.Cancelled, 0, cancelled),
		row("crashed", task.Pending, 0, interrupted),
		row("live", task.Running, 30000, running),
		row("after", task.Blocked, 0),
	}
	rows[4].Attempts[0].Error = "CUDA out of memory <tried & failed>"
	rows[5].Error = "timed out after 3s"
	rows[9].BlockedBy, rows[9].Error = "slow", "blocked: dependency slow failed"
	var samples []store.Sample
	for s := 0; s <= 12; s++ {
		for c := range 3 {
			sm := store.Sample{At: at(float64(s)), Index: c, TotalMiB: 81559, CapacityMiB: 81047}
			if c == 0 && s >= 1 && s < 9 {
				sm.ChargedMiB, sm.ObservedMiB = 26000, 25000
			}
			if c == 0 {
				sm.ForeignMiB = 6000
			}
			samples = append(samples, sm)
		}
	}
	return Data{
		RunDir: "/runs/small", Rows: rows, Samples: samples, Live: true, Now: at(12), Location: time.UTC,
		Cards: []gpu.CardView{
			{Index: 0, Name: "NVIDIA H100 80GB HBM3", TotalMiB: 81559},
			{Index: 1, Name: "NVIDIA H100 80GB HBM3", TotalMiB: 81559},
			{Index: 2, Name: "NVIDIA H100 80GB HBM3", TotalMiB: 81559},
			{Index: 3, State: gpu.CardHidden},
		},
	}
}
