package nvidiasmi

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/procfs"
)

func TestConvert(t *testing.T) {
	gpus := []byte("index, uuid, name, memory.total [MiB], memory.used [MiB], memory.free [MiB]\n" +
		"0, GPU-aaa, NVIDIA H100, 81559 MiB, 1200 MiB, 79800 MiB\n" +
		"2, GPU-ccc, NVIDIA H100, 81559 MiB, [N/A], [N/A]\n" +
		"Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error\n")
	apps, err := os.ReadFile("../../../testdata/nvidia-smi/rtx4080super-load-query-compute-apps-csv.txt")
	if err != nil {
		t.Fatal(err)
	}
	g, gp := ParseGPUs(gpus)
	a, ap := ParseApps(apps)
	lin := func(pid int) (int, []int) { return pid + 1, []int{pid + 2} }
	tok := func(pid int) string { return "token-" + strconv.Itoa(pid) }
	s := convert(Snapshot{GPUs: g, Apps: a, Problems: append(gp, ap...)}, time.Unix(5, 0), lin, tok)
	if len(s.Cards) != 2 {
		t.Fatalf("cards = %+v", s.Cards)
	}
	if c := s.Cards[0]; c.Index != 0 || c.UUID != "GPU-aaa" || c.TotalMiB != 81559 || c.FreeMiB != 79800 || c.Problem != "" {
		t.Errorf("card 0 = %+v", c)
	}
	if c := s.Cards[1]; c.Index != 2 || c.Problem == "" {
		t.Errorf("card 2 = %+v, want a problem (memory unreadable)", c)
	}
	if len(s.Lost) != 1 || s.Lost[0].Index != 1 || s.Lost[0].BusID != "0000:34:00.0" {
		t.Errorf("lost = %+v", s.Lost)
	}
	var pids []int
	for _, p := range s.Procs {
		pids = append(pids, p.PID)
		if p.PGID != p.PID+1 || !slices.Equal(p.Ancestors, []int{p.PID + 2}) || p.UsedMiB <= 0 || p.Token != "token-"+strconv.Itoa(p.PID) {
			t.Errorf("proc = %+v", p)
		}
	}
	if !slices.Equal(pids, []int{2165, 5022, 5021}) {
		t.Errorf("pids = %v", pids)
	}
}

func TestLineageOfThisProcess(t *testing.T) {
	pgid, anc := lineage(os.Getpid())
	if pgid <= 0 {
		t.Errorf("pgid = %d", pgid)
	}
	if len(anc) == 0 || anc[0] != os.Getppid() {
		t.Errorf("ancestors = %v, want the parent %d first", anc, os.Getppid())
	}
}

// TestTokenOfARealProcess reads the token from a real process's
// environment: the first entry of the variable, as getenv would; "" for a
// process without it and for one that is gone.
func TestTokenOfARealProcess(t *testing.T) {
	start := func(env ...string) *exec.Cmd {
		cmd := exec.Command("sleep", "3600")
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // as one that left its task's group
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		settled(t, cmd.Process.Pid)
		return cmd
	}
	with := start("A=1", executor.TokenVar+"=run1.train.3", "B=2")
	without := start("A=1", "OTHER_"+executor.TokenVar+"=run1.train.3")
	empty := start(executor.TokenVar + "=")
	if got := token(with.Process.Pid); got != "run1.train.3" {
		t.Errorf("token = %q, want run1.train.3", got)
	}
	if got := token(without.Process.Pid); got != "" {
		t.Errorf("token of a process without the variable = %q", got)
	}
	if got := token(empty.Process.Pid); got != "" {
		t.Errorf("token of a process with an empty variable = %q", got)
	}
	// os.StartProcess passes the environment as is, duplicates included.
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	twice, err := os.StartProcess(sleep, []string{"sleep", "3600"}, &os.ProcAttr{
		Env: []string{executor.TokenVar + "=first", executor.TokenVar + "=second"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { twice.Kill(); twice.Wait() })
	settled(t, twice.Pid)
	if got := token(twice.Pid); got != "first" {
		t.Errorf("token of a process with the variable twice = %q, want the first", got)
	}
	with.Process.Kill()
	with.Wait()
	if got := token(with.Process.Pid); got != "" {
		t.Errorf("token of a process that is gone = %q", got)
	}
}

// settled waits until pid's execve has put its environment in place.
func settled(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if st, ok := procfs.Read(pid); ok && st.EnvEnd != 0 {
			return
		}
	}
	t.Fatalf("process %d never showed its environment", pid)
}
