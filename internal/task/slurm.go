package task

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// SlurmExecutor is the name of the executor that SlurmSettings are for.
const SlurmExecutor = "slurm"

// SlurmSettings are what a task run by the slurm executor asks of Slurm:
// each maps to an sbatch option. The zero value asks for nothing (Slurm's
// defaults). They are not part of the task's definition: placing a task
// elsewhere does not change what it produces.
type SlurmSettings struct {
	Partition   string   `json:"partition,omitempty"`     // --partition
	Account     string   `json:"account,omitempty"`       // --account
	QOS         string   `json:"qos,omitempty"`           // --qos
	Constraint  string   `json:"constraint,omitempty"`    // --constraint
	CPUsPerTask int      `json:"cpus_per_task,omitempty"` // --cpus-per-task
	Mem         string   `json:"mem,omitempty"`           // --mem: host memory, as sbatch takes it ("16G", "500M")
	ExtraArgs   []string `json:"extra_args,omitempty"`    // passed to sbatch as they are, after the others
	// GPUTypes maps the GPU types a GPU task may ask for (Slurm's gres
	// type names, e.g. "a100") to each one's memory in MiB. A GPU task
	// asks for the smallest type that holds its GPU memory budget
	// (--gres=gpu:TYPE:1; see GPUType). Empty: --gres=gpu:1, any GPU,
	// and the budget is not used to place the task.
	GPUTypes map[string]int64 `json:"gpu_types,omitempty"`
}

// IsZero reports whether s asks for nothing.
func (s *SlurmSettings) IsZero() bool {
	return s == nil || s.Partition == "" && s.Account == "" && s.QOS == "" && s.Constraint == "" &&
		s.CPUsPerTask == 0 && s.Mem == "" && len(s.ExtraArgs) == 0 && len(s.GPUTypes) == 0
}

// Over returns s with what it leaves unset taken from base (a workflow's
// settings under a task's): each field of s that is set wins, ExtraArgs
// and GPUTypes included (a task's list or map replaces the workflow's).
// Either may be nil.
func (s *SlurmSettings) Over(base *SlurmSettings) *SlurmSettings {
	if s == nil && base == nil {
		return nil
	}
	var out SlurmSettings
	if base != nil {
		out = *base
	}
	if s != nil {
		pick := func(dst *string, v string) {
			if v != "" {
				*dst = v
			}
		}
		pick(&out.Partition, s.Partition)
		pick(&out.Account, s.Account)
		pick(&out.QOS, s.QOS)
		pick(&out.Constraint, s.Constraint)
		pick(&out.Mem, s.Mem)
		if s.CPUsPerTask != 0 {
			out.CPUsPerTask = s.CPUsPerTask
		}
		if s.ExtraArgs != nil {
			out.ExtraArgs = s.ExtraArgs
		}
		if s.GPUTypes != nil {
			out.GPUTypes = s.GPUTypes
		}
	}
	out.ExtraArgs = slices.Clone(out.ExtraArgs)
	out.GPUTypes = maps.Clone(out.GPUTypes)
	return &out
}

// GPUType returns the GPU type of GPUTypes that a GPU memory budget of
// mib MiB asks for: the smallest whose memory holds it (of types with
// the same memory, the first by name), and its memory. When none holds
// it, fits is false and the type is the largest (the same tie rule). An
// empty name: there are no types.
func (s *SlurmSettings) GPUType(mib int64) (name string, typeMiB int64, fits bool) {
	if s == nil || len(s.GPUTypes) == 0 {
		return "", 0, false
	}
	for _, n := range s.gpuTypesBySize() {
		if m := s.GPUTypes[n]; m >= mib {
			return n, m, true
		}
	}
	name, typeMiB = s.LargestGPUType()
	return name, typeMiB, false
}

// LargestGPUType returns the type of GPUTypes with the most memory (of
// several, the first by name) and that memory; "" and 0 when there are
// no types.
func (s *SlurmSettings) LargestGPUType() (name string, mib int64) {
	if s == nil {
		return "", 0
	}
	for _, n := range s.gpuTypesBySize() {
		if m := s.GPUTypes[n]; name == "" || m > mib {
			name, mib = n, m
		}
	}
	return name, mib
}

// gpuTypesBySize lists the names of GPUTypes, smallest memory first, by
// name among equals.
func (s *SlurmSettings) gpuTypesBySize() []string {
	names := slices.Collect(maps.Keys(s.GPUTypes))
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(s.GPUTypes[a], s.GPUTypes[b]), strings.Compare(a, b))
	})
	return names
}

// gresNameRE is what Slurm takes as a gres type name.
var gresNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// MaxGPUTypeLen is the longest GPU type name accepted, in bytes.
const MaxGPUTypeLen = 64

// memRE is what sbatch's --mem takes: a number with an optional unit.
var memRE = regexp.MustCompile(`^[0-9]+[KMGT]?$`)

// Validate returns the first problem with s as field and reason; "" when
// there is none. Names must be one word; ExtraArgs must be options;
// GPUTypes must map gres type names to a positive memory.
func (s *SlurmSettings) Validate() (field, reason string) {
	if s == nil {
		return "", ""
	}
	for _, f := range []struct{ name, v string }{{"partition", s.Partition}, {"account", s.Account}, {"qos", s.QOS}} {
		if f.v != "" && strings.ContainsAny(f.v, " \t\n\r\x00") {
			return f.name, fmt.Sprintf("%q has blanks; Slurm names are one word", f.v)
		}
	}
	if strings.ContainsAny(s.Constraint, "\n\r\x00") {
		return "constraint", "has a line break"
	}
	if s.CPUsPerTask < 0 {
		return "cpus_per_task", fmt.Sprintf("%d is negative", s.CPUsPerTask)
	}
	if s.Mem != "" && !memRE.MatchString(s.Mem) {
		return "mem", fmt.Sprintf("%q is not a size sbatch takes (a number with an optional unit K, M, G or T, e.g. 16G)", s.Mem)
	}
	for i, a := range s.ExtraArgs {
		if !strings.HasPrefix(a, "-") || strings.ContainsAny(a, "\n\r\x00") {
			return fmt.Sprintf("extra_args[%d]", i), fmt.Sprintf("%q is not an sbatch option (one argument starting with -, e.g. --exclusive or --reservation=maint)", a)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(s.GPUTypes)) {
		switch m := s.GPUTypes[n]; {
		case !gresNameRE.MatchString(n) || len(n) > MaxGPUTypeLen:
			return "gpu_types", fmt.Sprintf("%q is not a Slurm GPU type name (letters, digits, _ - and . only, at most %d bytes, e.g. a100)", n, MaxGPUTypeLen)
		case m <= 0:
			return "gpu_types." + n, fmt.Sprintf("%d is not a memory size: give the type's GPU memory in MiB, e.g. 81920", m)
		}
	}
	return "", ""
}
