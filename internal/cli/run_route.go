package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gpusched/gpusched/client"
	"github.com/gpusched/gpusched/internal/supervise"
)

// Where "gpusched run" runs a workflow: in this process (as it always
// did), or through a daemon, which queues it as a run beside everyone
// else's tasks, under one GPU ledger.
//
//	--local                      in this process; a warning when a daemon answers
//	--daemon, --socket PATH      through the daemon (--socket's, else the one client.Dial finds;
//	                             --daemon starts your own when none answers, as submit does)
//	$GPUSCHED_SOCKET set         through the daemon there (an error when none answers)
//	the system socket exists     through the system daemon; in this process when nothing answers there
//	otherwise                    in this process
//
// A front's scheduler (front.go) runs in its process: its front chose.

// runRoute is where a run goes.
type runRoute struct {
	daemon   bool   // through a daemon
	socket   string // the socket to dial; "" for client.Dial's order
	start    bool   // start a per-user daemon when none answers (--daemon)
	announce string // the line to say on stderr before going, if any
	// cl is the system daemon's client chooseRoute dialed to see that it
	// answers; the run goes on with it rather than dial again. Nil: dial.
	cl *client.Client
}

// routeFlags are run's flags that choose the route.
type routeFlags struct {
	daemon bool
	local  bool
	socket string
}

// chooseRoute decides where a run goes. It dials nothing except a system
// daemon's socket that exists, to see whether it answers.
func chooseRoute(ctx context.Context, f routeFlags) (runRoute, error) {
	switch {
	case f.local && (f.daemon || f.socket != ""):
		return runRoute{}, inputf("--local runs in this process; it cannot go with --daemon or --socket")
	case supervise.ThisScheduler() != nil, f.local:
		return runRoute{}, nil
	case f.daemon || f.socket != "":
		return runRoute{daemon: true, socket: f.socket, start: f.daemon && f.socket == ""}, nil
	}
	if env := os.Getenv(client.SocketEnv); env != "" {
		return runRoute{daemon: true, socket: env, announce: announceDaemon(env)}, nil
	}
	if _, err := os.Stat(client.SystemSocket); err != nil {
		return runRoute{}, nil
	}
	cl, err := dialQuick(ctx, client.SystemSocket)
	if err != nil {
		return runRoute{announce: fmt.Sprintf("gpusched: the system daemon's socket %s does not answer (%v); running in this process", client.SystemSocket, oneLine(err.Error()))}, nil
	}
	return runRoute{daemon: true, socket: client.SystemSocket, announce: announceDaemon(client.SystemSocket), cl: cl}, nil
}

func announceDaemon(socket string) string {
	return fmt.Sprintf("gpusched: running through the daemon at %s (--local to run in this process)", socket)
}

// dialQuick dials the daemon on socket ("" for client.Dial's order),
// giving up after a few seconds: a daemon too busy to say its version is
// not one to hand a run to.
func dialQuick(ctx context.Context, socket string) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return client.Dial(ctx, socket)
}

// warnLocal says, once, that a run in this process does not share GPU
// budgets with a daemon that answers: both may charge the same card.
func warnLocal(ctx context.Context, stderr io.Writer) {
	if supervise.ThisScheduler() != nil {
		return // the front warned
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, "")
	if err != nil {
		var ve *client.VersionError
		if !errors.As(err, &ve) {
			return
		}
		fmt.Fprintf(stderr, "gpusched: --local: a gpusched daemon answers on %s; GPU budgets are not shared with its tasks\n", ve.Socket)
		return
	}
	defer cl.Close()
	fmt.Fprintf(stderr, "gpusched: --local: the gpusched daemon at %s is up; GPU budgets are not shared with its tasks\n", cl.Socket())
}
