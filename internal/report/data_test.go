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

// resumed is a real run of examples/fake-gpus (two fake 80 GB cards, card 0
// with 6000 MiB of foreign use), its scheduler killed with SIGKILL about 5s
// in and the run resumed 6s later, as its state database held it (times in
// seconds from the first record, rounded to 10ms). Run 1 recorded its last
// sample at 4.13; the resumed scheduler opened the run directory at 11.11
// (the end it gave the three attempts it found interrupted) and submitted
// at 11.16, which every task's submission time now says.
func resumed() Data {
	gpuAtt := func(n int, ready, start, end float64, card int, asked, peak int64) task.Attempt {
		return onCard(att(n, ready, start, end, 0), card, asked, peak)
	}
	interrupted := func(a task.Attempt) task.Attempt {
		a.ExitCode, a.Interrupted, a.Error = nil, true, "interrupted: the scheduler stopped during the attempt"
		return a
	}
	oom := gpuAtt(1, 1.01, 1.01, 2.07, 0, 8000, 0)
	oom.ExitCode, oom.Error = ip(1), "CUDA out of memory. Tried to allocate 18000 MiB"
	rows := []store.Row{
		row("prepare", task.Complete, 0, att(1, 0, 0, 1.01, 0)),
		row("sweep-1", task.Complete, 20000, interrupted(gpuAtt(1, 1.01, 1.01, 11.11, 1, 20000, 0)), gpuAtt(2, 11.16, 11.18, 15.37, 1, 20000, 20000)),
		row("sweep-2", task.Complete, 24000, gpuAtt(1, 1.01, 1.02, 4.06, 0, 24000, 24000)),
		row("sweep-3", task.Complete, 18000, interrupted(gpuAtt(1, 1.01, 1.01, 11.11, 1, 18000, 0)), gpuAtt(2, 11.16, 11.17, 16.23, 0, 18000, 18000)),
		row("sweep-4", task.Complete, 30000, gpuAtt(1, 1.01, 1.02, 4.03, 0, 30000, 30000)),
		row("sweep-5", task.Complete, 20000, interrupted(gpuAtt(1, 1.01, 1.01, 11.11, 1, 20000, 0)), gpuAtt(2, 11.16, 11.17, 15.28, 1, 20000, 20000)),
		row("sweep-6", task.Complete, 24000, gpuAtt(1, 11.16, 11.18, 13.22, 0, 24000, 24000)),
		row("sweep-7", task.Complete, 18000, gpuAtt(1, 1.01, 1.04, 4.09, 1, 18000, 18000)),
		row("sweep-8", task.Complete, 8000, oom, gpuAtt(2, 11.16, 11.18, 15.23, 1, 26512, 26000)),
		row("finetune", task.Complete, 70000, gpuAtt(1, 11.16, 16.37, 20.4, 1, 70000, 70000)),
		row("report", task.Complete, 0, att(1, 20.4, 20.4, 20.41, 0)),
	}
	for i := range rows {
		rows[i].Submitted = at(11.16)
	}
	var samples []store.Sample
	for _, s := range []struct {
		at                         float64
		card                       int
		used, foreign, obs, charge int64
	}{
		{1.12, 0, 68000, 14000, 54000, 62000}, {1.12, 1, 76000, 76000, 0, 76000},
		{2.1, 0, 60000, 6000, 54000, 54000}, {2.1, 1, 76000, 0, 76000, 76000},
		{4.07, 0, 6000, 6000, 0, 0}, {4.13, 1, 58000, 0, 58000, 58000},
		{11.39, 0, 48000, 24000, 24000, 42000}, {11.39, 1, 48000, 40000, 8000, 66512},
		{13.26, 0, 24000, 6000, 18000, 18000}, {13.26, 1, 66000, 0, 66000, 66512},
		{15.3, 1, 20000, 0, 20000, 20000}, {15.41, 1, 0, 0, 0, 0},
		{16.26, 0, 6000, 6000, 0, 0}, {18.29, 1, 70000, 0, 70000, 70000},
	} {
		samples = append(samples, store.Sample{At: at(s.at), Index: s.card, TotalMiB: 81559, UsedMiB: s.used,
			ForeignMiB: s.foreign, ObservedMiB: s.obs, ChargedMiB: s.charge, CapacityMiB: 81047})
	}
	return Data{
		RunDir: "/runs/resumed", Rows: rows, Samples: samples, Now: at(60), Location: time.UTC,
		Cards: []gpu.CardView{
			{Index: 0, Name: "NVIDIA H100 80GB HBM3", TotalMiB: 81559, CapacityMiB: 81047},
			{Index: 1, Name: "NVIDIA H100 80GB HBM3", TotalMiB: 81559, CapacityMiB: 81047},
		},
	}
}
