package slurm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/testbin"
)

var sleeper, fakeSlurm string

func TestMain(m *testing.M) {
	MaybeAttempt() // the test binary is the batch jobs' helper too
	sleeper = testbin.MustBuild("cmd/sleeper")
	fakeSlurm = testbin.MustBuild("cmd/fake-slurm")
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// fake is one fake Slurm controller: its state folder and the commands
// that reach it.
type fake struct {
	dir string
}

func newFake(t *testing.T) *fake {
	t.Helper()
	return &fake{dir: t.TempDir()}
}

// Run runs the fake as the program name, on this controller.
func (f *fake) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, fakeSlurm, append([]string{name}, args...)...)
	cmd.Env = append(os.Environ(), "FAKE_SLURM_DIR="+f.dir)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return out, &CommandError{Name: name, Err: err, Stderr: strings.TrimSpace(errb.String())}
	}
	return out, nil
}

// admin plays the cluster's administrator: preempt, nodefail, oom,
// forget or vanish a job.
func (f *fake) admin(t *testing.T, what, id string) {
	t.Helper()
	cmd := exec.Command(fakeSlurm, "admin", what, id)
	cmd.Env = append(os.Environ(), "FAKE_SLURM_DIR="+f.dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fake-slurm admin %s %s: %v: %s", what, id, err, out)
	}
}

// set writes one of the fake's control files ("down", "sbatch-fail"...).
func (f *fake) set(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f *fake) unset(t *testing.T, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(f.dir, name)); err != nil {
		t.Fatal(err)
	}
}

// calls returns the calls made so far, one "program args..." each.
func (f *fake) calls() []string {
	b, _ := os.ReadFile(filepath.Join(f.dir, "calls.log"))
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// count returns how many calls were made of program name.
func (f *fake) count(name string) int {
	n := 0
	for _, c := range f.calls() {
		if strings.HasPrefix(c, name+" ") {
			n++
		}
	}
	return n
}

// testConfig is a configuration fit for tests: fast rounds and short
// waits.
func testConfig(cmds Commands) Config {
	return Config{Commands: cmds, PollMin: 50 * time.Millisecond, PollMax: 400 * time.Millisecond,
		LostGrace: time.Second, Slack: 2 * time.Second}
}

// newExecutor returns an executor over f, closed at the end of the test.
func newExecutor(t *testing.T, cfg Config) *Executor {
	ex := New(cfg)
	t.Cleanup(func() { ex.Close() })
	return ex
}

// jobID returns the job id in a handle of this executor's.
func jobID(t *testing.T, h executor.Handle) string {
	t.Helper()
	d, err := decodeHandle(h)
	if err != nil {
		t.Fatal(err)
	}
	return d.JobID
}
