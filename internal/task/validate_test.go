package task

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gpusched/gpusched/internal/elide"
)

// A refused character is named as the character it is, with its position,
// not as its first byte ('\u00c3' for "é").
func TestValidIDNamesTheCharacter(t *testing.T) {
	t.Parallel()
	tests := []struct{ id, want string }{
		{"café", `has 'é' at character 4; use ASCII letters`},
		{"a b", `has ' ' at character 2;`},
		{"日本-x", `has '日' at character 1;`},
		{"x\u200by", `has '\u200b' at character 2;`},
		{"ab\ncd", `has '\n' at character 3;`},
		{"ok\xffno", `has the byte "\xff" at character 3, which is not UTF-8`},
		{"é\xff", `has 'é' at character 1;`},
	}
	for _, tt := range tests {
		why, ok := ValidID(tt.id)
		if ok || !strings.Contains(why, tt.want) {
			t.Errorf("ValidID(%q) = %q, %v; want a refusal containing %q", tt.id, why, ok, tt.want)
		}
		if strings.Contains(why, `\u00c3`) || strings.Contains(why, `'Ã'`) {
			t.Errorf("ValidID(%q) = %q names a byte, not the character", tt.id, why)
		}
	}
}

// An executor name is a lowercase identifier of at most MaxExecutorLen
// bytes; whether it exists is not this package's to say.
func TestValidExecutorName(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"local", "slurm", "a", "my-cluster_2", strings.Repeat("x", MaxExecutorLen)} {
		if why, ok := ValidExecutorName(name); !ok {
			t.Errorf("ValidExecutorName(%q) = %q, false; want it accepted", name, why)
		}
	}
	tests := []struct{ name, want string }{
		{"", "must not be empty"},
		{"Slurm", `"Slurm" is not an executor name: use a lowercase letter`},
		{"2slurm", `"2slurm" is not an executor name`},
		{"-x", `"-x" is not an executor name`},
		{"_x", `"_x" is not an executor name`},
		{"slurm.x", `"slurm.x" is not an executor name`},
		{"sl urm", `"sl urm" is not an executor name`},
		{"slurmé", `"slurmé" is not an executor name`},
		{strings.Repeat("x", MaxExecutorLen+1), "is 33 bytes long; the limit is 32"},
	}
	for _, tt := range tests {
		why, ok := ValidExecutorName(tt.name)
		if ok || !strings.Contains(why, tt.want) {
			t.Errorf("ValidExecutorName(%q) = %q, %v; want a refusal containing %q", tt.name, why, ok, tt.want)
		}
	}
	// In a spec, empty means the default; anything else must be a name.
	for _, tt := range []struct {
		executor string
		ok       bool
	}{{"", true}, {"local", true}, {"slurm", true}, {"Local", false}} {
		s := Spec{ID: "t", Executor: tt.executor}
		s.Normalize()
		err := s.Validate()
		var te *Error
		switch {
		case tt.ok && err != nil:
			t.Errorf("executor %q: Validate() = %v, want nil", tt.executor, err)
		case !tt.ok && (!errors.As(err, &te) || te.Field != "executor" || !errors.Is(err, ErrInvalidTask)):
			t.Errorf("executor %q: Validate() = %v, want an invalid-task error on field executor", tt.executor, err)
		}
	}
}

// Problems reports every problem of a spec, in field order; Validate the
// first of them.
func TestSpecProblems(t *testing.T) {
	t.Parallel()
	s := Spec{
		ID:               "a b",
		Dependencies:     []string{"x", "", "x", "a b", "x", ""},
		Resources:        ResourceRequest{Device: "tpu"},
		Executor:         "Slurm",
		Timeout:          -5,
		Retries:          -3,
		RetryDelay:       -7,
		RetryOnExitCodes: []int{1, 0, 256},
		Env:              map[string]string{"Z": "ok", "B=C": "v", "A": "nul\x00", "": ""},
		Dir:              "/d\x00",
		Artifacts:        []string{"ok", "", "a\x00"},
		OnComplete:       []string{" ", "x\x00"},
		OnFailure:        []string{"", "ok", "y\x00"},
	}
	s.Normalize()
	var got []string
	for _, err := range s.Problems() {
		got = append(got, err.Error())
	}
	want := []string{
		`task "a b": id: has ' ' at character 2; use ASCII letters, digits and _.:@+=,-`,
		`task "a b": dependencies: empty dependency id`,
		`task "a b": dependencies: "x" is listed twice`,
		`dependency cycle: "a b" -> "a b"`,
		`task "a b": resources.device: must be "cpu" or "cuda", not "tpu"`,
		`task "a b": executor: "Slurm" is not an executor name: use a lowercase letter, then lowercase letters, digits, _ and -`,
		`task "a b": timeout: must not be negative (got -5ns)`,
		`task "a b": retries: must not be negative (got -3)`,
		`task "a b": retry_delay: must not be negative (got -7ns)`,
		`task "a b": retry_on_exit_codes: 0 is not a failing exit code (1 to 255)`,
		`task "a b": retry_on_exit_codes: 256 is not a failing exit code (1 to 255)`,
		`task "a b": env: invalid variable name ""`,
		`task "a b": env: the value of "A" has a NUL byte, which an environment cannot hold`,
		`task "a b": env: invalid variable name "B=C"`,
		`task "a b": dir: "/d\x00" has a NUL byte, which a path cannot hold`,
		`task "a b": artifacts[1]: empty path`,
		`task "a b": artifacts[2]: "a\x00" has a NUL byte, which a path cannot hold`,
		`task "a b": on_complete: empty command`,
		`task "a b": on_complete[1]: "x\x00" has a NUL byte, which a command line cannot hold`,
		`task "a b": on_failure: empty command`,
		`task "a b": on_failure[2]: "y\x00" has a NUL byte, which a command line cannot hold`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Problems():\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := s.Validate(); err == nil || err.Error() != want[0] {
		t.Errorf("Validate() = %v, want the first problem %q", err, want[0])
	}
	ok := Spec{ID: "fine", Dependencies: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}}
	ok.Normalize()
	if p := ok.Problems(); p != nil {
		t.Errorf("Problems() of a valid spec = %v", p)
	}
	long := Spec{ID: "l", Dependencies: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "a", "a"}}
	long.Normalize()
	if p := long.Problems(); len(p) != 1 || !errors.Is(p[0], ErrInvalidTask) || !strings.Contains(p[0].Error(), `"a" is listed twice`) {
		t.Errorf("Problems() of a long list with a repeat = %v, want one 'listed twice'", p)
	}
}

func TestCheckArgv(t *testing.T) {
	t.Parallel()
	if err := CheckArgv("t", "args", []string{"echo", "a b", ""}); err != nil {
		t.Errorf("CheckArgv of a good argv = %v", err)
	}
	err := CheckArgv("t", "args", []string{"echo", "ok", "bad\x00arg", "\x00"})
	var te *Error
	if !errors.As(err, &te) || te.Field != "args[2]" || te.TaskID != "t" || !errors.Is(err, ErrInvalidTask) {
		t.Fatalf("CheckArgv = %#v, want an invalid-task error on args[2]", err)
	}
	if want := `task "t": args[2]: "bad\x00arg" has a NUL byte, which a command line cannot hold`; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

func TestCycleErrorMessage(t *testing.T) {
	t.Parallel()
	ids := func(n int) []string {
		p := make([]string, n+1)
		for i := range n {
			p[i] = fmt.Sprintf("t%d", i)
		}
		p[n] = p[0]
		return p
	}
	tests := []struct {
		name string
		path []string
		want string
	}{
		{"self", []string{"a", "a"}, "dependency cycle: a -> a"},
		{"three", []string{"a", "c", "b", "a"}, "dependency cycle: a -> c -> b -> a"},
		{"seven: in full", ids(7), "dependency cycle: t0 -> t1 -> t2 -> t3 -> t4 -> t5 -> t6 -> t0"},
		{"eight: cut", ids(8), "dependency cycle of 8 tasks: t0 -> t1 -> t2 -> … -> t6 -> t7 -> t0"},
		{"100,000", ids(100_000), "dependency cycle of 100000 tasks: t0 -> t1 -> t2 -> … -> t99998 -> t99999 -> t0"},
		{
			"long ids cut",
			[]string{strings.Repeat("a", 200), strings.Repeat("b", 150), strings.Repeat("a", 200)},
			"dependency cycle: " + elide.Middle(strings.Repeat("a", 200), 40) + " -> " + elide.Middle(strings.Repeat("b", 150), 40) + " -> " + elide.Middle(strings.Repeat("a", 200), 40),
		},
		{"invalid ids quoted", []string{"a\nb", "c", "a\nb"}, `dependency cycle: "a\nb" -> c -> "a\nb"`},
	}
	for _, tt := range tests {
		got := (&CycleError{Path: tt.path}).Error()
		if got != tt.want {
			t.Errorf("%s: Error() = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// However long or strange the ids and values, a validation message is one
// line of bounded length.
func TestMessagesOfHostileSpecsAreShortLines(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("x", 10_000)
	junk := string([]byte{0, 1, 2, 0xff, 0xfe, '\n', '\r', 0x1b, '[', '2', 'J'})
	junk = strings.Repeat(junk, 1000)
	specs := []Spec{
		{ID: huge, Dependencies: []string{huge, "", huge}, Env: map[string]string{huge + "=": junk, "V": junk}, Dir: junk, Artifacts: []string{junk}, OnComplete: []string{junk}},
		{ID: junk, Dependencies: []string{junk}, Resources: ResourceRequest{Device: Device(junk)}},
		{ID: "ok", Resources: ResourceRequest{Device: Device(huge)}},
		{ID: "ok", Executor: huge},
		{ID: "ok", Executor: junk[:30]},
	}
	cycle := make([]string, 100_001)
	for i := range cycle {
		cycle[i] = fmt.Sprintf("%s-%d", huge[:MaxIDLen-10], i%100_000)
	}
	errs := []error{&CycleError{Path: cycle}, &CycleError{Path: []string{junk, huge, junk}}}
	for _, s := range specs {
		s.Normalize()
		errs = append(errs, s.Problems()...)
	}
	if len(errs) < 12 {
		t.Fatalf("only %d problems found: %v", len(errs), errs)
	}
	for _, err := range errs {
		msg := err.Error()
		if len(msg) > 400 || strings.ContainsAny(msg, "\n\r\x00\x1b") || !utf8.ValidString(msg) {
			t.Errorf("message of %d bytes is not one short line: %.600q", len(msg), msg)
		}
	}
}

func TestValidQualifiedID(t *testing.T) {
	long := strings.Repeat("a", 150)
	for _, c := range []struct {
		id   string
		ok   bool
		want string // part of the reason
	}{
		{"train", true, ""},
		{"12/train", true, ""},
		{"run-a/b.c", true, ""},
		{"1/a/b", false, "more than one '/'"},
		{"/a", false, "run part"},
		{"1/", false, "task part"},
		{"1/.a", false, "task part"},
		{"-1/a", false, "run part"},
		{"1/a b", false, "task part"},
		{long + "/" + long, false, "limit is 200"},
	} {
		why, ok := ValidQualifiedID(c.id)
		if ok != c.ok || !strings.Contains(why, c.want) {
			t.Errorf("ValidQualifiedID(%q) = %q, %v; want ok %v, reason with %q", c.id, why, ok, c.ok, c.want)
		}
	}
	s := Spec{ID: "1/a", Kind: DefaultKind, Resources: ResourceRequest{Device: CPU}}
	if err := s.Validate(); err == nil {
		t.Error("Validate took a qualified id")
	}
	if err := s.ValidateQualified(); err != nil {
		t.Errorf("ValidateQualified: %v", err)
	}
}

// Inputs are paths, globs or folders: an empty one, one with a NUL byte
// and a glob that does not parse are refused, each named by its place.
func TestValidateInputs(t *testing.T) {
	t.Parallel()
	ok := Spec{ID: "a", Kind: DefaultKind, Resources: ResourceRequest{Device: CPU},
		Inputs: []string{"params.json", "data/*.csv", "src/", "/abs/x", `lit\*eral`, "d/[a-c].txt"}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate refused good inputs: %v", err)
	}
	bad := ok
	bad.Inputs = []string{"ok", " ", "a\x00", "data/[a-"}
	var got []string
	for _, err := range bad.Problems() {
		if !errors.Is(err, ErrInvalidTask) {
			t.Errorf("%v is not an ErrInvalidTask", err)
		}
		got = append(got, err.Error())
	}
	want := []string{
		`task "a": inputs[1]: empty path`,
		`task "a": inputs[2]: "a\x00" has a NUL byte, which a path cannot hold`,
		`task "a": inputs[3]: "data/[a-" is not a valid glob (syntax error in pattern)`,
	}
	if len(got) != len(want) {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d = %s\nwant prefix %s", i, got[i], want[i])
		}
	}
}

// Inputs and HashInputs are not part of the definition: the files are
// compared at resume, not the list.
func TestInputsAreNotInTheFingerprint(t *testing.T) {
	t.Parallel()
	a := Spec{ID: "a", Kind: DefaultKind, Payload: []string{"x"}, Resources: ResourceRequest{Device: CPU}}
	b := a
	b.Inputs, b.HashInputs = []string{"params.json"}, true
	if a.Fingerprint() != b.Fingerprint() {
		t.Error("declaring inputs changed the fingerprint: every task with inputs would run again once")
	}
	if c := b.Changed(&a); len(c) != 0 {
		t.Errorf("Changed = %v; want nothing", c)
	}
}
