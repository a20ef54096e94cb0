package slurm

import (
	"os"
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
func realSlurm(t *testing.T) Config {
	t.Helper()
	if os.Getenv("SLURM_CONF") == "" {
		if os.Getenv("CI") == "" {
			t.Skip("SLURM_CONF is not set: no Slurm cluster to test against")
		}
		t.Fatal("CI is set, and SLURM_CONF is not: the Slurm tests must run under CI")
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
