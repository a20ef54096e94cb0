package workflow_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/workflow"
)

// The retry policy and the completion handler's timeout, in a file: each
// key lands in its Go field, and 0 means none (retry at once, no timeout).
func TestRetryKeys(t *testing.T) {
	t.Parallel()
	doc := `scheduling:
  retry_delay: 2s
  retry_delay_max: 5m
  on_complete_timeout: 30s
tasks:
  - id: a
    args: [x]
    retries: 3
    retry_delay: 10s
    retry_on_exit_codes: [75, 143]
    retry_on_timeout: true
  - id: b
    args: [x]
    retry_delay: 0
`
	w, err := workflow.Parse("/flows/retry.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	s := w.Scheduling
	if s.DefaultRetryDelay != 2*time.Second || s.RetryDelayMax != 5*time.Minute || s.OnCompleteTimeout != 30*time.Second {
		t.Errorf("scheduling = %+v", s)
	}
	a, b := w.Tasks[0], w.Tasks[1]
	if a.RetryDelay != 10*time.Second || !slices.Equal(a.RetryOnExitCodes, []int{75, 143}) || !a.RetryOnTimeout {
		t.Errorf("a = %+v", a)
	}
	if b.RetryDelay != gpusched.NoRetryDelay || b.RetryOnTimeout || b.RetryOnExitCodes != nil {
		t.Errorf("b = %+v: retry_delay 0 means at once", b)
	}
	w, err = workflow.Parse("/flows/none.yaml", []byte("scheduling:\n  retry_delay: 0\n  on_complete_timeout: 0\ntasks:\n  - id: a\n    args: [x]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w.Scheduling.DefaultRetryDelay >= 0 || w.Scheduling.OnCompleteTimeout >= 0 {
		t.Errorf("0 in a file must mean none (negative in Go): %+v", w.Scheduling)
	}
}

func TestRetryKeyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ doc, want string }{
		{"tasks:\n  - id: a\n    args: [x]\n    retry_on_exit_codes: 75\n", "/f.yaml:4: task \"a\": retry_on_exit_codes must be a list of whole numbers"},
		{"tasks:\n  - id: a\n    args: [x]\n    retry_on_exit_codes: [75, x]\n", "/f.yaml:4: task \"a\": retry_on_exit_codes must be a whole number"},
		{"tasks:\n  - id: a\n    args: [x]\n    retry_on_exit_codes: [0]\n", "/f.yaml:4: task \"a\": retry_on_exit_codes: 0 is not a failing exit code (1 to 255)"},
		{"tasks:\n  - id: a\n    args: [x]\n    retry_delay: soon\n", "/f.yaml:4: task \"a\": retry_delay: \"soon\" is not a duration"},
		{"tasks:\n  - id: a\n    args: [x]\n    retry_on_timeout: maybe\n", "/f.yaml:4: task \"a\": retry_on_timeout must be true or false"},
		{"scheduling:\n  retry_delay_max: 0\ntasks:\n  - id: a\n    args: [x]\n", "/f.yaml:2: scheduling.retry_delay_max must be more than 0"},
	}
	for _, tt := range tests {
		_, err := workflow.Parse("/f.yaml", []byte(tt.doc))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%q:\n got %v\nwant prefix %s", tt.doc, err, tt.want)
		}
	}
}

// internalSpec carries every field of a TaskSpec: both encode to the same
// JSON.
func TestInternalSpecKeepsEveryField(t *testing.T) {
	t.Parallel()
	ts := gpusched.TaskSpec{ID: "a", Kind: "k", Dependencies: []string{"b"}, Payload: []string{"x"}, Priority: 3,
		Resources: gpusched.ResourceRequest{Device: gpusched.CUDA, MemoryMiB: 10, Exclusive: true, GPUs: 2, MemoryAuto: true, MemoryMaxMiB: 20,
			Budget: &gpusched.MemoryBudget{Source: gpusched.BudgetMax, Since: 1}, CPUs: 2, MemoryMiBHost: 3, Counters: map[string]int{"l": 1},
			MemoryHostAuto: true, MemoryHostMaxMiB: 4, HostBudget: &gpusched.MemoryBudget{Source: gpusched.BudgetDefault, Cap: "machine", Since: 2}},
		Executor: "e", Timeout: time.Second,
		Retries: 2, RetryDelay: time.Minute, RetryOnExitCodes: []int{75}, RetryOnTimeout: true, Env: map[string]string{"A": "1"},
		Dir: "/d", Artifacts: []string{"o"}, HashArtifacts: true, Inputs: []string{"i"}, HashInputs: true, OnComplete: []string{"n"}, OnFailure: []string{"f"}, CleanEnv: true, Owner: "1000",
		DependencyOn: map[string]gpusched.DependencyCondition{"b": gpusched.AfterAny},
		Slurm:        &gpusched.SlurmSettings{Partition: "p", Account: "a", QOS: "q", Constraint: "c", CPUsPerTask: 2, Mem: "1G", ExtraArgs: []string{"--x"}}}
	if n := reflect.TypeOf(ts).NumField(); n != 24 {
		t.Fatalf("TaskSpec has %d fields; give the new ones a value here and check internalSpec", n)
	}
	if n := reflect.TypeOf(ts.Resources).NumField(); n != 13 {
		t.Fatalf("ResourceRequest has %d fields; give the new ones a value here and check internalSpec", n)
	}
	sp := workflow.InternalSpecForTest(&ts)
	a, _ := json.Marshal(ts)
	b, _ := json.Marshal(&sp)
	if string(a) != string(b) {
		t.Errorf("JSON differs:\npublic   %s\ninternal %s", a, b)
	}
}
