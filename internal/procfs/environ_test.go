package procfs

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestEnvValue(t *testing.T) {
	env := []byte("A=1\x00TOKEN=\x00B=x=y\x00TOKEN=second\x00LAST=z")
	for _, c := range []struct {
		name, want string
		ok         bool
	}{
		{"A", "1", true},
		{"TOKEN", "", true}, // the first entry, even empty
		{"B", "x=y", true},
		{"LAST", "z", true}, // no final NUL
		{"x", "", false},    // inside a value
		{"TOK", "", false},  // a prefix of a name
		{"", "", false},
	} {
		if got, ok := EnvValue(env, c.name); got != c.want || ok != c.ok {
			t.Errorf("EnvValue(%q) = %q, %v; want %q, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func TestEnvironOfAChild(t *testing.T) {
	cmd := exec.Command("sleep", "3600")
	cmd.Env = []string{"A=1", "LONG=" + strings.Repeat("x", 10000)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// Start returns once the child is in execve; its new environment is
	// in place a moment later.
	var env []byte
	for deadline := time.Now().Add(10 * time.Second); len(env) == 0 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		var err error
		if env, err = Environ(cmd.Process.Pid, make([]byte, 0, 16)); err != nil {
			t.Fatal(err)
		}
	}
	if want := "A=1\x00LONG=" + strings.Repeat("x", 10000) + "\x00"; string(env) != want {
		t.Errorf("Environ = %d bytes, want %d", len(env), len(want))
	}
	if got := Getenv(cmd.Process.Pid, "A"); got != "1" {
		t.Errorf("Getenv(A) = %q", got)
	}
	if _, err := Environ(1<<30, nil); err == nil {
		t.Error("Environ of a PID that cannot exist did not fail")
	}
}

func TestPIDsAndCounters(t *testing.T) {
	pids, err := PIDs()
	if err != nil || !slices.Contains(pids, os.Getpid()) {
		t.Fatalf("PIDs = %d entries, %v; want this process among them", len(pids), err)
	}
	max, err := PIDMax()
	if err != nil || max < 300 {
		t.Fatalf("PIDMax = %d, %v", max, err)
	}
	before, err := Forks()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	after, err := Forks()
	if err != nil || after <= before {
		t.Errorf("Forks = %d, %v after a fork; it was %d", after, err, before)
	}
	last, err := LastPID()
	if err != nil || last <= 0 || last >= max {
		t.Errorf("LastPID = %d, %v; want a PID below %d", last, err, max)
	}
}

// TestLastPIDFresh: the /proc/loadavg held open reads the kernel's
// current last PID each time, not the text of the first read: after a
// fork it names that child's PID or a later one.
func TestLastPIDFresh(t *testing.T) {
	for i := range 5 {
		first, err := LastPID()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("true")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		child := cmd.Process.Pid
		last, err := LastPID()
		cmd.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if last == first {
			t.Fatalf("round %d: LastPID = %d after starting process %d, the same as before it", i, last, child)
		}
		// PIDs go up until they wrap: the child's or a later one, unless
		// the kernel went round meanwhile.
		if last < child && child-last < 1<<20 {
			t.Errorf("round %d: LastPID = %d, before the child %d just started", i, last, child)
		}
	}
}
