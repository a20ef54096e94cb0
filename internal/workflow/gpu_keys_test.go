package workflow_test

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/workflow"
)

// gpuKeysPath is the path the GPU key cases are parsed as; Parse never
// reads it.
const gpuKeysPath = "/home/ml/flows/gpu.yaml"

// gpuKeysDoc is a workflow whose scheduling section is sched (indented
// lines, each ending in a newline), followed by one task. The first line of
// sched is line 2 of the file.
func gpuKeysDoc(sched string) string {
	return "scheduling:\n" + sched + "tasks:\n  - id: a\n    args: [x]\n    resources: {device: cuda, memory_mib: 100}\n"
}

// Every GPU scheduling key, valid values: each parses into exactly the
// gpusched.Scheduling field documented in docs/gpu.md, and nothing else is
// set. In a file, 0 for the margin, cooldown and quarantine settings means
// none, which is negative in the Go struct (0 there is the default).
func TestGPUSchedulingKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		sched string
		want  gpusched.Scheduling
	}{
		{"none set", "  max_parallel_tasks: 2\n", gpusched.Scheduling{MaxParallelTasks: 2}},
		{"margin", "  gpu_safety_margin_mib: 1024\n", gpusched.Scheduling{GPUSafetyMarginMiB: 1024}},
		{"margin 0 is none", "  gpu_safety_margin_mib: 0\n", gpusched.Scheduling{GPUSafetyMarginMiB: -1}},
		{"cooldown", "  gpu_cooldown: 1500ms\n", gpusched.Scheduling{GPUCooldown: 1500 * time.Millisecond}},
		{"cooldown 0 is none", "  gpu_cooldown: 0\n", gpusched.Scheduling{GPUCooldown: -1}},
		{"cooldown 0s is none", "  gpu_cooldown: 0s\n", gpusched.Scheduling{GPUCooldown: -1}},
		{"placement pack", "  gpu_placement: pack\n", gpusched.Scheduling{GPUPlacement: "pack"}},
		{"placement spread", "  gpu_placement: spread\n", gpusched.Scheduling{GPUPlacement: "spread"}},
		{"visible by index", "  visible_gpus: [1]\n", gpusched.Scheduling{VisibleGPUs: []string{"1"}}},
		{"visible by index and uuid", "  visible_gpus:\n    - 0\n    - GPU-8f3a-11\n",
			gpusched.Scheduling{VisibleGPUs: []string{"0", "GPU-8f3a-11"}}},
		{"quarantine after", "  gpu_quarantine_after: 2\n", gpusched.Scheduling{GPUQuarantineAfter: 2}},
		{"quarantine after 0 is never", "  gpu_quarantine_after: 0\n", gpusched.Scheduling{GPUQuarantineAfter: -1}},
		{"quarantine for", "  gpu_quarantine_for: 90s\n", gpusched.Scheduling{GPUQuarantineFor: 90 * time.Second}},
		{"quarantine for 0 is none", "  gpu_quarantine_for: 0\n", gpusched.Scheduling{GPUQuarantineFor: -1}},
		{"poll interval", "  gpu_poll_interval: 250ms\n", gpusched.Scheduling{GPUPollInterval: 250 * time.Millisecond}},
		{"reserve after", "  gpu_reserve_after: 2m\n", gpusched.Scheduling{GPUReserveAfter: 2 * time.Minute}},
		{"reserve after never is negative", "  gpu_reserve_after: never\n", gpusched.Scheduling{GPUReserveAfter: -1}},
		{"reserve after 0 is at once", "  gpu_reserve_after: 0\n", gpusched.Scheduling{GPUReserveAfter: time.Nanosecond}},
		{"unknown timeout", "  gpu_unknown_timeout: 3s\n", gpusched.Scheduling{GPUUnknownTimeout: 3 * time.Second}},
		{"nvidia-smi timeout", "  nvidia_smi_timeout: 500ms\n", gpusched.Scheduling{NvidiaSMITimeout: 500 * time.Millisecond}},
		{"all at once, flow style",
			"  {gpu_safety_margin_mib: 256, gpu_cooldown: 2s, gpu_placement: pack, visible_gpus: [GPU-x, 3], " +
				"gpu_quarantine_after: 5, gpu_quarantine_for: 1h, gpu_poll_interval: 1s, gpu_reserve_after: 30s, " +
				"gpu_unknown_timeout: 20m, nvidia_smi_timeout: 4s}\n",
			gpusched.Scheduling{
				GPUSafetyMarginMiB: 256, GPUCooldown: 2 * time.Second, GPUPlacement: "pack",
				VisibleGPUs: []string{"GPU-x", "3"}, GPUQuarantineAfter: 5, GPUQuarantineFor: time.Hour,
				GPUPollInterval: time.Second, GPUReserveAfter: 30 * time.Second,
				GPUUnknownTimeout: 20 * time.Minute, NvidiaSMITimeout: 4 * time.Second,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := gpuKeysDoc(tt.sched)
			w, err := workflow.Parse(gpuKeysPath, []byte(src))
			if err != nil {
				t.Fatalf("Parse: %v\n%s", err, src)
			}
			if !reflect.DeepEqual(w.Scheduling, tt.want) {
				t.Errorf("Scheduling = %+v\nwant         %+v", w.Scheduling, tt.want)
			}
			if err := w.Scheduling.Validate(); err != nil {
				t.Errorf("parsed settings do not validate: %v", err)
			}
			want := gpusched.ResourceRequest{Device: gpusched.CUDA, MemoryMiB: 100}
			if len(w.Tasks) != 1 || !reflect.DeepEqual(w.Tasks[0].Resources, want) {
				t.Errorf("tasks = %+v, want one with resources %+v", w.Tasks, want)
			}
		})
	}
}

// An empty visible_gpus list is accepted and restricts nothing.
func TestGPUSchedulingVisibleEmpty(t *testing.T) {
	t.Parallel()
	w, err := workflow.Parse(gpuKeysPath, []byte(gpuKeysDoc("  visible_gpus: []\n")))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(w.Scheduling.VisibleGPUs) != 0 {
		t.Errorf("VisibleGPUs = %q, want none", w.Scheduling.VisibleGPUs)
	}
}

// Invalid GPU settings: a one-line error "FILE:LINE: ..." naming the key,
// the line being the offending one.
func TestGPUSchedulingKeyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		sched    string
		line     int
		contains []string
		is       error // sentinel, or nil
	}{
		{"bad placement", "  gpu_cooldown: 1s\n  gpu_placement: packed\n", 3,
			[]string{"scheduling.gpu_placement", `"spread" or "pack"`, `"packed"`}, gpusched.ErrInvalidScheduling},
		{"placement in capitals", "  gpu_placement: Pack\n", 2,
			[]string{"scheduling.gpu_placement", `"Pack"`}, gpusched.ErrInvalidScheduling},
		{"placement a list", "  gpu_placement: [pack]\n", 2,
			[]string{"scheduling.gpu_placement must be a single value"}, nil},
		{"negative margin", "  gpu_safety_margin_mib: -1\n", 2,
			[]string{"scheduling.gpu_safety_margin_mib must not be negative", "-1"}, nil},
		{"fractional margin", "  gpu_safety_margin_mib: 1.5\n", 2,
			[]string{"scheduling.gpu_safety_margin_mib must be a whole number", `"1.5"`}, nil},
		{"visible_gpus a scalar", "  visible_gpus: 1\n", 2,
			[]string{"scheduling.visible_gpus must be a list"}, nil},
		{"visible_gpus a mapping", "  max_parallel_tasks: 1\n  visible_gpus: {a: 1}\n", 3,
			[]string{"scheduling.visible_gpus must be a list", "a mapping"}, nil},
		{"visible_gpus nested list", "  visible_gpus: [[0]]\n", 2,
			[]string{"scheduling.visible_gpus: each item must be a single value"}, nil},
		{"visible_gpus empty entry", "  timeout: 1m\n  visible_gpus: [0, \"\"]\n", 3,
			[]string{"scheduling.visible_gpus", "empty entry"}, gpusched.ErrInvalidScheduling},
		{"zero poll interval", "  gpu_poll_interval: 0\n", 2,
			[]string{"scheduling.gpu_poll_interval must be more than 0"}, nil},
		{"zero poll interval 0s", "  gpu_poll_interval: 0s\n", 2,
			[]string{"scheduling.gpu_poll_interval must be more than 0"}, nil},
		{"zero unknown timeout", "  gpu_unknown_timeout: 0\n", 2,
			[]string{"scheduling.gpu_unknown_timeout must be more than 0"}, nil},
		{"zero nvidia-smi timeout", "  nvidia_smi_timeout: 0\n", 2,
			[]string{"scheduling.nvidia_smi_timeout must be more than 0"}, nil},
		{"negative cooldown", "  gpu_cooldown: -1s\n", 2,
			[]string{"scheduling.gpu_cooldown must not be negative"}, nil},
		{"cooldown not a duration", "  gpu_cooldown: 3\n", 2,
			[]string{"scheduling.gpu_cooldown", `"3" is not a duration`}, nil},
		{"reserve after misspelt never", "  gpu_reserve_after: nevr\n", 2,
			[]string{"scheduling.gpu_reserve_after", `"nevr" is not a duration`}, nil},
		{"negative quarantine count", "  gpu_quarantine_after: -2\n", 2,
			[]string{"scheduling.gpu_quarantine_after must not be negative"}, nil},
		{"negative quarantine time", "  gpu_quarantine_for: -5m\n", 2,
			[]string{"scheduling.gpu_quarantine_for must not be negative"}, nil},
		{"unknown gpu key with suggestion", "  gpu_cooldown: 1s\n  gpu_cooldwn: 2s\n", 3,
			[]string{"scheduling", `unknown key "gpu_cooldwn"`, `did you mean "gpu_cooldown"?`}, nil},
		{"unknown gpu key, singular", "  visible_gpu: [0]\n", 2,
			[]string{`unknown key "visible_gpu"`, `did you mean "visible_gpus"?`}, nil},
		{"unknown gpu key, misspelt", "  gpu_quarantine_aftr: 2\n", 2,
			[]string{`unknown key "gpu_quarantine_aftr"`, `did you mean "gpu_quarantine_after"?`}, nil},
		{"gpu key repeated", "  gpu_cooldown: 1s\n  gpu_cooldown: 2s\n", 3,
			[]string{`key "gpu_cooldown" appears twice`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := gpuKeysDoc(tt.sched)
			w, err := workflow.Parse(gpuKeysPath, []byte(src))
			if err == nil {
				t.Fatalf("Parse succeeded with scheduling %+v; want an error\n%s", w.Scheduling, src)
			}
			msg := err.Error()
			if prefix := gpuKeysPath + ":" + strconv.Itoa(tt.line) + ": "; !strings.HasPrefix(msg, prefix) {
				t.Errorf("error %q does not start with %q", msg, prefix)
			}
			for _, s := range tt.contains {
				if !strings.Contains(msg, s) {
					t.Errorf("error %q does not contain %q", msg, s)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error %q spans lines", msg)
			}
			var we *workflow.Error
			if !errors.As(err, &we) || we.Line != tt.line || we.Path != gpuKeysPath {
				t.Errorf("error %#v is not a *workflow.Error at %s:%d", err, gpuKeysPath, tt.line)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%q, %v) = false", msg, tt.is)
			}
		})
	}
}
