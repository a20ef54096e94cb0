package task

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestConditionNames(t *testing.T) {
	for _, c := range []Condition{AfterSuccess, AfterFailure, AfterAny} {
		got, err := ParseCondition(c.String())
		if err != nil || got != c {
			t.Errorf("ParseCondition(%q) = %v, %v; want %v", c.String(), got, err, c)
		}
	}
	// Persisted in stored definitions: the names must not change.
	if AfterSuccess.String() != "success" || AfterFailure.String() != "failure" || AfterAny.String() != "any" {
		t.Errorf("names = %s, %s, %s", AfterSuccess, AfterFailure, AfterAny)
	}
	if _, err := ParseCondition("afterok"); err == nil || !strings.Contains(err.Error(), "success, failure or any") {
		t.Errorf("ParseCondition(afterok) = %v, want an error listing the names", err)
	}
}

// Judge follows the table in its comment, for every terminal state and
// both kinds of blocked.
func TestConditionJudge(t *testing.T) {
	type dep struct {
		st        State
		notNeeded bool
	}
	deps := []dep{{Complete, false}, {Failed, false}, {Cancelled, false}, {Blocked, false}, {Blocked, true}, {Pending, false}, {Running, false}}
	want := map[Condition][]Verdict{
		AfterSuccess: {Met, Unmet, Unmet, Unmet, NotNeeded, Unsettled, Unsettled},
		AfterFailure: {NotNeeded, Met, Met, Met, NotNeeded, Unsettled, Unsettled},
		AfterAny:     {Met, Met, Met, Met, Met, Unsettled, Unsettled},
	}
	for c, verdicts := range want {
		for i, d := range deps {
			if got := c.Judge(d.st, d.notNeeded); got != verdicts[i] {
				t.Errorf("%s.Judge(%s, not needed %v) = %d, want %d", c, d.st, d.notNeeded, got, verdicts[i])
			}
		}
	}
}

// A definition stored before conditions existed reads back with none; one
// with conditions keeps them by name, and only the conditions that are not
// the default are written.
func TestSpecConditionsJSON(t *testing.T) {
	var old Spec
	if err := json.Unmarshal([]byte(`{"id":"agg","dependencies":["a","b"],"payload":["true"]}`), &old); err != nil {
		t.Fatal(err)
	}
	if old.DependencyOn != nil || old.On("a") != AfterSuccess {
		t.Errorf("old spec: conditions %v", old.DependencyOn)
	}
	s := Spec{ID: "agg", Dependencies: []string{"a", "b"}, DependencyOn: map[string]Condition{"b": AfterAny}}
	b, err := json.Marshal(&s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"dependency_on":{"b":"any"}`) {
		t.Errorf("JSON %s, want dependency_on by name", b)
	}
	var back Spec
	if err := json.Unmarshal(b, &back); err != nil || back.On("b") != AfterAny || back.On("a") != AfterSuccess {
		t.Errorf("read back: %v, %v", back.DependencyOn, err)
	}
	if err := json.Unmarshal([]byte(`{"id":"x","dependencies":["a"],"dependency_on":{"a":"sometimes"}}`), &back); err == nil {
		t.Error("an unknown condition was read")
	}
	plain, b2 := Spec{ID: "agg", Dependencies: []string{"a"}}, []byte(nil)
	if b2, _ = json.Marshal(&plain); strings.Contains(string(b2), "dependency_on") {
		t.Errorf("a spec without conditions writes %s", b2)
	}
}

// Conditions are not part of the definition: a run directory written
// before them keeps its fingerprints, and changing on: reruns nothing.
func TestFingerprintIgnoresConditions(t *testing.T) {
	plain := Spec{ID: "c", Kind: "command", Payload: []string{"sh", "clean.sh"}, Dependencies: []string{"prep"}}
	cond := plain
	cond.DependencyOn = map[string]Condition{"prep": AfterFailure}
	if plain.Fingerprint() != cond.Fingerprint() {
		t.Error("a condition changed the fingerprint")
	}
	if c := cond.Changed(&plain); len(c) != 0 {
		t.Errorf("Changed() = %v, want nothing", c)
	}
}

func TestValidateConditions(t *testing.T) {
	tests := []struct {
		name string
		on   map[string]Condition
		want string // part of the message; "" means valid
	}{
		{"none", nil, ""},
		{"any and failure", map[string]Condition{"a": AfterAny, "b": AfterFailure}, ""},
		{"explicit success", map[string]Condition{"a": AfterSuccess}, ""},
		{"not a dependency", map[string]Condition{"z": AfterAny}, `a condition is given for "z", which is not one of its dependencies`},
		{"unknown condition", map[string]Condition{"a": Condition(7)}, `"a": condition(7) is not a condition`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Spec{ID: "t", Dependencies: []string{"a", "b"}, DependencyOn: tt.on}
			s.Normalize()
			err := s.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			var te *Error
			if !errors.Is(err, ErrInvalidTask) || !errors.As(err, &te) || te.Field != "dependencies" || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %v, want an invalid dependencies field saying %q", err, tt.want)
			}
		})
	}
	// Problems reports each, in the order of their ids.
	s := Spec{ID: "t", Dependencies: []string{"a"}, DependencyOn: map[string]Condition{"y": AfterAny, "x": AfterAny}}
	s.Normalize()
	errs := s.Problems()
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), `"x"`) || !strings.Contains(errs[1].Error(), `"y"`) {
		t.Errorf("Problems() = %v, want x then y", errs)
	}
}

func TestRecordOK(t *testing.T) {
	for _, tt := range []struct {
		r    Record
		want bool
	}{
		{Record{State: Complete}, true},
		{Record{State: Blocked, NotNeeded: true}, true},
		{Record{State: Blocked}, false},
		{Record{State: Failed}, false},
		{Record{State: Cancelled}, false},
		{Record{State: Pending}, false},
	} {
		if got := tt.r.OK(); got != tt.want {
			t.Errorf("%s (not needed %v): OK() = %v, want %v", tt.r.State, tt.r.NotNeeded, got, tt.want)
		}
	}
}
