package slurm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/executortest"
)

// TestConformance: over the fake Slurm, the executor passes the common
// suite as a remote executor whose attempts outlive a restart, found
// again even without a handle (by the job's name).
func TestConformance(t *testing.T) {
	f := newFake(t)
	executortest.Run(t, harness(testConfig(f)))
}

// TestConformanceRealSlurm runs the suite against the Slurm that
// SLURM_CONF names (../shared/slurm-local.sh up brings one up). It is
// skipped only outside CI when SLURM_CONF is unset.
func TestConformanceRealSlurm(t *testing.T) {
	executortest.Run(t, harness(realSlurm(t)))
}

// realSlurm returns a configuration for the Slurm that SLURM_CONF names.
// It skips the test only outside CI when SLURM_CONF is unset; under CI,
// it fails it.
var (
	controllerUp  sync.Once
	controllerErr error
)

func realSlurm(t *testing.T) Config {
	t.Helper()
	if os.Getenv("SLURM_CONF") == "" {
		if os.Getenv("CI") == "" {
			t.Skip("SLURM_CONF is not set: no Slurm cluster to test against")
		}
		t.Fatal("CI is set, and SLURM_CONF is not: the Slurm tests must run under CI")
	}
	// A controller that does not answer would hold the tests until go
	// test's own timeout (submission waits for it): fail at once instead.
	controllerUp.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "scontrol", "ping").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "UP") {
			controllerErr = fmt.Errorf("scontrol ping: %v: %s", err, strings.TrimSpace(string(out)))
		}
	})
	if controllerErr != nil {
		t.Fatalf("the Slurm controller of SLURM_CONF=%s does not answer: %v", os.Getenv("SLURM_CONF"), controllerErr)
	}
	cfg := testConfig(PathCommands{})
	cfg.LostGrace = 5 * time.Second
	return cfg
}

func harness(cfg Config) executortest.Harness {
	return executortest.Harness{
		New:          func(t *testing.T) executor.Executor { return newExecutor(t, cfg) },
		Sleeper:      sleeper,
		Restart:      func(_ *testing.T, old executor.Executor) { old.(*Executor).Close() },
		Adopts:       true,
		Remote:       true,
		FindsByToken: true,
	}
}
