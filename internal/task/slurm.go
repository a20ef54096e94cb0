package task

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

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
}

// IsZero reports whether s asks for nothing.
func (s *SlurmSettings) IsZero() bool {
	return s == nil || s.Partition == "" && s.Account == "" && s.QOS == "" && s.Constraint == "" &&
		s.CPUsPerTask == 0 && s.Mem == "" && len(s.ExtraArgs) == 0
}

// Over returns s with what it leaves unset taken from base (a workflow's
// settings under a task's): each field of s that is set wins, ExtraArgs
// included (a task's list replaces the workflow's). Either may be nil.
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
	}
	out.ExtraArgs = slices.Clone(out.ExtraArgs)
	return &out
}

// memRE is what sbatch's --mem takes: a number with an optional unit.
var memRE = regexp.MustCompile(`^[0-9]+[KMGT]?$`)

// Validate returns the first problem with s as field and reason; "" when
// there is none. Names must be one word; ExtraArgs must be options.
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
	return "", ""
}
