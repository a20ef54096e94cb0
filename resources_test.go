package gpusched_test

import (
	"cmp"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched"
)

func TestSchedulingValidatesResources(t *testing.T) {
	for _, tt := range []struct {
		s     gpusched.Scheduling
		field string
		says  string
	}{
		{gpusched.Scheduling{CPUs: -1}, "cpus", "must not be negative"},
		{gpusched.Scheduling{MemoryMiBHost: -1}, "memory_mib_host", "must not be negative"},
		{gpusched.Scheduling{Resources: map[string]int{"licenses": 0}}, "resources", "licenses must have at least 1 unit"},
		{gpusched.Scheduling{Resources: map[string]int{"cpus": 2}}, "resources", `"cpus" is a key of resources`},
		{gpusched.Scheduling{Resources: map[string]int{"Lic": 2}}, "resources", "not a resource name"},
	} {
		err := tt.s.Validate()
		var se *gpusched.SchedulingError
		if !errors.As(err, &se) || se.Field != tt.field || !strings.Contains(err.Error(), tt.says) || !errors.Is(err, gpusched.ErrInvalidScheduling) {
			t.Errorf("Validate(%+v) = %v; want an error on %s saying %q", tt.s, err, tt.field, tt.says)
		}
	}
	if err := (gpusched.Scheduling{CPUs: 4, MemoryMiBHost: 1000, Resources: map[string]int{"licenses": 2}}).Validate(); err != nil {
		t.Errorf("valid settings: %v", err)
	}
}

// CheckHost refuses, naming the task and the field, what could never
// start; a slurm task's cores are not this machine's.
func TestCheckHost(t *testing.T) {
	s := gpusched.Scheduling{CPUs: 4, MemoryMiBHost: 8000, Resources: map[string]int{"licenses": 2}}
	task := func(id string, r gpusched.ResourceRequest) gpusched.TaskSpec {
		return gpusched.TaskSpec{ID: id, Payload: []string{"true"}, Resources: r}
	}
	for _, tt := range []struct {
		t     gpusched.TaskSpec
		field string
		says  string
	}{
		{task("wide", gpusched.ResourceRequest{CPUs: 5}), "resources.cpus", "asks for 5 cpus; this scheduler's tasks may take 4 in all"},
		{task("fat", gpusched.ResourceRequest{MemoryMiBHost: 8001}), "resources.memory_mib_host", "asks for 8001 MiB"},
		{task("typo", gpusched.ResourceRequest{Counters: map[string]int{"licences": 1}}), "resources.licences", "not a resource declared under scheduling.resources (licenses)"},
		{task("greedy", gpusched.ResourceRequest{Counters: map[string]int{"licenses": 3}}), "resources.licenses", "which has 2 in all"},
	} {
		err := gpusched.CheckHost(s, []gpusched.TaskSpec{task("ok", gpusched.ResourceRequest{CPUs: 4, MemoryMiBHost: 8000}), tt.t})
		var te *gpusched.TaskError
		if !errors.As(err, &te) || te.TaskID != tt.t.ID || te.Field != tt.field || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("CheckHost(%s) = %v; want an error on %s saying %q", tt.t.ID, err, tt.field, tt.says)
		}
	}
	away := task("away", gpusched.ResourceRequest{CPUs: 64, MemoryMiBHost: 1 << 30})
	away.Executor = "slurm"
	if err := gpusched.CheckHost(s, []gpusched.TaskSpec{away}); err != nil {
		t.Errorf("a slurm task: %v", err)
	}
	if err := gpusched.CheckHost(gpusched.Scheduling{}, []gpusched.TaskSpec{task("l", gpusched.ResourceRequest{Counters: map[string]int{"licenses": 1}})}); err == nil ||
		!strings.Contains(err.Error(), "declare it under scheduling.resources") {
		t.Errorf("a resource no scheduling declares: %v", err)
	}
}

// mostAtOnce is the most attempts of recs that ran at the same time, from
// their start and end times.
func mostAtOnce(recs map[string]gpusched.Record) int {
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for _, r := range recs {
		for _, a := range r.Attempts {
			edges = append(edges, edge{a.Start.UnixNano(), 1}, edge{a.End.UnixNano(), -1})
		}
	}
	// Ends before starts at the same instant: one attempt followed
	// another.
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta)) })
	most, now := 0, 0
	for _, e := range edges {
		now += e.delta
		most = max(most, now)
	}
	return most
}

// Real processes: four tasks of 2 cores on 4 run two at a time, as their
// attempts' times show, though 8 slots are free; and the settings in
// effect say the cores.
func TestSchedulerAdmitsCores(t *testing.T) {
	s := newScheduler(t, gpusched.Scheduling{MaxParallelTasks: 8, CPUs: 4})
	if got := s.Settings(); got.CPUs != 4 || got.MemoryMiBHost <= 0 {
		t.Errorf("settings in effect: %d cpus, %d MiB of host memory", got.CPUs, got.MemoryMiBHost)
	}
	var tasks []gpusched.TaskSpec
	for _, id := range []string{"a", "b", "c", "d"} {
		tasks = append(tasks, gpusched.TaskSpec{ID: id, Payload: []string{"sleep", "0.2"}, Resources: gpusched.ResourceRequest{CPUs: 2}})
	}
	if err := s.SubmitMany(tasks); err != nil {
		t.Fatal(err)
	}
	recs := run(t, s)
	for id, r := range recs {
		if r.State != gpusched.StateComplete {
			t.Fatalf("%s: %s (%s)", id, r.State, r.Error)
		}
	}
	if n := mostAtOnce(recs); n != 2 {
		t.Errorf("%d attempts ran at once, want 2", n)
	}
}
