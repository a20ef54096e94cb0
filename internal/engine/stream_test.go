package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// streaming is a memory store a second engine may reopen (keepOpen) that
// also streams a big batch's rows (store.Streamer); keepOpen hides that,
// so an engine on it takes the general path.
type streaming struct{ *store.Memory }

func (streaming) Close() error { return nil }

// streams counts the streams begun.
type streams struct {
	streaming
	begun int
}

func (s *streams) StreamTasks(rows []store.TaskWrite) *store.TaskStream {
	s.begun++
	return s.streaming.StreamTasks(rows)
}

// bigBatch returns n tasks, each depending on up to two earlier ones:
// one in three on the one before it, every one but the first on the one
// at half its number, one in seven of those on its failure.
func bigBatch(n int) []*task.Spec {
	id := func(i int) string { return fmt.Sprintf("t%05d", i) }
	specs := make([]*task.Spec, n)
	for i := range specs {
		s := spec(id(i))
		if i%3 == 1 {
			s.Dependencies = append(s.Dependencies, id(i-1))
		}
		if i > 1 {
			s.Dependencies = append(s.Dependencies, id(i/2))
			if i%7 == 0 {
				s.DependencyOn = map[string]task.Condition{id(i / 2): task.AfterFailure}
			}
		}
		specs[i] = s
	}
	return specs
}

// submission is specs as the scheduler submits them.
func submission(t *testing.T, specs []*task.Spec) Submission {
	t.Helper()
	sub := Submission{Specs: specs, JSON: make([][]byte, len(specs))}
	for i, s := range specs {
		s.Normalize()
		if err := s.Validate(); err != nil {
			t.Fatalf("invalid spec in test: %v", err)
		}
		sub.JSON[i], _ = json.Marshal(s)
	}
	return sub
}

// earlierRun fills a memory store as an earlier run of bigBatch(n)
// would have left it: one task in eleven failed, the others complete.
func earlierRun(t *testing.T, n int) *store.Memory {
	t.Helper()
	st := store.NewMemory()
	b := &store.Batch{}
	for i, s := range bigBatch(n) {
		state := task.Complete
		if i%11 == 10 {
			state = task.Failed
		}
		b.Tasks = append(b.Tasks, store.TaskWrite{ID: s.ID, Seq: int64(i), Kind: task.DefaultKind, Spec: []byte(`{}`), State: state})
	}
	if err := st.Apply(b); err != nil {
		t.Fatal(err)
	}
	return st
}

// A big batch in dependency order is admitted while its rows stream to
// the store, and ends up as the general path leaves it: the same records,
// rows and events, in one transaction.
func TestStreamedSubmitAgreesWithGeneralPath(t *testing.T) {
	const n = 3000
	at := time.Unix(1_700_000_000, 0)
	type outcome struct {
		recs   []task.Record
		rows   []store.Row
		events []Event
		begun  int
	}
	submit := func(stream bool) outcome {
		st := earlierRun(t, n)
		var s store.Store = keepOpen{st}
		rec := &streams{streaming: streaming{st}}
		if stream {
			s = rec
		}
		var events []Event
		e, err := Open(Config{MaxParallel: 1, Store: s, Runner: &fakeRunner{store: st, script: map[string][]step{}}, LogDir: "/logs",
			Now: func() time.Time { return at }, Observer: func(ev Event) { events = append(events, ev) }})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Submit(submission(t, bigBatch(n))); err != nil {
			t.Fatal(err)
		}
		recs := e.Records()
		if err := e.Close(); err != nil { // events are published by then
			t.Fatal(err)
		}
		rows, err := st.Load()
		if err != nil {
			t.Fatal(err)
		}
		for i := range events {
			events[i].Seq = 0
		}
		slices.SortFunc(events, func(a, b Event) int { return strings.Compare(a.TaskID, b.TaskID) })
		return outcome{recs, rows, events, rec.begun}
	}
	general, streamed := submit(false), submit(true)
	if streamed.begun != 1 || general.begun != 0 {
		t.Fatalf("streams begun: %d and %d; want 1 for the streaming store, 0 for the other", streamed.begun, general.begun)
	}
	states := map[task.State]int{}
	for _, r := range streamed.recs {
		states[r.State]++
	}
	if states[task.Complete] == 0 || states[task.Blocked] == 0 || states[task.Pending] == 0 {
		t.Fatalf("states %v; the batch should leave tasks complete, blocked and pending", states)
	}
	if !reflect.DeepEqual(streamed.recs, general.recs) {
		for i := range streamed.recs {
			if !reflect.DeepEqual(streamed.recs[i], general.recs[i]) {
				t.Fatalf("record %d streamed %+v; general path %+v", i, streamed.recs[i], general.recs[i])
			}
		}
		t.Fatalf("%d records streamed, %d by the general path", len(streamed.recs), len(general.recs))
	}
	if !reflect.DeepEqual(streamed.rows, general.rows) {
		for i := range min(len(streamed.rows), len(general.rows)) {
			if !reflect.DeepEqual(streamed.rows[i], general.rows[i]) {
				t.Fatalf("row %d streamed %+v; general path %+v", i, streamed.rows[i], general.rows[i])
			}
		}
		t.Fatalf("%d rows streamed, %d by the general path", len(streamed.rows), len(general.rows))
	}
	if len(streamed.events) != states[task.Blocked] || !reflect.DeepEqual(streamed.events, general.events) {
		t.Fatalf("%d events streamed, %d by the general path, for %d blocked tasks; or they differ", len(streamed.events), len(general.events), states[task.Blocked])
	}
}

// A big batch refused, whatever refused it, leaves nothing behind, in
// memory or stored; one out of dependency order is accepted all the same
// (by the general path), and so is the good batch after a refused one.
func TestStreamedBatchRefusedLeavesNothing(t *testing.T) {
	cpus := func(s *task.Spec, n int) *task.Spec { s.Resources.CPUs = n; return s }
	const n = 2000
	cases := []struct {
		name   string
		change func(b []*task.Spec) []*task.Spec
		want   error // nil: a cycle
	}{
		{"duplicate of a held task", func(b []*task.Spec) []*task.Spec { return append(b, spec("held")) }, task.ErrDuplicateTask},
		{"duplicate in the batch", func(b []*task.Spec) []*task.Spec { return append(b, spec(b[1500].ID)) }, task.ErrDuplicateTask},
		{"unknown dependency", func(b []*task.Spec) []*task.Spec {
			b[1700].Dependencies = append(b[1700].Dependencies, "nowhere")
			return b
		}, task.ErrUnknownDependency},
		{"cycle", func(b []*task.Spec) []*task.Spec {
			b[2].Dependencies = append(b[2].Dependencies, b[1024].ID) // 1024 depends on 512, 256... 4, 2
			return b
		}, nil},
		{"more cores than the machine", func(b []*task.Spec) []*task.Spec { b[1800] = cpus(b[1800], 99); return b }, task.ErrInvalidTask},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := store.NewMemory()
			s := &streams{streaming: streaming{st}}
			e, err := Open(Config{MaxParallel: 1, Store: s, Runner: &fakeRunner{store: st, script: map[string][]step{}}, LogDir: "/logs",
				Host: HostConfig{CPUs: 4}})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if err := e.Submit(submission(t, []*task.Spec{spec("held")})); err != nil {
				t.Fatal(err)
			}
			err = e.Submit(submission(t, c.change(bigBatch(n))))
			var cycle *task.CycleError
			switch {
			case err == nil:
				t.Fatal("accepted; want refused")
			case c.want == nil && !errors.As(err, &cycle):
				t.Fatalf("refused with %v; want a cycle", err)
			case c.want != nil && !errors.Is(err, c.want):
				t.Fatalf("refused with %v; want %v", err, c.want)
			}
			if recs := e.Records(); len(recs) != 1 {
				t.Fatalf("%d records after the refused batch; want held's alone", len(recs))
			}
			if rows, _ := st.Load(); len(rows) != 1 {
				t.Fatalf("%d rows stored after the refused batch; want held's alone", len(rows))
			}
			// Out of dependency order (the last task first), and good.
			good := bigBatch(n)
			good = append(good[n-1:], good[:n-1]...)
			if err := e.Submit(submission(t, good)); err != nil {
				t.Fatal(err)
			}
			if rows, _ := st.Load(); len(rows) != n+1 {
				t.Fatalf("%d rows stored after the good batch; want %d", len(rows), n+1)
			}
			if recs := e.Records(); len(recs) != n+1 || recs[1].ID != good[0].ID {
				t.Fatalf("%d records after the good batch, the second %q; want %d, the second %q", len(recs), recs[1].ID, n+1, good[0].ID)
			}
		})
	}
}
