package budget

import (
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// ran is an attempt numbered n that ended by itself having asked for
// asked MiB and peaked at peak.
func ran(n int, asked, peak int64) task.Attempt {
	return task.Attempt{Number: n, Start: t0, End: t0.Add(time.Minute), MemRequestedMiB: asked, MemPeakMiB: peak}
}

func cancelled(a task.Attempt) task.Attempt   { a.Cancelled = true; return a }
func interrupted(a task.Attempt) task.Attempt { a.Interrupted = true; return a }
func running(a task.Attempt) task.Attempt     { a.End = time.Time{}; return a }

func TestMarginAndPropose(t *testing.T) {
	t.Parallel()
	tests := []struct{ peak, margin, proposed int64 }{
		{100, 512, 768},         // the minimum margin, rounded up
		{5120, 512, 5632},       // 10% is 512: either
		{5800, 580, 6400},       // 6380 rounded up to 256
		{40000, 4000, 44032},    // 44000 rounded up
		{7424, 742, 8192},       // 8166 rounded up: exactly a step
		{7680 - 512, 716, 7936}, // 7884 rounded up
	}
	for _, tt := range tests {
		if got := Margin(tt.peak); got != tt.margin {
			t.Errorf("Margin(%d) = %d, want %d", tt.peak, got, tt.margin)
		}
		if got := Propose(tt.peak); got != tt.proposed {
			t.Errorf("Propose(%d) = %d, want %d", tt.peak, got, tt.proposed)
		}
		if got := Propose(tt.peak); got%StepMiB != 0 || got < tt.peak+tt.margin {
			t.Errorf("Propose(%d) = %d: not a multiple of %d at least peak + margin", tt.peak, got, StepMiB)
		}
	}
}

func TestChoose(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   Input
		mib  int64
		want task.Budget
		text string
	}{
		{"first time, no maximum", Input{},
			DefaultMiB, task.Budget{Source: task.BudgetDefault, Since: 1},
			"memory_mib auto: 8192 MiB (the default: no earlier attempt to learn from)"},
		{"first time, the maximum", Input{MaxMiB: 40000},
			40000, task.Budget{Source: task.BudgetMax, Since: 1},
			"memory_mib auto: 40000 MiB (memory_mib_max: no earlier attempt to learn from)"},
		{"first time, the default capped by the card", Input{LimitMiB: 5000},
			5000, task.Budget{Source: task.BudgetDefault, Cap: CapCard, Since: 1},
			"memory_mib auto: 5000 MiB (the default: no earlier attempt to learn from, capped at the largest card's capacity)"},
		{"history", Input{MaxMiB: 40000, Attempts: []task.Attempt{ran(1, 40000, 5800), ran(2, 6400, 5500), ran(3, 6400, 5000)}, Since: 1},
			6400, task.Budget{Source: task.BudgetHistory, PeakMiB: 5800, Attempts: 3, Since: 1},
			"memory_mib auto: 6400 MiB (peak 5800 MiB in 3 attempts + margin)"},
		{"history without a maximum", Input{Attempts: []task.Attempt{ran(1, 8192, 30000)}, Since: 1},
			33024, task.Budget{Source: task.BudgetHistory, PeakMiB: 30000, Attempts: 1, Since: 1},
			"memory_mib auto: 33024 MiB (peak 30000 MiB in 1 attempt + margin)"},
		{"only the last 5 attempts count", Input{Attempts: []task.Attempt{
			ran(1, 0, 20000), ran(2, 0, 1000), ran(3, 0, 1000), ran(4, 0, 1000), ran(5, 0, 1000), ran(6, 0, 1200)}, Since: 1},
			1792, task.Budget{Source: task.BudgetHistory, PeakMiB: 1200, Attempts: 5, Since: 1}, ""},
		{"cancelled, interrupted and running attempts teach nothing", Input{MaxMiB: 9000, Attempts: []task.Attempt{
			cancelled(ran(1, 9000, 100)), interrupted(ran(2, 9000, 200)), running(ran(3, 9000, 300)), ran(4, 9000, 0)}, Since: 1},
			9000, task.Budget{Source: task.BudgetMax, Since: 1}, ""},
		{"a changed definition starts over", Input{MaxMiB: 12000, Attempts: []task.Attempt{ran(1, 12000, 3000), ran(2, 3840, 3000)}, Since: 3},
			12000, task.Budget{Source: task.BudgetMax, Since: 3}, ""},
		{"only the attempts of this definition", Input{MaxMiB: 12000, Attempts: []task.Attempt{ran(1, 12000, 9000), ran(2, 12000, 2000)}, Since: 2},
			2560, task.Budget{Source: task.BudgetHistory, PeakMiB: 2000, Attempts: 1, Since: 2}, ""},
		{"capped at the maximum", Input{MaxMiB: 6000, Attempts: []task.Attempt{ran(1, 6000, 5900)}, Since: 1},
			6000, task.Budget{Source: task.BudgetHistory, PeakMiB: 5900, Attempts: 1, Cap: CapMax, Since: 1},
			"memory_mib auto: 6000 MiB (peak 5900 MiB in 1 attempt + margin, capped at memory_mib_max)"},
		{"capped at the card", Input{LimitMiB: 81047, Attempts: []task.Attempt{ran(1, 80000, 78000)}, Since: 1},
			81047, task.Budget{Source: task.BudgetHistory, PeakMiB: 78000, Attempts: 1, Cap: CapCard, Since: 1}, ""},
		{"the smaller cap wins", Input{MaxMiB: 50000, LimitMiB: 40000},
			40000, task.Budget{Source: task.BudgetMax, Cap: CapCard, Since: 1}, ""},
		{"an out-of-memory growth above history stands", Input{MaxMiB: 8000, GrownMiB: 15512,
			Attempts: []task.Attempt{ran(1, 8000, 5000), ran(2, 5632, 5600)}, Since: 1},
			15512, task.Budget{Source: task.BudgetGrown, PeakMiB: 5600, Attempts: 2, Since: 1},
			"memory_mib auto: 15512 MiB (grown after running out of memory; peak 5600 MiB in 2 attempts)"},
		{"a growth below history is history", Input{GrownMiB: 4000, Attempts: []task.Attempt{ran(1, 8192, 5000)}, Since: 1},
			5632, task.Budget{Source: task.BudgetHistory, PeakMiB: 5000, Attempts: 1, Since: 1}, ""},
		{"a growth above the cap stands", Input{MaxMiB: 6000, GrownMiB: 9000, Since: 1},
			9000, task.Budget{Source: task.BudgetGrown, Since: 1},
			"memory_mib auto: 9000 MiB (grown after running out of memory)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Resource = GPUMemory
			mib, b := Choose(tt.in)
			if mib != tt.mib || b != tt.want {
				t.Errorf("Choose = %d, %+v\nwant     %d, %+v", mib, b, tt.mib, tt.want)
			}
			if tt.text != "" {
				if got := Describe(GPUMemory, mib, &b); got != tt.text {
					t.Errorf("Describe = %q\nwant       %q", got, tt.text)
				}
			}
		})
	}
}

func spec(args ...string) *task.Spec {
	sp := &task.Spec{ID: "train", Payload: args, Resources: task.ResourceRequest{Device: task.CUDA, MemoryAuto: true}}
	sp.Normalize()
	return sp
}

// The identity leaves out every budget field and nothing else.
func TestIdentity(t *testing.T) {
	t.Parallel()
	base := spec("python", "train.py")
	same := []func(*task.Spec){
		func(s *task.Spec) { s.Resources.MemoryAuto, s.Resources.MemoryMiB = false, 20000 },
		func(s *task.Spec) { s.Resources.MemoryMaxMiB = 40000 },
		func(s *task.Spec) {
			s.Resources.MemoryMiB, s.Resources.Budget = 6400, &task.Budget{Source: task.BudgetHistory, Since: 3}
		},
		func(s *task.Spec) { s.Priority, s.Retries, s.Dependencies = 5, 2, []string{"prep"} },
		func(s *task.Spec) {
			s.Resources.MemoryHostAuto, s.Resources.MemoryMiBHost, s.Resources.MemoryHostMaxMiB = true, 768, 4000
			s.Resources.HostBudget = &task.Budget{Source: task.BudgetHistory, Since: 2}
		},
	}
	for i, change := range same {
		s := *base
		change(&s)
		if Identity(&s) != Identity(base) {
			t.Errorf("change %d changed the identity", i)
		}
	}
	other := []func(*task.Spec){
		func(s *task.Spec) { s.Payload = []string{"python", "train.py", "--big"} },
		func(s *task.Spec) { s.Env = map[string]string{"BATCH": "64"} },
		func(s *task.Spec) { s.Dir = "/elsewhere" },
		func(s *task.Spec) { s.Resources.Exclusive = true },
	}
	for i, change := range other {
		s := *base
		change(&s)
		if Identity(&s) == Identity(base) {
			t.Errorf("definition change %d kept the identity", i)
		}
	}
}

func TestSince(t *testing.T) {
	t.Parallel()
	cur := spec("python", "train.py")
	attempts := []task.Attempt{ran(1, 0, 1), ran(2, 0, 1), ran(3, 0, 1)}
	withSince := func(s *task.Spec, since int) *task.Spec {
		c := *s
		c.Resources.MemoryMiB, c.Resources.Budget = 7000, &task.Budget{Source: task.BudgetHistory, Since: since}
		return &c
	}
	fixed := *cur
	fixed.Resources.MemoryAuto, fixed.Resources.MemoryMiB = false, 20000
	tests := []struct {
		name     string
		prev     *task.Spec
		attempts []task.Attempt
		want     int
	}{
		{"never ran", nil, nil, 1},
		{"unreadable definition", nil, attempts, 4},
		{"same definition, first auto run", cur, attempts, 1},
		{"same definition, its since kept", withSince(cur, 2), attempts, 2},
		{"a fixed budget before: its attempts count", &fixed, attempts, 1},
		{"changed definition", withSince(spec("python", "other.py"), 1), attempts, 4},
	}
	for _, tt := range tests {
		if got := Since(tt.prev, tt.attempts, cur); got != tt.want {
			t.Errorf("%s: Since = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// The definition keeps the word auto: choosing another number, or
// another cap, leaves the fingerprint as it was; an auto task and one
// with a fixed budget differ.
func TestFingerprintKeepsAuto(t *testing.T) {
	t.Parallel()
	a := spec("python", "train.py")
	b := *a
	b.Resources.MemoryMiB, b.Resources.MemoryMaxMiB = 6400, 40000
	b.Resources.Budget = &task.Budget{Source: task.BudgetHistory, PeakMiB: 5800, Attempts: 3, Since: 1}
	if a.Fingerprint() != b.Fingerprint() {
		t.Error("the budget chosen changed the fingerprint")
	}
	if ch := b.Changed(a); len(ch) != 0 {
		t.Errorf("Changed = %v, want nothing", ch)
	}
	fixed := *a
	fixed.Resources.MemoryAuto, fixed.Resources.MemoryMiB = false, 6400
	if fixed.Fingerprint() == b.Fingerprint() {
		t.Error("an auto budget and a fixed one of the same number have one fingerprint")
	}
	if ch := fixed.Changed(&b); len(ch) != 1 || ch[0] != "resources" {
		t.Errorf("Changed = %v, want [resources]", ch)
	}
}

func TestAdvise(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		attempts []task.Attempt
		since    int
		want     Advice
	}{
		{"never ran", nil, 1, Advice{}},
		{"no peak seen", []task.Attempt{ran(1, 8000, 0)}, 1, Advice{AskedMiB: 8000}},
		{"about right", []task.Attempt{ran(1, 6400, 5800)}, 1, Advice{AskedMiB: 6400, PeakMiB: 5800, Attempts: 1, ProposedMiB: 6400}},
		{"wasted", []task.Attempt{ran(1, 20000, 3000)}, 1, Advice{AskedMiB: 20000, PeakMiB: 3000, Attempts: 1, ProposedMiB: 3584, Flag: Wasted}},
		{"above but not far", []task.Attempt{ran(1, 5000, 3000)}, 1, Advice{AskedMiB: 5000, PeakMiB: 3000, Attempts: 1, ProposedMiB: 3584}},
		{"peak near the ask", []task.Attempt{ran(1, 6000, 5800)}, 1, Advice{AskedMiB: 6000, PeakMiB: 5800, Attempts: 1, ProposedMiB: 6400, Flag: OOMRisk}},
		{"peak above the ask", []task.Attempt{ran(1, 1000, 30000)}, 1, Advice{AskedMiB: 1000, PeakMiB: 30000, Attempts: 1, ProposedMiB: 33024, Flag: OOMRisk}},
		{"asked is the last attempt's, peak the max", []task.Attempt{ran(1, 20000, 9000), ran(2, 10240, 4000), running(ran(3, 9984, 0))}, 1,
			Advice{AskedMiB: 9984, PeakMiB: 9000, Attempts: 2, ProposedMiB: 9984}},
		{"an earlier definition is left out", []task.Attempt{ran(1, 20000, 9000), ran(2, 4000, 1000)}, 2,
			Advice{AskedMiB: 4000, PeakMiB: 1000, Attempts: 1, ProposedMiB: 1536, Flag: Wasted}},
	}
	for _, tt := range tests {
		if got := Advise(GPUMemory, tt.attempts, tt.since); got != tt.want {
			t.Errorf("%s: Advise = %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

// hostRan is an attempt numbered n that ended by itself having asked for
// asked MiB of host memory and reached a peak RSS of rss, on a card where
// it asked for 999 MiB and peaked at 900: the host budget reads the
// former only.
func hostRan(n int, asked, rss int64) task.Attempt {
	a := ran(n, 999, 900)
	a.HostMemRequestedMiB, a.RSSPeakMiB = asked, rss
	return a
}

// Host memory follows the rule through its own fields: the peak RSS and
// the host budget asked, memory_mib_host_max, the machine's limit and
// its own default.
func TestChooseHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   Input
		mib  int64
		want task.Budget
		text string
	}{
		{"first time, no maximum", Input{},
			DefaultHostMiB, task.Budget{Source: task.BudgetDefault, Since: 1},
			"memory_mib_host auto: 2048 MiB (the default: no earlier attempt to learn from)"},
		{"first time, the maximum", Input{MaxMiB: 3000},
			3000, task.Budget{Source: task.BudgetMax, Since: 1},
			"memory_mib_host auto: 3000 MiB (memory_mib_host_max: no earlier attempt to learn from)"},
		{"first time, capped by the machine", Input{MaxMiB: 64000, LimitMiB: 15000},
			15000, task.Budget{Source: task.BudgetMax, Cap: CapMachine, Since: 1},
			"memory_mib_host auto: 15000 MiB (memory_mib_host_max: no earlier attempt to learn from, capped at the machine's host memory)"},
		{"history of peak RSS", Input{MaxMiB: 3000, Attempts: []task.Attempt{hostRan(1, 3000, 200), hostRan(2, 768, 150)}, Since: 1},
			768, task.Budget{Source: task.BudgetHistory, PeakMiB: 200, Attempts: 2, Since: 1},
			"memory_mib_host auto: 768 MiB (peak 200 MiB in 2 attempts + margin)"},
		{"capped at its maximum", Input{MaxMiB: 4000, Attempts: []task.Attempt{hostRan(1, 4000, 3900)}, Since: 1},
			4000, task.Budget{Source: task.BudgetHistory, PeakMiB: 3900, Attempts: 1, Cap: CapHostMax, Since: 1},
			"memory_mib_host auto: 4000 MiB (peak 3900 MiB in 1 attempt + margin, capped at memory_mib_host_max)"},
		{"no RSS seen teaches nothing", Input{Attempts: []task.Attempt{hostRan(1, 2048, 0)}, Since: 1},
			DefaultHostMiB, task.Budget{Source: task.BudgetDefault, Since: 1}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Resource = HostMemory
			mib, b := Choose(tt.in)
			if mib != tt.mib || b != tt.want {
				t.Errorf("Choose = %d, %+v\nwant     %d, %+v", mib, b, tt.mib, tt.want)
			}
			if tt.text != "" {
				if got := Describe(HostMemory, mib, &b); got != tt.text {
					t.Errorf("Describe = %q\nwant       %q", got, tt.text)
				}
			}
		})
	}
	ad := Advise(HostMemory, []task.Attempt{hostRan(1, 20000, 1000)}, 1)
	if want := (Advice{AskedMiB: 20000, PeakMiB: 1000, Attempts: 1, ProposedMiB: 1536, Flag: Wasted}); ad != want {
		t.Errorf("Advise(HostMemory) = %+v\nwant %+v", ad, want)
	}
	// Each resource reads and writes its own fields of a request.
	var req task.ResourceRequest
	req.MemoryHostAuto, req.MemoryHostMaxMiB = true, 9000
	if auto, maxMiB := HostMemory.Requested(&req); !auto || maxMiB != 9000 {
		t.Errorf("HostMemory.Requested = %v, %d; want true, 9000", auto, maxMiB)
	}
	if auto, _ := GPUMemory.Requested(&req); auto {
		t.Error("GPUMemory.Requested is true for a host auto budget")
	}
	HostMemory.Set(&req, 768, task.Budget{Source: task.BudgetHistory, Since: 2})
	if mib, b := HostMemory.Chosen(&req); mib != 768 || b == nil || b.Since != 2 || req.MemoryMiB != 0 || req.Budget != nil {
		t.Errorf("after Set: Chosen = %d, %+v; request %+v", mib, b, req)
	}
	if SavedSince(&req) != 2 {
		t.Errorf("SavedSince = %d, want 2 (the host budget's)", SavedSince(&req))
	}
}
