package task

import "strconv"

// AppendJSON appends s encoded as json.Marshal encodes it, for the shape
// nearly every command has: an id, a kind, dependencies without
// conditions, an argv, a priority, a CPU task's resources and nothing
// else, every text printable ASCII that JSON writes as it is. For any
// other spec it returns b as it was and false: encode that one with
// json.Marshal. A resubmission compares the stored bytes with these, so
// they never differ from json.Marshal's (TestAppendJSONIsMarshal); by
// hand, a spec is encoded about five times faster.
func (s *Spec) AppendJSON(b []byte) ([]byte, bool) {
	argv, isArgv := s.Payload.([]string)
	if !isArgv && s.Payload != nil || !s.common() || !plain(s.ID) || !plain(s.Kind) {
		return b, false
	}
	size := len(`{"id":"","kind":"","dependencies":[],"payload":[],"priority":,"resources":{"device":"cpu"}}`) + len(s.ID) + len(s.Kind) + 20
	for _, d := range s.Dependencies {
		if !plain(d) {
			return b, false
		}
		size += len(d) + 3
	}
	for _, a := range argv {
		if !plain(a) {
			return b, false
		}
		size += len(a) + 3
	}
	if b == nil {
		b = make([]byte, 0, size) // one allocation
	}
	b = append(b, `{"id":"`...)
	b = append(b, s.ID...)
	b = append(b, '"')
	if s.Kind != "" {
		b = append(b, `,"kind":"`...)
		b = append(b, s.Kind...)
		b = append(b, '"')
	}
	if len(s.Dependencies) > 0 {
		b = appendStrings(append(b, `,"dependencies":`...), s.Dependencies)
	}
	if isArgv {
		b = append(b, `,"payload":`...)
		if argv == nil {
			b = append(b, "null"...) // a nil []string in a non-nil interface
		} else {
			b = appendStrings(b, argv)
		}
	}
	if s.Priority != 0 {
		b = strconv.AppendInt(append(b, `,"priority":`...), int64(s.Priority), 10)
	}
	if s.Resources.Device != "" {
		b = append(b, `,"resources":{"device":"`...)
		b = append(b, s.Resources.Device...)
		b = append(b, `"}`...)
	}
	return append(b, '}'), true
}

// common says whether s sets nothing but what AppendJSON encodes by hand.
func (s *Spec) common() bool {
	r := &s.Resources
	return len(s.DependencyOn) == 0 && s.Executor == "" && s.Slurm == nil && s.Timeout == 0 && s.Retries == 0 &&
		s.RetryDelay == 0 && len(s.RetryOnExitCodes) == 0 && !s.RetryOnTimeout && len(s.Env) == 0 && s.Dir == "" &&
		len(s.Artifacts) == 0 && !s.HashArtifacts && !s.HashInputs && len(s.Inputs) == 0 && len(s.OnComplete) == 0 &&
		len(s.OnFailure) == 0 && !s.CleanEnv && s.Owner == "" &&
		(r.Device == "" || r.Device == CPU) && plain(string(r.Device)) && r.MemoryMiB == 0 && !r.Exclusive && r.GPUs == 0 &&
		!r.MemoryAuto && r.MemoryMaxMiB == 0 && r.Budget == nil && r.CPUs == 0 && r.MemoryMiBHost == 0 &&
		len(r.Counters) == 0 && !r.MemoryHostAuto && r.MemoryHostMaxMiB == 0 && r.HostBudget == nil
}

// plain says whether JSON writes t between quotes as it is: printable
// ASCII but the quote, the backslash, and the <, > and & that
// json.Marshal escapes for HTML.
func plain(t string) bool {
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// appendStrings appends a JSON array of plain strings.
func appendStrings(b []byte, v []string) []byte {
	b = append(b, '[')
	for i, t := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, t...)
		b = append(b, '"')
	}
	return append(b, ']')
}
