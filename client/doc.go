// Package client is the Go client of the gpusched daemon: the verbs of
// the gpusched command (submit, queue, cancel, wait, logs, gpus, daemon
// stop) over the daemon's unix socket.
//
// # Finding the daemon
//
// Dial connects to the socket it is given, else to the first that answers
// of: $GPUSCHED_SOCKET, the per-user socket (UserSocket:
// $XDG_RUNTIME_DIR/gpusched/gpusched.sock, or /tmp/gpusched-UID/gpusched.sock
// when XDG_RUNTIME_DIR is unset) and the system one (SystemSocket,
// /run/gpusched/gpusched.sock). It asks the daemon its version first and
// refuses, with a *VersionError that says what runs where, a daemon that
// does not speak APIVersion.
//
// # Ids
//
// Every submission is a run with a numeric id. A command run has one task,
// known as the run's id ("12"); a workflow run's tasks are RUN/TASK
// ("13/train"). Every id the daemon prints is accepted by every call, and
// a run's id stands for all its tasks.
//
// # Protocol
//
// JSON over HTTP/1.1 on the unix socket, routes under /v1/; streams (Wait,
// Logs, Events) are newline-delimited JSON. docs/daemon.md lists every
// route with a curl example.
package client
