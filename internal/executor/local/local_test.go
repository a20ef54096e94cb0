package local_test

import (
	"os"
	"testing"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/executortest"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/testbin"
)

var sleeper string

func TestMain(m *testing.M) {
	sleeper = testbin.MustBuild("cmd/sleeper")
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

func TestConformance(t *testing.T) {
	executortest.Run(t, func(*testing.T) executor.Executor { return &local.Executor{} }, sleeper)
}

func TestStartTicks(t *testing.T) {
	if local.StartTicks(os.Getpid()) == 0 {
		t.Error("StartTicks of this process is 0")
	}
	if local.StartTicks(1<<30) != 0 {
		t.Error("StartTicks of a PID that cannot exist is not 0")
	}
}
