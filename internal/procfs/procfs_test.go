package procfs

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestReadSelf(t *testing.T) {
	st, ok := Read(os.Getpid())
	if !ok || st.PPID != os.Getppid() || st.PGID <= 0 || st.StartTicks == 0 || st.Zombie() {
		t.Errorf("Read(self) = %+v, %v", st, ok)
	}
	if st.KernelThread() || st.EnvEnd == 0 {
		t.Errorf("Read(self) = %+v: want a user process with its environment in place", st)
	}
	if !Alive(os.Getpid()) {
		t.Error("this process is not alive")
	}
	if _, ok := Read(1 << 30); ok || Alive(1<<30) {
		t.Error("a PID that cannot exist was read")
	}
}

func TestZombie(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	// Not reaped yet: once it has exited, it is a zombie.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if st, ok := Read(cmd.Process.Pid); ok && st.Zombie() {
			if Alive(cmd.Process.Pid) {
				t.Error("a zombie counts as alive")
			}
			return
		}
	}
	t.Fatal("the exited child never showed as a zombie")
}

func TestKernelThread(t *testing.T) {
	// kthreadd is PID 2 where gpusched sees the host's PIDs.
	if st, ok := Read(2); ok && st.PPID == 0 && !st.KernelThread() {
		t.Errorf("PID 2 = %+v, a child of PID 0 that is no kernel thread", st)
	}
}

// Children lists a child this process started, by either way of reading
// them, and not this process itself; a live process is not Exiting.
func TestChildren(t *testing.T) {
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	self := os.Getpid()
	for name, list := range map[string]func(int) ([]int, error){"Children": Children, "childrenByScan": childrenByScan} {
		kids, err := list(self)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, k := range kids {
			found = found || k == cmd.Process.Pid
			if k == self {
				t.Errorf("%s(self) lists this process", name)
			}
		}
		if !found {
			t.Errorf("%s(self) = %v, without the child %d", name, kids, cmd.Process.Pid)
		}
	}
	if st, _ := Read(self); st.Exiting() {
		t.Errorf("this process reads as exiting: %+v", st)
	}
}
