// Package supervise keeps a run's attempts supervised when the scheduler
// that started them is gone (killed, out of memory, upgraded): a
// supervisor process per run directory runs them, enforces their
// timeouts while no scheduler runs, and records how each ended, in the
// run directory, before it tells anyone.
//
// # One supervisor per run directory
//
// The supervisor is the gpusched binary itself, started with
// GPUSCHED_SUPERVISOR=<run directory> (MaybeServe, first thing in main).
// Executor, the client, starts one when none answers, in a session of its
// own (a terminal's Ctrl-C does not reach it), and hands it every attempt
// over one unix socket connection. The supervisor runs each attempt with
// local.Executor, so attempts are process groups with tokens and, when
// asked, cgroups, exactly as when the scheduler runs them itself, with the
// same handles.
//
// One long-lived process rather than one per attempt: starting the 18 MB
// binary again for each attempt costs some 3 ms of CPU on the development
// VM, as much as the rest of a no-op task. Through a running supervisor an
// attempt costs a start message, one append to the results file and one
// message back (running and ended go together for attempts shorter than
// 5 ms): about 90 µs of wall time for the round trip, and 0.3 ms of CPU
// per no-op task in all on that VM, most of it the Go runtimes of two
// processes waking up (see docs/benchmarks.md).
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
//	supervisor.results  how each attempt ended: one JSON object per line (id,
//	                    reason, exit code, signal, start, end, error, its
//	                    process), appended when it ends, before its client is
//	                    told. Never written or read through a symbolic link, never
//	                    fsynced (see resultsName for why). ReadResult reads it.
//
// # The protocol
//
// Newline-delimited JSON, versioned by a hello each way (protocol.go).
// The client sends start (an attempt, named by its token), stop, kill and
// attach (take over attempts started by an earlier client); the
// supervisor answers running, ended and attached. An attempt belongs to
// the connection that started or last attached it. When that connection
// drops, the attempt runs on, with nobody to tell; its end is in the
// results file.
//
// # Who outlives whom
//
// The scheduler dies: its attempts run on, their timeouts still hold,
// their ends are recorded. The next scheduler's Recover takes over those
// that still run (attach) and reads the ends of the others.
//
// The supervisor dies (kill -9): its clients kill what is left of the
// attempts they watched (local.KillStaleMany, one scan for all) and report
// them Lost; the next attempt starts a new supervisor. Recover reports
// Lost, and kills, the attempts that neither the results file nor a
// running supervisor knows.
//
// The supervisor is told to stop (SIGTERM): it stops every attempt
// (SIGTERM, kill grace, SIGKILL), records them as the infrastructure's
// fault, tells their clients and exits. SIGINT and SIGHUP do nothing to
// it. With no attempt and no client for a second, it exits on its own,
// removing its socket before it releases its lock.
package supervise
