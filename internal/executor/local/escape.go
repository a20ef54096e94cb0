package local

import (
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/procfs"
)

// killWait bounds how long an attempt's end waits for the processes it
// killed to be gone (one stuck in the kernel may take longer).
const killWait = 10 * time.Second

// A process started by the attempt has a PID after the leader's in the
// kernel's cyclic order, unless the kernel handed out every PID since (it
// went round). maxPIDRate bounds how many PIDs (processes and threads) the
// machine hands out per second, well above what Linux sustains: then it
// cannot go round within wrapWindow of the leader's start, during which
// fewer than half the PIDs can be handed out. After it, the machine's fork
// counter tells, read at half the window and at the end (reading it costs
// some 40 us, so short attempts do without).
const maxPIDRate = 100_000

// pidSpace is how many PIDs the kernel cycles through (pid_max less the
// 300 it skips after going round), read once.
var pidSpace = sync.OnceValue(func() uint64 {
	if m, err := procfs.PIDMax(); err == nil && m > 1300 {
		return uint64(m - 300)
	}
	return 32768 - 300
})

// wrapWindow is 162 ms where pid_max is 32768, 21 s where it is 4194304.
func wrapWindow() time.Duration {
	return time.Duration(pidSpace()/2) * time.Second / maxPIDRate
}

// tracker follows what one attempt started beyond its process group: the
// processes in its cgroup and those that carry its token. Its methods run
// on the goroutine that runs Execute, except the fork-counter sample.
type tracker struct {
	self   int     // gpusched's own PID
	leader int     // the leader's PID, also the process group's id
	token  string  // "": none
	cg     *cgroup // nil: none
	began  time.Time
	forks0 atomic.Uint64 // machine's fork count soon after began; 0: not read
	sample *time.Timer
	buf    []byte // reused to read environments
	turn   uint64 // taken from ours after began: leaders of later turns are not this attempt's
	skip   []int  // reused to list those leaders
}

// newTracker starts following the attempt whose leader is about to start;
// began is taken now, before the leader's PID is handed out.
func newTracker(token string, cg *cgroup) *tracker {
	t := &tracker{self: os.Getpid(), token: token, cg: cg, began: time.Now()}
	t.turn = ours.take()
	if token != "" {
		t.sample = time.AfterFunc(wrapWindow()/2, func() {
			if time.Since(t.began) >= wrapWindow() {
				return // too late to vouch for the PIDs handed out before
			}
			if n, err := procfs.Forks(); err == nil {
				t.forks0.Store(n)
			}
		})
	}
	return t
}

// inOrder reports whether every process started since the leader still
// has a PID after the leader's in cyclic order, so that only those need a
// look.
func (t *tracker) inOrder() bool {
	if t.leader == 0 {
		return false
	}
	if time.Since(t.began) < wrapWindow() {
		return true
	}
	f0 := t.forks0.Load()
	if f0 == 0 {
		return false
	}
	f1, err := procfs.Forks()
	return err == nil && f1-f0 < pidSpace()/2
}

// maxProbe: up to this many PIDs handed out since the leader are looked
// at one by one, which is cheaper than listing /proc.
const maxProbe = 64

// carriers lists the live processes, other than the leader, whose
// environment carries the attempt's token. When the PIDs tell (see
// wrapWindow), only processes started after the leader are read: each PID
// handed out since, when there are few, else those of a /proc listing.
// Otherwise every process is read.
func (t *tracker) carriers() []int {
	if t.token == "" {
		return nil
	}
	if t.inOrder() {
		if last, err := procfs.LastPID(); err == nil {
			if last >= t.leader && last-t.leader <= maxProbe {
				return t.probe(last)
			}
			return t.scan(last, true)
		}
	}
	return t.scan(0, false)
}

// probe reads each PID after the leader's up to last, except those of
// leaders this process started since (see leaderLog). A PID may be a
// thread's rather than a process's (/proc answers for those too); grab
// leaves those out.
func (t *tracker) probe(last int) []int {
	var out []int
	t.skip = ours.since(t.turn, t.skip[:0])
	skip := t.skip
	for pid := t.leader + 1; pid <= last; pid++ {
		if pid != t.self && !slices.Contains(skip, pid) && t.carries(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// scan reads the processes /proc lists, only those after the leader and
// up to last when bounded, less the leaders this process started since.
func (t *tracker) scan(last int, bounded bool) []int {
	pids, err := procfs.PIDs()
	if err != nil {
		return nil
	}
	var out []int
	var skip []int
	if bounded {
		t.skip = ours.since(t.turn, t.skip[:0])
		skip = t.skip
	}
	for _, pid := range pids {
		if pid == t.self || pid == t.leader || bounded && (!after(pid, t.leader, last) || slices.Contains(skip, pid)) {
			continue
		}
		if t.carries(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// after reports whether pid comes after leader, and no later than last,
// in the kernel's cyclic order of PIDs.
func after(pid, leader, last int) bool {
	if last >= leader {
		return pid > leader && pid <= last
	}
	return pid > leader || pid <= last
}

// carries reports whether pid's environment holds TokenVar=token (its
// first TokenVar, as getenv would read it).
//
// An environment reads empty for a kernel thread, a zombie, a process
// started with none, and for a moment inside execve, between the process
// taking its new memory and its environment being put there. A process
// inside execve is waited for (briefly), unless its parent is gpusched
// itself: then it is another attempt's leader being started.
func (t *tracker) carries(pid int) bool {
	settled := false // the environment, if any, is in place
	for try := 0; ; try++ {
		env, err := procfs.Environ(pid, t.buf)
		t.buf = env[:0]
		if err != nil {
			return false
		}
		if len(env) > 0 {
			v, ok := procfs.EnvValue(env, executor.TokenVar)
			return ok && v == t.token
		}
		st, ok := procfs.Read(pid)
		switch {
		case !ok || st.Zombie() || st.KernelThread():
			return false
		case st.EnvEnd != 0: // in place: empty, or it came since the read
			if settled {
				return false
			}
			settled = true
			continue
		case st.PPID == t.self, try == 8:
			return false
		}
		time.Sleep(time.Duration(50<<try) * time.Microsecond)
	}
}

// term sends SIGTERM to the attempt's processes outside its process group
// (which the caller signals as a whole): those in its cgroup and those
// that carry its token.
func (t *tracker) term() {
	var pids []int
	if t.cg != nil {
		pids = t.cg.pids()
	}
	pids = append(pids, t.carriers()...)
	seen := make(map[int]bool, len(pids))
	for _, pid := range pids {
		if seen[pid] || pid == t.leader {
			continue
		}
		seen[pid] = true
		st, ok := procfs.Read(pid)
		if !ok || st.Zombie() || st.PGID == t.leader {
			continue
		}
		if v, ok := grab(pid, t.belongs); ok {
			v.signal(unix.SIGTERM)
			v.close()
		}
	}
}

// belongs reports whether pid is one of the attempt's: in its cgroup or
// carrying its token.
func (t *tracker) belongs(pid int) bool {
	return t.cg != nil && t.cg.holds(pid) || t.token != "" && t.carries(pid)
}

// kill kills what is left of the attempt outside its process group (which
// the caller has killed): its cgroup at once, then every process that
// carries its token, round after round until none is found (one may fork
// while it is being killed). It returns when they are gone, or after
// killWait.
func (t *tracker) kill() {
	if t.sample != nil {
		t.sample.Stop()
	}
	deadline := time.Now().Add(killWait)
	if t.cg != nil {
		t.cg.kill(deadline)
	}
	for t.token != "" && time.Now().Before(deadline) {
		var vs []victim
		for _, pid := range t.carriers() {
			if v, ok := grab(pid, t.carries); ok {
				v.signal(unix.SIGKILL)
				vs = append(vs, v)
			}
		}
		if len(vs) == 0 {
			break
		}
		waitGone(vs, deadline)
	}
}

// abandon gives up an attempt that did not start.
func (t *tracker) abandon() {
	if t.sample != nil {
		t.sample.Stop()
	}
	t.close()
}

// close removes the cgroup, once the leader is reaped.
func (t *tracker) close() {
	if t.cg != nil {
		t.cg.remove(time.Now().Add(killWait))
	}
}

// victim is a process about to be signalled, held by a pidfd where the
// kernel has them, so that a PID reused meanwhile is never hit.
type victim struct {
	pid, fd int // fd -1: no pidfd
}

// grab holds pid, then checks with still that it is (still) one to
// signal: once the pidfd is open, a check that passes is about the process
// the pidfd holds, or that one has gone and signalling it does nothing. A
// thread's id is not grabbed: its process is, by its own PID.
func grab(pid int, still func(int) bool) (victim, bool) {
	fd, err := unix.PidfdOpen(pid, 0)
	switch err {
	case nil:
	case unix.ESRCH, unix.EINVAL: // gone, or a thread that is not its process's leader
		return victim{}, false
	default:
		fd = -1 // no pidfds here (before Linux 5.3)
	}
	v := victim{pid: pid, fd: fd}
	if !still(pid) {
		v.close()
		return victim{}, false
	}
	return v, true
}

func (v victim) signal(sig unix.Signal) {
	if v.fd >= 0 {
		_ = unix.PidfdSendSignal(v.fd, sig, nil, 0)
		return
	}
	_ = unix.Kill(v.pid, sig)
}

func (v victim) close() {
	if v.fd >= 0 {
		unix.Close(v.fd)
	}
}

// waitGone waits until every victim has exited (a zombie counts as gone)
// or deadline passes, and releases them.
func waitGone(vs []victim, deadline time.Time) {
	for _, v := range vs {
		for time.Now().Before(deadline) {
			if v.fd < 0 {
				if !procfs.Alive(v.pid) {
					break
				}
				time.Sleep(time.Millisecond)
				continue
			}
			ms := min(time.Until(deadline).Milliseconds()+1, 1000)
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(v.fd), Events: unix.POLLIN}}, int(ms))
			if n > 0 || err != nil && err != syscall.EINTR {
				break
			}
		}
		v.close()
	}
}

// ours is the log of the leaders this process started.
var ours leaderLog

// leaderLog remembers the PIDs of the last leaders this process started,
// each with the turn its tracker took, so that an attempt's end does not
// read the environment of every other attempt's leader to find that it
// does not carry its token (at -j 8, most of the PIDs handed out after a
// leader's are those of the next leaders).
//
// A leader whose tracker took a later turn than t's was started after t
// began: its PID was handed out then. When the PIDs tell (t.inOrder),
// fewer than a cycle of PIDs went by since t began, so that PID is still
// the other attempt's leader's, or free, and never one of t's processes:
// a PID is handed out again only after a whole cycle. Only the bounded
// reads (probe, scan with bounded) may skip them.
//
// It takes no lock: turn n's leader goes in slot n % len(slots), as
// turn<<22 | pid (Linux PIDs are below 1<<22), and a slot that holds
// another turn is not read as this one's.
type leaderLog struct {
	turns atomic.Uint64 // turns taken
	slots [256]atomic.Uint64
}

const pidBits = 22

// take returns a turn after every turn taken so far.
func (l *leaderLog) take() uint64 { return l.turns.Add(1) }

// add records that the leader whose tracker took turn has PID pid.
func (l *leaderLog) add(pid int, turn uint64) {
	if pid <= 0 || pid >= 1<<pidBits {
		return
	}
	l.slots[turn%uint64(len(l.slots))].Store(turn<<pidBits | uint64(pid))
}

// since appends to buf the PIDs of the leaders it remembers whose
// trackers took a turn after turn, and returns it.
func (l *leaderLog) since(turn uint64, buf []int) []int {
	last := l.turns.Load()
	if last-turn > uint64(len(l.slots)) {
		turn = last - uint64(len(l.slots))
	}
	for n := turn + 1; n <= last; n++ {
		if v := l.slots[n%uint64(len(l.slots))].Load(); v>>pidBits == n {
			buf = append(buf, int(v&(1<<pidBits-1)))
		}
	}
	return buf
}
