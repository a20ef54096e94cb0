package gpusched

// The scheduler as a long-lived service (a daemon's): Serve instead of Run,
// Wait for given tasks, Subscribe to the committed events, submissions
// that are harmless to repeat, and tasks grouped into runs by their ids.

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// Errors of subscriptions (Subscribe, Subscription.Err).
var (
	// ErrSlowSubscriber: the subscriber let its buffer fill up, so it was
	// dropped. Subscribe again from the last event read.
	ErrSlowSubscriber = engine.ErrSlowSubscriber
	// ErrTooOld: the events after the one to resume from are no longer
	// kept (the latest EventHistory are). Read the records afresh and
	// subscribe from 0.
	ErrTooOld = engine.ErrTooOld
	// ErrNotPublished: the event to resume from was not published by this
	// scheduler (sequence numbers start at 1 again when one opens).
	ErrNotPublished = engine.ErrNotPublished
	// ErrKeyReused: SubmitKeyed with a key used before for other task ids.
	ErrKeyReused = engine.ErrKeyReused
)

// EventHistory is how many of the latest events a scheduler keeps for
// subscribers that resume from an earlier one.
const EventHistory = engine.EventHistory

// MaxKeyLength is the longest key SubmitKeyed takes, in bytes.
const MaxKeyLength = engine.MaxKeyLength

// WithQualifiedIDs has the scheduler accept task ids made of a run's id
// and a task's joined by exactly one "/" ("12/train"; each part a valid
// id, at most 200 bytes in all), besides plain ones, so that one scheduler
// can hold many runs whose task ids repeat. Dependencies name tasks by the
// same ids. A task's logs go to logs/RUN/TASK/.
func WithQualifiedIDs() Option {
	return func(o *options) { o.qualified = true }
}

// WithRetirement has the scheduler forget a finished task (complete,
// failed, blocked or cancelled) once its end is saved and its completion
// event delivered, so that a scheduler serving for weeks holds only the
// tasks that have not finished. A retired task stays in the state
// database: Lookup reads it, Wait returns its record, Cancel of it does
// nothing, a new task may depend on it, and SubmitAgain takes it up
// again; Records, Record and Run leave it out.
func WithRetirement() Option {
	return func(o *options) { o.retire = true }
}

// Lookup returns task id as the state database holds it now (what is
// saved of it), whether or not the scheduler holds it: one retired
// (WithRetirement) or left by an earlier scheduler is read so. ok is
// false when the database has no such task. Use Record for a task the
// scheduler holds: Lookup reads the database.
func (s *Scheduler) Lookup(id string) (t StoredTask, ok bool, err error) {
	r, ok, err := s.engine.Lookup(id)
	if err != nil || !ok {
		return StoredTask{}, false, publicError(err)
	}
	t, err = storedTask(&r)
	return t, err == nil, err
}

// SubmitAgain is SubmitManyContext for tasks that may have been retired
// (WithRetirement): a retired task is taken up again with its history,
// as a task an earlier scheduler left is when submitted again, so a
// failed, cancelled or blocked one runs again, its attempt numbers
// continuing. A task the scheduler holds is still a duplicate. Its tasks
// may depend on finished tasks the scheduler does not hold, retired or
// left finished by an earlier scheduler on the state directory: each
// such dependency is judged by how the task ended. The pending tasks
// the scheduler holds that depend on a task taken up so wait for its new
// end, as Retry has it for a task held; this is how a long-lived program
// queues again, after a restart, its unfinished tasks with their
// dependencies, and retries a task finished before it started.
func (s *Scheduler) SubmitAgain(ctx context.Context, tasks []TaskSpec) error {
	_, err := s.submitWith(ctx, "", true, tasks, SubmitOptions{})
	return err
}

// Serve runs every task submitted, whenever it is submitted and from any
// goroutine, until ctx is done or the scheduler is closed. Then running
// attempts are stopped and recorded cancelled, tasks not started stay
// pending, and Serve returns ctx's error (or ErrClosed). Serve and Run
// exclude each other (ErrRunning). A program that must leave attempts
// running when it stops (they are adopted by the next scheduler on the
// run directory, see docs/adoption.md) exits without ending Serve.
func (s *Scheduler) Serve(ctx context.Context) error { return s.engine.Serve(ctx) }

// Wait returns once every task in ids is finished (complete, failed,
// blocked or cancelled), with their records in the order of ids. It
// returns ctx's error when ctx is done first and ErrClosed when the
// scheduler closes; an id never submitted to this scheduler is an
// ErrUnknownTask error. Wait does not run anything: tasks run while Serve
// or Run is in progress.
func (s *Scheduler) Wait(ctx context.Context, ids []string) ([]Record, error) {
	recs, err := s.engine.Wait(ctx, ids)
	if err != nil {
		return nil, publicError(err)
	}
	return publicRecords(recs), nil
}

// Record returns task id's record, and whether this scheduler holds the
// task: submitted to it, or running when an earlier scheduler on the run
// directory died and adopted since. It costs one task's copy, where
// Records copies them all.
func (s *Scheduler) Record(id string) (Record, bool) {
	r, ok := s.engine.Record(id)
	if !ok {
		return Record{}, false
	}
	return publicRecord(r), true
}

// SubmitKeyed is SubmitManyContext with an idempotency key: a batch
// submitted again with the key of a batch already committed, with the
// same task ids in the same order, adds nothing and returns nil, also
// after a restart (keys are saved with the tasks); the key of a batch of
// other ids is an ErrKeyReused error. A key holds for 7 days after its
// batch was committed, then is forgotten (see docs/adoption.md). At most
// MaxKeyLength bytes; an empty key is none.
func (s *Scheduler) SubmitKeyed(ctx context.Context, key string, tasks []TaskSpec) error {
	return s.submit(ctx, key, tasks)
}

// Subscription is a stream of a scheduler's committed events, each with
// its sequence number (Event.Seq). It has a bounded buffer: a subscriber
// that lets it fill up is dropped, never waited for.
type Subscription struct {
	sub  *engine.Subscription
	ch   chan Event
	done chan struct{} // closed by Close
}

// Subscribe starts a stream of the events committed from now on, or, with
// from > 0, of those after event from (Event.Seq) first: ErrTooOld when
// they are no longer kept, ErrNotPublished when from is beyond the last.
// buffer bounds the events waiting to be read (0: 256). Close the
// subscription when done with it.
func (s *Scheduler) Subscribe(from uint64, buffer int) (*Subscription, error) {
	sub, err := s.engine.Subscribe(from, buffer)
	if err != nil {
		return nil, err
	}
	p := &Subscription{sub: sub, ch: make(chan Event), done: make(chan struct{})}
	go p.convert()
	return p, nil
}

// convert hands the engine's events on as public ones, until the engine's
// stream ends or Close.
func (p *Subscription) convert() {
	defer close(p.ch)
	for ev := range p.sub.C() {
		select {
		case p.ch <- publicEvent(ev):
		case <-p.done:
			return
		}
	}
}

// C returns the events, in Seq order without gaps. It is closed when the
// subscription ends: Close, the subscriber dropped (Err says why), the
// scheduler closed.
func (p *Subscription) C() <-chan Event { return p.ch }

// Err says why C was closed: ErrSlowSubscriber (wrapped, with how far the
// subscriber fell behind) or ErrClosed; nil while it is open and after
// Close.
func (p *Subscription) Err() error { return p.sub.Err() }

// Close ends the subscription; C is closed soon after. Not to be called
// from an observer (WithObserver).
func (p *Subscription) Close() {
	select {
	case <-p.done:
	default:
		close(p.done)
	}
	p.sub.Close()
}

// StoredTask is a task as the run directory's state database held it when
// the scheduler opened: its definition and what had happened to it.
type StoredTask struct {
	Spec   TaskSpec
	Record Record
}

// Stored returns every task the run directory's state database held when
// New opened it, in submission order, whether or not it has been
// submitted to this scheduler since. A long-lived program reads it at
// start to learn what earlier schedulers left: tasks that were pending
// stay pending only if submitted again (Submit keeps their history), and
// those that were running are adopted (see docs/adoption.md).
func (s *Scheduler) Stored() ([]StoredTask, error) {
	return s.stored(false)
}

// StoredUnfinished is Stored with only the tasks that had not finished
// (pending or running): a long-lived program that reads its finished
// tasks some cheaper way decodes only these definitions.
func (s *Scheduler) StoredUnfinished() ([]StoredTask, error) {
	return s.stored(true)
}

func (s *Scheduler) stored(unfinished bool) ([]StoredTask, error) {
	rows := s.engine.Stored()
	out := make([]StoredTask, 0, len(rows))
	for _, r := range rows {
		if unfinished && r.State.Terminal() {
			continue
		}
		st, err := storedTask(r)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// storedTask decodes a stored row into the task it saved.
func storedTask(r *store.Row) (StoredTask, error) {
	var sp task.Spec
	if err := json.Unmarshal(r.Spec, &sp); err != nil {
		return StoredTask{}, fmt.Errorf("read stored task %q: %w", r.ID, err)
	}
	sp.Normalize()
	st := StoredTask{Spec: *publicSpec(&sp), Record: publicRecord(r.Record)}
	st.Spec.Payload = argvPayload(sp.Kind, sp.Payload)
	return st, nil
}

// argvPayload gives a command's payload, read back from JSON as []any, its
// type of origin, []string, so that its fingerprint is the one it was
// saved with.
func argvPayload(kind string, p any) any {
	list, ok := p.([]any)
	if kind != task.DefaultKind || !ok {
		return p
	}
	args := make([]string, len(list))
	for i, a := range list {
		s, ok := a.(string)
		if !ok {
			return p
		}
		args[i] = s
	}
	return args
}

// EventsPending returns how many outbox events (completion and failure
// events, on_run_end, webhooks) are recorded and not delivered yet.
func (s *Scheduler) EventsPending() int { return s.engine.EventsPending() }

// Cards returns the GPUs as the scheduler's admission sees them now, and
// whether it knows them: it reads the cards only while GPU tasks wait or
// run, so a scheduler that has run none may know nothing (use ReadGPUs).
func (s *Scheduler) Cards() ([]CardView, bool) {
	cards, known := s.engine.Cards()
	if !known {
		return nil, false
	}
	return publicCards(cards), true
}
