package gpusched

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/task"
)

// filled returns a TaskSpec with every field set to something that is not
// its zero value, so that a conversion that forgets a field shows.
func filled(t *testing.T) TaskSpec {
	t.Helper()
	var ts TaskSpec
	v := reflect.ValueOf(&ts).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x-" + v.Type().Field(i).Name)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			switch f.Type().Elem().Kind() {
			case reflect.String:
				f.Set(reflect.ValueOf([]string{"a", "b"}))
			case reflect.Int:
				f.Set(reflect.ValueOf([]int{75, 143}))
			default:
				t.Fatalf("field %s: no test value for %s", v.Type().Field(i).Name, f.Type())
			}
		case reflect.Map:
			switch f.Type() {
			case reflect.TypeFor[map[string]string]():
				f.Set(reflect.ValueOf(map[string]string{"K": "v"}))
			case reflect.TypeFor[map[string]DependencyCondition]():
				f.Set(reflect.ValueOf(map[string]DependencyCondition{"a": AfterAny, "b": AfterFailure}))
			default:
				t.Fatalf("field %s: no test value for %s", v.Type().Field(i).Name, f.Type())
			}
		case reflect.Interface:
			f.Set(reflect.ValueOf([]string{"echo", "hi"}))
		case reflect.Struct:
			ts.Resources = ResourceRequest{Device: CUDA, MemoryMiB: 4096, Exclusive: true, GPUs: 2, MemoryAuto: true, MemoryMaxMiB: 40000,
				Budget: &MemoryBudget{Source: BudgetHistory, PeakMiB: 3000, Attempts: 2, Cap: "card", Since: 3},
				CPUs:   3, MemoryMiBHost: 16000, Counters: map[string]int{"licenses": 1},
				MemoryHostAuto: true, MemoryHostMaxMiB: 32000,
				HostBudget: &MemoryBudget{Source: BudgetMax, PeakMiB: 100, Attempts: 1, Cap: "machine", Since: 2}}
			checkEveryFieldSet(t, reflect.ValueOf(ts.Resources))
			checkEveryFieldSet(t, reflect.ValueOf(*ts.Resources.Budget))
			checkEveryFieldSet(t, reflect.ValueOf(*ts.Resources.HostBudget))
		case reflect.Pointer:
			if v.Type().Field(i).Name != "Slurm" {
				t.Fatalf("field %s: no test value for %s", v.Type().Field(i).Name, f.Type())
			}
			ts.Slurm = &SlurmSettings{Partition: "p", Account: "a", QOS: "q", Constraint: "c", CPUsPerTask: 2, Mem: "1G", ExtraArgs: []string{"--x"}}
		default:
			t.Fatalf("field %s: no test value for %s", v.Type().Field(i).Name, f.Type())
		}
	}
	return ts
}

// checkEveryFieldSet fails the test when a field of struct v has its zero
// value: a field added to a nested struct must get a test value too.
func checkEveryFieldSet(t *testing.T, v reflect.Value) {
	t.Helper()
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("%s.%s has no test value", v.Type().Name(), v.Type().Field(i).Name)
		}
	}
}

// Every field of TaskSpec crosses into the engine's definition and back,
// and both encode to the same JSON (the state database keeps the engine's;
// status reads it back into a TaskSpec).
func TestSpecConversionKeepsEveryField(t *testing.T) {
	ts := filled(t)
	sp := ts.spec()
	a, _ := json.Marshal(ts)
	b, _ := json.Marshal(&sp)
	if string(a) != string(b) {
		t.Errorf("JSON differs:\npublic   %s\ninternal %s", a, b)
	}
	if back := publicSpec(&sp); !reflect.DeepEqual(*back, ts) {
		t.Errorf("round trip:\n got %+v\nwant %+v", *back, ts)
	}
	if reflect.TypeOf(ts).NumField() != reflect.TypeOf(sp).NumField() {
		t.Errorf("TaskSpec has %d fields, task.Spec %d", reflect.TypeOf(ts).NumField(), reflect.TypeOf(sp).NumField())
	}
}

// Every event kind of the engine has a public kind of the same name.
func TestEveryEventKindIsPublic(t *testing.T) {
	for k := engine.Started; k <= engine.JobChanged; k++ {
		got := publicEvent(engine.Event{Kind: k}).Kind
		if got == 0 || got.String() != k.String() {
			t.Errorf("engine kind %s becomes %v", k, got)
		}
	}
	if s := engine.EventKind(engine.JobChanged + 1).String(); s != "event(13)" {
		t.Errorf("the engine has an event kind after JobChanged (%s): add it to EventKind and eventKinds", s)
	}
}

// Dependency conditions keep their names across the border; the default
// one is left out, so that a task without others is saved as before.
func TestConditionsCross(t *testing.T) {
	for c := task.AfterSuccess; c <= task.AfterAny; c++ {
		var back DependencyCondition
		if err := back.UnmarshalText([]byte(c.String())); err != nil || back != DependencyCondition(c) || back.String() != c.String() {
			t.Errorf("condition %s reads back as %v, %v", c, back, err)
		}
	}
	ts := TaskSpec{ID: "t", Dependencies: []string{"a", "b"}, DependencyOn: map[string]DependencyCondition{"a": AfterSuccess}}
	if sp := ts.spec(); sp.DependencyOn != nil {
		t.Errorf("conditions %v, want none: success is the default", sp.DependencyOn)
	}
	ts.DependencyOn["b"] = AfterFailure
	sp := ts.spec()
	if len(sp.DependencyOn) != 1 || sp.On("b") != task.AfterFailure {
		t.Errorf("conditions %v, want b on failure alone", sp.DependencyOn)
	}
	ts.DependencyOn["b"] = AfterAny // the caller's map is not the engine's
	if sp.On("b") != task.AfterFailure {
		t.Error("the engine's conditions share the caller's map")
	}
}

// States and card states keep their names across the border.
func TestStatesKeepTheirNames(t *testing.T) {
	for st := task.Pending; st <= task.Cancelled; st++ {
		if State(st).String() != st.String() {
			t.Errorf("state %d: %s vs %s", st, State(st), st)
		}
	}
	for st := gpu.CardOK; st <= gpu.CardHidden; st++ {
		if CardState(st).String() != st.String() {
			t.Errorf("card state %d: %s vs %s", st, CardState(st), st)
		}
	}
}

// A card view crosses with its holders, and encodes as the saved one does.
func TestCardConversion(t *testing.T) {
	in := gpu.CardView{Index: 1, UUID: "GPU-1", Name: "H100", TotalMiB: 81559, UsedMiB: 6000, FreeMiB: 75559, CapacityMiB: 81047,
		ForeignMiB: 6000, ForeignProcs: 1, ChargedMiB: 20000, AvailableMiB: 55047, Exclusive: true, State: gpu.CardCooling,
		Reason: "a task just left it", Until: time.Unix(100, 0).UTC(), ReservedFor: "big",
		Holders: []gpu.Holding{{Task: "a", PID: 7, RequestMiB: 20000, ObservedMiB: 1, PeakMiB: 2, Exclusive: true}}}
	out := publicCards([]gpu.CardView{in})
	a, _ := json.Marshal(in)
	b, _ := json.Marshal(out[0])
	if string(a) != string(b) {
		t.Errorf("JSON differs:\ninternal %s\npublic   %s", a, b)
	}
}

// Every field of the engine's record crosses to the public one, which
// encodes to the same JSON; a field added to one and not the other fails.
func TestRecordConversionKeepsEveryField(t *testing.T) {
	code, card := 3, 1
	t0 := time.Unix(1700000000, 0).UTC()
	in := task.Record{ID: "train", State: task.Failed, ExitCode: &code, Error: "exit code 3", BlockedBy: "prep",
		Submitted: t0, RetryAt: t0.Add(time.Minute), Rerun: "definition changed: args",
		Artifacts: []task.Artifact{{Path: "out/model.pt", Size: 7, ModTime: t0, SHA256: "ab"}},
		Waiting:   task.WaitReason{Kind: task.WaitRetryDelay, Detail: "exit code 3", Until: t0.Add(time.Minute)}, Paused: true, NotNeeded: true,
		Attempts: []task.Attempt{{Number: 1, Start: t0, End: t0.Add(time.Second), ExitCode: &code, Signal: "SIGKILL", TimedOut: true,
			Cancelled: true, Interrupted: true, NotCharged: true, Adopted: true, EndReason: "exited", Error: "e", LogPath: "l", PID: 9,
			GPU: &card, GPUs: []int{1, 0}, GPUUUID: "GPU-1", MemRequestedMiB: 2, MemPeakMiB: 1, HostMemRequestedMiB: 5, RSSPeakMiB: 8, ReadyAt: t0,
			Job: &task.RemoteJob{System: "Slurm", ID: "4242", State: "RUNNING", Node: "n1", Reason: "None"}}}}
	for _, v := range []reflect.Value{reflect.ValueOf(in), reflect.ValueOf(in.Attempts[0]), reflect.ValueOf(in.Waiting)} {
		for i := range v.NumField() {
			if v.Field(i).IsZero() {
				t.Errorf("the test leaves %s.%s unset: set it", v.Type().Name(), v.Type().Field(i).Name)
			}
		}
	}
	out := publicRecord(in)
	a, _ := json.Marshal(in)
	b, _ := json.Marshal(out)
	if string(a) != string(b) {
		t.Errorf("JSON differs:\ninternal %s\npublic   %s", a, b)
	}
	if reflect.TypeOf(in).NumField() != reflect.TypeOf(out).NumField() {
		t.Errorf("task.Record has %d fields, Record %d", reflect.TypeOf(in).NumField(), reflect.TypeOf(out).NumField())
	}
	if reflect.TypeOf(in.Waiting).NumField() != reflect.TypeOf(out.Waiting).NumField() || out.Waiting.internal() != in.Waiting {
		t.Errorf("waiting reason %+v crosses as %+v", in.Waiting, out.Waiting)
	}
}

// Every waiting kind is public under the same name, and says the same.
func TestEveryWaitKindIsPublic(t *testing.T) {
	for k := task.NotWaiting; k <= task.WaitResource; k++ {
		w := task.WaitReason{Kind: k, Detail: "d", Until: time.Unix(100, 0)}
		p := publicWait(w)
		if p.Kind.String() != k.String() || p.String() != w.Text(time.Time{}) {
			t.Errorf("kind %s: public %q says %q, want %q", k, p.Kind, p, w.Text(time.Time{}))
		}
		var back WaitKind
		if err := back.UnmarshalText([]byte(k.String())); err != nil || back != p.Kind {
			t.Errorf("kind %q reads back as %v, %v", k, back, err)
		}
	}
	if s := task.WaitKind(task.WaitResource + 1).String(); s != "wait(15)" {
		t.Errorf("there is a waiting kind after WaitResource (%s): make it public in task.go", s)
	}
}

// Every field of the engine's event reaches the public one, the sequence
// number that subscribers resume from included.
func TestEventConversionKeepsEveryField(t *testing.T) {
	code := 3
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ev := engine.Event{Seq: 42, Time: at, Kind: engine.Retrying, TaskID: "1/a",
		Attempt:   task.Attempt{Number: 2, Start: at, ExitCode: &code},
		BlockedBy: "1/b", NotNeeded: true, Error: "e", Rerun: "r", Card: 1, Ended: true, RetryAt: at, Submitted: at, Notification: "webhook", GaveUp: true}
	got := publicEvent(ev)
	v := reflect.ValueOf(got)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("public Event.%s is not set from the engine's event", v.Type().Field(i).Name)
		}
	}
	if reflect.TypeOf(got).NumField() != reflect.TypeOf(ev).NumField() {
		t.Errorf("Event has %d fields, engine.Event %d", reflect.TypeOf(got).NumField(), reflect.TypeOf(ev).NumField())
	}
	if got.Seq != 42 || got.Attempt.Number != 2 || *got.Attempt.ExitCode != 3 {
		t.Errorf("converted %+v", got)
	}
}
