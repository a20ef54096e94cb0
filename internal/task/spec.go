package task

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpusched/gpusched/internal/elide"
)

// Device says what a task runs on.
type Device string

// The devices a task can ask for.
const (
	CPU  Device = "cpu"
	CUDA Device = "cuda"
)

// ResourceRequest is what a task needs to start. For a CUDA task MemoryMiB is
// the GPU memory budget used for admission, on each of its cards; it is not
// enforced as a hard limit on the process. Exclusive asks for cards no other
// task shares. GPUs is how many cards a CUDA task takes, all at once or
// none: 0 means one (Normalize writes 1 as 0, so that a task that says
// gpus: 1 has the definition of one that says nothing).
//
// With MemoryAuto the budget is learned from the peaks of the task's
// earlier attempts when it is submitted (package budget): MemoryMiB is
// then the budget chosen, and Budget says how. The definition holds the
// word auto, not the number, nor MemoryMaxMiB: choosing another budget, or
// another cap, does not make a completed task run again.
//
// CPUs, MemoryMiBHost and Counters are what it takes of the machine while
// it runs, admitted against the scheduler's capacities (see
// docs/workflow.md, "CPU, memory and custom resources"): cores (0 means
// 1), a host memory budget in MiB (0: none declared), and units of custom
// resources by name (scheduling.resources). Like MemoryMiB they are
// budgets for admission, not limits on the process, and not part of the
// definition. With MemoryHostAuto the host memory budget is learned from
// history too.
type ResourceRequest struct {
	Device    Device `json:"device,omitempty"`
	MemoryMiB int64  `json:"memory_mib,omitempty"`
	Exclusive bool   `json:"exclusive,omitempty"`
	GPUs      int    `json:"gpus,omitempty"`
	// MemoryAuto: the GPU memory budget is learned from history.
	MemoryAuto bool `json:"memory_auto,omitempty"`
	// MemoryMaxMiB, with MemoryAuto: the budget when nothing is known yet,
	// and the most a learned budget may be; 0: the default first budget,
	// capped by the cards only.
	MemoryMaxMiB int64 `json:"memory_mib_max,omitempty"`
	// Budget says how an auto budget was chosen; set at submit, nil for
	// other tasks.
	Budget        *Budget        `json:"budget,omitempty"`
	CPUs          int            `json:"cpus,omitempty"`
	MemoryMiBHost int64          `json:"memory_mib_host,omitempty"`
	Counters      map[string]int `json:"counters,omitempty"`
	// MemoryHostAuto: the host memory budget (MemoryMiBHost) is learned
	// from the peak RSS of earlier attempts, as MemoryAuto learns the GPU
	// one; MemoryHostMaxMiB and HostBudget are its MemoryMaxMiB and
	// Budget. None of them is part of the definition, as MemoryMiBHost is
	// not.
	MemoryHostAuto   bool    `json:"memory_host_auto,omitempty"`
	MemoryHostMaxMiB int64   `json:"memory_mib_host_max,omitempty"`
	HostBudget       *Budget `json:"host_budget,omitempty"`
}

// CPUCount is the cores the task takes: CPUs, or 1 when it says none.
func (r *ResourceRequest) CPUCount() int { return max(r.CPUs, 1) }

// Host reports whether the request asks for anything of the machine
// beyond the default (one core): more cores, a host memory budget, or a
// custom resource.
func (r *ResourceRequest) Host() bool {
	return r.CPUs > 1 || r.MemoryMiBHost > 0 || r.MemoryHostAuto || len(r.Counters) > 0
}

// Budget says how the scheduler chose an auto memory budget, of GPU or
// host memory.
type Budget struct {
	// Source is where the number comes from.
	Source BudgetSource `json:"source"`
	// PeakMiB is the largest peak of the attempts learned from, and
	// Attempts how many they are (0: none).
	PeakMiB  int64 `json:"peak_mib,omitempty"`
	Attempts int   `json:"attempts,omitempty"`
	// Cap names what lowered the budget, if anything did:
	// the maximum's key ("memory_mib_max", "memory_mib_host_max"), "card"
	// (the largest card's capacity) or "machine" (the host memory the
	// scheduler gives tasks).
	Cap string `json:"cap,omitempty"`
	// Since is the number of the first attempt of the task's current
	// definition: earlier attempts ran another definition and are not
	// learned from.
	Since int `json:"since,omitempty"`
}

// BudgetSource says where an auto budget comes from.
type BudgetSource string

// The sources of an auto budget.
const (
	// BudgetHistory: the peak of recent attempts, plus a margin.
	BudgetHistory BudgetSource = "history"
	// BudgetMax: no attempt to learn from; memory_mib_max.
	BudgetMax BudgetSource = "max"
	// BudgetDefault: no attempt to learn from and no memory_mib_max.
	BudgetDefault BudgetSource = "default"
	// BudgetGrown: an earlier attempt ran out of memory, and the budget
	// it grew to is more than history gives.
	BudgetGrown BudgetSource = "grown"
)

// defined is the request as the definition holds it: an auto budget as
// the word auto, without the number chosen, the cap or how it was chosen;
// and without the cores, host memory and custom resources a task takes,
// which are the scheduler's business, not its outputs': changing them
// does not make a completed task run again.
func (r ResourceRequest) defined() ResourceRequest {
	if r.MemoryAuto {
		r.MemoryMiB = 0
	}
	r.MemoryMaxMiB, r.Budget = 0, nil
	r.CPUs, r.MemoryMiBHost, r.Counters = 0, 0, nil
	r.MemoryHostAuto, r.MemoryHostMaxMiB, r.HostBudget = false, 0, nil
	return r
}

// MaxGPUs is the most cards one task may ask for.
const MaxGPUs = 64

// GPU reports whether the request needs a GPU.
func (r ResourceRequest) GPU() bool { return r.Device == CUDA }

// GPUCount is how many cards the request takes: 0 for a CPU task, else
// GPUs, at least 1.
func (r ResourceRequest) GPUCount() int {
	if !r.GPU() {
		return 0
	}
	return max(r.GPUs, 1)
}

// NoTimeout, as a Spec's Timeout, means "no timeout" even when the queue has
// a default one. NoRetries, as a Spec's Retries, means "no retries" even when
// the queue's default is more.
const (
	NoTimeout    time.Duration = -1
	NoRetries    int           = -1
	NoRetryDelay time.Duration = -1
)

// DefaultKind is the kind of a spec that names none: the built-in handler
// that runs an argv and succeeds on exit code 0.
const DefaultKind = "command"

// Spec describes one task: what to run, after what, with what priority and
// resources. The zero value of every field but ID is a usable default.
type Spec struct {
	// ID names the task; unique within a scheduler. ASCII letters, digits and
	// "_.:@+=,-", not starting with "." or "-", at most 200 bytes: it also
	// names the task's log folder.
	ID string `json:"id"`
	// Kind selects the handler that turns the task into a command; empty
	// means "command".
	Kind string `json:"kind,omitempty"`
	// Dependencies are the ids of tasks that must end first: complete,
	// unless DependencyOn says otherwise.
	Dependencies []string `json:"dependencies,omitempty"`
	// DependencyOn gives, by dependency id, the condition of the
	// dependencies that are not AfterSuccess; a dependency it does not
	// name must complete. Each id it names must be among Dependencies.
	// Like Dependencies, it is not part of the definition (Fingerprint).
	DependencyOn map[string]Condition `json:"dependency_on,omitempty"`
	// Payload is the handler's input. For "command": the argv, a []string,
	// run without a shell.
	Payload any `json:"payload,omitempty"`
	// Priority orders ready tasks: higher starts first; ties go by
	// submission order.
	Priority int `json:"priority,omitempty"`
	// Resources is what the task needs to start (device, GPU memory budget).
	Resources ResourceRequest `json:"resources,omitzero"`
	// Executor is the executor that runs its attempts, by name; empty means
	// the scheduler's default, local. It is not part of the definition:
	// moving a task to another executor does not make it run again.
	Executor string `json:"executor,omitempty"`
	// Slurm is what the task asks of Slurm when the slurm executor runs
	// it (partition, account...); nil: nothing. Like Executor, it is not
	// part of the definition.
	Slurm *SlurmSettings `json:"slurm,omitempty"`
	// Timeout bounds each attempt; 0 means the queue default, NoTimeout none.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Retries is how many extra attempts a failing task gets; 0 means the
	// queue default, NoRetries none.
	Retries int `json:"retries,omitempty"`
	// RetryDelay is the wait before the first retry; each further retry
	// waits twice as long as the one before, up to the queue's maximum. 0
	// means the queue default, NoRetryDelay none.
	RetryDelay time.Duration `json:"retry_delay,omitempty"`
	// RetryOnExitCodes, when not empty, limits retries to attempts that
	// exited with one of these codes: any other failure (another code, a
	// signal, a failed artifact check) is final. A CUDA out-of-memory
	// failure is retried whatever its code, with a larger budget.
	RetryOnExitCodes []int `json:"retry_on_exit_codes,omitempty"`
	// RetryOnTimeout retries attempts stopped at their timeout. By default
	// they are not: a task that ran out of time usually runs out again, and
	// each try costs the whole timeout.
	RetryOnTimeout bool `json:"retry_on_timeout,omitempty"`
	// Env is added to the inherited environment of every attempt; with
	// CleanEnv it is the whole environment.
	Env map[string]string `json:"env,omitempty"`
	// Dir is the attempt's working directory; empty means the scheduler's.
	Dir string `json:"dir,omitempty"`
	// Artifacts are the files the task must produce, relative to Dir. An
	// attempt that exits 0 completes only if each exists (and the kind's
	// artifact check passes); a completed task whose artifacts went missing
	// or changed runs again when the run resumes.
	Artifacts []string `json:"artifacts,omitempty"`
	// HashArtifacts makes resume compare the artifacts' content (SHA-256),
	// not only their size and modification time.
	HashArtifacts bool `json:"hash_artifacts,omitempty"`
	// HashInputs makes resume compare the inputs' content (SHA-256) when
	// their size or modification time changed, so that a file touched but
	// not changed is still the same input.
	HashInputs bool `json:"hash_inputs,omitempty"`
	// Inputs are the files the task reads, relative to Dir: a path, a glob
	// (path.Match syntax) or a folder (every file under it). What they
	// were when an attempt started is recorded when the task completes; a
	// completed task whose inputs differ when the run resumes runs again.
	// The list itself is not part of the definition: the files it names
	// are compared, so a new pattern that names the same files changes
	// nothing.
	Inputs []string `json:"inputs,omitempty"`
	// OnComplete, for the command kind, is an argv run once the task has
	// completed (at least once: again after a crash until it exits 0), with
	// GPUSCHED_TASK_ID and GPUSCHED_EVENT_ID set.
	OnComplete []string `json:"on_complete,omitempty"`
	// OnFailure, for the command kind, is an argv run once the task has
	// failed for good, its retries spent (at least once, as OnComplete),
	// with GPUSCHED_TASK_ID, GPUSCHED_EVENT_ID, GPUSCHED_EXIT_CODE,
	// GPUSCHED_ATTEMPTS and GPUSCHED_ERROR set. A blocked or cancelled
	// task has not failed: it is not run for those. Not part of the
	// definition, as OnComplete is not.
	OnFailure []string `json:"on_failure,omitempty"`
	// CleanEnv makes Env the attempts' whole environment (besides the
	// variables gpusched sets): nothing is inherited from the scheduler's.
	// A daemon gives a task its submitter's environment so. It is part of
	// the definition.
	CleanEnv bool `json:"clean_env,omitempty"`
	// Owner is the Unix user the task belongs to, by decimal uid: its
	// attempts run as that user (a scheduler running as root switches to
	// it), and fair share counts its use against that user. Empty: the
	// scheduler's own user. It is part of the definition.
	Owner string `json:"owner,omitempty"`
}

// On returns the condition of dependency dep: AfterSuccess unless
// DependencyOn says otherwise.
func (s *Spec) On(dep string) Condition { return s.DependencyOn[dep] }

// ArtifactPath returns artifact a's path, resolved against the task's Dir.
func (s *Spec) ArtifactPath(a string) string {
	if filepath.IsAbs(a) || s.Dir == "" {
		return a
	}
	return filepath.Join(s.Dir, a)
}

// definition is what a task's outputs depend on: the fields whose change
// makes a completed task run again.
type definition struct {
	Kind          string            `json:"kind"`
	Payload       any               `json:"payload"`
	Env           map[string]string `json:"env"`
	Dir           string            `json:"dir"`
	Resources     ResourceRequest   `json:"resources"`
	Artifacts     []string          `json:"artifacts"`
	HashArtifacts bool              `json:"hash_artifacts"`
	CleanEnv      bool              `json:"clean_env"`
	Owner         string            `json:"owner,omitempty"`
}

func (s *Spec) definition() definition {
	return definition{s.Kind, s.Payload, s.Env, s.Dir, s.Resources.defined(), s.Artifacts, s.HashArtifacts, s.CleanEnv, s.Owner}
}

// Fingerprint is a digest of the task's definition: kind, payload, env,
// dir, resources (the device and GPU keys, an auto GPU budget as the word
// auto) and artifacts (not its id, dependencies and their conditions,
// priority, timeout, retries, executor, cores, host memory or custom
// resources, which do not change what it produces: a condition decides
// whether the task runs, and a dependency that runs again makes it run
// again anyway). It is written
// straight into the hash, field by field with lengths, so that a 100,000-task
// submit does not encode every definition once more.
func (s *Spec) Fingerprint() string {
	buf := make([]byte, 0, 256)
	num := func(v int64) { buf = binary.LittleEndian.AppendUint64(buf, uint64(v)) }
	str := func(v string) {
		num(int64(len(v)))
		buf = append(buf, v...)
	}
	str(s.Kind)
	switch p := s.Payload.(type) {
	case []string:
		num(int64(len(p)))
		for _, a := range p {
			str(a)
		}
	default: // other kinds' payloads: their JSON, map keys sorted
		b, _ := json.Marshal(p)
		num(-1)
		str(string(b))
	}
	var keys []string
	if len(s.Env) > 0 {
		keys = slices.Sorted(maps.Keys(s.Env))
	}
	num(int64(len(keys)))
	for _, k := range keys {
		str(k)
		str(s.Env[k])
	}
	str(s.Dir)
	str(string(s.Resources.Device))
	num(s.Resources.defined().MemoryMiB)
	num(boolInt(s.Resources.Exclusive))
	if s.Resources.GPUs > 1 {
		// Only when several, so that the fingerprints of every task
		// defined before the field existed stay as they were.
		str("gpus")
		num(int64(s.Resources.GPUs))
	}
	num(int64(len(s.Artifacts)))
	for _, a := range s.Artifacts {
		str(a)
	}
	num(boolInt(s.HashArtifacts))
	if s.CleanEnv {
		// Only when set, so that the fingerprints of every task defined
		// before the field existed stay as they were.
		str("clean_env")
	}
	if s.Owner != "" {
		str("owner")
		str(s.Owner)
	}
	if s.Resources.MemoryAuto {
		// The word, not the budget chosen: a new choice is no new
		// definition. Only when set, as clean_env.
		str("memory_mib")
		str("auto")
	}
	sum := sha256.Sum256(buf)
	return hex.EncodeToString(sum[:16])
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// Changed lists the fields of the definition that differ between old and
// s, by their workflow names ("args" for the command kind's payload).
func (s *Spec) Changed(old *Spec) []string {
	a, b := s.definition(), old.definition()
	var out []string
	field := func(name string, x, y any) {
		jx, _ := json.Marshal(x)
		jy, _ := json.Marshal(y)
		if !bytes.Equal(jx, jy) {
			out = append(out, name)
		}
	}
	payload := "payload"
	if s.Kind == DefaultKind {
		payload = "args"
	}
	field("kind", a.Kind, b.Kind)
	field(payload, a.Payload, b.Payload)
	field("env", a.Env, b.Env)
	field("dir", a.Dir, b.Dir)
	field("resources", a.Resources, b.Resources)
	field("artifacts", a.Artifacts, b.Artifacts)
	field("hash_artifacts", a.HashArtifacts, b.HashArtifacts)
	field("clean_env", a.CleanEnv, b.CleanEnv)
	field("owner", a.Owner, b.Owner)
	return out
}

// MaxExecutorLen is the longest executor name accepted, in bytes.
const MaxExecutorLen = 32

// ValidExecutorName reports whether name may name an executor, and if not,
// why: a lowercase identifier, a letter then letters, digits, "_" and "-",
// at most MaxExecutorLen bytes. Whether such an executor exists is for the
// scheduler, which knows its executors, to say.
func ValidExecutorName(name string) (string, bool) {
	switch {
	case name == "":
		return "must not be empty", false
	case len(name) > MaxExecutorLen:
		return fmt.Sprintf("%s is %d bytes long; the limit is %d", elide.Quote(name), len(name), MaxExecutorLen), false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		lower := c >= 'a' && c <= 'z'
		if !lower && (i == 0 || !(c >= '0' && c <= '9' || c == '_' || c == '-')) {
			return fmt.Sprintf("%s is not an executor name: use a lowercase letter, then lowercase letters, digits, _ and -", elide.Quote(name)), false
		}
	}
	return "", true
}

// MaxIDLen is the longest task id accepted, in bytes.
const MaxIDLen = 200

// ValidID reports whether id may name a task, and if not, why. A character
// it refuses is named as a character (not as its first byte) with its
// position, counting characters from 1.
func ValidID(id string) (string, bool) {
	switch {
	case id == "":
		return "must not be empty", false
	case len(id) > MaxIDLen:
		return fmt.Sprintf("is %d bytes long; the limit is %d", len(id), MaxIDLen), false
	case id[0] == '.' || id[0] == '-':
		return "must not start with '.' or '-'", false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !idByte(c) {
			return badIDChar(id, i), false
		}
	}
	return "", true
}

// ValidQualifiedID reports whether id may name a task of a scheduler that
// groups tasks into runs, and if not, why: either a valid id (ValidID) or
// two joined by exactly one "/" (RUN/TASK), at most MaxIDLen bytes in all.
func ValidQualifiedID(id string) (string, bool) {
	run, inner, ok := strings.Cut(id, "/")
	if !ok {
		return ValidID(id)
	}
	if len(id) > MaxIDLen {
		return fmt.Sprintf("is %d bytes long; the limit is %d", len(id), MaxIDLen), false
	}
	if why, ok := ValidID(run); !ok {
		return "run part " + strconv.Quote(run) + " " + why, false
	}
	if strings.IndexByte(inner, '/') >= 0 {
		return "has more than one '/'; a qualified id is RUN/TASK", false
	}
	if why, ok := ValidID(inner); !ok {
		return "task part " + strconv.Quote(inner) + " " + why, false
	}
	return "", true
}

// idByte reports whether c may appear in a task id.
func idByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("_.:@+=,-", c) >= 0
}

// badIDChar says what is wrong with the character of id that starts at
// byte i.
func badIDChar(id string, i int) string {
	const allowed = "use ASCII letters, digits and _.:@+=,-"
	pos := utf8.RuneCountInString(id[:i]) + 1
	r, n := utf8.DecodeRuneInString(id[i:])
	if r == utf8.RuneError && n == 1 {
		return fmt.Sprintf("has the byte %s at character %d, which is not UTF-8; %s", elide.Quote(id[i:i+1]), pos, allowed)
	}
	return fmt.Sprintf("has %s at character %d; %s", strconv.QuoteRune(r), pos, allowed)
}

// Normalize fills the spec's defaults in place (Kind, Resources.Device),
// and writes a CUDA task's Resources.GPUs of 1 as 0 (one card either way).
func (s *Spec) Normalize() {
	if s.Kind == "" {
		s.Kind = DefaultKind
	}
	if s.Resources.Device == "" {
		s.Resources.Device = CPU
	}
	if s.Resources.GPU() && s.Resources.GPUs == 1 {
		s.Resources.GPUs = 0
	}
}

// Validate checks the fields that need nothing but this spec, and returns
// the first problem it finds. It does not look at other tasks (see package
// dag) or at the kind's payload (the kind's handler does). The spec should
// be normalized first.
func (s *Spec) Validate() error {
	return s.validate(ValidID)
}

// ValidateQualified is Validate for a scheduler that groups tasks into
// runs: the id may also be RUN/TASK (ValidQualifiedID).
func (s *Spec) ValidateQualified() error {
	return s.validate(ValidQualifiedID)
}

func (s *Spec) validate(validID func(string) (string, bool)) error {
	var first error
	s.check(validID, func(err error) bool {
		first = err
		return false
	})
	return first
}

// Problems is Validate, but returns every problem it finds, in the order of
// the spec's fields (an env's variables by name); nil if there is none.
func (s *Spec) Problems() []error {
	var errs []error
	s.check(ValidID, func(err error) bool {
		errs = append(errs, err)
		return true
	})
	return errs
}

// check reports each problem of the spec to report, and stops when report
// returns false.
func (s *Spec) check(validID func(string) (string, bool), report func(error) bool) {
	if why, ok := validID(s.ID); !ok {
		if !report(&Error{TaskID: s.ID, Field: "id", Reason: why, Kind: ErrInvalidTask}) {
			return
		}
	}
	var seen map[string]int // for long lists; short ones are searched
	if len(s.Dependencies) > 8 {
		seen = make(map[string]int, len(s.Dependencies))
	}
	for i, d := range s.Dependencies {
		var before int // how many times d was listed before
		if seen != nil {
			before = seen[d]
			seen[d]++
		} else {
			for _, e := range s.Dependencies[:i] {
				if e == d {
					before++
				}
			}
		}
		var err error
		switch {
		case before > 0 && (before > 1 || d == "" || d == s.ID):
			// Already reported.
		case d == "":
			err = Invalid(s.ID, "dependencies", "empty dependency id")
		case d == s.ID:
			err = &CycleError{Path: []string{s.ID, s.ID}}
		case before == 1:
			err = Invalid(s.ID, "dependencies", "%s is listed twice", elide.Quote(d))
		}
		if err != nil && !report(err) {
			return
		}
	}
	if !s.checkConditions(report) {
		return
	}
	if !s.Resources.check(s.ID, report) {
		return
	}
	if s.Executor != "" {
		if why, ok := ValidExecutorName(s.Executor); !ok {
			if !report(Invalid(s.ID, "executor", "%s", why)) {
				return
			}
		}
	}
	if field, why := s.Slurm.Validate(); field != "" {
		if !report(Invalid(s.ID, "slurm."+field, "%s", why)) {
			return
		}
	} else if err := s.checkGPUType(); err != nil && !report(err) {
		return
	}
	if s.Timeout < 0 && s.Timeout != NoTimeout {
		if !report(Invalid(s.ID, "timeout", "must not be negative (got %s)", s.Timeout)) {
			return
		}
	}
	if s.Retries < 0 && s.Retries != NoRetries {
		if !report(Invalid(s.ID, "retries", "must not be negative (got %d)", s.Retries)) {
			return
		}
	}
	if s.RetryDelay < 0 && s.RetryDelay != NoRetryDelay {
		if !report(Invalid(s.ID, "retry_delay", "must not be negative (got %s)", s.RetryDelay)) {
			return
		}
	}
	for _, c := range s.RetryOnExitCodes {
		if c < 1 || c > 255 {
			if !report(Invalid(s.ID, "retry_on_exit_codes", "%d is not a failing exit code (1 to 255)", c)) {
				return
			}
		}
	}
	if !s.checkEnv(report) {
		return
	}
	if strings.IndexByte(s.Dir, 0) >= 0 {
		if !report(Invalid(s.ID, "dir", "%s has a NUL byte, which a path cannot hold", elide.Quote(s.Dir))) {
			return
		}
	}
	for i, a := range s.Artifacts {
		field := "artifacts[" + strconv.Itoa(i) + "]"
		var err error
		switch {
		case strings.TrimSpace(a) == "":
			err = Invalid(s.ID, field, "empty path")
		case strings.IndexByte(a, 0) >= 0:
			err = Invalid(s.ID, field, "%s has a NUL byte, which a path cannot hold", elide.Quote(a))
		}
		if err != nil && !report(err) {
			return
		}
	}
	if !s.checkInputs(report) {
		return
	}
	if len(s.OnComplete) > 0 && strings.TrimSpace(s.OnComplete[0]) == "" {
		if !report(Invalid(s.ID, "on_complete", "empty command")) {
			return
		}
	}
	for i, a := range s.OnComplete {
		if err := CheckArg(s.ID, "on_complete", i, a); err != nil && !report(err) {
			return
		}
	}
	if len(s.OnFailure) > 0 && strings.TrimSpace(s.OnFailure[0]) == "" {
		if !report(Invalid(s.ID, "on_failure", "empty command")) {
			return
		}
	}
	for i, a := range s.OnFailure {
		if err := CheckArg(s.ID, "on_failure", i, a); err != nil && !report(err) {
			return
		}
	}
}

// checkInputs reports the inputs that cannot name files: empty, holding
// a NUL byte, or a glob that does not parse.
func (s *Spec) checkInputs(report func(error) bool) bool {
	for i, in := range s.Inputs {
		field := "inputs[" + strconv.Itoa(i) + "]"
		var err error
		switch {
		case strings.TrimSpace(in) == "":
			err = Invalid(s.ID, field, "empty path")
		case strings.IndexByte(in, 0) >= 0:
			err = Invalid(s.ID, field, "%s has a NUL byte, which a path cannot hold", elide.Quote(in))
		default:
			if _, merr := filepath.Match(in, ""); merr != nil {
				err = Invalid(s.ID, field, "%s is not a valid glob (%v): use *, ? and [...], and \\ before a character meant as itself", elide.Quote(in), merr)
			}
		}
		if err != nil && !report(err) {
			return false
		}
	}
	return true
}

// checkConditions reports the entries of DependencyOn that name no
// dependency, or give an unknown condition, in the order of their ids.
func (s *Spec) checkConditions(report func(error) bool) bool {
	if len(s.DependencyOn) == 0 {
		return true
	}
	for _, id := range slices.Sorted(maps.Keys(s.DependencyOn)) {
		c := s.DependencyOn[id]
		var err error
		switch {
		case int(c) >= len(conditionNames):
			err = Invalid(s.ID, "dependencies", "%s: %s is not a condition: use success, failure or any", elide.Quote(id), c)
		case !slices.Contains(s.Dependencies, id):
			err = Invalid(s.ID, "dependencies", "a condition is given for %s, which is not one of its dependencies", elide.Quote(id))
		}
		if err != nil && !report(err) {
			return false
		}
	}
	return true
}

// checkGPUType refuses a GPU task run by the slurm executor whose GPU
// memory budget is larger than every type its slurm.gpu_types lists: no
// GPU Slurm could give it would hold it.
func (s *Spec) checkGPUType() error {
	if s.Executor != SlurmExecutor || !s.Resources.GPU() {
		return nil
	}
	name, mib := s.Slurm.LargestGPUType()
	if name == "" || s.Resources.MemoryMiB <= mib {
		return nil
	}
	return Invalid(s.ID, "resources.memory_mib", "needs %d MiB, more than any GPU type in slurm.gpu_types has: the largest, %s, has %d MiB",
		s.Resources.MemoryMiB, name, mib)
}

// checkEnv reports the env's invalid names and values, by name.
func (s *Spec) checkEnv(report func(error) bool) bool {
	var bad []string
	for k, v := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			bad = append(bad, k)
		}
	}
	slices.Sort(bad)
	for _, k := range bad {
		var err error
		if k == "" || strings.ContainsAny(k, "=\x00") {
			err = Invalid(s.ID, "env", "invalid variable name %s", elide.Quote(k))
		} else {
			err = Invalid(s.ID, "env", "the value of %s has a NUL byte, which an environment cannot hold", elide.Quote(k))
		}
		if !report(err) {
			return false
		}
	}
	return true
}

// CheckArgv returns an ErrInvalidTask error about the first item of argv
// that a command line cannot carry, one that holds a NUL byte, naming it
// as field[i] (for example "args[2]"); nil if every item can be passed.
// The command kind checks its payload with it, and Validate a task's
// on_complete and on_failure.
func CheckArgv(id, field string, argv []string) error {
	for i, a := range argv {
		if err := CheckArg(id, field, i, a); err != nil {
			return err
		}
	}
	return nil
}

// CheckArg is CheckArgv for item i of an argv alone.
func CheckArg(id, field string, i int, arg string) error {
	if strings.IndexByte(arg, 0) < 0 {
		return nil
	}
	return Invalid(id, field+"["+strconv.Itoa(i)+"]", "%s has a NUL byte, which a command line cannot hold", elide.Quote(arg))
}

// check reports the request's problem, if any, and returns report's
// answer (true when there was none).
func (r ResourceRequest) check(id string, report func(error) bool) bool {
	if err := r.validate(id); err != nil {
		return report(err)
	}
	return true
}

func (r ResourceRequest) validate(id string) error {
	switch r.Device {
	case CPU:
		if r.MemoryMiB != 0 || r.MemoryAuto {
			return Invalid(id, "resources.memory_mib", "is a GPU memory budget; set resources.device to %q to use it", CUDA)
		}
		if r.MemoryMaxMiB != 0 {
			return Invalid(id, "resources.memory_mib_max", "caps a GPU memory budget learned from history; set resources.device to %q and memory_mib to auto", CUDA)
		}
		if r.Exclusive {
			return Invalid(id, "resources.exclusive", "is for GPU tasks; set resources.device to %q", CUDA)
		}
		if r.GPUs != 0 {
			return Invalid(id, "resources.gpus", "is for GPU tasks; set resources.device to %q to use it", CUDA)
		}
	case CUDA:
		if r.GPUs < 0 || r.GPUs > MaxGPUs {
			return Invalid(id, "resources.gpus", "must be from 1 to %d cards (got %d)", MaxGPUs, r.GPUs)
		}
		if r.MemoryMiB < 0 {
			return Invalid(id, "resources.memory_mib", "must not be negative (got %d)", r.MemoryMiB)
		}
		if r.MemoryMaxMiB < 0 {
			return Invalid(id, "resources.memory_mib_max", "must not be negative (got %d)", r.MemoryMaxMiB)
		}
		if r.MemoryMaxMiB > 0 && !r.MemoryAuto {
			return Invalid(id, "resources.memory_mib_max", "caps a budget learned from history: set memory_mib to auto, or drop memory_mib_max")
		}
		if r.MemoryMiB == 0 && !r.Exclusive && !r.MemoryAuto {
			return Invalid(id, "resources.memory_mib", "a cuda task needs a memory budget in MiB, or auto (or exclusive: true)")
		}
	default:
		return Invalid(id, "resources.device", "must be %q or %q, not %s", CPU, CUDA, elide.Quote(string(r.Device)))
	}
	if r.CPUs < 0 {
		return Invalid(id, "resources.cpus", "must not be negative (got %d)", r.CPUs)
	}
	if r.MemoryMiBHost < 0 {
		return Invalid(id, "resources.memory_mib_host", "must not be negative (got %d)", r.MemoryMiBHost)
	}
	if r.MemoryHostMaxMiB < 0 {
		return Invalid(id, "resources.memory_mib_host_max", "must not be negative (got %d)", r.MemoryHostMaxMiB)
	}
	if r.MemoryHostMaxMiB > 0 && !r.MemoryHostAuto {
		return Invalid(id, "resources.memory_mib_host_max", "caps a host memory budget learned from history: set memory_mib_host to auto, or drop memory_mib_host_max")
	}
	if len(r.Counters) == 0 {
		return nil // the common case: no sorting of no names
	}
	for _, name := range slices.Sorted(maps.Keys(r.Counters)) {
		if why, ok := ValidResourceName(name); !ok {
			return Invalid(id, "resources."+name, "%s", why)
		}
		if n := r.Counters[name]; n < 1 {
			return Invalid(id, "resources."+name, "must be at least 1 (got %d)", n)
		}
	}
	return nil
}

// ResourceKeys are the keys of a task's resources that are not custom
// resources; no custom resource may take one of these names.
var ResourceKeys = []string{"device", "memory_mib", "memory_mib_max", "exclusive", "cpus", "memory_mib_host", "memory_mib_host_max", "gpus"}

// MaxResourceNameLen is the longest name of a custom resource, in bytes.
const MaxResourceNameLen = 32

// ValidResourceName reports whether name may name a custom resource
// (scheduling.resources), and if not, why: a lowercase letter, then
// lowercase letters, digits, "_" and "-", at most MaxResourceNameLen
// bytes, and none of ResourceKeys.
func ValidResourceName(name string) (string, bool) {
	switch {
	case name == "":
		return "a custom resource needs a name", false
	case len(name) > MaxResourceNameLen:
		return fmt.Sprintf("%s is %d bytes long; the limit for a custom resource's name is %d", elide.Quote(name), len(name), MaxResourceNameLen), false
	case slices.Contains(ResourceKeys, name):
		return fmt.Sprintf("%q is a key of resources, not a custom resource", name), false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		lower := c >= 'a' && c <= 'z'
		if !lower && (i == 0 || !(c >= '0' && c <= '9' || c == '_' || c == '-')) {
			return fmt.Sprintf("%s is not a resource name: use a lowercase letter, then lowercase letters, digits, _ and -", elide.Quote(name)), false
		}
	}
	return "", true
}
