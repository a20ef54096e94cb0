package cli

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// A task that sets memory_mib_host, a number or auto, gets a host row in
// suggest, learned from its peak RSS; a GPU task gets its GPU row as
// before, and a task that sets neither gets none.
func TestSuggestHostRows(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	ran := func(n int, gpuAsked, gpuPeak, hostAsked, rss int64) task.Attempt {
		return task.Attempt{Number: n, Start: t0, End: t0.Add(time.Minute), MemRequestedMiB: gpuAsked, MemPeakMiB: gpuPeak,
			HostMemRequestedMiB: hostAsked, RSSPeakMiB: rss}
	}
	row := func(sp task.Spec, attempts ...task.Attempt) store.Row {
		sp.Normalize()
		b, err := json.Marshal(&sp)
		if err != nil {
			t.Fatal(err)
		}
		r := store.Row{Spec: b, Fingerprint: sp.Fingerprint()}
		r.ID, r.State, r.Attempts = sp.ID, task.Failed, attempts
		return r
	}
	rows := []store.Row{
		row(task.Spec{ID: "prep", Payload: []string{"prep"}, Resources: task.ResourceRequest{MemoryHostAuto: true, MemoryHostMaxMiB: 4000}},
			ran(1, 0, 0, 4000, 200)),
		row(task.Spec{ID: "both", Payload: []string{"both"}, Resources: task.ResourceRequest{Device: task.CUDA, MemoryMiB: 8000, MemoryMiBHost: 20000}},
			ran(1, 8000, 7900, 20000, 3000)),
		row(task.Spec{ID: "plain", Payload: []string{"plain"}}, ran(1, 0, 0, 0, 500)),
	}
	out := suggestAll(rows)
	var got []string
	for _, s := range out {
		got = append(got, s.ID+" "+s.Resource)
	}
	if want := []string{"prep memory_mib_host", "both memory_mib", "both memory_mib_host"}; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("suggestions %q, want %q", got, want)
	}
	if s := out[0]; !s.MemoryAuto || s.MemoryMaxMiB != 4000 || s.AskedMiB != 4000 || s.PeakMiB != 200 || s.ProposedMiB != 768 || s.Flag != "wasted" {
		t.Errorf("prep: %+v", s)
	}
	if s := out[2]; s.MemoryMiB != 20000 || s.PeakMiB != 3000 || s.ProposedMiB != 3584 {
		t.Errorf("both's host row: %+v", s)
	}
	var buf bytes.Buffer
	writeSuggestions(&buf, "/runs/x", out)
	for _, re := range []string{
		`(?m)^TASK\s+BUDGET\s+ASKED`,
		`(?m)^prep\s+host auto \(max 4000\)\s+4000\s+200\s+1\s+768\s+wasted`,
		`(?m)^both\s+8000\s+8000\s+7900\s+1\s+8704\s+OOM risk`,
		`(?m)^both\s+host 20000\s+20000\s+3000\s+1\s+3584\s+wasted`,
	} {
		if !regexp.MustCompile(re).MatchString(buf.String()) {
			t.Errorf("suggest output does not match %s:\n%s", re, buf.String())
		}
	}
}

// budgetNote says each budget learned from history, the GPU one first.
func TestBudgetNoteHost(t *testing.T) {
	t.Parallel()
	gpuB := &gpusched.MemoryBudget{Source: gpusched.BudgetHistory, PeakMiB: 5800, Attempts: 3, Since: 1}
	hostB := &gpusched.MemoryBudget{Source: gpusched.BudgetMax, Since: 1}
	tests := []struct {
		r    gpusched.ResourceRequest
		want string
	}{
		{gpusched.ResourceRequest{MemoryHostAuto: true, MemoryMiBHost: 3000, HostBudget: hostB},
			"memory_mib_host auto: 3000 MiB (memory_mib_host_max: no earlier attempt to learn from)"},
		{gpusched.ResourceRequest{Device: gpusched.CUDA, MemoryAuto: true, MemoryMiB: 6400, Budget: gpuB, MemoryHostAuto: true, MemoryMiBHost: 3000, HostBudget: hostB},
			"memory_mib auto: 6400 MiB (peak 5800 MiB in 3 attempts + margin); memory_mib_host auto: 3000 MiB (memory_mib_host_max: no earlier attempt to learn from)"},
		{gpusched.ResourceRequest{MemoryMiBHost: 3000}, ""},
	}
	for _, tt := range tests {
		if got := budgetNote(tt.r); got != tt.want {
			t.Errorf("budgetNote(%+v) = %q\nwant %q", tt.r, got, tt.want)
		}
	}
}
