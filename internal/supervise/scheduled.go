package supervise

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/procfs"
)

// SchedulerVar is set by a supervisor in the environment of a scheduler
// it starts for a front (StartScheduler), to a JSON object: the front's
// PID, the run directory, the front's umask and the descriptors the
// scheduler inherits (status pipe, journal, the front's Files).
// MaybeScheduler reads it and removes it from the environment, so the
// scheduler's tasks never see it.
const SchedulerVar = "GPUSCHED_SCHEDULER"

// schedEnv is SchedulerVar's value.
type schedEnv struct {
	Front   int    `json:"front"`
	Dir     string `json:"dir"`
	Umask   int    `json:"umask"`
	Status  int    `json:"status"`
	Journal int    `json:"journal"`
	Files   []int  `json:"files,omitempty"`
}

// exitFrontGone is the exit code of a scheduler whose front died; only
// its supervisor's log shows it.
const exitFrontGone = 1

// Scheduler is this process when a supervisor started it as the
// scheduler of a front (StartScheduler); see ThisScheduler.
type Scheduler struct {
	// Front is the front's PID.
	Front int
	// RunDir is the run directory whose supervisor started this process.
	RunDir string
	// Files are the descriptors the front passed in SchedulerSpec.Files,
	// in order.
	Files []*os.File

	status  int      // the status pipe's writing end
	journal *os.File // where each attempt is noted (Journaled), for the supervisor
	done    atomic.Bool
}

// this is set once, by MaybeScheduler, before main goes on.
var this *Scheduler

// ThisScheduler returns this process as a front's scheduler, or nil when
// it is not one (MaybeScheduler found no SchedulerVar).
func ThisScheduler() *Scheduler { return this }

// MaybeScheduler sets this process up as a front's scheduler when a
// supervisor started it as one (SchedulerVar is set), and returns at
// once otherwise. Call it first thing in main, after MaybeServe: it takes
// the front's umask, keeps the inherited descriptors from the tasks it
// will start, and watches the front: when the front dies, this process
// exits at once, leaving its tasks running for the supervisor to adopt,
// as if it had been killed with its front.
func MaybeScheduler() {
	v, ok := os.LookupEnv(SchedulerVar)
	if !ok {
		return
	}
	os.Unsetenv(SchedulerVar)
	var env schedEnv
	if err := json.Unmarshal([]byte(v), &env); err != nil || env.Status < 3 || env.Journal < 3 || !filepath.IsAbs(env.Dir) {
		fmt.Fprintf(os.Stderr, "gpusched: %s=%q: only a run directory's supervisor sets it, for the scheduler it starts\n", SchedulerVar, v)
		os.Exit(1)
	}
	unix.Umask(env.Umask)
	s := &Scheduler{Front: env.Front, RunDir: env.Dir, status: env.Status}
	unix.CloseOnExec(env.Status)
	unix.CloseOnExec(env.Journal)
	s.journal = os.NewFile(uintptr(env.Journal), "journal")
	for _, fd := range env.Files {
		unix.CloseOnExec(fd)
		s.Files = append(s.Files, os.NewFile(uintptr(fd), "fd "+strconv.Itoa(fd)))
	}
	this = s
	go s.watchFront()
}

// watchFront exits the process at once when the front is gone: the status
// pipe then has no reader, which poll tells as POLLERR on its writing end.
func (s *Scheduler) watchFront() {
	fds := []unix.PollFd{{Fd: int32(s.status)}}
	for {
		n, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
			break
		}
	}
	if !s.done.Load() {
		os.Exit(exitFrontGone)
	}
}

// Done tells the front that this process is about to exit with code;
// call it last, once everything else is closed.
func (s *Scheduler) Done(code int) {
	s.done.Store(true)
	b := []byte(strconv.Itoa(code) + "\n")
	for {
		if _, err := unix.Write(s.status, b); err != unix.EINTR {
			return
		}
	}
}

// Leaving reports whether process pid is on its way out as far as a run
// directory's lock goes: it is exiting, or it is a front's scheduler whose
// front is gone (it exits as soon as it notices). A scheduler that finds
// the lock held by such a process waits for it; one held by any other is
// a run in progress.
func Leaving(pid int) bool {
	st, ok := procfs.Read(pid)
	if !ok || st.Exiting() {
		return true
	}
	var env schedEnv
	v := procfs.Getenv(pid, SchedulerVar) // as it was started: the variable is gone from its Go environment only
	if v == "" || json.Unmarshal([]byte(v), &env) != nil || env.Front <= 0 {
		return false
	}
	return !procfs.Alive(env.Front)
}

// Executor returns the executor of local attempts for a scheduler of
// runDir in this process: Journaled, when runDir is the one whose
// supervisor started it; else nil.
func (s *Scheduler) Executor(runDir string) executor.Executor {
	abs, err := filepath.Abs(runDir)
	if err != nil || abs != s.RunDir {
		return nil
	}
	return &Journaled{journal: s.journal, sup: Executor{RunDir: s.RunDir}}
}
