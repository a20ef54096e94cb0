package cli

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/client"
	"github.com/gpusched/gpusched/internal/task"
)

// How "gpusched run" through the daemon shows its run: the daemon's
// events (GET /v1/events) of the run's tasks, and of the GPUs, become the
// display's events; the live display's waiting reasons come from the
// queue and its GPU charges from the daemon's ledger, read at most once a
// second each.

// daemonFollower passes the daemon's events of one run to a display.
// Events come before the run is known (the stream starts before the
// submission, so that none is missed): they are kept until follow names
// the run, then the run's are passed on and the others dropped.
type daemonFollower struct {
	cl     *client.Client
	gpuMiB map[string]int64 // by task id within the workflow

	mu      sync.Mutex // guards the fields below
	run     string     // "" until follow
	display runDisplay
	early   []client.Event // before follow
	starts  map[string]time.Time
	ended   map[string]bool // the tasks whose end the display had
	changed chan struct{}   // a task ended (buffered: one is enough)
}

func newDaemonFollower(cl *client.Client, tasks []client.Task) *daemonFollower {
	f := &daemonFollower{cl: cl, gpuMiB: map[string]int64{}, starts: map[string]time.Time{}, ended: map[string]bool{},
		changed: make(chan struct{}, 1)}
	for _, t := range tasks {
		f.gpuMiB[t.ID] = t.GPUMiB
	}
	return f
}

// subscribe opens the daemon's event stream: what the daemon commits
// from now on comes to events.
func (f *daemonFollower) subscribe(ctx context.Context) (*client.EventStream, error) {
	return f.cl.Subscribe(ctx, 0)
}

// events reads s, then, when the daemon goes away, subscribes again
// (backing off from 100 ms to 2 s) and goes on, until ctx is done. The
// events committed while no stream was open are not seen: the run's end
// comes from Wait all the same.
func (f *daemonFollower) events(ctx context.Context, s *client.EventStream) {
	backoff := 100 * time.Millisecond
	for {
		if s != nil {
			_ = s.Each(func(ev client.Event) bool {
				backoff = 100 * time.Millisecond
				f.take(ev)
				return true
			})
			s.Close()
			s = nil
		}
		if ctx.Err() != nil {
			return
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, 2*time.Second)
		s, _ = f.subscribe(ctx)
	}
}

// drain waits until the display has had the end of every task of ids
// (their events may come after Wait's answer), or for at most limit (the
// events of a time the daemon was away never come).
func (f *daemonFollower) drain(ids []string, limit time.Duration) {
	deadline := time.After(limit)
	for {
		f.mu.Lock()
		all := true
		for _, id := range ids {
			all = all && f.ended[id]
		}
		f.mu.Unlock()
		if all {
			return
		}
		select {
		case <-f.changed:
		case <-deadline:
			return
		}
	}
}

// follow names the run and its display: the events kept so far that are
// the run's go to it now.
func (f *daemonFollower) follow(run string, d runDisplay) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.run, f.display = run, d
	for _, ev := range f.early {
		f.pass(ev)
	}
	f.early = nil
}

func (f *daemonFollower) take(ev client.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.run == "" {
		f.early = append(f.early, ev)
		return
	}
	f.pass(ev)
}

// pass gives the display ev if it is of the run or of the GPUs. f.mu is
// held.
func (f *daemonFollower) pass(ev client.Event) {
	if ev.Task == "" {
		if kind, ok := gpuEventKinds[ev.Kind]; ok {
			out := gpusched.Event{Time: ev.Time, Kind: kind, Error: ev.Error}
			if ev.GPU != nil {
				out.Card = *ev.GPU
			}
			f.display.observe(out)
		}
		return
	}
	run, id, _ := strings.Cut(ev.Task, "/")
	if run != f.run {
		return
	}
	kind, ok := taskEventKinds[ev.Kind]
	if !ok {
		return
	}
	out := gpusched.Event{Time: ev.Time, Kind: kind, TaskID: ev.Task, BlockedBy: ev.BlockedBy, NotNeeded: ev.NotNeeded, Error: ev.Error}
	if ev.Attempt > 0 {
		a := gpusched.Attempt{Number: ev.Attempt, GPU: ev.GPU, GPUs: ev.GPUs, ExitCode: ev.ExitCode, Start: ev.Time, End: ev.Time}
		if kind == gpusched.EventStarted {
			f.starts[ev.Task] = ev.Time
			if ev.GPU != nil {
				a.MemRequestedMiB = cmp.Or(ev.GPUMiB, f.gpuMiB[id]) // a daemon before gpu_mib: the budget asked
			}
		} else if s, ok := f.starts[ev.Task]; ok {
			a.Start = s
		}
		a.Error = ev.Error
		if a.Error == "" && ev.ExitCode != nil && *ev.ExitCode != 0 {
			a.Error = fmt.Sprintf("exit code %d", *ev.ExitCode)
		}
		out.Attempt = a
	}
	f.display.observe(out)
	switch kind {
	case gpusched.EventComplete, gpusched.EventFailed, gpusched.EventBlocked, gpusched.EventCancelled:
		f.ended[ev.Task] = true
		select {
		case f.changed <- struct{}{}:
		default:
		}
	case gpusched.EventStarted, gpusched.EventRetrying, gpusched.EventDeliveryFailed, gpusched.EventAdopted,
		gpusched.EventCardQuarantined, gpusched.EventGPUUnknown, gpusched.EventGPUKnown, gpusched.EventJob:
		// the task goes on, or the event is not a task's end
	}
}

// The daemon's event kinds (their names, as EventKind.String gives them)
// that the display shows.
var (
	taskEventKinds = map[string]gpusched.EventKind{}
	gpuEventKinds  = map[string]gpusched.EventKind{}
)

func init() {
	for _, k := range []gpusched.EventKind{gpusched.EventStarted, gpusched.EventRetrying, gpusched.EventComplete,
		gpusched.EventFailed, gpusched.EventBlocked, gpusched.EventCancelled, gpusched.EventDeliveryFailed, gpusched.EventAdopted} {
		taskEventKinds[k.String()] = k
	}
	for _, k := range []gpusched.EventKind{gpusched.EventCardQuarantined, gpusched.EventGPUUnknown, gpusched.EventGPUKnown} {
		gpuEventKinds[k.String()] = k
	}
}

// daemonEventLine is eventLine for a run through the daemon, whose logs
// are read with gpusched logs ID rather than from a file.
func daemonEventLine(ev gpusched.Event) string {
	ts := ev.Time.Format("15:04:05")
	a := ev.Attempt
	switch ev.Kind {
	case gpusched.EventRetrying:
		return fmt.Sprintf("%s retry     %s: attempt %d %s; gpusched logs %s", ts, ev.TaskID, a.Number, a.Error, ev.TaskID)
	case gpusched.EventFailed:
		if a.Number == 0 {
			return fmt.Sprintf("%s failed    %s: %s", ts, ev.TaskID, ev.Error)
		}
		return fmt.Sprintf("%s failed    %s: attempt %d %s; gpusched logs %s", ts, ev.TaskID, a.Number, a.Error, ev.TaskID)
	case gpusched.EventAdopted:
		return fmt.Sprintf("%s adopted   %s (attempt %d, by a daemon that restarted)", ts, ev.TaskID, a.Number)
	case gpusched.EventStarted, gpusched.EventComplete, gpusched.EventBlocked, gpusched.EventCancelled,
		gpusched.EventDeliveryFailed, gpusched.EventCardQuarantined, gpusched.EventGPUUnknown, gpusched.EventGPUKnown,
		gpusched.EventJob:
		// worded as gpusched run words them
	}
	return eventLine(ev)
}

// daemonWaits counts the run's waiting tasks by reason, from the queue.
type daemonWaits struct {
	cl   *client.Client
	run  string
	next time.Time
	last map[task.WaitKind]int
}

func (r *daemonWaits) read(now time.Time) map[task.WaitKind]int {
	if now.Before(r.next) {
		return r.last
	}
	r.next = now.Add(waitInterval)
	ctx, cancel := context.WithTimeout(context.Background(), waitInterval)
	defer cancel()
	tasks, err := r.cl.Queue(ctx, client.QueueOptions{IDs: []string{r.run}, States: []string{"pending"}})
	if err != nil {
		return r.last
	}
	counts := map[task.WaitKind]int{}
	for _, t := range tasks {
		if k, err := task.ParseWaitKind(t.WaitingKind); err == nil && t.WaitingKind != "" {
			counts[k]++
		}
	}
	r.last = counts
	return counts
}

func (r *daemonWaits) close() {}

// daemonCharges reads the GPU memory charged to the run's running tasks
// from the daemon's ledger.
type daemonCharges struct {
	cl   *client.Client
	run  string
	next time.Time
	last map[string]int64
}

func (c *daemonCharges) read(now time.Time) map[string]int64 {
	if now.Before(c.next) {
		return c.last
	}
	c.next = now.Add(chargeInterval)
	ctx, cancel := context.WithTimeout(context.Background(), chargeInterval)
	defer cancel()
	g, err := c.cl.GPUs(ctx)
	if err != nil || g.Source != "daemon" {
		return c.last
	}
	m := map[string]int64{}
	for _, card := range g.Cards {
		for _, h := range card.Tasks {
			if strings.HasPrefix(h.Task, c.run+"/") {
				m[h.Task] = max(m[h.Task], h.RequestMiB, h.ObservedMiB) // on several cards: the most on one
			}
		}
	}
	c.last = m
	return m
}

func (c *daemonCharges) close() {}

// sortByRank sorts tasks by their rank (the workflow's order); those
// without one go last, by id.
func sortByRank(tasks []client.TaskInfo, rank map[string]int) {
	slices.SortStableFunc(tasks, func(a, b client.TaskInfo) int {
		ra, oka := rank[a.ID]
		rb, okb := rank[b.ID]
		switch {
		case oka && okb:
			return ra - rb
		case oka:
			return -1
		case okb:
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
}

func joinComma(parts []string) string { return strings.Join(parts, ", ") }
