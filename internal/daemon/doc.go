// Package daemon is gpusched's long-lived server: one scheduler (one
// engine, one GPU ledger, one state database) for every run submitted to
// it, behind a unix socket.
//
// It is a thin shell around gpusched.Scheduler in Serve mode: handlers
// translate requests into scheduler calls and the scheduler's records and
// events into answers; no scheduling happens here. What the daemon adds:
//
//   - runs: every submission is a run with a sequential number, kept in
//     runs.db beside the scheduler's state.db (runs.go); its tasks are the
//     scheduler's tasks RUN/TASK (gpusched.WithQualifiedIDs), a command
//     run's one task RUN/cmd, shown as RUN (ids.go);
//   - who asks: the peer's uid from the socket (SO_PEERCRED), never from
//     the request (peer.go); who may do what (access.go);
//   - the socket: its place, its mode, one daemon per state directory,
//     stale sockets, socket activation (paths.go, listen.go, lock.go);
//   - restarts: what an earlier daemon left in the state directory is
//     taken up again at start (restore.go): running attempts are adopted
//     by the scheduler, pending tasks queued again with all their
//     dependencies (those on finished tasks judged by how they ended, and
//     relinked when such a task is retried), finished ones shown;
//   - finished tasks: the scheduler retires them from its memory
//     (gpusched.WithRetirement); the daemon answers for them, and for
//     those finished before it started, from the state database
//     (Daemon.stored), and retries them by submitting their definitions
//     again (again.go).
//
// The protocol (JSON over HTTP/1.1, /v1/ routes, NDJSON streams) is
// described route by route in docs/daemon.md; its types are the public
// client package's.
package daemon
