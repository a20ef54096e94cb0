package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/user"
	"strconv"
	"sync"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/metrics"
	"github.com/gpusched/gpusched/internal/store"
)

// API versions this daemon serves (client.APIVersion is the client's).
const (
	APIMin = 1
	APIMax = 1
)

// Config configures a daemon. Zero values are the documented defaults.
type Config struct {
	// Socket is where to listen; empty: the mode's default (per-user:
	// client.UserSocket(); system: client.SystemSocket). Ignored when the
	// daemon was socket-activated.
	Socket string
	// StateDir holds the state (state.db, runs.db, logs/); empty: the
	// mode's default (DefaultStateDir, SystemStateDir).
	StateDir string
	// System runs the machine's daemon, as root: every user may connect
	// (through the socket's group, SystemGroup), and each sees what is
	// theirs. Otherwise the daemon is its user's alone.
	System bool
	// Scheduling configures the scheduler (MaxParallelTasks, GPU
	// settings...).
	Scheduling gpusched.Scheduling
	// Build is the gpusched version, told by GET /v1/version.
	Build string
	// Timeouts bound how long a connection may take to send a request.
	Timeouts Timeouts
	// Log receives the daemon's diagnostics; nil: stderr.
	Log io.Writer
	// Listener, if set, is used instead of listening on Socket (a test's,
	// or one systemd passed; Run finds the latter by itself).
	Listener *net.UnixListener
	// Options are passed to gpusched.New (a GPU probe, an executor).
	Options []gpusched.Option
	// MetricsListen, if set, is a TCP address (host:port, "127.0.0.1:9400")
	// where GET /metrics serves the metrics, and nothing else, to anyone
	// who can connect; the socket serves them at GET /v1/metrics either
	// way. Empty: no TCP listener.
	MetricsListen string
	// KeepFinished keeps every task the scheduler ran in its memory until
	// the daemon stops, as daemons did before they retired finished tasks
	// (gpusched.WithRetirement): the heap then grows with the tasks run.
	// For measurements; the answers are the same either way.
	KeepFinished bool
}

// Timeouts bound the parts of a request. Streams (wait, logs -f,
// events) are not bounded once their request is read.
type Timeouts struct {
	ReadHeader time.Duration // the request line and headers; default 5s
	Read       time.Duration // the whole request, body included; default 30s
	Write      time.Duration // an answer that is not a stream; default 60s
	Idle       time.Duration // a kept-alive connection between requests; default 2m
}

func (t Timeouts) withDefaults() Timeouts {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&t.ReadHeader, 5*time.Second)
	def(&t.Read, 30*time.Second)
	def(&t.Write, 60*time.Second)
	def(&t.Idle, 2*time.Minute)
	return t
}

// Daemon is a running daemon: its scheduler, its runs and its server.
type Daemon struct {
	cfg     Config
	uid     int // the daemon's own user
	started time.Time
	log     *log.Logger
	sched   *gpusched.Scheduler
	runs    *runs
	tasks   *taskIndex
	// metrics counts events and reads gauges (metrics.go); metricsLn is
	// the TCP listener for them, nil unless Config.MetricsListen.
	metrics   *metrics.Metrics
	metricsLn net.Listener
	// lock holds the state directory (LockFile) while the daemon lives;
	// referenced so that the garbage collector never closes it.
	lock *os.File

	// peerOf reads a connection's peer; a seam for tests, which cannot
	// connect as another user without creating one.
	peerOf func(net.Conn) peer
	// runAsAnyone, a seam for tests with made-up users, lets users other
	// than the daemon's own submit to any daemon, their tasks running as
	// the daemon's user (no Owner). The system daemon, as root, takes
	// every user's tasks without it and runs them as their owners.
	runAsAnyone bool
	// readSummaries reads what the queue shows of finished tasks from the
	// state database, in one read (summarise); lookupStored reads one
	// task whole (stored). Seams for tests, which count them.
	readSummaries func(ids []string) ([]store.Summary, error)
	lookupStored  func(id string) (gpusched.StoredTask, bool, error)
	summaries     *summaryReader
	// learned keeps the learned GPU budgets the queue shows
	// (queuebudget.go).
	learned budgetCache

	stopping chan struct{} // closed when the daemon starts stopping: streams end
	stopOnce sync.Once
	stopReq  chan bool // a shutdown request: kill the running tasks?
	// stopServe ends the scheduler's Serve, stopping the running tasks:
	// only when the daemon stops with them.
	stopServe context.CancelFunc

	users sync.Map // uid -> user name
}

// ErrStopped is not an error: Run returns it when it stopped on request
// without stopping the running tasks, which its process must leave to
// their supervisor by exiting (see Run).
var ErrStopped = errors.New("daemon stopped; its running tasks go on")

// Run runs a daemon until ctx is done or a client asks it to stop
// (POST /v1/shutdown). It refuses at once to start when another daemon
// holds the state directory or answers on the socket (a *LockedError).
//
// Stopping with kill_tasks stops the running tasks (recorded cancelled),
// closes the scheduler and returns nil. Any other stop (ctx done, a
// shutdown without kill_tasks) leaves the running tasks to their
// supervisor: Run returns ErrStopped with the scheduler still open, and
// the process must then exit without closing it, as gpusched daemon does;
// the next daemon on the state directory adopts the tasks. Pending tasks
// stay queued either way.
func Run(ctx context.Context, cfg Config) error {
	d, sock, err := start(cfg)
	if err != nil {
		return err
	}
	return d.serve(ctx, sock)
}

// start does everything but serving: paths, locks, socket, scheduler,
// restoring what an earlier daemon left.
func start(cfg Config) (*Daemon, *socket, error) {
	if cfg.Log == nil {
		cfg.Log = os.Stderr
	}
	cfg.Timeouts = cfg.Timeouts.withDefaults()
	if cfg.Listener == nil {
		ul, err := activated()
		if err != nil {
			return nil, nil, err
		}
		cfg.Listener = ul
	}
	if err := resolvePaths(&cfg); err != nil {
		return nil, nil, err
	}
	d := &Daemon{cfg: cfg, uid: os.Getuid(), started: time.Now(), log: log.New(cfg.Log, "gpusched daemon: ", log.LstdFlags),
		peerOf: peerCred, stopping: make(chan struct{}), stopReq: make(chan bool, 1)}
	lock, err := lockStateDir(cfg.StateDir)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*Daemon, *socket, error) {
		lock.Close()
		return nil, nil, err
	}
	if err := privateDatabases(cfg.StateDir); err != nil {
		return fail(err)
	}
	var sock *socket
	if cfg.Listener != nil {
		sock = &socket{ln: cfg.Listener, path: cfg.Listener.Addr().String()}
		d.cfg.Socket = sock.path
	} else {
		mode, gid := os.FileMode(0o600), -1
		if cfg.System {
			mode = 0o660
			if g, ok := systemGroup(); ok {
				gid = g
			}
		}
		if sock, err = listenSocket(cfg.Socket, mode, gid); err != nil {
			return fail(err)
		}
	}
	failSock := func(err error) (*Daemon, *socket, error) {
		sock.close()
		return fail(err)
	}
	if d.runs, err = openRuns(cfg.StateDir); err != nil {
		return failSock(err)
	}
	opts := []gpusched.Option{gpusched.WithQualifiedIDs(), gpusched.WithBudgetHistory(d.history)}
	if !cfg.KeepFinished {
		opts = append(opts, gpusched.WithRetirement())
	}
	opts = append(opts, cfg.Options...)
	if d.sched, err = gpusched.New(cfg.StateDir, cfg.Scheduling, opts...); err != nil {
		d.runs.close()
		return failSock(err)
	}
	d.summaries = newSummaryReader(cfg.StateDir)
	d.readSummaries, d.lookupStored = d.summaries.read, d.sched.Lookup
	if err := d.restore(); err != nil {
		d.sched.Close()
		d.runs.close()
		return failSock(err)
	}
	if err := d.startMetrics(); err != nil {
		d.sched.Close()
		d.runs.close()
		return failSock(err)
	}
	d.lock = lock // held until the process exits
	return d, sock, nil
}

// serve serves until stopped; see Run.
func (d *Daemon) serve(ctx context.Context, sock *socket) error {
	t := d.cfg.Timeouts
	srv := &http.Server{
		Handler:           d.handler(),
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    64 << 10,
		ConnContext:       d.withPeer,
		ErrorLog:          d.log,
	}
	// Not cancelled when serve returns without killing the tasks: that
	// would stop them.
	var serveCtx context.Context
	serveCtx, d.stopServe = context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.sched.Serve(serveCtx) }()
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(sock.ln) }()
	go d.serveMetrics()
	d.log.Printf("pid %d serving %s (state %s, API %d-%d)", os.Getpid(), sock.path, d.cfg.StateDir, APIMin, APIMax)

	var kill bool
	var fatal error
	select {
	case <-ctx.Done():
	case kill = <-d.stopReq:
	case fatal = <-served:
		fatal = fmt.Errorf("scheduler stopped: %w", fatal)
	case err := <-httpDone:
		fatal = fmt.Errorf("serve %s: %w", sock.path, err)
	}
	d.beginStop()
	// No new connections; requests in progress get a moment to finish
	// (streams end at once, their clients come back to the next daemon).
	sock.close()
	shutCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = srv.Shutdown(shutCtx)
	cancel()
	srv.Close()
	if fatal != nil {
		d.stopServe()
		d.summaries.close()
		d.sched.Close()
		d.runs.close()
		return fatal
	}
	d.summaries.close()
	if !kill {
		d.log.Printf("stopped; running tasks go on under their supervisor and the next daemon adopts them")
		return ErrStopped
	}
	d.stopServe()
	if err := <-served; err != nil && !errors.Is(err, context.Canceled) {
		d.log.Printf("scheduler: %v", err)
	}
	err := d.sched.Close()
	d.runs.close()
	d.log.Printf("stopped; running tasks were stopped")
	return err
}

// beginStop tells streams to end.
func (d *Daemon) beginStop() { d.stopOnce.Do(func() { close(d.stopping) }) }

// requestStop asks serve to stop (the first request wins).
func (d *Daemon) requestStop(kill bool) {
	select {
	case d.stopReq <- kill:
	default:
	}
}

// userName returns uid's login name, or the uid as text.
func (d *Daemon) userName(uid int) string {
	if v, ok := d.users.Load(uid); ok {
		return v.(string)
	}
	name := strconv.Itoa(uid)
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	d.users.Store(uid, name)
	return name
}

// uidOf returns the uid a user is named by: a name or a number.
func uidOf(name string) (int, bool) {
	if n, err := strconv.Atoi(name); err == nil {
		return n, true
	}
	u, err := user.Lookup(name)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(u.Uid)
	return n, err == nil
}
