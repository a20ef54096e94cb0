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
		return
	}
	os.Exit(serve(dir))
}

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
	ln, err := listen(dir)
	if err != nil {
		lg.Print(err)
		return fail(err)
	}
	s := &server{dir: dir, log: lg, ln: ln, done: make(chan struct{}),
		attempts: map[string]*attempt{}, conns: map[*sconn]struct{}{}}
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
	dir  string
	log  *log.Logger
	ln   *net.UnixListener
	done chan struct{} // closed when the supervisor is to exit

	mu          sync.Mutex // guards the fields below, and attempt.owner and attempt.run
	attempts    map[string]*attempt
	conns       map[*sconn]struct{}
	idleGen     int  // counts idle periods, so a stale timer does nothing
	idling      bool // an idle timer runs
	terminating bool // SIGTERM came: stop everything, start nothing
	exiting     bool // done is closed
}

// attempt is one attempt the supervisor runs.
type attempt struct {
	id      string
	job     executor.Job
	cgroups bool
	stop    context.CancelCauseFunc // stops it (SIGTERM, grace, SIGKILL)
	killNow chan struct{}           // closed to kill it at once
	kill    sync.Once               // closes killNow

	owner *sconn   // who hears of it; nil: nobody. Guarded by server.mu.
	run   *message // its running message once it runs. Guarded by server.mu.
}

// maybeIdle starts the linger when nothing is left to do, or exits when
// told to and no attempt is left. s.mu is held.
func (s *server) maybeIdle() {
	if s.exiting || len(s.attempts) > 0 {
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
	s.log.Printf("SIGTERM: stopping %d attempt(s)", len(s.attempts))
	for _, a := range s.attempts {
		a.stop(errTerminated)
	}
	if len(s.attempts) == 0 {
		s.exit()
	}
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
		if err := checkPeer(nc); err != nil {
			s.log.Printf("refused a connection: %v", err)
			nc.Close()
			continue
		}
		c := &sconn{nc: nc, wake: make(chan struct{}, 1), flushed: make(chan struct{})}
		s.mu.Lock()
		if s.exiting {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.busy()
		s.mu.Unlock()
		go c.write()
		go s.serveConn(c)
	}
}

// flushAll lets every connection's writer send what it has queued (the
// ended messages of a SIGTERM), for a second at most.
func (s *server) flushAll() {
	s.mu.Lock()
	conns := make([]*sconn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	deadline := time.Now().Add(time.Second)
	for _, c := range conns {
		c.nc.SetWriteDeadline(deadline)
		c.finish()
	}
	for _, c := range conns {
		<-c.flushed
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
		c.finish()
	}()
	sc := bufio.NewScanner(c.nc)
	sc.Buffer(make([]byte, 0, 64<<10), maxMessage)
	helloed := false
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			c.send(&message{Type: msgError, Error: fmt.Sprintf("read message: %v", err)})
			return
		}
		if !helloed {
			if m.Type != msgHello || m.Version != protocolVersion {
				c.send(&message{Type: msgError, Error: fmt.Sprintf("this supervisor speaks version %d of the protocol; say hello with it first", protocolVersion)})
				return
			}
			helloed = true
			c.send(&message{Type: msgHello, Version: protocolVersion, PID: os.Getpid()})
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
	case msgAttach:
		s.mu.Lock()
		for _, id := range m.IDs {
			a := s.attempts[id]
			if a == nil {
				c.send(&message{Type: msgAttached, ID: id})
				continue
			}
			if a.owner != nil && a.owner != c {
				a.owner.send(&message{Type: msgDetached, ID: id})
			}
			a.owner = c
			r := &message{Type: msgAttached, ID: id, Running: true}
			if a.run != nil {
				r.PID, r.PGID, r.StartTicks, r.Since = a.run.PID, a.run.PGID, a.run.StartTicks, a.run.Since
			}
			c.send(r)
		}
		s.mu.Unlock()
	default:
		c.send(&message{Type: msgError, ID: m.ID, Error: fmt.Sprintf("unknown message type %q", m.Type)})
	}
}

// start starts the attempt m describes, owned by c.
func (s *server) start(c *sconn, m *message) {
	refuse := func(why string) {
		now := time.Now()
		r := executor.Result{Reason: executor.Infrastructure, Start: now, End: now, Err: errors.New(why)}
		c.send(&message{Type: msgEnded, ID: m.ID, Result: record(m.ID, r)})
	}
	if m.ID == "" || m.Job == nil {
		c.send(&message{Type: msgError, Error: "start: no id or no job"})
		return
	}
	ctx, stop := context.WithCancelCause(context.Background())
	a := &attempt{id: m.ID, job: m.Job.job(), cgroups: m.Job.Cgroups, stop: stop, killNow: make(chan struct{}), owner: c}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.terminating:
		stop(nil)
		refuse("the supervisor is stopping: it was told to")
		return
	case s.attempts[m.ID] != nil:
		stop(nil)
		refuse(fmt.Sprintf("attempt %s already runs in this supervisor", m.ID))
		return
	}
	s.attempts[m.ID] = a
	s.busy()
	go s.run(ctx, a)
}

// run runs attempt a to its end, records how it ended, then tells its
// owner, if it has one.
func (s *server) run(ctx context.Context, a *attempt) {
	job := a.job
	job.KillNow = a.killNow
	hooks := executor.Hooks{Running: func(r executor.Running) {
		p, _ := local.DecodeHandle(r.Handle)
		m := &message{Type: msgRunning, ID: a.id, PID: p.PID, PGID: p.PGID, StartTicks: p.StartTicks, Since: r.Since}
		s.mu.Lock()
		a.run = m
		if a.owner != nil {
			a.owner.send(m)
		}
		s.mu.Unlock()
	}}
	res := (&local.Executor{Cgroups: a.cgroups}).Execute(ctx, job, hooks)
	if res.Reason == executor.Cancelled && context.Cause(ctx) == errTerminated {
		res.Reason, res.Err = executor.Infrastructure, errTerminated
	}
	a.stop(nil)
	rec := record(a.id, res)
	// Recorded before anyone is told: whoever hears of the end may die
	// before it keeps it, and its successor then reads the file.
	werr := writeResult(job.LogRoot, job.LogPath, rec)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.attempts, a.id)
	if a.owner != nil {
		a.owner.send(&message{Type: msgEnded, ID: a.id, Result: rec})
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
}

// sconn is a client's connection to the supervisor. Messages to it are
// queued and written by its own goroutine, in the order queued, so that
// whoever queues (holding server.mu) never waits for the client.
type sconn struct {
	nc      *net.UnixConn
	wake    chan struct{} // a message or the end was queued
	flushed chan struct{} // closed when the writer is done

	mu       sync.Mutex // guards the fields below
	queue    []*message
	finished bool // nothing more is queued; the writer ends once the queue is written
}

// send queues m.
func (c *sconn) send(m *message) {
	c.mu.Lock()
	if !c.finished {
		c.queue = append(c.queue, m)
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// finish ends the writer once it has written what is queued.
func (c *sconn) finish() {
	c.mu.Lock()
	c.finished = true
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// write writes queued messages, several in one write when they pile up,
// until finish; then it closes the connection.
func (c *sconn) write() {
	defer close(c.flushed)
	defer c.nc.Close()
	var buf []byte
	var batch []*message
	for {
		c.mu.Lock()
		batch, c.queue = c.queue, batch[:0]
		finished := c.finished
		c.mu.Unlock()
		if len(batch) == 0 {
			if finished {
				return
			}
			<-c.wake
			continue
		}
		buf = buf[:0]
		for _, m := range batch {
			b, err := json.Marshal(m)
			if err != nil {
				continue
			}
			buf = append(append(buf, b...), '\n')
		}
		clear(batch)
		if _, err := c.nc.Write(buf); err != nil {
			c.nc.Close() // the reader ends, and calls finish
		}
	}
}
