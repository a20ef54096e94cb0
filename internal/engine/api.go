package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// Submission is a batch of tasks to add.
type Submission struct {
	// Specs must be normalized and valid on their own (task.Spec.Validate).
	Specs []*task.Spec
	// JSON[i] is Specs[i]'s definition as persisted.
	JSON [][]byte
	// Fingerprint[i] is Specs[i].Fingerprint(); may be nil for none.
	Fingerprint []string
	// Resume[i] says whether a task that completed in an earlier run is
	// still valid; may be nil (then a completed task is kept as is).
	Resume []Resume
	// Reading, if not nil, is a GPU probe's answer taken for this batch:
	// GPU tasks larger than every card are refused with it.
	Reading *Reading
	// Key, if not empty, names the batch so that submitting it again is
	// harmless: a batch whose key an earlier committed batch used, with
	// the same task ids in the same order, adds nothing and succeeds; the
	// same key with other ids fails with ErrKeyReused. Keys are saved in
	// the store, so a restarted engine knows them too. At most
	// MaxKeyLength bytes.
	Key string
	// Estimate, if not nil, orders the batch's ready tasks among those of
	// their priority: Estimate[i] is Specs[i]'s estimated run time, longest
	// first, then submission; EstimateUnknown goes before every known one
	// (order.go). Nil: submission order. An engine's batches should all
	// give estimates or none: a task without one goes after those with.
	Estimate []time.Duration
	// Again lets the batch name retired tasks (Config.Retire): each is
	// taken up again with its history, as a task an earlier run left is
	// when submitted again (a failed, cancelled or blocked one runs
	// again, its attempt numbers continuing). It is how a retired task is
	// retried. Without it, a retired task's id is a duplicate. With it,
	// a task that an earlier engine left finished is to the batch what a
	// retired one is: its tasks may depend on it, judged by its stored
	// end, and naming it takes it up again; either way, the pending tasks
	// that depend on a task taken up again wait for its new end
	// (earlier.go).
	Again bool
	// RunNext says that its caller calls Run as soon as Submit returns:
	// a big batch may then start its first task before it is committed
	// in full, and before Run (stream.go, earlyStart). Without it, no
	// task starts before Run.
	RunNext bool
}

// Resume is the verdict on a task that completed in an earlier run.
type Resume struct {
	Intact bool   // same definition, artifacts as they were
	Why    string // when not intact: why it runs again
	// Pinned keeps an intact task complete even when a task it depends
	// on runs again: its caller chose to keep it as it is (its artifacts
	// were edited by hand, and running it would overwrite them).
	Pinned bool
}

// Submit adds a batch of tasks, all or none, checking the graph:
// duplicates, unknown dependencies, cycles. It returns once the batch is
// committed. A dependency may name a retired task (Config.Retire): one that
// completed satisfies it, one that failed, was cancelled or was blocked
// blocks the new task; a retired task's id cannot be used again.
func (e *Engine) Submit(sub Submission) error {
	if sub.Estimate != nil && len(sub.Estimate) != len(sub.Specs) {
		return fmt.Errorf("submit: %d estimates for %d tasks", len(sub.Estimate), len(sub.Specs))
	}
	reply := make(chan error, 1)
	if !e.send(submitEvent{sub, reply}) {
		return ErrClosed
	}
	err, ok := await(e, reply)
	if !ok {
		return ErrClosed
	}
	return err
}

// Cancel cancels a task: a pending one never starts (also one waiting out a
// retry delay), a running one is stopped (SIGTERM, then SIGKILL after the
// kill grace). Either way it ends cancelled and its dependents blocked.
// Cancel returns once that is committed: for a running task, once its
// attempt has ended and been recorded. Cancelling a finished (or retired)
// task does nothing and returns nil at once.
func (e *Engine) Cancel(id string) error {
	reply := make(chan error, 1)
	if !e.send(cancelEvent{id, reply}) {
		return ErrClosed
	}
	err, ok := await(e, reply)
	if !ok {
		return ErrClosed
	}
	return err
}

// StopNow stops every running attempt at once with SIGKILL, without the
// kill grace (a second Ctrl-C), and stops the Run in progress, as its
// context would. Attempts already being stopped are killed too.
func (e *Engine) StopNow() {
	e.send(stopNowEvent{})
}

type stopNowEvent struct{}

func (stopNowEvent) apply(e *Engine) {
	select {
	case <-e.killNow:
	default:
		close(e.killNow)
	}
	e.stopAll(ErrStoppedNow)
}

// Records returns every submitted task's record, in submission order. With
// Config.Retire, retired tasks are left out: their records are in the
// store.
func (e *Engine) Records() []task.Record {
	reply := make(chan []task.Record, 1)
	if !e.send(recordsEvent{reply}) {
		return nil
	}
	recs, _ := await(e, reply)
	return recs
}

// Run schedules until nothing more can run, then returns every record (with
// Config.Retire, those still in memory). When ctx is done, running attempts
// are stopped and recorded cancelled, tasks that had not started stay
// pending, and Run returns ctx's error. Run and Serve exclude each other
// (ErrRunning).
func (e *Engine) Run(ctx context.Context) ([]task.Record, error) {
	reply := make(chan runResult, 1)
	if !e.send(runEvent{ctx: ctx, reply: reply}) {
		return nil, ErrClosed
	}
	r, ok := await(e, reply)
	if !ok {
		return nil, ErrClosed
	}
	return r.records, r.err
}

// Close stops running attempts, waits for them to end, and closes the store.
func (e *Engine) Close() error {
	reply := make(chan error, 1)
	if !e.send(closeEvent{reply}) {
		return ErrClosed
	}
	err, ok := await(e, reply)
	if !ok {
		return ErrClosed
	}
	return err
}

// await waits for a reply to a request. A request queued just as the loop
// ended gets no reply; ok is false then.
func await[T any](e *Engine, reply chan T) (v T, ok bool) {
	select {
	case v = <-reply:
		return v, true
	case <-e.closed:
		select { // the loop may have replied just before it ended
		case v = <-reply:
			return v, true
		default:
			return v, false
		}
	}
}

type submitEvent struct {
	Submission
	reply chan error
}

func (ev submitEvent) apply(e *Engine) {
	if e.closing != nil {
		ev.reply <- ErrClosed
		return
	}
	if e.broken != nil {
		ev.reply <- e.broken
		return
	}
	var digest string
	if ev.Key != "" {
		var done bool
		if digest, done = e.checkKey(ev.Submission, ev.reply); done {
			return
		}
	}
	var again map[string]*store.Row
	if ev.Again {
		var err error
		if again, err = e.retiredOf(ev.Specs); err != nil {
			ev.reply <- err
			return
		}
	}
	// Nearly always (no adopted or retired task about, no Again), the
	// graph is checked while it is built, each id looked up once;
	// checkBatch finds what was wrong only when something was.
	// Otherwise checkBatch checks it first, asking the store about
	// retired ids, and making stand-ins for the finished tasks it
	// depends on.
	checked := len(e.adopted) > 0 || e.svc.retired > 0 || ev.Again
	var retired map[string]*node
	if checked {
		var err error
		if retired, err = e.checkBatch(ev.Specs, again, ev.Again); err != nil {
			ev.reply <- err
			return
		}
		if err := e.checkSubmitted(ev.Submission); err != nil {
			ev.reply <- err
			return
		}
	}
	first := e.nextSeq // tasks of this batch have seq >= first
	now := e.cfg.Now()
	if !checked && e.submitStreamed(ev, digest, first, now) {
		return
	}
	b, ok := e.link(ev.Submission, again, retired, first, now)
	if !ok {
		e.unlink(ev.Specs, b)
		_, err := e.checkBatch(ev.Specs, again, ev.Again)
		if err == nil { // link and checkBatch disagree: a bug
			err = fmt.Errorf("submit batch: %w", errGraph)
		}
		ev.reply <- err
		return
	}
	if !checked {
		if err := e.checkSubmitted(ev.Submission); err != nil {
			e.unlink(ev.Specs, b)
			ev.reply <- err
			return
		}
	}
	if len(retired) > 0 {
		e.shareStandIns(b.nodes, retired)
	}
	// Nothing is refused from here on.
	e.batch.Tasks = slices.Grow(e.batch.Tasks, len(ev.Specs))
	for i, n := range b.nodes {
		s := ev.Specs[i]
		if n.claimed {
			// Running when its scheduler died, adopted since: this
			// submission takes it over as it is. (Running: it is not in
			// the ready queue, so its estimate may be set.)
			fp := ""
			if ev.Fingerprint != nil {
				fp = ev.Fingerprint[i]
			}
			e.claim(n, s, ev.JSON[i], fp, now)
			if ev.Estimate != nil {
				n.est = rankOf(ev.Estimate[i])
			}
			continue
		}
		e.nextSeq++ // n.seq, set by link
		// Its row's place in the batch, in submission order, for
		// writeTask to fill when admission (in dependency order) reaches
		// it. Ids that follow submission order, as generated ones do,
		// then go into the store's id index in order rather than all
		// over it (100,000 rows: 0.27 s of CPU against 0.47 s), and Load
		// reads the rows back in order.
		n.writeIdx = int32(len(e.batch.Tasks))
		e.batch.Tasks = append(e.batch.Tasks, store.TaskWrite{ID: s.ID})
	}
	for _, n := range b.nodes {
		for _, d := range n.deps {
			if d.seq < first { // held before the batch (or a retired one's stand-in)
				d.dependents = append(d.dependents, n)
			}
		}
	}
	// Admit in dependency order: a task's first state depends on its
	// dependencies' states.
	for _, n := range b.order {
		if n.claimed {
			n.claimed = false // its state is its adopted attempt's
			e.writeTask(n)
		} else {
			e.admit(n)
		}
	}
	if ev.Key != "" {
		e.rememberKey(ev.Key, digest, true)
	}
	if len(again) > 0 {
		e.relinkAgain(b.nodes, again, first)
	}
	e.queueRetireAdmitted(b.nodes)
	e.effects = append(e.effects, func(err error) { ev.reply <- err })
}

// errGraph: the graph of a batch could not be linked, yet checkBatch
// found nothing wrong with it.
var errGraph = errors.New("the batch's graph cannot be linked")

// checkSubmitted refuses a batch with a task this scheduler could never
// start: GPU or host resources it cannot have.
func (e *Engine) checkSubmitted(sub Submission) error {
	if err := e.checkSubmittedGPU(sub.Specs, sub.Reading); err != nil {
		return err
	}
	return e.checkSubmittedHost(sub.Specs)
}

// batchGraph is a batch's graph, built and checked, before it is admitted.
type batchGraph struct {
	nodes []*node // in submission order: new ones, and adopted ones it claims (claimed set)
	order []*node // the same, dependencies first
	added int     // nodes[:added] are in e.tasks
}

// link builds a batch's nodes and graph: it puts them in e.tasks,
// resolves every dependency (retired holds stand-ins for retired tasks),
// and orders the batch with Kahn's algorithm, each task after the tasks
// of the batch it depends on. ok is false when the batch holds an id
// already taken, depends on an id not known, or holds a cycle; undo the
// link with unlink then. Besides e.tasks, link changes only the batch's
// own nodes: new ones, given their seq (first on), and adopted ones it
// marks claimed, which the caller claims.
func (e *Engine) link(sub Submission, again map[string]*store.Row, retired map[string]*node, first int64, now time.Time) (b batchGraph, ok bool) {
	specs := sub.Specs
	if len(e.tasks) == 0 {
		e.tasks = make(map[string]*node, len(specs)) // sized once for a big first batch
	}
	b.nodes = make([]*node, len(specs))
	slab := make([]node, len(specs)) // one allocation for the batch's new nodes
	ndeps := 0
	for i, s := range specs {
		if _, dup := e.tasks[s.ID]; dup {
			return b, false
		}
		n := e.adopted[s.ID]
		if n != nil {
			n.claimed = true
		} else {
			n = &slab[i]
			e.newNode(n, sub, i, again, first+int64(i), now)
		}
		e.tasks[s.ID] = n
		b.nodes[i], b.added = n, i+1
		ndeps += len(s.Dependencies)
	}
	// Resolve the dependencies, counting each task's inside the batch.
	// Dependency lists share one backing array; dependents lists of the
	// batch's tasks are sized by that count, then share another.
	inBatch := func(d *node) bool { return d.seq >= first || d.claimed }
	depsArr := make([]*node, ndeps)
	for i, n := range b.nodes {
		ids := specs[i].Dependencies // an adopted node's spec is the batch's once claimed
		n.deps, depsArr = depsArr[:len(ids):len(ids)], depsArr[len(ids):]
		for j, id := range ids {
			d := e.tasks[id]
			if d == nil {
				d = retired[id] // a stand-in for a retired task
			}
			if d == nil {
				return b, false
			}
			n.deps[j] = d
			if inBatch(d) {
				n.inBatch++
				d.inBatchDependents++
			}
		}
	}
	dependentsArr := make([]*node, ndeps)
	for _, n := range b.nodes {
		k := int(n.inBatchDependents)
		n.dependents, dependentsArr = dependentsArr[:0:k], dependentsArr[k:]
	}
	b.order = make([]*node, 0, len(b.nodes))
	for _, n := range b.nodes {
		for _, d := range n.deps {
			if inBatch(d) {
				d.dependents = append(d.dependents, n)
			}
		}
		if n.inBatch == 0 {
			b.order = append(b.order, n)
		}
	}
	for i := 0; i < len(b.order); i++ {
		for _, c := range b.order[i].dependents { // all of them are in this batch
			if c.inBatch--; c.inBatch == 0 {
				b.order = append(b.order, c)
			}
		}
	}
	return b, len(b.order) == len(b.nodes) // else a cycle
}

// unlink undoes a link that was not ok.
func (e *Engine) unlink(specs []*task.Spec, b batchGraph) {
	for i, n := range b.nodes[:b.added] {
		delete(e.tasks, specs[i].ID)
		if n.claimed { // adopted: as it was
			n.claimed, n.deps, n.dependents, n.inBatch, n.inBatchDependents = false, nil, nil, 0, 0
		}
	}
}

// newNode fills n, a new node, for sub.Specs[i].
func (e *Engine) newNode(n *node, sub Submission, i int, again map[string]*store.Row, seq int64, now time.Time) {
	s := sub.Specs[i]
	*n = node{spec: s, specJSON: sub.JSON[i], seq: seq, rec: task.Record{ID: s.ID, Submitted: now}, card: -1}
	if sub.Estimate != nil {
		n.est = rankOf(sub.Estimate[i])
	}
	if sub.Fingerprint != nil {
		n.fingerprint = sub.Fingerprint[i]
	}
	if s.Resources.GPU() {
		n.need = needOf(s.Resources)
		n.placed = e.placed(s)
	} else {
		n.placed = e.remote(s) // a CPU task's executor may place it too
	}
	p := e.earlier[s.ID]
	if r := again[s.ID]; r != nil {
		p = r // retired in this run: its history is the store's
	}
	if p == nil {
		return
	}
	// Seen in an earlier run: keep its history, continue numbering.
	// Copies: the loop owns the node, Earlier's callers the row.
	if bytes.Equal(n.specJSON, p.Spec) {
		n.specJSON = nil // stored as it is: not bound and written again
	}
	if n.fingerprint == p.Fingerprint {
		n.fingerprint = "" // "": the stored one stays
	}
	n.rec.Attempts, n.handles, n.rec.ExitCode = slices.Clone(p.Attempts), maps.Clone(p.Handles), p.ExitCode
	n.rec.Artifacts = slices.Clone(p.Artifacts)
	n.rec.Paused = p.Paused && !p.State.Terminal() // paused before a restart: still paused
	if p.GPURequestMiB > n.need.MiB && s.Resources.GPU() {
		n.need.MiB = p.GPURequestMiB // it ran out of memory before
	}
	switch {
	case p.NotNeeded:
		n.rec.Rerun = "was not needed"
	case p.State != task.Complete:
		n.rec.Rerun = "was " + p.State.String()
	case sub.Resume != nil && !sub.Resume[i].Intact:
		n.rec.Rerun = sub.Resume[i].Why
	default:
		n.kept = true
		n.pinned = sub.Resume != nil && sub.Resume[i].Pinned
	}
}

// relinkAgain links the tasks held from before the batch (seq < first)
// that depend on a finished task the batch takes up again (retired, or
// left by an earlier engine) to its new node, in place of the stand-in
// or retired node they had; a pending one that counted the finished
// task's end (on: any, on: failure) waits for its new end, as Retry has
// it for a task held.
func (e *Engine) relinkAgain(nodes []*node, again map[string]*store.Row, first int64) {
	taken := make(map[string]*node, len(again))
	for _, n := range nodes {
		if again[n.spec.ID] != nil {
			taken[n.spec.ID] = n
		}
	}
	for _, d := range e.tasks {
		if d.seq >= first {
			continue
		}
		linked := false
		for j, id := range d.spec.Dependencies {
			if n := taken[id]; n != nil && d.deps[j] != n {
				d.deps[j] = n
				n.dependents = append(n.dependents, d)
				linked = true
			}
		}
		if linked && d.rec.State == task.Pending {
			e.recount(d)
		}
	}
}

// admit sets a new task's first state from its dependencies' (judge),
// queues its row, and does what follows from that state. Dependencies
// are admitted before their dependents.
func (e *Engine) admit(n *node) {
	e.judge(n)
	e.writeTask(n)
	e.admitted(n)
}

// judge sets a new task's first state from its dependencies', each judged
// by the condition the task depends on it with: its record, waiting count
// and kept flag, and nothing outside n (admitted does the rest). A task
// that completed in an earlier run stays complete while nothing it
// depends on runs again, whatever its conditions say (they decide whether
// it runs, and it ran).
func (e *Engine) judge(n *node) {
	var blockedBy, via *node // what blocks it, and through which dependency
	notNeeded := false       // and no failure is behind that
	allKept := true
	var rerunning *node // a dependency of a kept task that runs again
	ids := n.spec.Dependencies
	for j, d := range n.deps {
		switch n.spec.On(ids[j]).Judge(d.rec.State, d.rec.NotNeeded) {
		case task.Met:
		case task.Unmet:
			if blockedBy == nil || notNeeded {
				// A failure upstream says more than a task not needed.
				blockedBy, via, notNeeded = e.rootOf(d), d, false
			}
		case task.NotNeeded:
			if blockedBy == nil {
				blockedBy, via, notNeeded = e.rootOf(d), d, true
			}
		case task.Unsettled:
			n.waiting++
		}
		if !d.kept && rerunning == nil {
			rerunning = d
		}
		allKept = allKept && d.kept
	}
	switch {
	case n.kept && (allKept || n.pinned):
		// Completed in an earlier run, and nothing it depends on reruns
		// (or its caller keeps it all the same).
		n.rec.State = task.Complete
	case blockedBy != nil:
		n.kept = false
		setBlocked(n, blockedBy, via, notNeeded)
	default:
		if n.kept {
			n.rec.Rerun = fmt.Sprintf("upstream %s reruns", rerunning.spec.ID)
		}
		n.kept = false
		n.rec.State = task.Pending
		n.rec.Error = ""
		// Its reason goes in its row (the batch's INSERT).
		switch {
		case n.rec.Paused:
			n.rec.Waiting = task.WaitReason{Kind: task.WaitPaused}
		case n.waiting == 0:
			n.rec.Waiting = task.WaitReason{Kind: task.WaitSlot}
		default:
			n.rec.Waiting = task.WaitReason{Kind: task.WaitDependencies} // its detail is written from its dependencies
		}
	}
}

// admitted does what follows from a judged task's first state: a blocked
// one's event; a pending one that waits for nothing goes in the ready
// queue.
func (e *Engine) admitted(n *node) {
	switch {
	case n.rec.State == task.Blocked:
		e.notifyBlocked(n)
	case n.rec.State == task.Pending && n.waiting == 0:
		e.makeReady(n)
	}
}

type cancelEvent struct {
	id    string
	reply chan error
}

func (ev cancelEvent) apply(e *Engine) {
	n := e.node(ev.id)
	if n == nil {
		switch r, err := e.retiredNode(ev.id); {
		case err != nil:
			ev.reply <- fmt.Errorf("cancel task %q: %w", ev.id, err)
		case r != nil:
			ev.reply <- nil // retired: finished, nothing to cancel
		default:
			ev.reply <- &task.Error{TaskID: ev.id, Reason: "no such task", Kind: task.ErrUnknownTask}
		}
		return
	}
	switch n.rec.State {
	case task.Running:
		n.cancelled, n.userCancelled = true, true
		n.cancel(ErrCancelled)
		e.continueStopped(n) // a stopped attempt handles its SIGTERM
		// The exit event records the cancellation, then answers.
		n.cancelReplies = append(n.cancelReplies, ev.reply)
	case task.Pending:
		e.unready(n)
		n.rec.State, n.rec.Error = task.Cancelled, "cancelled before it started"
		e.writeTask(n)
		e.notify(Event{Kind: TaskCancelled, TaskID: n.spec.ID, Submitted: n.rec.Submitted})
		e.settle(n)
		e.effects = append(e.effects, func(err error) { ev.reply <- err })
	case task.Complete, task.Failed, task.Blocked, task.Cancelled:
		ev.reply <- nil // finished: nothing to cancel
	}
}

type recordsEvent struct{ reply chan []task.Record }

func (ev recordsEvent) apply(e *Engine) { ev.reply <- e.records() }

type runEvent struct {
	ctx   context.Context
	reply chan runResult
	serve bool
}

func (ev runEvent) apply(e *Engine) {
	switch {
	case e.closing != nil:
		ev.reply <- runResult{nil, ErrClosed}
	case e.run != nil:
		ev.reply <- runResult{nil, ErrRunning}
	case e.broken != nil:
		ev.reply <- runResult{e.records(), e.broken}
	default:
		e.run = &runState{ctx: ev.ctx, reply: ev.reply, serve: ev.serve, started: e.cfg.Now()}
	}
}

type closeEvent struct{ reply chan error }

func (ev closeEvent) apply(e *Engine) {
	if e.closing != nil {
		ev.reply <- ErrClosed
		return
	}
	e.closing = ev.reply
	e.stopAll(ErrClosed)
	e.stopDeliveries()
}

// EventKind says what happened to a task.
type EventKind uint8

// The kinds of events an Observer receives.
const (
	Started         EventKind = iota + 1 // an attempt started
	Retrying                             // an attempt failed; the task will run again
	Completed                            // the task completed
	Failed                               // the task failed, retries spent
	TaskBlocked                          // the condition of a dependency can no longer be met (it failed or was cancelled; or NotNeeded)
	TaskCancelled                        // the task was cancelled
	DeliveryFailed                       // a completion event's handler failed; it will be retried
	CardQuarantined                      // a GPU went into quarantine (Card, Error say which and why)
	GPUUnknown                           // the GPUs cannot be read (Error says why); GPU tasks wait
	GPUKnown                             // the GPUs can be read again after GPUUnknown
	Adopted                              // an attempt an earlier scheduler left running was adopted (Ended: it had ended meanwhile)
	JobChanged                           // what the batch system running an attempt says of it changed (Attempt.Job)
)

var eventNames = [...]string{Started: "started", Retrying: "retrying", Completed: "complete", Failed: "failed", TaskBlocked: "blocked",
	TaskCancelled: "cancelled", DeliveryFailed: "event-failed", CardQuarantined: "card-quarantined",
	GPUUnknown: "gpu-unknown", GPUKnown: "gpu-known", Adopted: "adopted", JobChanged: "job"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// MarshalText writes the kind's name.
func (k EventKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Event is a committed transition of one task, or news of the GPUs.
type Event struct {
	// Seq numbers the events of this engine's life in commit order: 1, 2,
	// 3... (a reopened engine starts again at 1).
	Seq       uint64
	Time      time.Time
	Kind      EventKind
	TaskID    string
	Attempt   task.Attempt // the attempt concerned, for Started..Failed, a running task's cancellation, Adopted and JobChanged
	BlockedBy string       // for TaskBlocked: the task that failed or was cancelled, or (NotNeeded) that completed
	Error     string       // for Failed without an attempt: why it could not run; for TaskBlocked: why it is blocked
	Rerun     string       // for Started: why a task that ran before runs again
	Card      int          // for CardQuarantined: the card's index
	// NotNeeded, for TaskBlocked: the task is not needed (a condition
	// it cannot meet, with no failure behind it; task.Record.NotNeeded).
	NotNeeded bool
	// Ended, for Adopted: the attempt had ended while no scheduler
	// watched; its end is recorded next, from its result.
	Ended bool
	// Notification, for DeliveryFailed, is the kind of the outbox event
	// (store.EventComplete, ...); GaveUp: it will not be tried again.
	Notification string
	GaveUp       bool
	// RetryAt, for Retrying: when the next attempt may start at the
	// earliest (retry delay, or a back-off after a fault of the
	// environment); zero when it may start at once.
	RetryAt time.Time
	// Submitted, for the end of a task (Completed, Failed, TaskBlocked,
	// TaskCancelled), is when it was last submitted (its record's), so
	// that a subscriber can note what a listing shows of it without
	// reading it back.
	Submitted time.Time
}
