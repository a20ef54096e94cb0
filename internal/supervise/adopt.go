package supervise

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/procfs"
)

// The supervisor's side of a front's scheduler (front.go): it starts the
// scheduler as its child, and is a child subreaper
// (PR_SET_CHILD_SUBREAPER), so that when the scheduler dies its tasks
// become the supervisor's children. Once it has reaped the scheduler, it
// reads the scheduler's journal and adopts those of its attempts that are
// now its children (same PID, same start time): it follows each to its
// end with local.Executor.Adopt, enforcing its timeout, and records it in
// the results file as it does the attempts it runs itself; until then, a
// scheduler's Recover finds it by its token (attach).
//
// A subreaper also inherits every process orphaned below it: the
// grandchildren of tasks that double-forked. It reaps those once they
// exit, on SIGCHLD, so that no zombie piles up, without taking the exit of
// a child that someone waits for: the schedulers (os/exec), the leaders of
// attempts (local.Executor, which waits for them itself), and the orphans
// of a scheduler that just died, until its journal is read.

// settleWait bounds how long an attach waits for the journal of a
// scheduler that is dying to be read.
const settleWait = 5 * time.Second

// schedProc is a scheduler started for a front.
type schedProc struct {
	pid     int
	journal *os.File      // its journal, which it inherited
	done    chan struct{} // closed once it ended and its orphans are adopted
}

// startScheduler starts the scheduler m asks for, with the descriptors
// fds that came with m, and answers scheduled with its PID, or error.
func (s *server) startScheduler(c *sconn, m *message, fds []int) {
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), "fd "+strconv.Itoa(fd))
	}
	// The scheduler has its own copies: ours go once it is started.
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	refuse := func(err error) {
		s.log.Printf("start a scheduler for PID %d: %v", c.peer, err)
		c.reply(&message{Type: msgError, ID: m.ID, Error: err.Error()})
	}
	sp := m.Sched
	if sp == nil || sp.Path == "" || len(sp.Args) == 0 || sp.Files < 0 || len(files) != 4+sp.Files {
		refuse(fmt.Errorf("a scheduler needs a program, its argv, and stdin, stdout, stderr, the status pipe and its files as descriptors (got %d)", len(files)))
		return
	}
	if err := s.becomeSubreaper(); err != nil {
		refuse(err)
		return
	}
	journal, err := createJournal(s.dir)
	if err != nil {
		refuse(err)
		return
	}
	// Inherited as 3 (status), 4.. (the front's), then the journal.
	extra := append(append([]*os.File{files[3]}, files[4:]...), journal)
	v := schedEnv{Front: c.peer, Dir: s.dir, Umask: sp.Umask, Status: 3, Journal: 2 + len(extra)}
	for i := range sp.Files {
		v.Files = append(v.Files, 4+i)
	}
	b, _ := json.Marshal(v)
	env := append(executor.WithoutVars(sp.Env, EnvVar, readyVar, SchedulerVar), SchedulerVar+"="+string(b))
	cmd := &exec.Cmd{Path: sp.Path, Args: sp.Args, Env: env, Dir: sp.Dir,
		Stdin: files[0], Stdout: files[1], Stderr: files[2], ExtraFiles: extra,
		// A group of its own: nothing sent to the supervisor's reaches it.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	s.forkMu.RLock()
	s.mu.Lock()
	if s.terminating || s.exiting {
		s.mu.Unlock()
		s.forkMu.RUnlock()
		journal.Close()
		refuse(errors.New("the supervisor is stopping: it was told to"))
		return
	}
	err = cmd.Start()
	var p *schedProc
	if err == nil {
		p = &schedProc{pid: cmd.Process.Pid, journal: journal, done: make(chan struct{})}
		s.scheds[p.pid] = p
		s.known[p.pid] = struct{}{}
		s.busy()
	}
	s.mu.Unlock()
	s.forkMu.RUnlock()
	if err != nil {
		journal.Close()
		refuse(fmt.Errorf("start %s: %w", sp.Path, err))
		return
	}
	s.log.Printf("scheduler %d started for PID %d", p.pid, c.peer)
	c.reply(&message{Type: msgScheduled, ID: m.ID, PID: p.pid})
	go s.waitScheduler(p, cmd)
}

// waitScheduler waits for scheduler p to end, then adopts what it left.
func (s *server) waitScheduler(p *schedProc, cmd *exec.Cmd) {
	err := cmd.Wait()
	how := "exit status 0"
	if err != nil {
		how = err.Error()
	}
	n := s.adoptJournal(p)
	p.journal.Close()
	s.log.Printf("scheduler %d ended (%s); adopted %d attempt(s) it left running", p.pid, how, n)
	s.mu.Lock()
	delete(s.scheds, p.pid)
	delete(s.known, p.pid)
	close(p.done)
	s.maybeIdle()
	s.mu.Unlock()
	s.kickReaper() // what it left that is not in its journal
}

// adoptJournal adopts the attempts in p's journal that are this
// process's children now, and returns how many.
func (s *server) adoptJournal(p *schedProc) int {
	recs, err := readJournal(p.journal)
	if err != nil {
		s.log.Printf("read the journal of scheduler %d: %v", p.pid, err)
	}
	self := os.Getpid()
	seen := make(map[int]bool, len(recs))
	n := 0
	for i := len(recs) - 1; i >= 0; i-- { // the latest record of a PID is the one
		r := &recs[i]
		if seen[r.PID] {
			continue
		}
		seen[r.PID] = true
		st, ok := procfs.Read(r.PID)
		if !ok || st.PPID != self || st.StartTicks != r.StartTicks {
			continue // it ended under its scheduler, which reaped it
		}
		if s.adopt(r) {
			n++
		}
	}
	return n
}

// adopt follows the attempt r, a child of this process now, to its end.
func (s *server) adopt(r *journalRecord) bool {
	id := r.ID
	if id == "" {
		id = "untokened-orphan-" + strconv.Itoa(r.PID)
	}
	ctx, stop := context.WithCancelCause(context.Background())
	a := &attempt{id: id, job: r.job(), cgroups: r.Cgroups, stop: stop, killNow: make(chan struct{}),
		run:     &message{Type: msgRunning, ID: id, PID: r.PID, PGID: r.PGID, StartTicks: r.StartTicks, Since: r.Since},
		runSent: true} // nobody to tell: an attach does
	s.mu.Lock()
	if s.attempts[id] != nil {
		s.mu.Unlock()
		stop(nil)
		s.log.Printf("attempt %s of pid %d: another of that id runs here; not adopted", id, r.PID)
		return false
	}
	s.attempts[id] = a
	s.known[r.PID] = struct{}{}
	s.busy()
	if s.terminating {
		a.stop(errTerminated)
	}
	s.mu.Unlock()
	s.log.Printf("adopted attempt %s (task %s, attempt %d, pid %d, running since %s)",
		id, r.Task, r.Attempt, r.PID, r.Since.Format(time.RFC3339))
	go func() {
		job := a.job
		job.KillNow = a.killNow
		res := (&local.Executor{Cgroups: a.cgroups}).Adopt(ctx, job, r.process(), r.Since)
		s.mu.Lock()
		delete(s.known, r.PID)
		s.mu.Unlock()
		s.finish(ctx, a, res)
	}()
	return true
}

// settle waits, up to settleWait, until the journals of the schedulers
// that are dying or dead have been read: a scheduler that attaches
// attempts may come right after one that died leaving them (it took the
// run directory's lock as the other let go of it). peer, the one asking,
// is not waited for.
func (s *server) settle(peer int) {
	s.mu.Lock()
	var wait []chan struct{}
	for pid, p := range s.scheds {
		if st, ok := procfs.Read(pid); pid != peer && (!ok || st.Exiting()) {
			wait = append(wait, p.done)
		}
	}
	s.mu.Unlock()
	if len(wait) == 0 {
		return
	}
	deadline := time.NewTimer(settleWait)
	defer deadline.Stop()
	for _, ch := range wait {
		select {
		case <-ch:
		case <-deadline.C:
			s.log.Print("an attach did not wait any longer for a dying scheduler's journal")
			return
		}
	}
}

// becomeSubreaper makes this process a child subreaper, once, and starts
// reaping the orphans it inherits.
func (s *server) becomeSubreaper() error {
	s.reapOnce.Do(func() {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			s.reapErr = fmt.Errorf("become a child subreaper: %w", err)
			return
		}
		signal.Notify(s.reapKick, syscall.SIGCHLD)
		go func() {
			for range s.reapKick {
				s.reapOrphans()
			}
		}()
	})
	return s.reapErr
}

// kickReaper has the reaper look for orphans.
func (s *server) kickReaper() {
	select {
	case s.reapKick <- syscall.SIGCHLD:
	default: // it will look anyway
	}
}

// reapOrphans reaps the children that exited and that nobody else will
// reap: not known, and not possibly an attempt of a scheduler that is
// dying or whose journal is not read yet (then its end reaps them).
func (s *server) reapOrphans() {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if err != nil || info.Signo == 0 {
		return // no child has exited: the usual case, for the cost of a system call
	}
	kids, err := procfs.Children(os.Getpid())
	if err != nil {
		return
	}
	var zombies []int
	for _, pid := range kids {
		if st, ok := procfs.Read(pid); ok && st.Zombie() {
			zombies = append(zombies, pid)
		}
	}
	if len(zombies) == 0 {
		return
	}
	// Every fork under way is now in known.
	s.forkMu.Lock()
	defer s.forkMu.Unlock()
	s.mu.Lock()
	// A scheduler's children become ours only once it has begun to exit:
	// if each is seen running, none of the zombies, seen before, is one of
	// its attempts.
	for pid := range s.scheds {
		if st, ok := procfs.Read(pid); !ok || st.Exiting() {
			s.mu.Unlock()
			return
		}
	}
	orphans := zombies[:0]
	for _, pid := range zombies {
		if _, ok := s.known[pid]; !ok {
			orphans = append(orphans, pid)
		}
	}
	s.mu.Unlock()
	for _, pid := range orphans {
		for {
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG, nil)
			if err != unix.EINTR {
				break
			}
		}
		s.reaped.Add(1)
	}
}
