package task

import (
	"slices"
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
	} {
		if field, why := tc.s.Validate(); field != tc.field || (field != "") != (why != "") {
			t.Errorf("%+v: field %q (%s), want %q", tc.s, field, why, tc.field)
		}
	}
}
