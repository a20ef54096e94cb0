package task

import (
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/elide"
)

func TestSpecValidate(t *testing.T) {
	tests := []struct {
		name  string
		spec  Spec
		field string // "" means valid
		want  error
	}{
		{"minimal", Spec{ID: "a"}, "", nil},
		{"full", Spec{ID: "train-3.b:x@y+z=1,2_", Dependencies: []string{"a", "b"}, Priority: -5, Timeout: time.Hour, Retries: 3,
			Env: map[string]string{"SEED": "1"}, Resources: ResourceRequest{Device: CUDA, MemoryMiB: 4096}}, "", nil},
		{"exclusive cuda without budget", Spec{ID: "a", Resources: ResourceRequest{Device: CUDA, Exclusive: true}}, "", nil},
		{"explicit none", Spec{ID: "a", Timeout: NoTimeout, Retries: NoRetries}, "", nil},
		{"empty id", Spec{}, "id", ErrInvalidTask},
		{"slash in id", Spec{ID: "a/b"}, "id", ErrInvalidTask},
		{"space in id", Spec{ID: "a b"}, "id", ErrInvalidTask},
		{"leading dot", Spec{ID: ".hidden"}, "id", ErrInvalidTask},
		{"leading dash", Spec{ID: "-x"}, "id", ErrInvalidTask},
		{"too long", Spec{ID: strings.Repeat("a", MaxIDLen+1)}, "id", ErrInvalidTask},
		{"empty dependency", Spec{ID: "a", Dependencies: []string{""}}, "dependencies", ErrInvalidTask},
		{"repeated dependency", Spec{ID: "a", Dependencies: []string{"b", "b"}}, "dependencies", ErrInvalidTask},
		{"self dependency", Spec{ID: "a", Dependencies: []string{"a"}}, "", ErrCycle},
		{"bad device", Spec{ID: "a", Resources: ResourceRequest{Device: "gpu"}}, "resources.device", ErrInvalidTask},
		{"cuda without budget", Spec{ID: "a", Resources: ResourceRequest{Device: CUDA}}, "resources.memory_mib", ErrInvalidTask},
		{"negative budget", Spec{ID: "a", Resources: ResourceRequest{Device: CUDA, MemoryMiB: -1}}, "resources.memory_mib", ErrInvalidTask},
		{"budget on cpu", Spec{ID: "a", Resources: ResourceRequest{Device: CPU, MemoryMiB: 10}}, "resources.memory_mib", ErrInvalidTask},
		{"exclusive cpu", Spec{ID: "a", Resources: ResourceRequest{Device: CPU, Exclusive: true}}, "resources.exclusive", ErrInvalidTask},
		{"auto budget", Spec{ID: "a", Resources: ResourceRequest{Device: CUDA, MemoryAuto: true}}, "", nil},
		{"auto budget with a maximum", Spec{ID: "a", Resources: ResourceRequest{Device: CUDA, MemoryAuto: true, MemoryMaxMiB: 40000}}, "", nil},
		{"auto budget, chosen", Spec{ID: "a", Resources: ResourceRequest{Device: CUDA, MemoryAuto: true, MemoryMiB: 6400,
			Budget: &Budget{Source: BudgetHistory, PeakMiB: 5800, Attempts: 3, Since: 1}}}, "", nil},
		{"auto budget on cpu", Spec{ID: "a", Resources: ResourceRequest{MemoryAuto: true}}, "resources.memory_mib", ErrInvalidTask},
		{"maximum on cpu", Spec{ID: "a", Resources: ResourceRequest{MemoryMaxMiB: 100}}, "resources.memory_mib_max", ErrInvalidTask},
		{"maximum without auto", Spec{ID: "a", Resources: ResourceRequest{Device: CUDA, MemoryMiB: 100, MemoryMaxMiB: 200}}, "resources.memory_mib_max", ErrInvalidTask},
		{"negative maximum", Spec{ID: "a", Resources: ResourceRequest{Device: CUDA, MemoryAuto: true, MemoryMaxMiB: -1}}, "resources.memory_mib_max", ErrInvalidTask},
		{"host auto on cpu", Spec{ID: "a", Resources: ResourceRequest{MemoryHostAuto: true, MemoryHostMaxMiB: 4096}}, "", nil},
		{"host maximum without auto", Spec{ID: "a", Resources: ResourceRequest{MemoryMiBHost: 100, MemoryHostMaxMiB: 200}}, "resources.memory_mib_host_max", ErrInvalidTask},
		{"negative host maximum", Spec{ID: "a", Resources: ResourceRequest{MemoryHostAuto: true, MemoryHostMaxMiB: -1}}, "resources.memory_mib_host_max", ErrInvalidTask},
		{"two gpus", Spec{ID: "a", Resources: ResourceRequest{Device: CUDA, MemoryMiB: 10, GPUs: 2}}, "", nil},
		{"64 gpus", Spec{ID: "a", Resources: ResourceRequest{Device: CUDA, MemoryMiB: 10, GPUs: MaxGPUs}}, "", nil},
		{"65 gpus", Spec{ID: "a", Resources: ResourceRequest{Device: CUDA, MemoryMiB: 10, GPUs: MaxGPUs + 1}}, "resources.gpus", ErrInvalidTask},
		{"negative gpus", Spec{ID: "a", Resources: ResourceRequest{Device: CUDA, MemoryMiB: 10, GPUs: -1}}, "resources.gpus", ErrInvalidTask},
		{"gpus on cpu", Spec{ID: "a", Resources: ResourceRequest{Device: CPU, GPUs: 2}}, "resources.gpus", ErrInvalidTask},
		{"one gpu on cpu", Spec{ID: "a", Resources: ResourceRequest{GPUs: 1}}, "resources.gpus", ErrInvalidTask},
		{"negative timeout", Spec{ID: "a", Timeout: -2 * time.Second}, "timeout", ErrInvalidTask},
		{"negative retries", Spec{ID: "a", Retries: -2}, "retries", ErrInvalidTask},
		{"bad env name", Spec{ID: "a", Env: map[string]string{"A=B": "x"}}, "env", ErrInvalidTask},
		{"empty env name", Spec{ID: "a", Env: map[string]string{"": "x"}}, "env", ErrInvalidTask},
		{"NUL in an env name", Spec{ID: "a", Env: map[string]string{"A\x00B": "x"}}, "env", ErrInvalidTask},
		{"NUL in an env value", Spec{ID: "a", Env: map[string]string{"A": "x\x00y"}}, "env", ErrInvalidTask},
		{"NUL in dir", Spec{ID: "a", Dir: "/tmp/a\x00b"}, "dir", ErrInvalidTask},
		{"empty artifact", Spec{ID: "a", Artifacts: []string{"ok", " "}}, "artifacts[1]", ErrInvalidTask},
		{"NUL in an artifact", Spec{ID: "a", Artifacts: []string{"ok", "m\x00.pt"}}, "artifacts[1]", ErrInvalidTask},
		{"empty on_complete", Spec{ID: "a", OnComplete: []string{""}}, "on_complete", ErrInvalidTask},
		{"NUL in on_complete", Spec{ID: "a", OnComplete: []string{"sh", "-c", "x\x00"}}, "on_complete[2]", ErrInvalidTask},
		{"host resources", Spec{ID: "a", Resources: ResourceRequest{CPUs: 4, MemoryMiBHost: 16000, Counters: map[string]int{"licenses": 1, "db-conn_2": 3}}}, "", nil},
		{"host resources of a GPU task", Spec{ID: "a", Resources: ResourceRequest{Device: CUDA, MemoryMiB: 10, CPUs: 2, MemoryMiBHost: 1}}, "", nil},
		{"negative cpus", Spec{ID: "a", Resources: ResourceRequest{CPUs: -1}}, "resources.cpus", ErrInvalidTask},
		{"negative host memory", Spec{ID: "a", Resources: ResourceRequest{MemoryMiBHost: -5}}, "resources.memory_mib_host", ErrInvalidTask},
		{"no unit of a resource", Spec{ID: "a", Resources: ResourceRequest{Counters: map[string]int{"licenses": 0}}}, "resources.licenses", ErrInvalidTask},
		{"a resource named as a key", Spec{ID: "a", Resources: ResourceRequest{Counters: map[string]int{"cpus": 1}}}, "resources.cpus", ErrInvalidTask},
		{"a resource's bad name", Spec{ID: "a", Resources: ResourceRequest{Counters: map[string]int{"Lic": 1}}}, "resources.Lic", ErrInvalidTask},
		{"empty on_failure", Spec{ID: "a", OnFailure: []string{" "}}, "on_failure", ErrInvalidTask},
		{"NUL in on_failure", Spec{ID: "a", OnFailure: []string{"sh", "x\x00"}}, "on_failure[1]", ErrInvalidTask},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.spec
			s.Normalize()
			err := s.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Validate() = %v, want %v", err, tt.want)
			}
			var te *Error
			if tt.field != "" && (!errors.As(err, &te) || te.Field != tt.field || te.TaskID != s.ID) {
				t.Errorf("Validate() = %#v, want a task error on field %q", err, tt.field)
			}
			name := elide.Quote(s.ID) // a cycle lists valid ids unquoted
			if errors.Is(err, ErrCycle) {
				name = s.ID
			}
			if !strings.Contains(err.Error(), name) {
				t.Errorf("message %q does not name the task", err)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	s := Spec{ID: "a"}
	s.Normalize()
	if s.Kind != DefaultKind || s.Resources.Device != CPU {
		t.Errorf("Normalize() = %+v", s)
	}
}

func TestStateNames(t *testing.T) {
	want := map[State]string{Pending: "pending", Running: "running", Complete: "complete", Failed: "failed", Blocked: "blocked", Cancelled: "cancelled"}
	for st, name := range want {
		if st.String() != name {
			t.Errorf("%d.String() = %q, want %q", st, st.String(), name)
		}
		back, err := ParseState(name)
		if err != nil || back != st {
			t.Errorf("ParseState(%q) = %v, %v", name, back, err)
		}
	}
	if _, err := ParseState("done"); err == nil {
		t.Error("ParseState accepted an unknown name")
	}
	if !Failed.Terminal() || Running.Terminal() || Pending.Terminal() {
		t.Error("Terminal() is wrong")
	}
}

func TestFingerprint(t *testing.T) {
	base := Spec{ID: "a", Kind: "command", Payload: []string{"python3", "train.py"}, Env: map[string]string{"A": "1", "B": "2"},
		Dir: "/w", Resources: ResourceRequest{Device: CUDA, MemoryMiB: 10}, Artifacts: []string{"m.pt"}}
	fp := base.Fingerprint()
	// Fingerprints are saved in run directories: the definition's digest
	// must not change between versions, or every completed task reruns.
	if want := "88420e08cc8026b3271d38bceacff6de"; fp != want {
		t.Errorf("fingerprint %s, want %s as in earlier versions", fp, want)
	}
	same := base
	same.ID, same.Priority, same.Dependencies, same.Timeout, same.Retries = "b", 9, []string{"x"}, time.Hour, 3
	same.Env = map[string]string{"B": "2", "A": "1"}
	if same.Fingerprint() != fp {
		t.Error("id, priority, dependencies, timeout, retries or map order changed the fingerprint")
	}
	// Moving a task to another executor must not make completed work run
	// again: the executor is not part of the definition.
	moved := base
	moved.Executor = "slurm"
	if moved.Fingerprint() != fp {
		t.Error("the executor changed the fingerprint")
	}
	if c := moved.Changed(&base); len(c) != 0 {
		t.Errorf("Changed() after a change of executor = %v, want nothing", c)
	}
	// Nor do the cores, host memory and custom resources it takes: they
	// are budgets for admission, not inputs.
	budgets := base
	budgets.Resources.CPUs, budgets.Resources.MemoryMiBHost, budgets.Resources.Counters = 8, 16000, map[string]int{"licenses": 1}
	if budgets.Fingerprint() != fp {
		t.Error("cpus, memory_mib_host or a custom resource changed the fingerprint")
	}
	if c := budgets.Changed(&base); len(c) != 0 {
		t.Errorf("Changed() after a change of cpus and host memory = %v, want nothing", c)
	}
	// Nor what is run when it ends: a new on_failure (or on_complete)
	// does not redo completed work.
	told := base
	told.OnFailure, told.OnComplete = []string{"notify-send", "failed"}, []string{"true"}
	if told.Fingerprint() != fp || len(told.Changed(&base)) != 0 {
		t.Errorf("on_failure or on_complete changed the definition: %v", told.Changed(&base))
	}
	changes := []func(s *Spec){
		func(s *Spec) { s.Kind = "other" },
		func(s *Spec) { s.Payload = []string{"python3", "train.py", "--x"} },
		func(s *Spec) { s.Payload = []string{"python3 train.py"} }, // same bytes, other split
		func(s *Spec) { s.Env = map[string]string{"A": "1", "B": "3"} },
		func(s *Spec) { s.Env = map[string]string{"A": "1"} },
		func(s *Spec) { s.Dir = "/w2" },
		func(s *Spec) { s.Resources.MemoryMiB = 11 },
		func(s *Spec) { s.Resources.Exclusive = true },
		func(s *Spec) { s.Resources.GPUs = 2 },
		func(s *Spec) { s.Resources.GPUs = 8 },
		func(s *Spec) { s.Artifacts = nil },
		func(s *Spec) { s.HashArtifacts = true },
		func(s *Spec) { s.Payload = map[string]any{"args": []string{"python3", "train.py"}} },
		func(s *Spec) { s.CleanEnv = true },
		func(s *Spec) { s.Owner = "1000" },
		func(s *Spec) { s.Resources.MemoryAuto = true },
	}
	// An auto budget is the word auto: the number chosen is no part of it.
	auto, chosen := base, base
	auto.Resources = ResourceRequest{Device: CUDA, MemoryAuto: true}
	chosen.Resources = ResourceRequest{Device: CUDA, MemoryAuto: true, MemoryMiB: 10, MemoryMaxMiB: 99, Budget: &Budget{Source: BudgetMax}}
	if auto.Fingerprint() != chosen.Fingerprint() {
		t.Error("an auto budget's number, maximum or source changed the fingerprint")
	}
	// Host memory is no part of the definition, learned or not.
	host := base
	host.Resources.MemoryHostAuto, host.Resources.MemoryMiBHost, host.Resources.MemoryHostMaxMiB = true, 3072, 8000
	host.Resources.HostBudget = &Budget{Source: BudgetHistory, PeakMiB: 2000, Attempts: 2}
	if host.Fingerprint() != base.Fingerprint() {
		t.Error("an auto host memory budget changed the fingerprint")
	}
	// One card said aloud is one card: the same definition.
	one := base
	one.Resources.GPUs = 1
	one.Normalize()
	if one.Fingerprint() != fp || len(one.Changed(&base)) != 0 {
		t.Errorf("gpus: 1 changed the definition (Changed() = %v)", one.Changed(&base))
	}
	seen := map[string]int{fp: -1}
	for i, change := range changes {
		c := base
		c.Env = maps.Clone(base.Env)
		change(&c)
		got := c.Fingerprint()
		if j, dup := seen[got]; dup {
			t.Errorf("change %d gives the same fingerprint as %d", i, j)
		}
		seen[got] = i
	}
}

// A resource name is a lowercase identifier, not one of the keys of
// resources, at most MaxResourceNameLen bytes.
func TestValidResourceName(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"licenses", "a", "db-conn_2", strings.Repeat("x", MaxResourceNameLen)} {
		if why, ok := ValidResourceName(name); !ok {
			t.Errorf("ValidResourceName(%q) = %q, false; want it accepted", name, why)
		}
	}
	for _, tt := range []struct{ name, want string }{
		{"", "needs a name"},
		{"cpus", `"cpus" is a key of resources`},
		{"memory_mib_host", "is a key of resources"},
		{"Licenses", "not a resource name"},
		{"2x", "not a resource name"},
		{"a.b", "not a resource name"},
		{strings.Repeat("x", MaxResourceNameLen+1), "is 33 bytes long"},
	} {
		if why, ok := ValidResourceName(tt.name); ok || !strings.Contains(why, tt.want) {
			t.Errorf("ValidResourceName(%q) = %q, %v; want a refusal containing %q", tt.name, why, ok, tt.want)
		}
	}
}

// An attempt is over its host memory when its peak RSS is more than 1.5
// times its budget; one without a budget never is.
func TestHostMemoryNote(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		budget, peak int64
		want         string
	}{
		{1000, 1500, ""},
		{1000, 1501, "peak RSS 1501 MiB, 1.5x its memory_mib_host of 1000 MiB"},
		{1500, 4210, "peak RSS 4210 MiB, 2.8x its memory_mib_host of 1500 MiB"},
		{0, 99999, ""},
		{1000, 0, ""},
	} {
		a := Attempt{HostMemRequestedMiB: tt.budget, RSSPeakMiB: tt.peak}
		if got := a.HostMemoryNote(); got != tt.want || a.OverHostMemory() != (tt.want != "") {
			t.Errorf("budget %d, peak %d: note %q, over %v; want %q", tt.budget, tt.peak, got, a.OverHostMemory(), tt.want)
		}
	}
}

// A definition read back from its JSON has the fingerprint it was saved
// with, an auto budget's choice included or not.
func TestDecodeSpec(t *testing.T) {
	sp := Spec{ID: "a", Payload: []string{"python3", "train.py"}, Env: map[string]string{"A": "1"},
		Resources: ResourceRequest{Device: CUDA, MemoryAuto: true, MemoryMaxMiB: 40000}}
	sp.Normalize()
	want := sp.Fingerprint()
	sp.Resources.MemoryMiB, sp.Resources.Budget = 6400, &Budget{Source: BudgetHistory, PeakMiB: 5800, Attempts: 3, Since: 2}
	b, err := json.Marshal(&sp)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeSpec(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.Fingerprint() != want {
		t.Errorf("decoded fingerprint %s, want %s", back.Fingerprint(), want)
	}
	if r := back.Resources; !r.MemoryAuto || r.MemoryMiB != 6400 || r.MemoryMaxMiB != 40000 || r.Budget == nil || *r.Budget != *sp.Resources.Budget {
		t.Errorf("decoded resources %+v (budget %+v)", r, r.Budget)
	}
	if _, err := DecodeSpec([]byte("{")); err == nil {
		t.Error("DecodeSpec accepted broken JSON")
	}
}
