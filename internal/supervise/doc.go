// Package supervise keeps a run's attempts supervised when the scheduler
// that started them is gone (killed, out of memory, upgraded): a
// supervisor process per run directory outlives the scheduler, enforces
// its attempts' timeouts while no scheduler runs, and records how each
// ended, in the run directory, before it tells anyone.
//
// # Two ways to supervise
//
// The gpusched command: the supervisor is the scheduler's parent
// (front.go, scheduled.go, journal.go, adopt.go). The command the user
// starts (the front) has the supervisor start the scheduler as its child
// (StartScheduler), passing it its stdio over the socket (SCM_RIGHTS),
// and waits for its exit code. The scheduler forks its attempts itself
// (Journaled) and notes each in a journal the supervisor gave it: no
// message crosses processes per attempt. The supervisor is a child
// subreaper: when the scheduler dies, its attempts become the
// supervisor's children, and it adopts those its journal names, following
// them to their end as it follows its own.
//
// Programs that embed gpusched: Executor, the client, hands every attempt
// to the supervisor over one connection, and the supervisor runs it as
// its own child. This costs a message each way per attempt (about 90 µs
// of wall time for the round trip, and 0.3 ms of CPU per no-op task in all
// on the development VM, most of it the Go runtimes of two processes
// waking up; see docs/benchmarks.md), which is why the command does not.
//
// # One supervisor per run directory
//
// The supervisor is the gpusched binary itself, started with
// GPUSCHED_SUPERVISOR=<run directory> (MaybeServe, first thing in main),
// in a session of its own (a terminal's Ctrl-C does not reach it), by the
// first client or front that finds none. It runs attempts with
// local.Executor, so attempts are process groups with tokens and, when
// asked, cgroups, exactly as when the scheduler runs them itself, with the
// same handles.
//
// One long-lived process rather than one per attempt: starting the 18 MB
// binary again for each attempt costs some 3 ms of CPU on the development
// VM, as much as the rest of a no-op task.
//
// # Files in the run directory
//
//	supervisor.lock     flocked by the supervisor for its whole life; holds its PID.
//	                    A second supervisor finds it held and exits at once.
//	supervisor.sock     the unix socket, mode 0600; only processes of the
//	                    supervisor's own user are served (SO_PEERCRED). When its
//	                    path is too long for a socket address (108 bytes), it is
//	                    reached as /proc/self/fd/N/supervisor.sock, N a
//	                    descriptor of the run directory.
//	supervisor.log      the supervisor's diagnostics, appended to.
//	(no name)           a journal per scheduler started for a front (O_TMPFILE):
//	                    one line per attempt it starts (journal.go).
//	supervisor.results  how each attempt ended: one JSON object per line (id,
//	                    reason, exit code, signal, start, end, error, its
//	                    process), appended when it ends, before its client is
//	                    told. Never written or read through a symbolic link, never
//	                    fsynced (see resultsName for why). ReadResult reads it.
//	                    Bounded: a client forgets the ends it has committed
//	                    (Executor.Forget), and a scheduler that opens sweeps
//	                    those of attempts its state no longer shows running
//	                    (Executor.Sweep), which append forget and sweep lines;
//	                    past 1 MiB the file is rewritten without the records
//	                    let go (compact.go).
//	supervisor.results.compact  the compacted results file while it is written,
//	                    fsynced, then renamed over supervisor.results.
//
// # The protocol
//
// Newline-delimited JSON, versioned by a hello each way (protocol.go).
// The client sends start (an attempt, named by its token), stop, kill,
// attach (take over attempts started by an earlier client or adopted from
// a scheduler that died), forget (ends it has committed, whose records may
// go), sweep (the attempts its state shows running: the records of the
// others may go) and scheduler (a front's, with its descriptors);
// the supervisor answers running, ended, attached and scheduled. An
// attempt belongs to the connection that started or last attached it.
// When that connection drops, the attempt runs on, with nobody to tell;
// its end is in the results file.
//
// # Who outlives whom
//
// The scheduler dies: its attempts run on, their timeouts still hold,
// their ends are recorded. The next scheduler's Recover takes over those
// that still run (attach, which first waits for the journal of a
// scheduler that is dying to be read) and reads the ends of the others.
//
// A front dies: its scheduler exits at once without stopping its
// attempts, as if killed with it (the status pipe has lost its reader),
// and the above follows. A front's scheduler dies: the front says so and
// exits 1.
//
// The supervisor dies (kill -9): its clients kill what is left of the
// attempts they watched (local.KillStaleMany, one scan for all) and report
// them Lost; the next attempt starts a new supervisor. Recover reports
// Lost, and kills, the attempts that neither the results file nor a
// running supervisor knows.
//
// The supervisor is told to stop (SIGTERM): it passes SIGTERM to its
// schedulers, which stop their attempts, stops every attempt it watches
// (SIGTERM, kill grace, SIGKILL), records them as the infrastructure's
// fault, tells their clients and exits. SIGINT and SIGHUP do nothing to
// it. With no scheduler, no attempt and no client for a second, it exits
// on its own, removing its socket before it releases its lock.
package supervise
