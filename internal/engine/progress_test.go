package engine

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

var (
	unreachableNow = executor.Progress{System: "Slurm", Queued: true,
		Reason: "Slurm controller unreachable since 05:20:11: submission waits"}
	pendingJob = executor.Progress{System: "Slurm", Job: "4242", State: "PENDING", Reason: "Priority", Queued: true}
)

// rowOf returns task id's row as the store holds it.
func (h *harness) rowOf(t *testing.T, id string) task.Record {
	t.Helper()
	rows, err := h.store.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.ID == id {
			return r.Record
		}
	}
	t.Fatalf("no row of %s", id)
	return task.Record{}
}

// A running task whose attempt waits in a batch system: its record (in
// memory and in the store) and Waiting say why, from what the executor
// tells (first why submission waits, then the job and Slurm's reason);
// the job is recorded in the attempt; once the command runs, the task no
// longer waits and its attempt's start is the command's, not the
// submission's.
func TestQueuedInBatchSystem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.Close()
		h.runner.script["train"] = []step{{dur: 30 * time.Second, queueWait: 10 * time.Second,
			queue: []executor.Progress{unreachableNow, pendingJob}}}
		h.mustSubmit(t, spec("train"))
		begun := time.Now()
		done := make(chan map[string]task.Record, 1)
		go func() { done <- h.run(t) }()

		time.Sleep(5 * time.Second)
		synctest.Wait()
		for _, r := range []task.Record{h.Records()[0], h.rowOf(t, "train")} {
			want := task.WaitReason{Kind: task.WaitQueued, Detail: unreachableNow.Reason}
			if r.State != task.Running || r.Waiting != want {
				t.Errorf("while submission waits: %s, waiting %+v; want running, %+v", r.State, r.Waiting, want)
			}
			if j := r.Attempts[0].Job; j == nil || j.ID != "" || !j.Queued || j.Reason != unreachableNow.Reason {
				t.Errorf("while submission waits: job %+v, want none yet, and why", j)
			}
		}

		time.Sleep(10 * time.Second)
		synctest.Wait()
		wantJob := task.RemoteJob{System: "Slurm", ID: "4242", State: "PENDING", Reason: "Priority", Queued: true}
		want := task.WaitReason{Kind: task.WaitQueued, Detail: "queued in Slurm as job 4242: Priority"}
		for _, r := range []task.Record{h.Records()[0], h.rowOf(t, "train")} {
			if r.State != task.Running || r.Waiting != want {
				t.Errorf("while queued: %s, waiting %+v; want running, %+v", r.State, r.Waiting, want)
			}
			if j := r.Attempts[0].Job; j == nil || *j != wantJob {
				t.Errorf("while queued: job %+v, want %+v", j, wantJob)
			}
		}
		if w, ok := h.Waiting("train")["train"]; !ok || w != want {
			t.Errorf("Waiting = %+v, %v; want %+v", w, ok, want)
		}

		time.Sleep(10 * time.Second) // the command runs from begun+20s
		synctest.Wait()
		r := h.Records()[0]
		if r.Waiting.Waiting() || r.State != task.Running {
			t.Errorf("once its command runs: %s, waiting %+v; want running, not waiting", r.State, r.Waiting)
		}
		if j := r.Attempts[0].Job; j == nil || j.Queued || j.ID != "4242" {
			t.Errorf("once its command runs: job %+v, want 4242, not queued", j)
		}
		if got := r.Attempts[0].Start.Sub(begun); got != 20*time.Second {
			t.Errorf("the attempt starts %v after submission, want 20s (when its command ran)", got)
		}
		if row := h.rowOf(t, "train"); row.Waiting.Waiting() {
			t.Errorf("the row still waits: %+v", row.Waiting)
		}
		if _, ok := h.Waiting("train")["train"]; ok {
			t.Error("Waiting still names the task")
		}

		got := <-done
		if tr := got["train"]; tr.State != task.Complete || tr.Waiting.Waiting() || tr.Attempts[0].Job == nil {
			t.Errorf("train = %+v, want complete, not waiting, its job kept", tr)
		}
		var jobs []task.RemoteJob
		for _, ev := range h.events {
			if ev.Kind == JobChanged {
				jobs = append(jobs, *ev.Attempt.Job)
			}
		}
		if len(jobs) != 3 || jobs[0].ID != "" || jobs[1] != wantJob || jobs[2].Queued {
			t.Errorf("JobChanged events carry %+v; want submission waiting, queued, then running", jobs)
		}
	})
}

// A task cancelled, or failing, while its attempt is queued does not keep
// the queued reason: cancelled has none, and a retry waits as pending
// tasks do.
func TestQueuedReasonEndsWithTheAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{DefaultRetryDelay: time.Minute}, nil)
		defer h.Close()
		h.runner.script["fails"] = []step{{exit: 1, queueWait: time.Second, queue: []executor.Progress{pendingJob}}, {}}
		h.runner.script["stays"] = []step{{queueWait: time.Hour, queue: []executor.Progress{pendingJob}}}
		s := spec("fails")
		s.Retries = 1
		h.mustSubmit(t, s, spec("stays"))
		stop := serve(h.Engine)
		defer stop()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		recs := byID(h.Records())
		if f := recs["fails"]; f.State != task.Pending || f.Waiting.Kind != task.WaitRetryDelay {
			t.Errorf("fails = %s waiting %+v, want pending for its retry delay", f.State, f.Waiting)
		}
		if s := recs["stays"]; s.Waiting.Kind != task.WaitQueued {
			t.Fatalf("stays = %s waiting %+v, want queued", s.State, s.Waiting)
		}
		if err := h.Cancel("stays"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		for _, r := range []task.Record{byID(h.Records())["stays"], h.rowOf(t, "stays")} {
			if r.State != task.Cancelled || r.Waiting.Waiting() {
				t.Errorf("stays after Cancel = %s waiting %+v, want cancelled, not waiting", r.State, r.Waiting)
			}
		}
	})
}

// An adopted attempt's progress reaches its task too: the orphan's
// Progress, told while Recover's Wait follows the job.
func TestAdoptedAttemptQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		since := time.Now().Add(-time.Hour)
		runningRow(t, st, spec("train"), since, nil, 0)
		end := make(chan struct{})
		r := &fakeRunner{recovered: func(orphans []Orphan) []executor.Recovery {
			out := stillRunning(since, end, 0)(orphans)
			for i := range out {
				wait, progress := out[i].Wait, orphans[i].Progress
				out[i].Wait = func(ctx context.Context) executor.Result {
					progress(pendingJob)
					return wait(ctx)
				}
			}
			return out
		}}
		h := newHarness(t, Config{Runner: r}, st)
		defer h.Close()
		synctest.Wait()
		rec := h.Records()[0]
		if rec.Waiting.Kind != task.WaitQueued || rec.Attempts[0].Job == nil || rec.Attempts[0].Job.ID != "4242" {
			t.Errorf("adopted train = waiting %+v, job %+v; want queued as job 4242", rec.Waiting, rec.Attempts[0].Job)
		}
		close(end)
		h.mustSubmit(t, spec("train"))
		if got := h.run(t)["train"]; got.State != task.Complete || got.Waiting.Waiting() {
			t.Errorf("train = %+v, want complete, not waiting", got)
		}
	})
}
