package task

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// AppendJSON knows every field of Spec and ResourceRequest: one added
// must be added to common() (or encoded by hand), or a spec that sets it
// would be stored without it.
func TestAppendJSONKnowsEveryField(t *testing.T) {
	names := func(v any) []string {
		var out []string
		ty := reflect.TypeOf(v)
		for i := range ty.NumField() {
			out = append(out, ty.Field(i).Name)
		}
		return out
	}
	spec := []string{"ID", "Kind", "Dependencies", "DependencyOn", "Payload", "Priority", "Resources", "Executor", "Slurm",
		"Timeout", "Retries", "RetryDelay", "RetryOnExitCodes", "RetryOnTimeout", "Env", "Dir", "Artifacts", "HashArtifacts",
		"HashInputs", "Inputs", "OnComplete", "OnFailure", "CleanEnv", "Owner"}
	resources := []string{"Device", "MemoryMiB", "Exclusive", "GPUs", "MemoryAuto", "MemoryMaxMiB", "Budget", "CPUs",
		"MemoryMiBHost", "Counters", "MemoryHostAuto", "MemoryHostMaxMiB", "HostBudget"}
	if got := names(Spec{}); !slices.Equal(got, spec) {
		t.Errorf("Spec's fields are %q; AppendJSON knows %q: update common()", got, spec)
	}
	if got := names(ResourceRequest{}); !slices.Equal(got, resources) {
		t.Errorf("ResourceRequest's fields are %q; AppendJSON knows %q: update common()", got, resources)
	}
}

// AppendJSON's bytes are json.Marshal's, for every spec it encodes; and
// it encodes the common ones.
func TestAppendJSONIsMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	texts := []string{"a", "task-000001", "x_y.z:w@v+u=t,s-r", "", "with space", "q\"uote", `back\slash`, "<tag>", "a&b",
		"tab\t", "nl\n", "é", "\x7f", "\u2028", "~!#$%^*()[]{}|;'?/`"}
	text := func() string { // mostly one JSON writes as it is
		if r.IntN(8) > 0 {
			return texts[r.IntN(5)]
		}
		return texts[r.IntN(len(texts))]
	}
	texts3 := func() []string {
		switch r.IntN(4) {
		case 0:
			return nil
		case 1:
			return []string{}
		}
		v := make([]string, 1+r.IntN(3))
		for i := range v {
			v[i] = text()
		}
		return v
	}
	encoded := 0
	for range 20000 {
		s := &Spec{ID: text(), Kind: []string{"", "command", "a<b"}[r.IntN(3)], Dependencies: texts3()}
		switch r.IntN(5) {
		case 0:
		case 1:
			s.Payload = []string(nil)
		case 2:
			s.Payload = map[string]int{"n": 1}
		default:
			s.Payload = texts3()
		}
		s.Priority = []int{0, 1, -1, 7, math.MaxInt, math.MinInt}[r.IntN(6)]
		s.Resources.Device = []Device{"", CPU, CPU, CUDA}[r.IntN(4)]
		// Now and then, one field beyond the common shape.
		switch r.IntN(12) {
		case 0:
			s.Env = map[string]string{"A": "1"}
		case 1:
			s.Timeout = time.Second
		case 2:
			s.Resources.CPUs = 2
		case 3:
			s.Resources.Budget = &Budget{Source: "history"}
		case 4:
			s.DependencyOn = map[string]Condition{"a": AfterAny}
		case 5:
			s.Owner = "1000"
		}
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := s.AppendJSON(nil)
		if !ok {
			if got != nil {
				t.Fatalf("AppendJSON refused %+v but returned %q", s, got)
			}
			continue
		}
		encoded++
		if string(got) != string(want) {
			t.Fatalf("AppendJSON(%+v) = %s; json.Marshal = %s", s, got, want)
		}
		// Appended to what b held.
		if got, _ := s.AppendJSON([]byte("x")); string(got) != "x"+string(want) {
			t.Fatalf("AppendJSON after x = %s", got)
		}
	}
	if encoded < 2000 {
		t.Errorf("AppendJSON encoded %d of 20,000 specs; most of those of the common shape should be", encoded)
	}
	// The shape SubmitMany's benchmark has, normalized, is encoded.
	s := &Spec{ID: "task-000002", Dependencies: []string{"task-000000", "task-000001"}, Payload: []string{"true"}, Priority: 3}
	s.Normalize()
	if _, ok := s.AppendJSON(nil); !ok {
		t.Errorf("AppendJSON refused %+v", s)
	}
}
