package workflow_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/workflow"
)

// scheduling.order: either order parses into Scheduling.Order; left out,
// it is empty (the submitted order, Scheduling's default).
func TestOrderKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ sched, want string }{
		{"  order: longest_first\n", gpusched.OrderLongestFirst},
		{"  order: submitted\n", gpusched.OrderSubmitted},
		{"  max_parallel_tasks: 2\n", ""},
	} {
		w, err := workflow.Parse(gpuKeysPath, []byte(gpuKeysDoc(c.sched)))
		if err != nil {
			t.Fatalf("%q: %v", c.sched, err)
		}
		if w.Scheduling.Order != c.want {
			t.Errorf("%q: Order = %q, want %q", c.sched, w.Scheduling.Order, c.want)
		}
	}
}

// An invalid order is one line naming the key and its line, and the two
// orders there are.
func TestOrderKeyErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sched, want string
		invalid     bool // ErrInvalidScheduling
	}{
		{"  max_parallel_tasks: 2\n  order: longest\n",
			gpuKeysPath + `:3: scheduling.order: must be "submitted" or "longest_first", not "longest"`, true},
		{"  order: Longest_First\n",
			gpuKeysPath + `:2: scheduling.order: must be "submitted" or "longest_first", not "Longest_First"`, true},
		{"  order: [longest_first]\n", gpuKeysPath + ":2: scheduling.order must be a single value", false},
		{"  ordr: submitted\n", `did you mean "order"?`, false},
	} {
		_, err := workflow.Parse(gpuKeysPath, []byte(gpuKeysDoc(c.sched)))
		if err == nil {
			t.Errorf("%q: parsed; want an error", c.sched)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
			t.Errorf("%q: error %q; want one line containing %q", c.sched, msg, c.want)
		}
		if c.invalid && !errors.Is(err, gpusched.ErrInvalidScheduling) {
			t.Errorf("%q: %q is not ErrInvalidScheduling", c.sched, msg)
		}
	}
}
