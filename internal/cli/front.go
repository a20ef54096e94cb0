package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/supervise"
)

// How "gpusched run" keeps its tasks alive when it is killed
// (docs/adoption.md). The command the user starts is the front: it reads
// the workflow and, for a new run directory, checks it (invalid input
// exits 2 here, with nothing started; resuming, the scheduler checks it
// alike, before it changes anything in the run's state), then has the run directory's supervisor start the scheduler
// as its child: this same program with the same argv, environment,
// working directory, umask, stdin, stdout and stderr, and the workflow's
// bytes as the front read them. The scheduler runs the tasks as its own
// children; when it dies they become the supervisor's, which adopts them.
// The front forwards its signals to the scheduler and exits with its
// exit code.

// forwardSignals are the signals the front passes on to its scheduler.
var forwardSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGWINCH}

// schedulerExit is the end of a front: its scheduler's exit code.
type schedulerExit struct{ code int }

func (e *schedulerExit) Error() string { return fmt.Sprintf("the scheduler exited with %d", e.code) }

// canFront reports whether this run can hand its scheduling to the run
// directory's supervisor: this program can serve as one, it is not itself
// a front's scheduler, supervision is not turned off, and its output goes
// to its own descriptors, which the scheduler is given.
func canFront(stdout, stderr io.Writer) bool {
	return supervise.CanServe() && supervise.ThisScheduler() == nil && os.Getenv(gpusched.NoSupervisorVar) == "" &&
		stdout == io.Writer(os.Stdout) && stderr == io.Writer(os.Stderr)
}

// runAsFront has the supervisor of dir start the scheduler of this run,
// with data, the workflow's bytes, and waits for it to end. handed is
// false when no scheduler could be started: the reason is said on stderr
// and the caller runs the tasks itself.
func runAsFront(stop *interrupts, stderr io.Writer, dir string, data []byte, events *os.File) (handed bool, err error) {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardSignals...)
	defer signal.Stop(sigs)
	if stop.interrupted() {
		return false, nil // the caller says so, as it does while loading
	}
	fail := func(err error) (bool, error) {
		fmt.Fprintf(stderr, "gpusched: cannot hand the run to a supervisor (%v); running its tasks in this process: they stop if it is killed\n", err)
		return false, nil
	}
	// A state database that is not gpusched's is refused before anything
	// is put beside it, as the scheduler would refuse it.
	if err := store.CheckSQLite(filepath.Join(dir, gpusched.StateFile)); err != nil {
		return true, err
	}
	// The supervisor lives in the run directory: made here, as the
	// scheduler would make it.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return true, fmt.Errorf("create run directory: %w", err)
	}
	wf, err := workflowCopy(data)
	if err != nil {
		return fail(err)
	}
	defer wf.Close()
	wd, err := os.Getwd()
	if err != nil {
		return fail(err)
	}
	files := []*os.File{frontWorkflowFile: wf}
	if events != nil {
		files = append(files, events) // frontEvents
	}
	front, err := supervise.StartScheduler(dir, supervise.SchedulerSpec{Args: os.Args, Env: os.Environ(), Dir: wd,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Files: files})
	if err != nil {
		return fail(err)
	}
	wf.Close()
	// From now on the scheduler has the signals, and says what they do.
	stop.handOver()
	code, ok := front.Wait(sigs)
	if !ok {
		fmt.Fprintf(stderr, "gpusched: the scheduler (PID %d) ended without an exit status\n", front.PID)
		code = ExitFailed
	}
	return true, &schedulerExit{code}
}

// workflowCopy returns a file that holds data, for the scheduler to read
// from its start: a memfd, else an unnamed temporary file.
func workflowCopy(data []byte) (*os.File, error) {
	var f *os.File
	if fd, err := unix.MemfdCreate("gpusched-workflow", unix.MFD_CLOEXEC); err == nil {
		f = os.NewFile(uintptr(fd), "workflow")
	} else {
		tf, err := os.CreateTemp("", "gpusched-workflow-*")
		if err != nil {
			return nil, fmt.Errorf("keep the workflow for the scheduler: %w", err)
		}
		os.Remove(tf.Name())
		f = tf
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("keep the workflow for the scheduler: %w", err)
	}
	return f, nil
}

// The files a front passes to its scheduler, by their place in
// supervise.Scheduler.Files.
const (
	frontWorkflowFile = 0 // the workflow's bytes, as the front read them
	frontEvents       = 1 // the file --events names, opened by the front; only with one
)

// frontFile returns file i that the front passed, when this process is a
// front's scheduler and it passed one there.
func frontFile(i int) (*os.File, bool) {
	sch := supervise.ThisScheduler()
	if sch == nil || i >= len(sch.Files) {
		return nil, false
	}
	return sch.Files[i], true
}

// frontWorkflow returns the workflow's bytes as the front read them, when
// this process is a front's scheduler; ok is false otherwise.
func frontWorkflow() (data []byte, ok bool, err error) {
	f, ok := frontFile(frontWorkflowFile)
	if !ok {
		return nil, false, nil
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, true, fmt.Errorf("read the workflow from the front: %w", err)
	}
	data = make([]byte, fi.Size())
	if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, true, fmt.Errorf("read the workflow from the front: %w", err)
	}
	return data, true, nil
}
