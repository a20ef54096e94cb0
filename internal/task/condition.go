package task

import "fmt"

// Condition says when a dependency is satisfied: when the task it names
// succeeds (the default), fails, or ends whichever way. They are Slurm's
// afterok, afternotok and afterany. Conditions persist as the stable
// lowercase strings returned by String; never renumber or rename them.
type Condition uint8

// The conditions.
const (
	// AfterSuccess: the dependency must complete. If it fails, is
	// cancelled or is blocked, the dependent is blocked.
	AfterSuccess Condition = iota
	// AfterFailure: the dependency must end without succeeding: fail (its
	// retries spent), be cancelled, or be blocked by a failure upstream.
	// If it completes, the dependent is not needed (blocked, NotNeeded).
	AfterFailure
	// AfterAny: the dependency must end, whichever way.
	AfterAny
)

var conditionNames = [...]string{AfterSuccess: "success", AfterFailure: "failure", AfterAny: "any"}

// String returns the condition's name, as a workflow's on: key writes it:
// "success", "failure" or "any".
func (c Condition) String() string {
	if int(c) < len(conditionNames) {
		return conditionNames[c]
	}
	return fmt.Sprintf("condition(%d)", uint8(c))
}

// ParseCondition returns the condition named s, as written by String.
func ParseCondition(s string) (Condition, error) {
	for i, n := range conditionNames {
		if n == s {
			return Condition(i), nil
		}
	}
	return 0, fmt.Errorf("unknown dependency condition %q: use success, failure or any", s)
}

// MarshalText writes the condition's name.
func (c Condition) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads a condition's name.
func (c *Condition) UnmarshalText(b []byte) error {
	v, err := ParseCondition(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// Verdict is what a dependency's end means to a task that depends on it
// with some condition.
type Verdict uint8

// The verdicts.
const (
	// Unsettled: the dependency has not ended; the task waits for it.
	Unsettled Verdict = iota
	// Met: the condition is met.
	Met
	// Unmet: the condition can no longer be met because the dependency did
	// not succeed; the task is blocked, as a consequence of a failure.
	Unmet
	// NotNeeded: the condition can no longer be met, and no failure is
	// behind it (a clean-up after a dependency that completed): the task
	// is blocked as not needed, which is not a failure of the run.
	NotNeeded
)

// Judge says what a dependency in state st means to a task that waits for
// it with condition c. notNeeded says the dependency was itself blocked as
// not needed (Record.NotNeeded): it did not run, and no failure is behind
// that, so it satisfies only AfterAny.
//
//	dependency   success     failure     any
//	complete     met         not needed  met
//	failed       unmet       met         met
//	cancelled    unmet       met         met
//	blocked      unmet       met         met
//	not needed   not needed  not needed  met
//	pending      unsettled   unsettled   unsettled
func (c Condition) Judge(st State, notNeeded bool) Verdict {
	if !st.Terminal() {
		return Unsettled
	}
	if c == AfterAny {
		return Met
	}
	switch {
	case st == Blocked && notNeeded:
		return NotNeeded
	case st == Complete && c == AfterFailure:
		return NotNeeded
	case st == Complete:
		return Met
	case c == AfterFailure:
		return Met
	}
	return Unmet
}

// Phrase says, for a person, what a task waiting for a dependency with
// condition c waits for, after the dependency's id: "" for AfterSuccess
// (the usual), " (any outcome)", " (on its failure)".
func (c Condition) Phrase() string {
	switch c {
	case AfterAny:
		return " (any outcome)"
	case AfterFailure:
		return " (on its failure)"
	case AfterSuccess:
	}
	return ""
}
