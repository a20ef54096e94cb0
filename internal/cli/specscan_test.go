package cli

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/task"
)

// storedSpecs are definitions as the scheduler stores them (json.Marshal
// of a task.Spec), of every shape status meets: the commands of a
// workflow file, GPU tasks with fixed and learned budgets, conditions,
// Slurm settings, and strings that JSON escapes.
func storedSpecs(t testing.TB) [][]byte {
	specs := []task.Spec{
		{ID: "a"},
		{ID: "task-000000", Kind: "command", Payload: []string{"true"}, Priority: 2, Resources: task.ResourceRequest{Device: task.CPU}, Dir: "/tmp/s2/scale"},
		{ID: "task-000001", Kind: "command", Dependencies: []string{"task-000000"}, Payload: []string{"true"}, Priority: 9,
			Resources: task.ResourceRequest{Device: task.CPU}, Dir: "/tmp/s2/scale"},
		{ID: "train", Dependencies: []string{"prep", "data-1", "data-2"}, DependencyOn: map[string]task.Condition{"data-1": task.AfterAny, "data-2": task.AfterFailure},
			Priority: -5, Payload: []string{"python", "train.py", "--lr", "0.1"},
			Resources: task.ResourceRequest{Device: task.CUDA, MemoryMiB: 6400, GPUs: 2, Exclusive: true, CPUs: 4, MemoryMiBHost: 2000,
				Counters: map[string]int{"licenses": 1}}},
		{ID: "auto", Resources: task.ResourceRequest{Device: task.CUDA, MemoryAuto: true, MemoryMiB: 6400, MemoryMaxMiB: 20000,
			Budget:         &task.Budget{Source: task.BudgetHistory, PeakMiB: 5800, Attempts: 3, Since: 1},
			MemoryHostAuto: true, MemoryMiBHost: 1500, HostBudget: &task.Budget{Source: task.BudgetHistory, PeakMiB: 1200, Attempts: 2}}},
		{ID: "slurm", Executor: "slurm", Slurm: &task.SlurmSettings{Partition: "gpu", ExtraArgs: []string{"--exclusive"}},
			Timeout: time.Hour, Retries: 3, RetryDelay: time.Second, RetryOnExitCodes: []int{1, 2}, RetryOnTimeout: true,
			Artifacts: []string{"out/model.pt"}, HashArtifacts: true, Priority: 1 << 40},
		{ID: "escapes", Dependencies: []string{"dé-1", "a<b>&c"}, Payload: []string{"sh", "-c", "echo \"hi\"\t\\ <html> & \u2028 \x01"},
			Env: map[string]string{"PATH": "/bin", "Ünï": "ç\n"}, Priority: 0},
		{ID: "empty-lists", Dependencies: []string{}, Payload: map[string]any{"deep": []any{map[string]any{"x": []any{1.5, -2e10, true, nil, "s"}}}}},
	}
	out := make([][]byte, 0, len(specs))
	for _, sp := range specs {
		b, err := json.Marshal(&sp)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// oddSpecs are definitions no scheduler writes but encoding/json reads:
// the decoder must read them as it does, or leave them to it.
var oddSpecs = []string{
	``, `null`, `[]`, `{}`, ` { } `, `{"priority":3} x`, `{"priority":3`, `{"priority":}`, `{"priority":3,}`,
	`{"Priority":3}`, `{"PRIORITY":3,"priority":4}`, `{"pr\u0069ority":5}`, `{"dependencieſ":["a"]}`, `{"RESOURCES":{"device":"cuda"}}`,
	`{"priority":3,"priority":4}`, `{"dependencies":["a"],"dependencies":["b"]}`,
	`{"priority":null}`, `{"dependencies":null}`, `{"resources":null}`, `{"dependency_on":null}`,
	`{"priority":1.0}`, `{"priority":1e3}`, `{"priority":-0}`, `{"priority":99999999999999999999}`, `{"priority":123456789012345678}`,
	`{"priority":"3"}`, `{"priority":01}`, `{"priority":-}`, `{"priority":1.}`, `{"priority":1e}`,
	`{"dependencies":[]}`, `{"dependencies":[ "a" , "b" ]}`, `{"dependencies":["\u0041","b\"c"]}`, `{"dependencies":["é"]}`,
	`{"dependencies":["a",1]}`, `{"dependencies":"a"}`, `{"dependencies":["a\x01"]}`, `{"dependencies":["\xff"]}`,
	`{"resources":{"device":"cpu"}}`, `{"resources":{"device":"cpu","device":"cuda"}}`, `{"resources":{"Device":"cuda"}}`,
	`{"resources":{"device":"cuda","memory_mib":"x"},"priority":7}`, `{"resources":{"gpus":-1}}`,
	`{"dependency_on":{"a":"any","b":"failure"}}`, `{"dependency_on":{"a":"sometimes"},"priority":2}`, `{"dependency_on":[]}`,
	`{"id":"x","payload":{"a":[1,2,{"b":null}]},"priority":2}`, `{"payload":"\ud800"}`, `{"payload":"\x"}`, `{"payload":"\u12"}`,
	`{"payload":tru}`, `{"payload":nul,"priority":2}`, `{"payload":[1 2]}`, `{"payload":{"a" 1}}`, `{"payload":{1:2}}`,
	"{\"payload\":\"a\nb\"}", "\t{\n\"priority\" : 3 \r}\n", `{"id":"a"}{"id":"b"}`,
	strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat(`}`, 100),
	`{"payload":` + strings.Repeat(`[`, 70) + strings.Repeat(`]`, 70) + `,"priority":8}`,
}

// decodeBoth decodes def with the scanner and with encoding/json.
func decodeBoth(def []byte) (got, want specView) {
	var d specDecoder
	d.decode(def, &got)
	_ = json.Unmarshal(def, &want)
	return got, want
}

// The scanner reads every definition as json.Unmarshal does: those the
// scheduler stores and odd ones.
func TestDecodeSpecViewAsEncodingJSON(t *testing.T) {
	t.Parallel()
	defs := storedSpecs(t)
	for _, s := range oddSpecs {
		defs = append(defs, []byte(s))
	}
	for _, def := range defs {
		got, want := decodeBoth(def)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %#v\nwant %#v", def, got, want)
		}
	}
	// One decoder for many definitions (as status uses it): each keeps
	// its own dependencies.
	var d specDecoder
	views := make([]specView, len(defs))
	for i, def := range defs {
		d.decode(def, &views[i])
	}
	for i, def := range defs {
		var want specView
		_ = json.Unmarshal(def, &want)
		if !reflect.DeepEqual(views[i], want) {
			t.Errorf("%s, decoded among others:\n got %#v\nwant %#v", def, views[i], want)
		}
	}
}

// A workflow file's command, with its dependencies, is read without
// encoding/json: one allocation, the text of its dependencies.
func TestDecodeSpecViewScansCommands(t *testing.T) {
	def := storedSpecs(t)[2]
	d := specDecoder{slab: make([]string, 0, 1000)}
	var sp specView
	if n := testing.AllocsPerRun(100, func() { d.decode(def, &sp) }); n > 1 {
		t.Errorf("decoding %s: %.0f allocations, want 1", def, n)
	}
	if len(sp.Dependencies) != 1 || sp.Dependencies[0] != "task-000000" || sp.Priority != 9 || sp.Resources.Device != gpusched.CPU {
		t.Errorf("decoded %s as %#v", def, sp)
	}
}

func FuzzDecodeSpecView(f *testing.F) {
	for _, def := range storedSpecs(f) {
		f.Add(def)
	}
	for _, s := range oddSpecs {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, def []byte) {
		got, want := decodeBoth(def)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q:\n got %#v\nwant %#v", def, got, want)
		}
	})
}

// BenchmarkDecodeSpecView decodes the definition of a workflow file's
// command with a dependency, as status does 100,000 times.
func BenchmarkDecodeSpecView(b *testing.B) {
	def := storedSpecs(b)[2]
	var d specDecoder
	var sp specView
	b.SetBytes(int64(len(def)))
	b.ReportAllocs()
	for b.Loop() {
		d.decode(def, &sp)
	}
}

// BenchmarkDecodeSpecViewEncodingJSON is the same through encoding/json.
func BenchmarkDecodeSpecViewEncodingJSON(b *testing.B) {
	def := storedSpecs(b)[2]
	b.SetBytes(int64(len(def)))
	b.ReportAllocs()
	for b.Loop() {
		var sp specView
		_ = json.Unmarshal(def, &sp)
	}
}
