package supervise

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
)

// EnvVar, set to a run directory's absolute path, makes MaybeServe run the
// supervisor of that directory.
const EnvVar = "GPUSCHED_SUPERVISOR"

// readyVar names the descriptor on which a supervisor says "ready" (it
// listens), "busy" (another one holds the lock) or "error", then closes it.
const readyVar = "GPUSCHED_SUPERVISOR_READY_FD"

// linger is how long a supervisor with no attempt and no client waits for
// one before it exits.
const linger = time.Second

// runningDelay is how long the running message of an attempt waits: one
// that ends sooner has its running and ended messages sent together, in
// one write, which spares both processes a wake-up (a third of the
// supervisor's cost for a short task). What the scheduler does on running
// (persist the handle) is not needed sooner: the supervisor finds its
// attempts by their tokens.
const runningDelay = 5 * time.Millisecond

// writeWait bounds how long a write to a client may block (one that does
// not read): then its connection is dropped.
const writeWait = 10 * time.Second

// maxMessage bounds one message (a start carries the job's whole
// environment).
const maxMessage = 16 << 20

// errTerminated is why attempts stop when the supervisor gets SIGTERM.
var errTerminated = errors.New("stopped: the supervisor was told to stop")

// MaybeServe runs the supervisor and exits the process when it is done, if
// EnvVar is set; otherwise it returns at once. Call it first thing in main
// (and in TestMain of tests that use their own binary as the supervisor).
func MaybeServe() {
	dir, ok := os.LookupEnv(EnvVar)
	if !ok {
		canServe.Store(true)
		return
	}
	os.Exit(serve(dir))
}

// canServe: MaybeServe was called and returned.
var canServe atomic.Bool

// CanServe reports whether this program serves as a supervisor when
// started as one: MaybeServe was called (first thing in main) and
// returned.
func CanServe() bool { return canServe.Load() }

// serve is the supervisor of dir; it returns the exit code.
func serve(dir string) int {
	ready := readyFile()
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "gpusched supervisor: %v\n", err)
		tell(ready, "error")
		return 1
	}
	if !filepath.IsAbs(dir) {
		return fail(fmt.Errorf("%s=%q: not an absolute path", EnvVar, dir))
	}
	logf, err := local.OpenLog(dir, filepath.Join(dir, logName))
	if err != nil {
		return fail(err)
	}
	defer logf.Close()
	lg := log.New(logf, "supervisor "+strconv.Itoa(os.Getpid())+": ", log.LstdFlags|log.Lmicroseconds)
	lock, held, err := lockRunDir(dir)
	if err != nil {
		lg.Print(err)
		return fail(err)
	}
	if held {
		tell(ready, "busy")
		return 0
	}
	defer lock.Close() // released last, after the socket is gone
	results, err := openResults(dir)
	if err != nil {
		lg.Print(err)
		return fail(err)
	}
	defer results.Close()
	ln, err := listen(dir)
	if err != nil {
		lg.Print(err)
		return fail(err)
	}
	s := &server{dir: dir, log: lg, ln: ln, results: results, done: make(chan struct{}),
		attempts: map[string]*attempt{}, conns: map[*sconn]struct{}{},
		known: map[int]struct{}{}, scheds: map[int]*schedProc{}, reapKick: make(chan os.Signal, 1)}
	// SIGINT and SIGHUP are caught and dropped rather than ignored: an
	// ignored signal stays ignored in the tasks started after exec, a
	// caught one does not. The supervisor has a session of its own, so
	// neither should come from a terminal anyway.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE, syscall.SIGTERM)
	go func() {
		for sig := range sigs {
			if sig == syscall.SIGTERM {
				s.terminate()
			}
		}
	}()
	lg.Printf("serving %s", dir)
	tell(ready, "ready")
	s.mu.Lock()
	s.maybeIdle()
	s.mu.Unlock()
	go s.accept()
	<-s.done
	ln.Close()
	if err := removeSocket(dir); err != nil {
		lg.Printf("remove socket: %v", err)
	}
	s.flushAll()
	if n := s.reaped.Load(); n > 0 {
		lg.Printf("reaped %d orphaned process(es) of tasks", n)
	}
	lg.Print("exiting")
	return 0
}

// readyFile returns the descriptor named by readyVar, if any, made
// close-on-exec so no task inherits it.
func readyFile() *os.File {
	n, err := strconv.Atoi(os.Getenv(readyVar))
	if err != nil || n < 3 {
		return nil
	}
	syscall.CloseOnExec(n)
	return os.NewFile(uintptr(n), "ready")
}

// tell writes word to the readiness pipe and closes it.
func tell(f *os.File, word string) {
	if f != nil {
		f.WriteString(word + "\n")
		f.Close()
	}
}

// server is a running supervisor.
type server struct {
	dir     string
	log     *log.Logger
	ln      *net.UnixListener
	results *os.File      // the results file, appended to; guarded by resMu
	done    chan struct{} // closed when the supervisor is to exit

	resMu       sync.RWMutex // held for reading to append to results, for writing to replace it (compact.go)
	compactNext int64        // the size at which the results file is compacted next; guarded by resMu

	// forkMu is held for reading from before a child is forked until it
	// is in known, and for writing while orphans are reaped: a child
	// just forked is never taken for an orphan (adopt.go).
	forkMu   sync.RWMutex
	reapOnce sync.Once      // becomes a subreaper, once
	reapErr  error          // why it could not
	reapKick chan os.Signal // SIGCHLD, or a nudge: look for orphans to reap
	reaped   atomic.Int64   // orphans reaped

	mu          sync.Mutex // guards the fields below, and attempt.owner and attempt.run
	attempts    map[string]*attempt
	conns       map[*sconn]struct{}
	known       map[int]struct{}   // children whose reaping is someone's job: schedulers, attempts' leaders
	scheds      map[int]*schedProc // schedulers started for fronts, by PID, until their orphans are adopted
	idleGen     int                // counts idle periods, so a stale timer does nothing
	idling      bool               // an idle timer runs
	terminating bool               // SIGTERM came: stop everything, start nothing
	exiting     bool               // done is closed
}

// attempt is one attempt the supervisor runs.
type attempt struct {
	id      string
	job     executor.Job
	cgroups bool
	stop    context.CancelCauseFunc // stops it (SIGTERM, grace, SIGKILL)
	killNow chan struct{}           // closed to kill it at once
	kill    sync.Once               // closes killNow

	// Guarded by server.mu:
	owner    *sconn      // who hears of it; nil: nobody
	run      *message    // its running message once it runs
	runSent  bool        // the owner has heard that it runs
	runTimer *time.Timer // sends run after runningDelay
	ended    bool
}

// maybeIdle starts the linger when nothing is left to do, or exits when
// told to and no attempt is left. s.mu is held.
func (s *server) maybeIdle() {
	if s.exiting || len(s.attempts) > 0 || len(s.scheds) > 0 {
		return
	}
	if s.terminating {
		s.exit()
		return
	}
	if s.idling || len(s.conns) > 0 {
		return
	}
	s.idling = true
	gen := s.idleGen
	time.AfterFunc(linger, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.idling && s.idleGen == gen {
			s.exit()
		}
	})
}

// busy ends the linger: there is something to do. s.mu is held.
func (s *server) busy() {
	if s.idling {
		s.idling = false
		s.idleGen++
	}
}

// exit makes serve return. s.mu is held.
func (s *server) exit() {
	if !s.exiting {
		s.exiting = true
		close(s.done)
	}
}

// terminate stops every attempt and exits once they have ended.
func (s *server) terminate() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.terminating {
		return
	}
	s.terminating = true
	s.log.Printf("SIGTERM: stopping %d attempt(s) and %d scheduler(s)", len(s.attempts), len(s.scheds))
	for _, a := range s.attempts {
		a.stop(errTerminated)
	}
	// A scheduler stops its own tasks, as it does when its front is told
	// to stop.
	for pid := range s.scheds {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	s.maybeIdle()
}

// accept takes connections until the listener closes.
func (s *server) accept() {
	for {
		nc, err := s.ln.AcceptUnix()
		if err != nil {
			s.mu.Lock()
			exiting := s.exiting
			s.mu.Unlock()
			if exiting {
				return
			}
			s.log.Printf("accept: %v", err)
			time.Sleep(10 * time.Millisecond) // out of descriptors: let some go
			continue
		}
		peer, err := checkPeer(nc)
		if err != nil {
			s.log.Printf("refused a connection: %v", err)
			nc.Close()
			continue
		}
		c := &sconn{nc: nc, peer: peer}
		s.mu.Lock()
		if s.exiting {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.busy()
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

// flushAll sends what is queued for every client (the ended messages of
// a SIGTERM) and hangs up.
func (s *server) flushAll() {
	s.mu.Lock()
	conns := make([]*sconn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.flush()
		c.nc.Close()
	}
}

// serveConn reads c's messages until it hangs up; the attempts it owns
// then run on without an owner.
func (s *server) serveConn(c *sconn) {
	defer func() {
		c.nc.Close()
		s.mu.Lock()
		delete(s.conns, c)
		for _, a := range s.attempts {
			if a.owner == c {
				a.owner = nil
			}
		}
		s.maybeIdle()
		s.mu.Unlock()
	}()
	c.fds = newFDReader(c.nc)
	defer c.fds.close()
	sc := bufio.NewScanner(c.fds)
	sc.Buffer(make([]byte, 0, 64<<10), maxMessage)
	helloed := false
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			c.reply(&message{Type: msgError, Error: fmt.Sprintf("read message: %v", err)})
			return
		}
		if !helloed {
			if m.Type != msgHello || m.Version != protocolVersion {
				c.reply(&message{Type: msgError, Error: fmt.Sprintf("this supervisor speaks version %d of the protocol; say hello with it first", protocolVersion)})
				return
			}
			helloed = true
			c.reply(&message{Type: msgHello, Version: protocolVersion, PID: os.Getpid()})
			continue
		}
		s.handle(c, &m)
	}
	if err := sc.Err(); err != nil && !errors.Is(err, net.ErrClosed) {
		s.log.Printf("read from a client: %v", err)
	}
}

// handle acts on one message from c.
func (s *server) handle(c *sconn, m *message) {
	switch m.Type {
	case msgStart:
		s.start(c, m)
	case msgStop:
		s.mu.Lock()
		if a := s.attempts[m.ID]; a != nil {
			a.stop(context.Canceled)
		}
		s.mu.Unlock()
	case msgKill:
		s.mu.Lock()
		if a := s.attempts[m.ID]; a != nil {
			a.kill.Do(func() { close(a.killNow) })
		}
		s.mu.Unlock()
	case msgScheduler:
		s.startScheduler(c, m, c.fds.take())
	case msgForget:
		s.forget(m.IDs, m.PIDs)
	case msgSweep:
		s.sweep(m.IDs)
	case msgAttach:
		// A scheduler that just died may have left some of these: its
		// journal is read first.
		s.settle(c.peer)
		s.mu.Lock()
		var old []*sconn // who lost attempts
		for _, id := range m.IDs {
			a := s.attempts[id]
			if a == nil {
				c.send(&message{Type: msgAttached, ID: id})
				continue
			}
			if a.owner != nil && a.owner != c {
				a.owner.send(&message{Type: msgDetached, ID: id})
				old = append(old, a.owner)
			}
			a.owner = c
			r := &message{Type: msgAttached, ID: id, Running: true}
			if a.run != nil {
				r.PID, r.PGID, r.StartTicks, r.Since = a.run.PID, a.run.PGID, a.run.StartTicks, a.run.Since
				a.runSent = true
			}
			c.send(r)
		}
		s.mu.Unlock()
		for _, o := range old {
			o.flush()
		}
		c.flush()
	default:
		c.reply(&message{Type: msgError, ID: m.ID, Error: fmt.Sprintf("unknown message type %q", m.Type)})
	}
}

// start starts the attempt m describes, owned by c.
func (s *server) start(c *sconn, m *message) {
	refuse := func(why string) {
		now := time.Now()
		r := executor.Result{Reason: executor.Infrastructure, Start: now, End: now, Err: errors.New(why)}
		c.reply(&message{Type: msgEnded, ID: m.ID, Result: record(m.ID, r, executor.Process{})})
	}
	if m.ID == "" || m.Job == nil {
		c.reply(&message{Type: msgError, Error: "start: no id or no job"})
		return
	}
	ctx, stop := context.WithCancelCause(context.Background())
	a := &attempt{id: m.ID, job: m.Job.job(), cgroups: m.Job.Cgroups, stop: stop, killNow: make(chan struct{}), owner: c}
	s.mu.Lock()
	why := ""
	switch {
	case s.terminating:
		why = "the supervisor is stopping: it was told to"
	case s.attempts[m.ID] != nil:
		why = fmt.Sprintf("attempt %s already runs in this supervisor", m.ID)
	default:
		s.attempts[m.ID] = a
		s.busy()
	}
	s.mu.Unlock()
	if why != "" {
		stop(nil)
		refuse(why)
		return
	}
	go s.run(ctx, a)
}

// run runs attempt a to its end, records how it ended, then tells its
// owner, if it has one.
func (s *server) run(ctx context.Context, a *attempt) {
	job := a.job
	job.KillNow = a.killNow
	pid := 0
	forking := true
	s.forkMu.RLock()
	forked := func() {
		if forking {
			forking = false
			s.forkMu.RUnlock()
		}
	}
	hooks := executor.Hooks{Running: func(r executor.Running) {
		p, _ := local.DecodeHandle(r.Handle)
		m := &message{Type: msgRunning, ID: a.id, PID: p.PID, PGID: p.PGID, StartTicks: p.StartTicks, Since: r.Since}
		s.mu.Lock()
		pid = p.PID
		s.known[pid] = struct{}{}
		a.run = m
		a.runTimer = time.AfterFunc(runningDelay, func() { s.tellRunning(a) })
		s.mu.Unlock()
		forked()
	}}
	res := (&local.Executor{Cgroups: a.cgroups}).Execute(ctx, job, hooks)
	forked() // when it did not start
	if pid != 0 {
		s.mu.Lock()
		delete(s.known, pid)
		s.mu.Unlock()
	}
	s.finish(ctx, a, res)
}

// finish records how attempt a ended, then tells its owner, if it has one.
func (s *server) finish(ctx context.Context, a *attempt, res executor.Result) {
	if res.Reason == executor.Cancelled && context.Cause(ctx) == errTerminated {
		res.Reason, res.Err = executor.Infrastructure, errTerminated
	}
	a.stop(nil)
	var p executor.Process
	s.mu.Lock()
	if a.run != nil {
		p = executor.Process{PID: a.run.PID, PGID: a.run.PGID, StartTicks: a.run.StartTicks}
	}
	s.mu.Unlock()
	rec := record(a.id, res, p)
	// Recorded before anyone is told: whoever hears of the end may die
	// before it keeps it, and its successor then reads the record.
	werr := s.appendResult(rec)
	s.mu.Lock()
	delete(s.attempts, a.id)
	a.ended = true
	if a.runTimer != nil {
		a.runTimer.Stop()
	}
	owner := a.owner
	if owner != nil {
		if a.run != nil && !a.runSent {
			owner.send(a.run)
		}
		owner.send(&message{Type: msgEnded, ID: a.id, Result: rec})
	}
	switch {
	case werr != nil && a.owner == nil:
		s.log.Printf("attempt %s ended (%s) while no client watched, and its end could not be recorded: %v", a.id, rec.Reason, werr)
	case werr != nil:
		s.log.Printf("attempt %s: %v", a.id, werr)
	case a.owner == nil:
		s.log.Printf("attempt %s ended (%s) while no client watched", a.id, rec.Reason)
	}
	s.maybeIdle()
	s.mu.Unlock()
	if owner != nil {
		owner.flush()
	}
}

// tellRunning tells a's owner that it runs, unless it has heard or a has
// ended (then ended tells).
func (s *server) tellRunning(a *attempt) {
	s.mu.Lock()
	c := a.owner
	if c == nil || a.runSent || a.ended {
		s.mu.Unlock()
		return
	}
	a.runSent = true
	c.send(a.run)
	s.mu.Unlock()
	c.flush()
}

// sconn is a client's connection to the supervisor. Messages to it are
// queued while server.mu is held, so that they are in the order of the
// events they tell, and written after it is released (flush), so that a
// slow client never holds up the others.
type sconn struct {
	nc   *net.UnixConn
	peer int       // the client's PID, when it connected
	fds  *fdReader // reads nc; the reading goroutine's

	wmu sync.Mutex // held while writing: batches go out in the order they were taken
	buf []byte     // guarded by wmu

	mu    sync.Mutex // guards queue
	queue []*message
}

// send queues m.
func (c *sconn) send(m *message) {
	c.mu.Lock()
	c.queue = append(c.queue, m)
	c.mu.Unlock()
}

// reply queues m and writes it with whatever else is queued.
func (c *sconn) reply(m *message) {
	c.send(m)
	c.flush()
}

// flush writes what is queued, in one write. A client that does not take
// it within writeWait is dropped.
func (c *sconn) flush() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	batch := c.queue
	c.queue = nil
	c.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	buf := c.buf[:0]
	for _, m := range batch {
		b, err := json.Marshal(m)
		if err != nil {
			continue
		}
		buf = append(append(buf, b...), '\n')
	}
	c.buf = buf
	c.nc.SetWriteDeadline(time.Now().Add(writeWait))
	if _, err := c.nc.Write(buf); err != nil {
		c.nc.Close() // the reader ends, and the attempts lose their owner
	}
}
