package supervise

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
)

// Executor runs attempts as local process groups, as local.Executor does,
// but through the supervisor of RunDir, which outlives this process: an
// attempt runs on when the scheduler dies, its timeout is still enforced,
// and how it ends is recorded in the results file (ResultsPath). Its handles
// are local.Executor's, and so is its name. Its methods are safe for
// concurrent use; all attempts share one connection to the supervisor.
type Executor struct {
	// RunDir is the run directory, which must exist: the supervisor's
	// socket, lock, log and results file live there. A relative path is
	// taken from the working directory.
	RunDir string
	// Binary is the program that serves as the supervisor when none runs:
	// it must call MaybeServe first thing. Empty: this process's own
	// executable.
	Binary string
	// Cgroups gives each attempt a cgroup of its own where the machine
	// allows, as local.Executor.Cgroups does.
	Cgroups bool

	mu sync.Mutex // guards c; held while connecting
	c  *conn      // the connection to the supervisor; nil before the first use and after Close

	fmu     sync.Mutex // guards forgets and sweep
	forgets forgotten  // ends committed, not yet sent (forget.go)
	sweep   []string   // Sweep's ids, not yet sent; nil: none
}

var _ executor.Executor = (*Executor)(nil)

// Name is "local": the attempts are local process groups, with
// local.Executor's handles.
func (e *Executor) Name() string { return local.Name }

// HonoursGate: Execute waits for Job.Gate before anything else.
func (e *Executor) HonoursGate() {}

var _ executor.Gated = (*Executor)(nil)

// Execute runs job through the supervisor, starting one if none runs; see
// executor.Executor. hooks.Submitted is not called (the attempt is named
// by job.Token before Execute); hooks.Running is, with a local handle.
// When the supervisor dies during the attempt, whatever is left of the
// attempt is killed and it ends Lost. When Close is called during it, it
// returns at once with Reason Lost while the attempt runs on: Recover
// finds it. A Job.Dir left empty is this process's working directory.
func (e *Executor) Execute(ctx context.Context, job executor.Job, hooks executor.Hooks) executor.Result {
	start := time.Now()
	if err := job.AwaitGate(); err != nil {
		return executor.Result{Reason: executor.Infrastructure, Start: start, End: time.Now(), Err: err}
	}
	spec, err := specOf(job, e.Cgroups)
	if err != nil {
		return executor.Result{Reason: executor.Infrastructure, Start: start, End: time.Now(), Err: err}
	}
	id := job.Token
	if id == "" {
		id = "untokened-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(anonSeq.Add(1), 10)
	}
	c, ws, err := e.register(true, []string{id}, []string{job.Token})
	if err != nil {
		return executor.Result{Reason: executor.Infrastructure, Start: start, End: time.Now(), Err: executor.EnvironmentFault(err)}
	}
	if ws[0] == nil {
		return executor.Result{Reason: executor.Infrastructure, Start: start, End: time.Now(),
			Err: fmt.Errorf("attempt %s is already being watched through this executor", id)}
	}
	c.send(&message{Type: msgStart, ID: id, Job: spec})
	return c.wait(ctx, ws[0], job.KillNow, hooks.Running)
}

// anonSeq names the attempts that have no token.
var anonSeq atomic.Uint64

// specOf returns job on the wire, its paths made absolute.
func specOf(job executor.Job, cgroups bool) (*jobSpec, error) {
	s := &jobSpec{Task: job.TaskID, Attempt: job.Attempt, Args: job.Args, Env: job.Env, Dir: job.Dir,
		LogPath: job.LogPath, LogRoot: job.LogRoot, Timeout: job.Timeout, KillGrace: job.KillGrace, Token: job.Token, Cgroups: cgroups, User: job.User}
	var err error
	if s.Dir == "" {
		if s.Dir, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("read working directory: %w", err)
		}
	}
	for _, p := range []*string{&s.LogPath, &s.LogRoot, &s.Dir} {
		if *p != "" && !filepath.IsAbs(*p) {
			if *p, err = filepath.Abs(*p); err != nil {
				return nil, fmt.Errorf("make %s absolute: %w", *p, err)
			}
		}
	}
	return s, nil
}

// Recover finds orphans, in order: one the results file has a record of
// ended as it says; one the running supervisor still runs is taken over
// (Wait waits for its end); one that neither knows is Lost, and whatever
// is left of it is killed (one scan of the processes for all of them).
// It never starts a supervisor.
func (e *Executor) Recover(orphans []executor.Orphan) []executor.Recovery {
	out := make([]executor.Recovery, len(orphans))
	dir, _ := e.runDir()
	procs := make([]executor.Process, len(orphans))
	want := make([]wanted, len(orphans))
	for i, o := range orphans {
		procs[i], _ = local.DecodeHandle(o.Handle)
		want[i] = wanted{id: o.Job.Token, proc: procs[i]}
	}
	// ended reports whether the results file says how orphan i ended.
	ended := func(recs map[string]*resultRecord, i int) bool {
		if t := orphans[i].Job.Token; t != "" && recs[t] != nil {
			out[i].Result = recs[t].result()
			return true
		}
		return false
	}
	recs, _ := readResults(dir, want)
	var ids []string
	var idx, lostIdx []int // orphan of each id, of each lost one
	for i, o := range orphans {
		switch {
		case ended(recs, i):
		case o.Job.Token == "": // no supervisor knows it by a name
			lostIdx = append(lostIdx, i)
		default:
			ids, idx = append(ids, o.Job.Token), append(idx, i)
		}
	}
	if len(ids) > 0 {
		var recheck []int // not running in the supervisor: ended meanwhile, or lost
		c, ws, err := e.register(false, ids, ids)
		if err != nil {
			recheck = idx // no supervisor: nobody watched them
		} else {
			c.send(&message{Type: msgAttach, IDs: attachable(ids, ws)})
			for k, w := range ws {
				i := idx[k]
				if w == nil {
					out[i].Result = executor.Result{Reason: executor.Infrastructure, End: time.Now(),
						Err: fmt.Errorf("attempt %s is already being watched through this executor", ids[k])}
					continue
				}
				ev := <-w.events
				switch {
				case ev.end != nil: // the connection broke, and its end was settled
					out[i].Result = *ev.end
				case ev.msg.Type == msgDetached:
					out[i].Result = detachedResult()
				case ev.msg.Running:
					m, job := ev.msg, orphans[i].Job
					out[i].Running = executor.Running{Since: m.Since, PID: m.PID,
						Handle: local.EncodeHandle(executor.Process{PID: m.PID, PGID: m.PGID, StartTicks: m.StartTicks})}
					out[i].Wait = func(ctx context.Context) executor.Result { return c.wait(ctx, w, job.KillNow, nil) }
				default:
					c.drop(w)
					recheck = append(recheck, i)
				}
			}
		}
		if len(recheck) > 0 {
			// One may have ended between the first read and the attach.
			recs, _ := readResults(dir, want)
			for _, i := range recheck {
				if !ended(recs, i) {
					lostIdx = append(lostIdx, i)
				}
			}
		}
	}
	if len(lostIdx) > 0 {
		stale := make([]local.Stale, len(lostIdx))
		for k, i := range lostIdx {
			stale[k] = local.Stale{Process: procs[i], Token: orphans[i].Job.Token}
		}
		killed, errs := local.KillStaleMany(stale)
		now := time.Now()
		for k, i := range lostIdx {
			out[i].Result = local.LostResult(now, killed[k], errs[k])
		}
	}
	return out
}

// attachable returns the ids that got a waiter.
func attachable(ids []string, ws []*waiter) []string {
	out := make([]string, 0, len(ids))
	for k, w := range ws {
		if w != nil {
			out = append(out, ids[k])
		}
	}
	return out
}

// Close drops the connection to the supervisor without stopping any
// attempt: they run on, and Recover (through this or another Executor)
// finds them. Execute calls in progress return at once with Reason Lost.
// The Executor may be used again; it then connects anew.
func (e *Executor) Close() error {
	e.flushForgets()
	e.mu.Lock()
	c := e.c
	e.c = nil
	e.mu.Unlock()
	if c == nil {
		return nil
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.nc.Close()
	<-c.dead
	return nil
}

// register connects to the supervisor, starting one if spawn allows and
// none answers, and gives each id a waiter for its messages (the attempt's
// token is tokens[k]); an id already watched gets nil.
func (e *Executor) register(spawn bool, ids, tokens []string) (*conn, []*waiter, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		if e.c == nil {
			c, err := e.connect(spawn)
			if err != nil {
				return nil, nil, err
			}
			e.c = c
			e.sendSweep(c)
		}
		if ws, ok := e.c.add(ids, tokens); ok {
			return e.c, ws, nil
		}
		e.c = nil // it broke: connect again
	}
}

// conn is a connection to the supervisor. One goroutine reads it and
// hands each message to the waiter of its attempt.
type conn struct {
	nc   *net.UnixConn
	dir  string        // the run directory
	dead chan struct{} // closed once the connection is gone and every waiter has its end

	wmu sync.Mutex // serialises writes

	mu      sync.Mutex         // guards the fields below
	waiters map[string]*waiter // by attempt id
	broken  bool               // the connection is gone: no waiter can be added
	closed  bool               // Close dropped it: the attempts run on
}

// waiter receives the messages about one attempt.
type waiter struct {
	id     string
	token  string     // the attempt's token in its processes' environment; "" when none
	events chan event // attached, running, then the end; buffered for all of them

	proc  executor.Process // from its running message; guarded by conn.mu
	since time.Time        // likewise
}

// event is a message about an attempt, or its end.
type event struct {
	msg *message
	end *executor.Result // the attempt's end: ended, or the connection broke
}

// add gives each id a waiter, nil for one already watched; false when the
// connection is broken.
func (c *conn) add(ids, tokens []string) ([]*waiter, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken {
		return nil, false
	}
	ws := make([]*waiter, len(ids))
	for k, id := range ids {
		if c.waiters[id] != nil {
			continue
		}
		ws[k] = &waiter{id: id, token: tokens[k], events: make(chan event, 4)}
		c.waiters[id] = ws[k]
	}
	return ws, true
}

// drop forgets w.
func (c *conn) drop(w *waiter) {
	c.mu.Lock()
	if c.waiters[w.id] == w {
		delete(c.waiters, w.id)
	}
	c.mu.Unlock()
}

// send writes m; when it cannot, the connection is closed, and the reader
// settles every waiter's end.
func (c *conn) send(m *message) {
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	b = append(b, '\n')
	c.wmu.Lock()
	_, err = c.nc.Write(b)
	c.wmu.Unlock()
	if err != nil {
		c.nc.Close()
	}
}

// sendWith writes m with the descriptors fds (SCM_RIGHTS), which the
// supervisor receives with m's first bytes.
func (c *conn) sendWith(m *message, fds []int) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n, _, err := c.nc.WriteMsgUnix(b, unix.UnixRights(fds...), nil)
	if err == nil && n < len(b) {
		_, err = c.nc.Write(b[n:])
	}
	if err != nil {
		c.nc.Close()
	}
	return err
}

// wait waits for w's attempt to end, telling running of it when it runs,
// forwarding ctx's end as stop and killNow as kill.
func (c *conn) wait(ctx context.Context, w *waiter, killNow <-chan struct{}, running func(executor.Running)) executor.Result {
	done := ctx.Done()
	for {
		select {
		case ev := <-w.events:
			switch {
			case ev.end != nil:
				return *ev.end
			case ev.msg.Type == msgDetached:
				return detachedResult()
			case ev.msg.Type == msgRunning && running != nil:
				m := ev.msg
				p := executor.Process{PID: m.PID, PGID: m.PGID, StartTicks: m.StartTicks}
				running(executor.Running{Handle: local.EncodeHandle(p), Since: m.Since, PID: m.PID})
			}
		case <-done:
			c.send(&message{Type: msgStop, ID: w.id})
			done = nil
		case <-killNow:
			c.send(&message{Type: msgKill, ID: w.id})
			killNow = nil
		}
	}
}

// detachedResult ends an attempt that another client took over.
func detachedResult() executor.Result {
	return executor.Result{Reason: executor.Lost, End: time.Now(),
		Err: errors.New("another client of the supervisor took the attempt over; it runs on")}
}

// read hands the supervisor's messages to their waiters until the
// connection ends, then settles the end of every attempt still waited for.
func (c *conn) read(sc *bufio.Scanner) {
	for sc.Scan() {
		m := new(message)
		if err := json.Unmarshal(sc.Bytes(), m); err != nil {
			break
		}
		c.mu.Lock()
		w := c.waiters[m.ID]
		switch m.Type {
		case msgRunning:
			if w != nil {
				w.proc = executor.Process{PID: m.PID, PGID: m.PGID, StartTicks: m.StartTicks}
				w.since = m.Since
			}
		case msgAttached:
			if w != nil && m.Running && m.PID != 0 {
				w.proc = executor.Process{PID: m.PID, PGID: m.PGID, StartTicks: m.StartTicks}
				w.since = m.Since
			}
		case msgEnded, msgDetached:
			delete(c.waiters, m.ID)
		}
		c.mu.Unlock()
		if w == nil {
			continue
		}
		ev := event{msg: m}
		if m.Type == msgEnded && m.Result != nil {
			r := m.Result.result()
			ev.end = &r
		}
		select {
		case w.events <- ev:
		default: // more than the protocol sends: drop it
		}
	}
	c.nc.Close()
	c.fail()
}

// fail settles the end of every attempt still waited for once the
// connection is gone. When Close dropped it, they run on, unwatched. When
// the supervisor is gone, an attempt ended as the results file says, if
// it has a record there; the rest are Lost, killed with whatever they left
// running.
func (c *conn) fail() {
	defer close(c.dead)
	c.mu.Lock()
	c.broken = true
	ws := make([]*waiter, 0, len(c.waiters))
	for _, w := range c.waiters {
		ws = append(ws, w)
	}
	c.waiters = nil
	closed := c.closed
	c.mu.Unlock()
	settle := func(w *waiter, r executor.Result) {
		if w.proc.PID != 0 {
			r.Started, r.Start = true, w.since
		}
		w.events <- event{end: &r} // room is kept for the end
	}
	if closed {
		for _, w := range ws {
			settle(w, executor.Result{Reason: executor.Lost, End: time.Now(),
				Err: errors.New("the executor was closed; the supervisor runs the attempt on, and Recover finds it")})
		}
		return
	}
	want := make([]wanted, len(ws))
	for k, w := range ws {
		want[k] = wanted{id: w.id, proc: w.proc}
	}
	recs, _ := readResults(c.dir, want)
	var lost []*waiter
	for _, w := range ws {
		if rec := recs[w.id]; rec != nil {
			r := rec.result()
			w.events <- event{end: &r}
			continue
		}
		lost = append(lost, w)
	}
	if len(lost) == 0 {
		return
	}
	stale := make([]local.Stale, len(lost))
	for k, w := range lost {
		stale[k] = local.Stale{Process: w.proc, Token: w.token}
	}
	killed, errs := local.KillStaleMany(stale)
	now := time.Now()
	for k, w := range lost {
		settle(w, local.LostResult(now, killed[k], errs[k]))
	}
}

var _ executor.Signaler = (*Executor)(nil)

// Signal sends sig to the process group of the attempt of h (a local
// handle; the process runs under the supervisor, on this machine); see
// executor.Signaler.
func (e *Executor) Signal(h executor.Handle, sig syscall.Signal) error { return local.Signal(h, sig) }
