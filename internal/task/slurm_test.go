package task

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestSlurmSettingsOver(t *testing.T) {
	base := &SlurmSettings{Partition: "gpu", Account: "lab", Mem: "16G", CPUsPerTask: 2, ExtraArgs: []string{"--exclusive"}}
	own := &SlurmSettings{Partition: "debug", ExtraArgs: []string{}}
	got := own.Over(base)
	if got.Partition != "debug" || got.Account != "lab" || got.Mem != "16G" || got.CPUsPerTask != 2 || len(got.ExtraArgs) != 0 {
		t.Errorf("own over base = %+v: want its partition and its empty extra_args, the rest from base", got)
	}
	if got := (*SlurmSettings)(nil).Over(base); got == base || !slices.Equal(got.ExtraArgs, base.ExtraArgs) || got.Partition != "gpu" {
		t.Errorf("nil over base = %+v, want a copy of base", got)
	}
	if got := (*SlurmSettings)(nil).Over(nil); got != nil {
		t.Errorf("nil over nil = %+v, want nil", got)
	}
	if !(*SlurmSettings)(nil).IsZero() || !(&SlurmSettings{}).IsZero() || base.IsZero() {
		t.Error("IsZero is wrong")
	}
}

func TestSlurmSettingsValidate(t *testing.T) {
	for _, tc := range []struct {
		s     SlurmSettings
		field string
	}{
		{SlurmSettings{}, ""},
		{SlurmSettings{Partition: "gpu", Account: "lab", QOS: "high", Constraint: "a100&nvlink", CPUsPerTask: 8, Mem: "500M", ExtraArgs: []string{"--exclusive"}}, ""},
		{SlurmSettings{Partition: "two words"}, "partition"},
		{SlurmSettings{Account: "a\nb"}, "account"},
		{SlurmSettings{QOS: "q\x00"}, "qos"},
		{SlurmSettings{Constraint: "a\nb"}, "constraint"},
		{SlurmSettings{CPUsPerTask: -1}, "cpus_per_task"},
		{SlurmSettings{Mem: "16GB"}, "mem"},
		{SlurmSettings{Mem: "-1"}, "mem"},
		{SlurmSettings{ExtraArgs: []string{"--ok", "exclusive"}}, "extra_args[1]"},
		{SlurmSettings{ExtraArgs: []string{"--x\n--y"}}, "extra_args[0]"},
		{SlurmSettings{GPUTypes: map[string]int64{"a100": 81920, "v100-16g": 16384, "h100_80.g": 1}}, ""},
		{SlurmSettings{GPUTypes: map[string]int64{"a100": 81920, "two words": 8}}, "gpu_types"},
		{SlurmSettings{GPUTypes: map[string]int64{"a:100": 81920}}, "gpu_types"},
		{SlurmSettings{GPUTypes: map[string]int64{"": 81920}}, "gpu_types"},
		{SlurmSettings{GPUTypes: map[string]int64{strings.Repeat("x", MaxGPUTypeLen+1): 1}}, "gpu_types"},
		{SlurmSettings{GPUTypes: map[string]int64{"a100": 0}}, "gpu_types.a100"},
		{SlurmSettings{GPUTypes: map[string]int64{"a100": -5}}, "gpu_types.a100"},
	} {
		if field, why := tc.s.Validate(); field != tc.field || (field != "") != (why != "") {
			t.Errorf("%+v: field %q (%s), want %q", tc.s, field, why, tc.field)
		}
	}
}

// TestGPUTypeChoice: a budget asks for the smallest type that holds it;
// equal sizes go by name; a budget no type holds gets the largest.
func TestGPUTypeChoice(t *testing.T) {
	t.Parallel()
	s := &SlurmSettings{GPUTypes: map[string]int64{"v100": 16384, "t4": 16384, "a100": 81920, "a40": 49152, "h100": 81920}}
	for _, tc := range []struct {
		mib  int64
		name string
		size int64
		fits bool
	}{
		{1, "t4", 16384, true}, // t4 and v100 hold it: by name
		{16384, "t4", 16384, true},
		{16385, "a40", 49152, true},
		{50000, "a100", 81920, true}, // a100 and h100: by name
		{81920, "a100", 81920, true},
		{81921, "a100", 81920, false}, // none: the largest, by name
	} {
		name, size, fits := s.GPUType(tc.mib)
		if name != tc.name || size != tc.size || fits != tc.fits {
			t.Errorf("GPUType(%d) = %s, %d, %v; want %s, %d, %v", tc.mib, name, size, fits, tc.name, tc.size, tc.fits)
		}
	}
	if name, mib := s.LargestGPUType(); name != "a100" || mib != 81920 {
		t.Errorf("LargestGPUType = %s, %d; want a100, 81920", name, mib)
	}
	for _, none := range []*SlurmSettings{nil, {}} {
		if name, _, fits := none.GPUType(100); name != "" || fits {
			t.Errorf("GPUType without types = %q, %v; want none", name, fits)
		}
		if name, mib := none.LargestGPUType(); name != "" || mib != 0 {
			t.Errorf("LargestGPUType without types = %q, %d", name, mib)
		}
	}
}

// TestGPUTypesOver: a task's gpu_types replace the workflow's whole, and
// the result shares no map with either.
func TestGPUTypesOver(t *testing.T) {
	t.Parallel()
	base := &SlurmSettings{Partition: "gpu", GPUTypes: map[string]int64{"a100": 81920, "v100": 16384}}
	got := (&SlurmSettings{Account: "lab"}).Over(base)
	if !maps.Equal(got.GPUTypes, base.GPUTypes) || got.IsZero() {
		t.Errorf("own without types over base = %+v: want the base's types", got)
	}
	got.GPUTypes["t4"] = 16384
	if _, ok := base.GPUTypes["t4"]; ok {
		t.Error("the result shares the base's map")
	}
	own := (&SlurmSettings{GPUTypes: map[string]int64{"h100": 81920}}).Over(base)
	if !maps.Equal(own.GPUTypes, map[string]int64{"h100": 81920}) {
		t.Errorf("own types over base = %v, want the task's alone", own.GPUTypes)
	}
	if (&SlurmSettings{GPUTypes: map[string]int64{"a": 1}}).IsZero() {
		t.Error("settings with gpu_types alone are zero")
	}
}

// TestGPUBudgetLargerThanEveryType: a slurm GPU task whose budget no type
// holds is refused, naming the largest; a local task with the same
// settings, or one whose budget fits, is not.
func TestGPUBudgetLargerThanEveryType(t *testing.T) {
	t.Parallel()
	types := &SlurmSettings{GPUTypes: map[string]int64{"a100": 81920, "v100": 16384}}
	mk := func(executor string, mib int64) *Spec {
		s := &Spec{ID: "train", Payload: []string{"x"}, Executor: executor, Slurm: types,
			Resources: ResourceRequest{Device: CUDA, MemoryMiB: mib}}
		s.Normalize()
		return s
	}
	err := mk(SlurmExecutor, 90000).Validate()
	var te *Error
	if !errors.As(err, &te) || te.Field != "resources.memory_mib" || te.TaskID != "train" ||
		!strings.Contains(err.Error(), "a100, has 81920 MiB") || strings.Contains(err.Error(), "\n") {
		t.Errorf("budget over every type: %v; want one line about resources.memory_mib naming a100's 81920 MiB", err)
	}
	for _, ok := range []*Spec{mk(SlurmExecutor, 81920), mk("local", 90000), mk("", 90000)} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%s on %q: %v", ok.ID, ok.Executor, err)
		}
	}
	noTypes := mk(SlurmExecutor, 900000)
	noTypes.Slurm = &SlurmSettings{Partition: "gpu"}
	if err := noTypes.Validate(); err != nil {
		t.Errorf("without gpu_types the budget is not checked: %v", err)
	}
}
