package task

import "fmt"

// State is where a task stands. States persist as the stable lowercase
// strings returned by String; never renumber or rename them.
type State uint8

// The task states. A task starts Pending, becomes Running while an attempt
// runs, and ends Complete, Failed, Blocked (the condition of a dependency
// can no longer be met: usually it failed or was cancelled; see Condition
// and Record.NotNeeded; so it never started) or Cancelled. Between the
// attempts of a retried task it is Pending again.
const (
	Pending State = iota
	Running
	Complete
	Failed
	Blocked
	Cancelled
)

var stateNames = [...]string{
	Pending:   "pending",
	Running:   "running",
	Complete:  "complete",
	Failed:    "failed",
	Blocked:   "blocked",
	Cancelled: "cancelled",
}

// String returns the state's persisted name, e.g. "complete".
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Terminal reports whether the state is final for this run: nothing more
// happens to the task unless the run is resumed.
func (s State) Terminal() bool {
	switch s {
	case Complete, Failed, Blocked, Cancelled:
		return true
	case Pending, Running:
		return false
	}
	return false
}

// ParseState returns the state named s, as written by String.
func ParseState(s string) (State, error) {
	for i, n := range stateNames {
		if n == s {
			return State(i), nil
		}
	}
	return 0, fmt.Errorf("unknown task state %q", s)
}

// MarshalText writes the state's name, so JSON carries "complete", not 2.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a state's name.
func (s *State) UnmarshalText(b []byte) error {
	v, err := ParseState(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}
