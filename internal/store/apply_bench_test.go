package store

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/task"
)

// BenchmarkApplyTurn: the commit of one turn of the scheduler's loop on a
// run of 10,000 tasks, as a run of short tasks makes them: one task
// completes (its row and its attempt's), the next starts (likewise, with a
// handle), and the owners' usage is saved (a meta key).
func BenchmarkApplyTurn(b *testing.B) {
	s, err := OpenSQLite(filepath.Join(b.TempDir(), "state.db"), "/run")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 10_000
	at := time.Unix(1_700_000_000, 0)
	batch := &Batch{}
	for i := range n {
		id := fmt.Sprintf("task-%06d", i)
		batch.Tasks = append(batch.Tasks, TaskWrite{ID: id, Seq: int64(i), Kind: "command", Submitted: at, Fingerprint: "f0e1d2c3b4a59687",
			Spec:  fmt.Appendf(nil, `{"id":%q,"kind":"command","dependencies":["task-000001"],"payload":["true"],"priority":3,"env":{"A":"1","B":"2"}}`, id),
			State: task.Pending})
	}
	if err := s.Apply(batch); err != nil {
		b.Fatal(err)
	}
	code := 0
	i := 0
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		done, next := fmt.Sprintf("task-%06d", i%n), fmt.Sprintf("task-%06d", (i+1)%n)
		batch.Reset()
		batch.Tasks = append(batch.Tasks,
			TaskWrite{ID: done, Seq: int64(i % n), Kind: "command", Submitted: at, State: task.Complete, ExitCode: &code},
			TaskWrite{ID: next, Seq: int64((i + 1) % n), Kind: "command", Submitted: at, State: task.Running})
		batch.Attempts = append(batch.Attempts,
			AttemptWrite{TaskID: done, Attempt: task.Attempt{Number: 1, Start: at, End: at.Add(time.Second), ExitCode: &code, PID: 1000 + i,
				LogPath: "/run/logs/" + done + "/attempt-1.log"}, Handle: executor.Handle{Executor: "local", Version: 1, Data: []byte(`{"pid":1000,"pgid":1000,"start_ticks":42}`)}},
			AttemptWrite{TaskID: next, Attempt: task.Attempt{Number: 1, Start: at, PID: 1001 + i, LogPath: "/run/logs/" + next + "/attempt-1.log"},
				Handle: executor.Handle{Executor: "local", Version: 1, Data: []byte(`{"pid":1001,"pgid":1001,"start_ticks":43}`)}})
		batch.Meta = map[string]string{"usage": fmt.Sprint(i)}
		if err := s.Apply(batch); err != nil {
			b.Fatal(err)
		}
		i++
	}
	reportCPU(b, cpuTime()-cpu)
}
