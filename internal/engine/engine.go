package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/google/btree"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// Errors of the engine's API.
var (
	// ErrClosed: the engine was closed.
	ErrClosed = errors.New("scheduler closed")
	// ErrRunning: Run was called while another Run is in progress.
	ErrRunning = errors.New("scheduler is already running")
	// ErrCancelled is the cause of an attempt's context when it was
	// cancelled (Cancel, Run's context, Close).
	ErrCancelled = errors.New("attempt cancelled")
	// ErrStoppedNow is why a Run stops after StopNow.
	ErrStoppedNow = errors.New("stopped at once (SIGKILL)")
)

// Runner carries out attempts: it builds the command from the task (the
// kind's handler), runs it (the task's executor) and judges the result. Its
// methods run on worker goroutines and may block.
type Runner interface {
	// Run carries out one attempt, telling hooks of its phases; it must
	// return soon after ctx is done.
	Run(ctx context.Context, req AttemptRequest, hooks executor.Hooks) Outcome
	// Recover finds, in one go, attempts an earlier scheduler left
	// running (see executor.Executor.Recover), for each orphan in order.
	Recover(orphans []Orphan) []executor.Recovery
	// Finish judges the result of a recovered attempt as Run would have.
	Finish(ctx context.Context, req AttemptRequest, res executor.Result) Outcome
}

// GatedRunner is a Runner whose Run honours AttemptRequest.Gate: it
// prepares the attempt while the gate blocks, and starts nothing (no
// process, no hook of the task's, no line in its log) before the gate
// has returned nil. The engine then calls Run as soon as it decides the
// start, so that the attempt is prepared while the start is committed;
// a plain Runner's Run is called once the commit is done.
type GatedRunner interface {
	Runner
	// HonoursGate says that Run honours AttemptRequest.Gate; it does
	// nothing.
	HonoursGate()
}

// Orphan is an attempt an earlier scheduler left running: the request it
// was started with and the last handle persisted for it.
type Orphan struct {
	Req    AttemptRequest
	Handle executor.Handle
	// Progress is to be told what the system running the attempt says of
	// it while it is followed (executor.Orphan.Progress).
	Progress func(executor.Progress)
}

// AttemptRequest is what a Runner needs to run an attempt.
type AttemptRequest struct {
	Spec    *task.Spec
	Number  int    // the attempt's number, from 1
	LogPath string // the file that receives its output
	// GPU is the card a GPU task was admitted to; nil for a CPU task, and
	// for a GPU task whose executor places its work (Config.PlacesGPUs).
	GPU *Assignment
	// GPUMiB is, for a GPU task whose executor places its work, its GPU
	// memory budget (grown after an out-of-memory failure), for the
	// executor to place it by; 0 otherwise.
	GPUMiB int64
	// KillNow is closed by StopNow: the attempt is to be killed at once.
	KillNow <-chan struct{}
	// Timeout stops the attempt that long after it starts running; 0:
	// none. The executor enforces it.
	Timeout time.Duration
	// Gate, for a GatedRunner, blocks until the attempt's start is
	// committed and returns nil, or returns the error that kept it from
	// being committed (the attempt must not run); it may be called more
	// than once. Nil for a plain Runner: its Run is called after the
	// commit.
	Gate func() error
}

// Assignment is the card an attempt runs on; for an attempt on several
// cards, the first of them, and all of them in More.
type Assignment struct {
	Index     int    // nvidia-smi's index
	UUID      string // the card's UUID
	MemoryMiB int64  // the memory it was admitted with, on each card
	// More are, for an attempt on several cards, every one of them in
	// the order chosen (the first is Index's); nil for one card.
	More []AssignedCard
}

// AssignedCard is one of the cards of an attempt on several.
type AssignedCard struct {
	Index int    // nvidia-smi's index
	UUID  string // the card's UUID, when known ("" for an adopted attempt)
}

// Cards returns every card of the attempt, in the order chosen.
func (a *Assignment) Cards() []AssignedCard {
	if len(a.More) > 0 {
		return a.More
	}
	return []AssignedCard{{Index: a.Index, UUID: a.UUID}}
}

// Outcome is what a Runner reports.
type Outcome struct {
	executor.Result
	// Verdict is nil when the attempt succeeded, else why it failed (for
	// example "exit code 3", or an error of the kind's handler).
	Verdict error
	// OOM is set when a GPU attempt's output shows CUDA running out of
	// memory; OOMTriedMiB is the failing allocation's size when known.
	OOM         bool
	OOMTriedMiB int64
	// Artifacts are the task's files as a successful attempt left them.
	Artifacts []task.Artifact
	// Inputs are the files the task read (task.Spec.Inputs), as they were
	// when a successful attempt started: saved with its completion.
	Inputs []task.Input
}

// Config configures an engine. Zero values mean the documented defaults.
type Config struct {
	MaxParallel    int           // attempts running at once; must be > 0
	DefaultTimeout time.Duration // per attempt; 0 means none
	DefaultRetries int           // extra attempts of a failing task
	LogDir         string        // attempt logs go to LogDir/<task>.attempt-<n>.log (AttemptLog)
	Store          store.Store   // required
	Runner         Runner        // required
	// Rows, when not nil, gives what Open would read with Store.Load:
	// rows its caller read beforehand, through another connection, while
	// nothing could write the store (store.LoadForOpen under the run
	// directory's lock), so that it could read them beside other work.
	Rows func() ([]store.Row, error)
	// Observer, if set, is told of every transition after it is committed,
	// in commit order, before subscribers (Subscribe) are. It runs on the
	// loop goroutine: it must be quick and must not call the engine.
	Observer func(Event)
	// Retire lets the engine forget finished tasks (see retire.go), so a
	// long-lived engine's memory stays bounded; their records stay in the
	// store. Records and Run then return only the tasks still in memory.
	Retire bool
	// Now is the clock for timestamps; nil means time.Now.
	Now func() time.Time
	// Token names an attempt in its processes' environment (the Runner
	// puts it there), so that GPU memory is attributed to the task
	// wherever its processes are. Nil: no tokens.
	Token func(taskID string, attempt int) string
	// GPU configures GPU admission.
	GPU GPUConfig
	// Host configures admission by the machine's cores, host memory and
	// custom resources, and the sampling of attempts' memory (host.go).
	// The zero value counts none of them and samples nothing.
	Host HostConfig
	// PlacesGPUs reports whether the executor of GPU task sp places its
	// attempts itself (executor.Placer: Slurm chooses the node and the
	// GPU), so that this machine's cards have nothing to do with it. Such
	// a task is admitted as a CPU task is: it takes a slot, no card, does
	// not wait for the GPU state, is not refused when no card here could
	// hold it, and does not count towards UserMaxGPUMiB. It keeps its GPU
	// memory budget, which grows after a CUDA out-of-memory failure (up to
	// MaxGPUMiB) and goes to the Runner in AttemptRequest.GPUMiB. Nil:
	// every GPU task runs on this machine's cards. It is asked of CPU
	// tasks too: a task it reports takes none of this machine's cores or
	// host memory (Host), only custom resources.
	PlacesGPUs func(sp *task.Spec) bool
	// MaxGPUMiB is, for a task PlacesGPUs reports, the most GPU memory its
	// executor can give one of its GPUs (Slurm: the largest of its
	// gpu_types); 0, or a nil MaxGPUMiB, for no limit.
	MaxGPUMiB func(sp *task.Spec) int64
	// WantsEvent reports whether a task's completion produces an event for
	// Deliver (an outbox row written with the completion). Nil: none do.
	WantsEvent func(*task.Spec) bool
	// Deliver hands a completion event to the task kind's handler; nil
	// acknowledges it. It runs on a goroutine of its own, one event at a
	// time in completion order, and must return soon after ctx is done.
	Deliver func(ctx context.Context, d Delivery) error
	// OnFailure, if set, is called on a goroutine of its own once a task
	// has failed for good (its retries spent), after that is committed.
	OnFailure func(spec *task.Spec, rec task.Record)
	// Notices, if set, returns the outbox events that ev asks for besides
	// a completion's (WantsEvent): a failure's, a card's quarantine's.
	// It is called on the loop as each event is recorded, with the
	// definition and record of its task (nil for events about the cards;
	// the record only for the call); what it returns is written in the
	// same transaction as the event, and delivered through Deliver like
	// completion events.
	Notices func(ev Event, spec *task.Spec, rec *task.Record) []Notice
	// RunEnded, if set, returns the outbox events of a Run's end: it is
	// called on the loop once the Run has nothing more to do, or is
	// stopped and nothing runs. The events are written before the Run
	// returns, and the Run waits for their delivery as for the others',
	// even when its context stopped it (not after StopNow).
	RunEnded func(end RunEnd) []Notice
	// DefaultRetryDelay is the wait before the first retry of a task that
	// sets no RetryDelay; it doubles with each retry up to RetryDelayMax.
	// 0 means DefaultRetryDelay; negative means none.
	DefaultRetryDelay time.Duration
	// RetryDelayMax caps retry delays. 0 means DefaultRetryDelayMax.
	RetryDelayMax time.Duration
	// DeliverTimeout bounds each call of Deliver; then the delivery counts
	// as failed and is tried again later. 0 means DefaultDeliverTimeout;
	// negative means none.
	DeliverTimeout time.Duration

	// Fair share between owners (task.Spec.Owner; see fair.go).
	// FairShareHalfLife is how long it takes an owner's usage to halve; 0
	// means DefaultFairShareHalfLife.
	FairShareHalfLife time.Duration
	// UserMaxRunning caps the attempts one owner has running at once; 0:
	// no cap.
	UserMaxRunning int
	// UserMaxGPUMiB caps the GPU memory charged to one owner's running
	// attempts; 0: no cap. A task that asks more than the cap on its own
	// starts only while its owner has no GPU memory charged.
	UserMaxGPUMiB int64
	// OwnerName names an owner for a person ("alice" for "1000"), in the
	// reasons of tasks held by a cap; nil or "": "user 1000".
	OwnerName func(owner string) string
}

// Defaults of Config.
const (
	DefaultRetryDelay     = time.Second
	DefaultRetryDelayMax  = time.Minute
	DefaultDeliverTimeout = time.Minute
	// MaxEnvironmentFaults is how many faults of the environment in a row
	// a task is spared (backing off 1s, 2s, 4s... up to a minute between
	// them) before it fails: a fault that lasts that long needs a person.
	MaxEnvironmentFaults = 10
)

// defaultDuration resolves a duration setting: 0 means def, negative
// means none (0).
func defaultDuration(v, def time.Duration) time.Duration {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// Engine schedules tasks. Its methods are safe for concurrent use, including
// from a Runner.
type Engine struct {
	cfg     Config
	events  chan event    // to the loop, from anyone
	closed  chan struct{} // closed when the loop has ended
	killNow chan struct{} // closed by StopNow (by the loop)
	workers *workers      // runs the attempts' goroutines

	// Owned by the loop goroutine.
	tasks   map[string]*node
	adopted map[string]*node // tasks adopted at Open that no submission has claimed yet
	stopped map[*node]bool   // running attempts sent SIGSTOP by Pause, and no SIGCONT since (kept out of node: its 512 bytes are a size class)
	multi   map[*node][]int  // running attempts on several cards: their cards' indices, in the order chosen (n.card is the first)
	ready   *readySet
	delayed *btree.BTreeG[*node] // pending tasks waiting out a retry delay, soonest first
	running int
	nextSeq int64
	earlier map[string]*store.Row // every persisted task as loaded at Open; never changed after, so any goroutine may read it
	batch   store.Batch
	// stream is the batch's rows a big submission is writing while it
	// admits them (stream.go); zero otherwise.
	stream rowStream
	// staleWaits are the tasks whose saved waiting reasons an earlier
	// scheduler decided, to be forgotten by the loop's first commit;
	// staleAll: all of them (ids not known). Set by Open, then the loop's.
	staleWaits []string
	staleAll   bool
	effects    []func(commitErr error) // to do once the batch is committed
	later      []laterWrite            // attempts to write with the next commit, at the latest at laterDue (see writeAttemptLater)
	laterDue   time.Time               // zero while later is empty
	run        *runState               // the Run in progress, or nil
	broken     error                   // a failed commit: nothing new starts
	closing    chan error              // Close's reply, once asked
	readyView  readyQueue

	// GPU admission, owned by the loop too.
	board          *gpu.Board
	gpuReady       int                  // ready tasks that need a GPU
	gpuRunning     int                  // running attempts that hold a GPU
	polling        bool                 // a probe is in flight
	nextPoll       time.Time            // when to probe next while GPU tasks wait or run
	wake           *time.Timer          // wakes the loop for the next poll or card change
	reserved       map[int]string       // card index -> starving task, from the last decision
	topo           *gpu.Topology        // how close the cards are; nil: unknown, no preference
	topoAsked      bool                 // the topology was asked for (once in the engine's life)
	gpuUnknownSaid bool                 // the observer was told the GPUs cannot be read
	cardsDirty     bool                 // the saved view of the cards is out of date
	fitCheck       bool                 // a reading arrived: check waiting tasks still fit some card
	lastSample     map[int]store.Sample // by card: the last memory sample saved

	// The outbox, owned by the loop too (outbox.go).
	outbox        [numLanes]lane
	outboxSpecs   map[string]*task.Spec // definitions the events' tasks completed (or failed) with
	nextEventID   int64
	deliverCtx    context.Context
	cancelDeliver context.CancelFunc
	pollCtx       context.Context
	stopPolls     context.CancelFunc

	// Subscribers, waiters, submit keys and retirement, owned by the loop
	// too (subscribe.go, serve.go, keys.go, retire.go).
	svc service

	// Why pending tasks wait, owned by the loop too (wait.go).
	waits waits

	// The machine's cores, memory and custom resources, owned by the
	// loop too (host.go).
	host hostState
}

// node is a task inside the loop. (Its fields are grouped so that the
// struct stays small: the heap of a run holds one per task, and the
// garbage collector reads them all.)
type node struct {
	// First what the ready queue reads of each task it hands decide (the
	// tree's order, Candidate), and the record, whose Waiting ends its
	// next cache line: a walk of thousands of waiting GPU tasks touches
	// as few lines as it can.
	spec *task.Spec
	seq  int64
	// est is its rank by estimated run time among tasks of its priority,
	// higher first (order.go): 0 for every task submitted without
	// estimates. Fixed while the task is in the ready queue.
	est        int32
	need       gpu.Need    // GPU tasks: its request; grows after an out-of-memory failure
	readySince time.Time   // when it last became ready
	rec        task.Record // with rec.Waiting: why it waits while pending (wait.go)

	specJSON      []byte
	handles       map[int]executor.Handle // by attempt number: the executor's handle, as persisted
	deps          []*node                 // what it depends on, in Dependencies order
	dependents    []*node
	fingerprint   string
	cancel        context.CancelCauseFunc // while running
	cancelReplies []chan error            // Cancel calls to answer once the attempt's end is committed
	// rerunAfter, when set, is why the task runs again once its adopted
	// attempt completes: its definition changed meanwhile.
	rerunAfter string

	kept          bool // complete from an earlier run, not run again in this one
	inReady       bool
	inDelayed     bool // in e.delayed, until rec.RetryAt
	cancelled     bool // a cancellation was requested while running
	userCancelled bool // by Cancel, not because the run stops: dependents are blocked
	claimed       bool // while being submitted: an adopted node this batch takes over
	// adopted: its attempt outlived the scheduler that started it, and no
	// submission has claimed the task yet (it is in Engine.adopted).
	adopted bool
	// staleWait: it is in waits.stale: a dependency completed since its
	// row, which names the unfinished ones, was written (wait.go).
	staleWait bool

	// Counts, in 32 bits.
	waiting           int32 // dependencies not yet complete
	inBatch           int32 // while being submitted: dependencies of its batch not yet admitted
	inBatchDependents int32 // while being submitted: tasks of its batch that depend on it
	failures          int32 // failed attempts charged to the task in this engine's life
	envFaults         int32 // attempts in a row that failed for a fault of the environment
	// writeIdx is where its last write is in the batch, while the batch
	// holds it (writeTask checks the id there).
	writeIdx int32
	// gpuWaitAt is its place in waits.gpu, plus one; 0: not there.
	gpuWaitAt int32
	card      int16 // GPU tasks: the card of its running attempt; -1 when none
	// placed: a task whose executor places its attempts itself
	// (Config.PlacesGPUs): a GPU task is admitted without a card, and any
	// takes none of this machine's cores or host memory (host.go).
	placed bool
	// pinned: kept even when a task it depends on runs again
	// (Resume.Pinned). (Here, not among the flags above: it fills the
	// padding before foreignAtStart.)
	pinned bool

	// GPU tasks only.
	// foreignAtStart is the memory foreign to us on its card when its
	// attempt was admitted: growth since then tells an out-of-memory
	// failure caused by someone else.
	foreignAtStart int64
}

type runState struct {
	ctx   context.Context
	reply chan runResult
	stop  error // why the run is stopping, once it is
	serve bool  // Serve: it ends only when stopped, and returns no records
	// For the events of its end (Config.RunEnded, outbox.go).
	started   time.Time
	endQueued bool    // they were written (or there were none)
	endIDs    []int64 // those not delivered yet
}

type runResult struct {
	records []task.Record
	err     error
}

// lessDelayed orders tasks waiting out a retry delay, soonest first.
func lessDelayed(a, b *node) bool {
	if !a.rec.RetryAt.Equal(b.rec.RetryAt) {
		return a.rec.RetryAt.Before(b.rec.RetryAt)
	}
	return a.seq < b.seq
}

// lessNode is the ready queue's order: higher priority first; then the
// longer estimated run time (est: equal for all when no estimates are
// given); then submission.
func lessNode(a, b *node) bool {
	if a.spec.Priority != b.spec.Priority {
		return a.spec.Priority > b.spec.Priority
	}
	if a.est != b.est {
		return a.est > b.est
	}
	return a.seq < b.seq
}

// Open loads the store's persisted tasks and starts the loop. Attempts that
// were running when an earlier scheduler died are recovered through the
// Runner: one still running is adopted (its task runs on, watched by this
// engine, its GPU memory charged before anything else is admitted), one
// that ended meanwhile is recorded from its result, and one whose outcome
// cannot be known is recorded interrupted and its task pending.
func Open(cfg Config) (*Engine, error) {
	if cfg.MaxParallel <= 0 {
		return nil, fmt.Errorf("engine: MaxParallel must be positive, got %d", cfg.MaxParallel)
	}
	if cfg.Store == nil || cfg.Runner == nil {
		return nil, errors.New("engine: Store and Runner are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.DefaultRetryDelay = defaultDuration(cfg.DefaultRetryDelay, DefaultRetryDelay)
	cfg.RetryDelayMax = defaultDuration(cfg.RetryDelayMax, DefaultRetryDelayMax)
	cfg.DeliverTimeout = defaultDuration(cfg.DeliverTimeout, DefaultDeliverTimeout)
	load := cfg.Store.Load
	if cfg.Rows != nil {
		load = cfg.Rows
	}
	rows, err := load()
	if err != nil {
		return nil, err
	}
	e := &Engine{
		cfg:     cfg,
		events:  make(chan event, 1024),
		closed:  make(chan struct{}),
		killNow: make(chan struct{}),
		tasks:   map[string]*node{},
		ready:   newReadySet(),
		delayed: btree.NewG(8, lessDelayed),
	}
	e.workers = newWorkers(e.closed)
	e.earlier = make(map[string]*store.Row, len(rows))
	e.readyView = readyQueue{e.ready}
	e.ready.halfLife = cmp.Or(max(cfg.FairShareHalfLife, 0), DefaultFairShareHalfLife)
	e.ready.slots = cfg.MaxParallel
	if err := e.loadUsage(); err != nil {
		return nil, err
	}
	e.initGPU()
	e.initHost()
	e.initOutbox()
	if err := e.loadOutbox(rows); err != nil {
		return nil, err
	}
	// Reasons an earlier scheduler saved are its own: this one decides
	// again about the tasks submitted to it. This commit marks them stale
	// (readers show none from here on); the first commit of the loop
	// forgets them (forgetStaleWaits), beside the submission's rows,
	// which it rewrites anyway: a resumed run of 100,000 waiting tasks
	// rewrote them twice, in two transactions, 0.3 s of CPU more.
	if err := e.markStaleWaits(rows); err != nil {
		return nil, err
	}
	adoptions := e.recoverOrphans(rows)
	if err := cfg.Store.Apply(&e.batch); err != nil {
		return nil, err
	}
	e.batch.Reset()
	e.runEffects(nil)
	for _, ad := range adoptions {
		e.watch(ad)
	}
	go e.loop()
	return e, nil
}

// Earlier returns what the store held for task id when the engine opened:
// its state, definition, fingerprint and artifacts from earlier runs. Safe
// for concurrent use; the caller must not change the row.
func (e *Engine) Earlier(id string) (*store.Row, bool) {
	r, ok := e.earlier[id]
	return r, ok
}

// event is something the loop applies to its state.
type event interface{ apply(e *Engine) }

// send delivers ev to the loop, or reports that the engine is closed.
func (e *Engine) send(ev event) bool {
	select {
	case <-e.closed:
		return false
	default:
	}
	select {
	case e.events <- ev:
		return true
	case <-e.closed:
		return false
	}
}

func (e *Engine) loop() {
	defer close(e.closed)
	e.initService()
	for {
		var runDone <-chan struct{}
		if e.run != nil && e.run.stop == nil {
			runDone = e.run.ctx.Done()
		}
		select {
		case ev := <-e.events:
			ev.apply(e)
		drain: // apply what else is queued: one commit for the lot
			for range 256 {
				select {
				case ev := <-e.events:
					ev.apply(e)
				default:
					break drain
				}
			}
		case <-runDone:
			e.stopAll(e.run.ctx.Err())
		case <-e.wake.C:
			// A poll is due, or a card's cooldown or quarantine ended.
		}
		e.checkGPUWaits()
		e.releaseDue()
		e.schedule()
		gpuNext := e.pollGPUs()
		waitNext := e.refreshWaits(e.cfg.Now())
		rssNext := e.sampleRSS(e.cfg.Now())
		usageNext := e.saveUsage()
		e.queueRunEnd()
		e.flush()
		e.arm(gpuNext, e.deliver(e.cfg.Now()), e.nextRetry(), waitNext, rssNext, e.laterDue, usageNext)
		e.finishRun()
		e.afterTurn()
		if e.closing != nil && e.running == 0 && !e.delivering() {
			e.stopPolls()
			e.wake.Stop()
			err := e.cfg.Store.Close()
			if e.run != nil {
				e.run.reply <- runResult{e.runRecords(), ErrClosed}
				e.run = nil
			}
			e.closeService()
			e.closing <- err
			return
		}
	}
}

// schedule starts what decide chooses, unless the engine is stopping.
func (e *Engine) schedule() {
	if e.run == nil || e.run.stop != nil || e.broken != nil || e.closing != nil {
		return
	}
	e.startChosen()
}

// startChosen starts what decide chooses now.
func (e *Engine) startChosen() {
	v := View{Free: e.cfg.MaxParallel - e.running, Ready: e.readyView, Now: e.cfg.Now()}
	if e.gpuReady > 0 {
		v.GPUKnown = e.board.Known()
		v.Cards = e.board.Views(v.Now)
		v.Placement = e.board.Settings().Placement
		v.ReserveAfter = e.cfg.GPU.ReserveAfter
		v.Topology, v.Reserved = e.topo, e.reserved
		e.ready.gpuMiB = capacityMiB(v.Cards, e.ready.gpuMiB)
	}
	e.ready.now = v.Now
	if e.cfg.UserMaxRunning > 0 || e.cfg.UserMaxGPUMiB > 0 {
		v.Owners, v.UserMaxRunning, v.UserMaxGPUMiB = e.ready.loads(), e.cfg.UserMaxRunning, e.cfg.UserMaxGPUMiB
	}
	v.Host = e.hostView()
	plan := decideVerified(v)
	for _, a := range plan.Starts {
		var cards []*gpu.CardView
		switch set := plan.Sets[a.TaskID]; {
		case len(set) > 0:
			for _, i := range set {
				cards = append(cards, &v.Cards[i])
			}
		case a.Card >= 0:
			cards = []*gpu.CardView{&v.Cards[a.Card]}
		}
		e.start(e.tasks[a.TaskID], cards)
	}
	heldFor := ""
	if e.host.on {
		heldFor = plan.HostHeldFor()
	}
	for _, p := range plan.Passed {
		n := e.tasks[p.TaskID]
		switch {
		case p.Why == task.WaitUserCap:
			e.setWait(n, e.capReason(n))
		case hostKind(p.Why):
			e.setWait(n, e.hostReason(n, p, heldFor))
		default:
			e.setWait(n, e.gpuReason(n, p.Why, v.Cards))
		}
	}
	if e.gpuReady > 0 || len(e.reserved) > 0 {
		e.setReserved(plan.Reserved)
	}
}

// flush commits the batch, then performs the effects it allows. The
// attempts written later (writeAttemptLater) go with it, or on their own
// once they are due.
func (e *Engine) flush() {
	if len(e.later) > 0 && (e.batch.Len() > 0 || len(e.effects) > 0 || e.closing != nil || !e.cfg.Now().Before(e.laterDue)) {
		e.foldLater()
	}
	var err error
	e.forgetStaleWaits()
	if e.batch.Len() > 0 {
		err = e.cfg.Store.Apply(&e.batch)
		e.committed(err)
	}
	e.runEffects(err)
}

// committed ends a commit of the batch: it empties the batch, and a
// failure breaks the engine.
func (e *Engine) committed(err error) {
	e.batch.Reset()
	if cap(e.batch.Tasks) > maxKeptWrites {
		// A big submission's writes (26 MiB for 100,000 tasks): not
		// kept for the turns after it, which write a few rows each.
		e.batch.Tasks = nil
	}
	if err != nil && e.broken == nil {
		e.broken = fmt.Errorf("save state: %w", err)
		e.stopAll(e.broken)
	}
}

// maxKeptWrites is the most task writes whose room the batch keeps from
// one commit to the next.
const maxKeptWrites = 4096

// finishRun ends the Run in progress once nothing runs and nothing more can
// start, and a Serve once it is stopped and nothing runs.
func (e *Engine) finishRun() {
	if e.run == nil || e.running > 0 {
		return
	}
	stopping := e.run.stop != nil || e.broken != nil || e.closing != nil
	if !stopping && (e.run.serve || e.ready.Len() > 0 || e.delayed.Len() > 0 || e.outboxHoldsRun()) {
		return
	}
	if stopping && e.runEndHoldsStop() {
		return
	}
	err := e.run.stop
	if e.broken != nil {
		err = e.broken
	}
	e.run.reply <- runResult{e.runRecords(), err}
	e.run = nil
}

// runRecords is what the Run in progress returns: every record; none for
// a Serve.
func (e *Engine) runRecords() []task.Record {
	if e.run.serve {
		return nil
	}
	return e.records()
}

// stopAll cancels every running attempt; they end as cancelled.
func (e *Engine) stopAll(why error) {
	if e.run != nil && e.run.stop == nil {
		e.run.stop = why
	}
	for _, n := range e.tasks {
		if n.cancel != nil {
			n.cancelled = true
			n.cancel(ErrCancelled)
		}
	}
	for _, n := range e.adopted {
		if n.cancel != nil {
			n.cancelled = true
			n.cancel(ErrCancelled)
		}
	}
}

// start moves a ready task to running and, once that is committed, launches
// its attempt on a worker goroutine; a GPU task's on cards, in the order
// chosen.
func (e *Engine) start(n *node, cards []*gpu.CardView) {
	e.unready(n)
	number := len(n.rec.Attempts) + 1
	att := task.Attempt{
		Number:  number,
		Start:   e.cfg.Now(),
		LogPath: AttemptLog(e.cfg.LogDir, n.spec.ID, number),
		ReadyAt: n.readySince,
	}
	var assign *Assignment
	var mib int64
	if n.placed {
		att.MemRequestedMiB = n.need.MiB // the budget its executor places it by
	}
	if !n.placed {
		att.HostMemRequestedMiB = n.spec.Resources.MemoryMiBHost
	}
	if len(cards) > 0 {
		mib = n.need.MiB * int64(len(cards))
		idx := cards[0].Index
		att.GPU, att.GPUUUID, att.MemRequestedMiB = &idx, cards[0].UUID, n.need.MiB
		assign = &Assignment{Index: idx, UUID: cards[0].UUID, MemoryMiB: n.need.MiB}
		n.card = int16(idx)
		n.foreignAtStart = 0
		for _, c := range cards {
			n.foreignAtStart += c.ForeignMiB
			e.board.HoldSince(n.spec.ID, c.Index, n.need, att.Start)
		}
		if len(cards) > 1 {
			att.GPUs = make([]int, len(cards))
			assign.More = make([]AssignedCard, len(cards))
			for i, c := range cards {
				att.GPUs[i], assign.More[i] = c.Index, AssignedCard{Index: c.Index, UUID: c.UUID}
			}
			e.setMulti(n, att.GPUs)
		}
		if e.cfg.Token != nil {
			e.board.SetToken(n.spec.ID, e.cfg.Token(n.spec.ID, number))
		}
		e.gpuRunning++
		e.cardsDirty = true
	}
	n.rec.Attempts = append(n.rec.Attempts, att)
	n.rec.State = task.Running
	e.running++
	e.charge(n, mib)
	e.takeHost(n)
	e.writeTask(n)
	e.writeAttempt(n, number)

	ctx, cancel := context.WithCancelCause(context.Background())
	n.cancel = cancel
	req := e.request(n, number, assign)
	e.notify(Event{Kind: Started, TaskID: n.spec.ID, Attempt: att, Rerun: n.rec.Rerun})
	if _, ok := e.cfg.Runner.(GatedRunner); ok {
		// Run prepares the attempt while the commit runs, and starts it
		// once the commit opens the gate.
		g := &gate{open: make(chan struct{})}
		req.Gate = g.wait
		e.effects = append(e.effects, g.set)
		e.workers.run(func() {
			out := e.cfg.Runner.Run(ctx, req, e.hooks(n, number))
			cause := context.Cause(ctx)
			if err := g.wait(); err != nil {
				// Not recorded as started, so it did not start (Run
				// honours the gate). The engine is broken now; report
				// the attempt as never run.
				out, cause = Outcome{Verdict: err}, ErrCancelled
			}
			e.send(exitEvent{n: n, number: number, out: out, cause: cause})
		})
		return
	}
	e.effects = append(e.effects, func(err error) {
		if err != nil {
			// Not recorded as started, so it must not start. The engine is
			// broken now; report the attempt as never run.
			go e.send(exitEvent{n: n, number: number, out: Outcome{Verdict: err}, cause: ErrCancelled})
			return
		}
		e.workers.run(func() {
			out := e.cfg.Runner.Run(ctx, req, e.hooks(n, number))
			e.send(exitEvent{n: n, number: number, out: out, cause: context.Cause(ctx)})
		})
	})
}

// gate is an attempt's AttemptRequest.Gate: the commit of its start sets
// it (an effect), once, from the loop.
type gate struct {
	open chan struct{} // closed once err is set
	err  error         // why the start was not committed; written before open is closed
}

func (g *gate) set(err error) {
	g.err = err
	close(g.open)
}

func (g *gate) wait() error {
	<-g.open
	return g.err
}

// AttemptLog is where attempt number of task id writes its output in the
// log folder dir: dir/<id>.attempt-<number>.log, every task's logs in the
// one folder. (Until issue 14 each task had a folder of its own,
// dir/<id>/attempt-<number>.log: creating it cost as much as the log
// file. Readers follow the path saved with each attempt, so run
// directories of either layout read alike.) A task id cannot contain
// "/" except the one of a daemon's RUN/TASK, whose logs go in dir/RUN.
// The name is never another attempt's: the number is what follows the
// last ".attempt-", and the id what precedes it.
func AttemptLog(dir, id string, number int) string {
	return filepath.Join(dir, id+".attempt-"+strconv.Itoa(number)+".log")
}

// request is what the Runner needs to run (or recover) attempt number of n.
func (e *Engine) request(n *node, number int, gpu *Assignment) AttemptRequest {
	req := AttemptRequest{Spec: n.spec, Number: number, LogPath: n.rec.Attempts[number-1].LogPath, GPU: gpu,
		KillNow: e.killNow, Timeout: e.timeoutOf(n.spec)}
	if n.placed {
		req.GPUMiB = n.need.MiB
	}
	return req
}

// hooks tell the loop of an attempt's phases: a handle submitted is
// committed before the executor goes on; running is recorded as it comes.
func (e *Engine) hooks(n *node, number int) executor.Hooks {
	return executor.Hooks{
		Submitted: func(h executor.Handle) error {
			reply := make(chan error, 1)
			if !e.send(submittedEvent{n: n, number: number, handle: h, reply: reply}) {
				return ErrClosed
			}
			err, ok := await(e, reply)
			if !ok {
				return ErrClosed
			}
			return err
		},
		Running:  func(r executor.Running) { e.send(runningEvent{n: n, number: number, run: r}) },
		Progress: func(p executor.Progress) { e.send(progressEvent{n: n, number: number, p: p}) },
	}
}

func (e *Engine) timeoutOf(s *task.Spec) time.Duration {
	return orQueueDefault(s.Timeout, task.NoTimeout, e.cfg.DefaultTimeout)
}

func (e *Engine) retriesOf(s *task.Spec) int {
	return orQueueDefault(s.Retries, task.NoRetries, e.cfg.DefaultRetries)
}

// orQueueDefault resolves a task's setting: none (0) when it says none,
// its own value when positive, else the queue's default.
func orQueueDefault[T int | time.Duration](v, none, def T) T {
	switch {
	case v == none:
		return 0
	case v > 0:
		return v
	}
	return def
}

// submittedEvent persists the handle of an attempt handed to another
// system, before its command can run; the reply follows the commit.
type submittedEvent struct {
	n      *node
	number int
	handle executor.Handle
	reply  chan error
}

func (ev submittedEvent) apply(e *Engine) {
	ev.n.setHandle(ev.number, ev.handle)
	e.writeAttempt(ev.n, ev.number)
	e.effects = append(e.effects, func(err error) { ev.reply <- err })
}

// runningEvent records that an attempt's command runs: its handle from now
// on, its process, and its real start, from which its duration counts.
type runningEvent struct {
	n      *node
	number int
	run    executor.Running
}

func (ev runningEvent) apply(e *Engine) {
	n := ev.n
	a := &n.rec.Attempts[ev.number-1]
	if a.Ended() {
		return // its end came first
	}
	a.PID = ev.run.PID
	if !ev.run.Since.IsZero() {
		a.Start = ev.run.Since
	}
	n.setHandle(ev.number, ev.run.Handle)
	e.stopWanted(n)
	if ev.run.PID > 0 {
		for _, c := range e.cardsOf(n) {
			e.board.SetPID(n.spec.ID, c, ev.run.PID)
		}
	}
	e.writeAttemptLater(n, ev.number) // it permits nothing: no commit of its own
	e.jobRuns(n, ev.number)           // it no longer waits in a batch system's queue
}

func (n *node) setHandle(number int, h executor.Handle) {
	if n.handles == nil {
		n.handles = map[int]executor.Handle{}
	}
	n.handles[number] = h
}

type exitEvent struct {
	n      *node
	number int
	out    Outcome
	cause  error // the attempt context's cause: nil or ErrCancelled (timeouts are the executor's: out.Reason)
}

func (ev exitEvent) apply(e *Engine) {
	n, out := ev.n, ev.out
	e.running--
	e.uncharge(n)
	e.releaseHost(n)
	n.cancel(nil)
	n.cancel = nil
	delete(e.stopped, n)
	a := &n.rec.Attempts[ev.number-1]
	a.End = e.cfg.Now()
	if !out.End.IsZero() {
		a.Start, a.End = out.Start, out.End
	}
	a.ExitCode, a.Signal = nil, ""
	if out.Started {
		if out.Signal != 0 {
			a.Signal = executor.SignalName(out.Signal)
		} else {
			code := out.ExitCode
			a.ExitCode = &code
		}
	}
	n.rec.ExitCode = a.ExitCode
	a.EndReason = out.Reason.String()
	cancelled := n.cancelled || errors.Is(ev.cause, ErrCancelled) || out.Reason == executor.Cancelled
	switch {
	case cancelled:
		a.Cancelled = true
		a.Error = "cancelled"
	case out.Reason == executor.TimedOut:
		a.TimedOut = true
		a.Error = "timed out after " + e.timeoutOf(n.spec).String()
	case out.Verdict != nil:
		a.Error = out.Verdict.Error()
	default:
		a.Error = ""
	}
	var oom oomCase
	switch failed := a.Error != "" && !cancelled; {
	case n.card >= 0:
		oom = e.releaseGPU(n, failed, out)
	case n.placed && failed && out.OOM:
		oom = e.growPlaced(n, out)
	}
	ended := Event{TaskID: n.spec.ID, Submitted: n.rec.Submitted}

	switch {
	case a.Error == "" && n.rerunAfter != "":
		// Its adopted attempt completed under the definition it started
		// with; the task's definition has changed since.
		n.rec.State, n.rec.Error, n.rec.Rerun = task.Pending, "", n.rerunAfter
		n.rerunAfter = ""
		e.makeReady(n)
		e.writeTask(n)
		ended.Kind = Retrying
	case a.Error == "":
		n.envFaults = 0
		n.rec.State, n.rec.Error = task.Complete, "" // Rerun stays: why it ran in this run
		n.rec.Artifacts = out.Artifacts
		e.writeTask(n)
		if len(n.spec.Artifacts) > 0 {
			w := &e.batch.Tasks[n.writeIdx]
			w.Artifacts, w.ArtifactsSet = out.Artifacts, true
		}
		if len(n.spec.Inputs) > 0 {
			e.batch.Inputs = append(e.batch.Inputs, store.InputsWrite{TaskID: n.spec.ID, Inputs: out.Inputs})
		}
		e.queueEvent(n, ev.number)
		ended.Kind = Completed
	case cancelled:
		n.rec.State, n.rec.Error = task.Cancelled, "cancelled"
		e.writeTask(n)
		ended.Kind = TaskCancelled
	default:
		ended.Kind, ended.RetryAt = e.failed(n, a, out, oom)
	}
	e.writeAttempt(n, ev.number)
	ended.Attempt = *a
	e.notify(ended)

	// Then what follows for the tasks that depend on it.
	switch ended.Kind {
	case Completed:
		e.settle(n)
	case TaskCancelled:
		// Stopped because the run stops (Ctrl-C, Close), what depends on
		// it never started and stays pending, for the next run.
		if n.userCancelled {
			e.settle(n)
		}
	case Failed:
		e.settle(n)
		if f := e.cfg.OnFailure; f != nil {
			spec, rec := n.spec, n.record()
			e.effects = append(e.effects, func(err error) {
				if err == nil {
					go f(spec, rec)
				}
			})
		}
	case Retrying:
		// Its dependents go on waiting for it.
	case Started, TaskBlocked, DeliveryFailed, CardQuarantined, GPUUnknown, GPUKnown, Adopted, JobChanged:
		// Not the end of an attempt.
	}
	e.answerCancels(n)
}

// failed decides what follows a failed attempt: a retry, at once or after
// a delay, or the task's failure. It completes the attempt's error with
// why, and returns the event to report and when the retry may start.
//
// A failure that is not the task's own (the environment could not set the
// attempt up; another process took the GPU memory it was promised) does
// not use up a retry: the task backs off and tries again, up to
// MaxEnvironmentFaults times in a row. A command that cannot run as given
// fails at once. Otherwise the task retries while it has retries left,
// unless its policy says this failure is final: a timeout without
// RetryOnTimeout, an exit code outside RetryOnExitCodes.
func (e *Engine) failed(n *node, a *task.Attempt, out Outcome, oom oomCase) (EventKind, time.Time) {
	final := "" // why there is no retry, when the policy says so
	switch {
	case errors.Is(out.Err, executor.ErrEnvironment) || oom.contention || (out.Reason != 0 && !out.Reason.Charged()):
		a.NotCharged = true
		n.envFaults++
		if !oom.contention {
			a.Error += "; " + notTheTasks(out)
		}
		if n.envFaults >= MaxEnvironmentFaults {
			final = fmt.Sprintf("gave up after %d such failures in a row", n.envFaults)
		}
	case errors.Is(out.Err, executor.ErrCommand):
		n.envFaults = 0
		n.failures++
		final = "not retried: the command cannot run as given"
	default:
		n.envFaults = 0
		n.failures++
		codes := n.spec.RetryOnExitCodes
		switch {
		case int(n.failures) > e.retriesOf(n.spec):
			final = "-" // no retries left: the error says enough
		case a.TimedOut && !n.spec.RetryOnTimeout:
			final = "not retried after a timeout (retry_on_timeout is off)"
		case len(codes) > 0 && !oom.oom && (a.ExitCode == nil || !slices.Contains(codes, *a.ExitCode)):
			final = "not retried: retry_on_exit_codes does not list " + howEnded(a)
		case oom.outgrown != "":
			final = "no retry: " + oom.outgrown
		}
	}
	stopping := e.broken != nil || e.closing != nil || (e.run != nil && e.run.stop != nil)
	retry := final == "" && !stopping
	a.Error += oom.describe(retry)
	if final != "" && final != "-" {
		a.Error += "; " + final
	}
	if !retry {
		n.rec.State, n.rec.Error = task.Failed, a.Error
		e.writeTask(n)
		return Failed, time.Time{}
	}
	delay := e.retryDelay(n)
	if a.NotCharged {
		delay = doubling(time.Second, int(n.envFaults), time.Minute)
	}
	n.rec.State, n.rec.Error = task.Pending, a.Error
	if delay > 0 {
		n.rec.RetryAt = e.cfg.Now().Add(delay)
		e.delay(n)
		why := task.WaitRetryDelay
		if a.NotCharged {
			why = task.WaitBackoff
		}
		e.setWait(n, task.WaitReason{Kind: why, Detail: a.Error, Until: n.rec.RetryAt})
	} else {
		e.makeReady(n)
	}
	e.writeTask(n)
	return Retrying, n.rec.RetryAt
}

// howEnded names how an attempt's process ended, for a person.
func howEnded(a *task.Attempt) string {
	switch {
	case a.ExitCode != nil:
		return "exit code " + strconv.Itoa(*a.ExitCode)
	case a.Signal != "":
		return a.Signal
	}
	return "a failure without an exit code"
}

// retryDelay is the wait before the task's next retry: its RetryDelay (or
// the queue's), doubled for each failure before the last, capped.
func (e *Engine) retryDelay(n *node) time.Duration {
	base := orQueueDefault(n.spec.RetryDelay, task.NoRetryDelay, e.cfg.DefaultRetryDelay)
	return doubling(base, int(n.failures), e.cfg.RetryDelayMax)
}

// doubling returns base doubled k-1 times, at most limit.
func doubling(base time.Duration, k int, limit time.Duration) time.Duration {
	d := base
	for i := 1; i < k && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// delay parks a pending task until its RetryAt.
func (e *Engine) delay(n *node) {
	e.delayed.ReplaceOrInsert(n)
	n.inDelayed = true
}

// releaseDue makes ready the tasks whose retry delay is over.
func (e *Engine) releaseDue() {
	now := e.cfg.Now()
	for {
		n, ok := e.delayed.Min()
		if !ok || n.rec.RetryAt.After(now) {
			return
		}
		e.delayed.Delete(n)
		n.inDelayed = false
		n.rec.RetryAt = time.Time{}
		e.writeTask(n)
		e.makeReady(n)
	}
}

// nextRetry returns when the next delayed task is due, or zero.
func (e *Engine) nextRetry() time.Time {
	if n, ok := e.delayed.Min(); ok {
		return n.rec.RetryAt
	}
	return time.Time{}
}

// record returns a copy of the task's record, with its waiting reason.
func (n *node) record() task.Record {
	r := n.rec
	r.Attempts = slices.Clone(n.rec.Attempts)
	r.Waiting = n.waitReason() // a dependencies' detail computed afresh
	return r
}

// makeReady queues a pending task whose dependencies are all complete. A
// paused one is not queued: it waits paused until resumed (pause.go).
func (e *Engine) makeReady(n *node) {
	if n.rec.Paused {
		e.setWait(n, task.WaitReason{Kind: task.WaitPaused})
		return
	}
	if !n.inReady {
		n.readySince = e.cfg.Now() // before it goes in: the GPU index reads it
		e.ready.ReplaceOrInsert(n)
		n.inReady = true
		e.setWait(n, task.WaitReason{Kind: task.WaitSlot})
		if n.localGPU() {
			e.gpuReady++
			e.addGPUWait(n)
			if !e.board.Known() {
				e.cardsDirty = true // status says why GPU tasks wait
			}
		}
	}
}

// unready takes a task out of the ready queue, or out of the tasks
// waiting out a retry delay.
func (e *Engine) unready(n *node) {
	if n.inDelayed {
		e.delayed.Delete(n)
		n.inDelayed = false
		n.rec.RetryAt = time.Time{}
	}
	if n.inReady {
		e.ready.Delete(n)
		n.inReady = false
		if n.localGPU() {
			e.gpuReady--
			e.dropGPUWait(n)
		}
	}
}

// settle tells the tasks that depend on n, which has just ended (or was
// blocked), what that means to them, by the condition each depends on it
// with (task.Condition.Judge): a pending task whose condition is met waits
// for one dependency less, and is ready once it waits for none; one whose
// condition can no longer be met is blocked, and what depends on it is
// told in turn. Every task blocked so names the same blocker (BlockedBy):
// the task that failed or was cancelled, or, for tasks not needed, the one
// that completed.
func (e *Engine) settle(n *node) {
	type ended struct{ n, root *node } // root: the blocker of n if blocked, else n; nil until needed
	var queue []ended                  // tasks blocked on the way, whose dependents are still to tell
	m := ended{n: n}
	for {
		for _, d := range m.n.dependents {
			switch v := d.spec.On(m.n.spec.ID).Judge(m.n.rec.State, m.n.rec.NotNeeded); v {
			case task.Met:
				d.waiting--
				switch {
				case d.rec.State != task.Pending:
				case d.waiting == 0:
					e.makeReady(d)
				default:
					e.staleDeps(d) // its reason names what it still waits for
				}
			case task.Unmet, task.NotNeeded:
				if d.rec.State != task.Pending {
					continue
				}
				if m.root == nil {
					m.root = e.rootOf(m.n)
				}
				e.block(d, m.root, m.n, v == task.NotNeeded)
				queue = append(queue, ended{d, m.root})
			case task.Unsettled:
				// Cannot be: m has ended.
			}
		}
		if len(queue) == 0 {
			return
		}
		m = queue[len(queue)-1]
		queue = queue[:len(queue)-1]
	}
}

// rootOf returns the task that blocked n, in memory or retired, when n is
// blocked (n itself when that task cannot be found); else n.
func (e *Engine) rootOf(n *node) *node {
	if n.rec.State == task.Blocked && n.rec.BlockedBy != "" && n.rec.BlockedBy != n.spec.ID {
		if b := e.blocker(n.rec.BlockedBy); b != nil {
			return b
		}
	}
	return n
}

// block marks pending task d blocked: the condition it depends on dep
// with can no longer be met, as a failure's consequence or, with
// notNeeded, not (task.NotNeeded). root is what blocked dep, or dep itself
// (see settle).
func (e *Engine) block(d, root, dep *node, notNeeded bool) {
	e.unready(d)
	setBlocked(d, root, dep, notNeeded)
	e.writeTask(d)
	e.notifyBlocked(d)
}

// setBlocked sets d's record blocked (see block).
func setBlocked(d, root, dep *node, notNeeded bool) {
	d.rec.State = task.Blocked
	d.rec.BlockedBy = root.spec.ID
	d.rec.NotNeeded = notNeeded
	switch {
	case !notNeeded:
		d.rec.Error = fmt.Sprintf("blocked: dependency %q %s", root.spec.ID, root.rec.State)
	case dep.rec.State == task.Complete:
		d.rec.Error = fmt.Sprintf("not needed: dependency %q completed; this task runs on its failure", dep.spec.ID)
	case root != dep:
		d.rec.Error = fmt.Sprintf("not needed: dependency %q was not needed (%q completed)", dep.spec.ID, root.spec.ID)
	default: // what made dep not needed cannot be found
		d.rec.Error = fmt.Sprintf("not needed: dependency %q was not needed", dep.spec.ID)
	}
}

// notifyBlocked queues the event of d's block.
func (e *Engine) notifyBlocked(d *node) {
	e.notify(Event{Kind: TaskBlocked, TaskID: d.spec.ID, BlockedBy: d.rec.BlockedBy, Error: d.rec.Error, NotNeeded: d.rec.NotNeeded,
		Submitted: d.rec.Submitted})
}

// writeTask queues the task's row, as it is now, for the next commit. A
// row written already in the same batch is replaced, keeping what only
// the earlier write carried (the definition, the artifacts): a commit
// writes each row once, however many changes the turn made to it. A task
// that is neither pending nor queued (running, its attempt waiting in the
// batch system that runs it) has no waiting reason.
func (e *Engine) writeTask(n *node) {
	if n.rec.Waiting.Waiting() && !keepsWait(n.rec.State, n.rec.Waiting.Kind) {
		e.forgetWait(n)
	}
	if n.rec.State.Terminal() {
		n.rec.Paused = false // finished: nothing left to hold back
	}
	var grown int64
	if n.need.MiB != n.spec.Resources.MemoryMiB {
		grown = n.need.MiB
	}
	w := store.TaskWrite{
		ID: n.spec.ID, Seq: n.seq, Kind: n.spec.Kind, Spec: n.specJSON, GPURequestMiB: grown, Submitted: n.rec.Submitted,
		Fingerprint: n.fingerprint, Rerun: n.rec.Rerun, RetryAt: n.rec.RetryAt,
		State: n.rec.State, ExitCode: n.rec.ExitCode, Error: n.rec.Error, BlockedBy: n.rec.BlockedBy,
		Paused: n.rec.Paused, NotNeeded: n.rec.NotNeeded,
	}
	if n.rec.Waiting.Waiting() {
		wr := n.waitReason()
		w.WaitKind, w.WaitDetail = wr.Kind, wr.Detail
	}
	n.specJSON = nil // written once; later writes keep it
	if i := int(n.writeIdx); i < len(e.batch.Tasks) && e.batch.Tasks[i].ID == n.spec.ID && !e.stream.holds(i) {
		old := &e.batch.Tasks[i]
		if w.Spec == nil {
			w.Spec = old.Spec
		}
		w.Artifacts, w.ArtifactsSet = old.Artifacts, old.ArtifactsSet
		*old = w
		return
	}
	n.writeIdx = int32(len(e.batch.Tasks))
	e.batch.Tasks = append(e.batch.Tasks, w)
}

func (e *Engine) writeAttempt(n *node, number int) {
	e.batch.Attempts = append(e.batch.Attempts, store.AttemptWrite{
		TaskID: n.spec.ID, Attempt: n.rec.Attempts[number-1], Handle: n.handles[number],
	})
}

// laterDelay is how long an attempt's write may wait for the next commit
// (writeAttemptLater).
const laterDelay = 50 * time.Millisecond

// laterWrite names an attempt whose row is to be written later.
type laterWrite struct {
	n      *node
	number int
}

// writeAttemptLater queues attempt number of n to be written with the next
// commit, as it is then, or on its own within laterDelay if none comes:
// for a change that permits no effect, so that it need not cost a commit
// of its own. That an attempt runs (its PID, handle and real start, which
// the executor reports once its process is started) is such a change:
// its start was committed before the process was, and a scheduler that
// dies before the write finds the attempt by its token (docs/states.md,
// "What is saved, and when"). With many short tasks the next commit comes
// within milliseconds (another task's end and the next start), and the
// write costs no transaction.
func (e *Engine) writeAttemptLater(n *node, number int) {
	if len(e.later) == 0 {
		e.laterDue = e.cfg.Now().Add(laterDelay)
	}
	e.later = append(e.later, laterWrite{n, number})
}

// foldLater puts the attempts written later into the batch, as they are
// now. One that ended since is in the batch already, whole: its end was
// written in this turn (any earlier commit would have taken it along).
func (e *Engine) foldLater() {
	for _, w := range e.later {
		if w.number <= len(w.n.rec.Attempts) && !w.n.rec.Attempts[w.number-1].Ended() {
			e.writeAttempt(w.n, w.number)
		}
	}
	clear(e.later)
	e.later, e.laterDue = e.later[:0], time.Time{}
}

// notify queues an event for the observer and subscribers, published
// after the commit.
func (e *Engine) notify(ev Event) {
	ev.Time = e.cfg.Now()
	e.queueNotices(ev)
	e.effects = append(e.effects, func(err error) {
		if err == nil {
			e.publish(ev)
		}
	})
}

// records returns a copy of every task's record in memory (with
// Config.Retire, not the retired ones), in submission order.
func (e *Engine) records() []task.Record {
	nodes := e.bySeq()
	out := make([]task.Record, len(nodes))
	for i, n := range nodes {
		out[i] = n.record()
	}
	return out
}

// bySeq returns every node in memory (tasks and adopted ones) in
// submission order. A batch's tasks have consecutive numbers, so each
// node is put at its number's place when the numbers are that dense (a
// sort of 100,000 nodes read from a map cost 0.05 s); a sort otherwise.
func (e *Engine) bySeq() []*node {
	total := len(e.tasks) + len(e.adopted)
	low, high := int64(math.MaxInt64), int64(math.MinInt64)
	each := func(f func(n *node) bool) {
		for _, n := range e.tasks {
			if !f(n) {
				return
			}
		}
		for _, n := range e.adopted {
			if !f(n) {
				return
			}
		}
	}
	each(func(n *node) bool { low, high = min(low, n.seq), max(high, n.seq); return true })
	if total > 0 && high-low < 2*int64(total) {
		slots := make([]*node, high-low+1)
		unique := true
		each(func(n *node) bool {
			i := n.seq - low
			unique = slots[i] == nil
			slots[i] = n
			return unique
		})
		if unique {
			nodes := slots[:0] // in place: a node moves only to a place at or before its own
			for _, n := range slots {
				if n != nil {
					nodes = append(nodes, n)
				}
			}
			return nodes
		}
	}
	nodes := make([]*node, 0, total)
	each(func(n *node) bool { nodes = append(nodes, n); return true })
	slices.SortFunc(nodes, func(a, b *node) int { return cmp.Compare(a.seq, b.seq) })
	return nodes
}

// readyQueue adapts the loop's ready queue to decide's Queue.
type readyQueue struct{ t *readySet }

func (q readyQueue) Ascend(fn func(Candidate) bool) {
	q.t.walk(func(o *owner, n *node) bool { return fn(candidateOf(o, n)) })
}

// capacityMiB is the GPU memory of cards, for weighing owners' usage;
// last when no card has any (the GPUs cannot be read).
func capacityMiB(cards []gpu.CardView, last int64) int64 {
	var sum int64
	for i := range cards {
		sum += cards[i].CapacityMiB
	}
	if sum == 0 {
		return last
	}
	return sum
}
