package workflow

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/dag"
	"github.com/gpusched/gpusched/internal/elide"
	"github.com/gpusched/gpusched/internal/suggest"
	"github.com/gpusched/gpusched/internal/task"
)

// Workflow is a loaded workflow file.
type Workflow struct {
	// Path is the file it was read from.
	Path string
	// Scheduling holds the file's scheduling settings.
	Scheduling gpusched.Scheduling
	// Executor is the executor of the tasks that name none, as applied to
	// Tasks: Options.Executor, else the file's scheduling.executor; empty
	// when neither sets one (the scheduler's default, local).
	Executor string
	// Tasks are the file's tasks in file order, as the scheduler takes
	// them: the defaults: applied, each task with a matrix replaced by the
	// tasks it expands to (in matrix order), globs among the dependencies
	// replaced by the ids they match, Dir made absolute (relative to the
	// file's folder, which is also the default), and Executor set to the
	// workflow's for those that name none. No two share a slice or map.
	Tasks []gpusched.TaskSpec
	// Slurm is the file's top-level slurm: settings, the defaults of every
	// task's own (applied to Tasks: a task's keys win); nil when none.
	Slurm *gpusched.SlurmSettings

	locs        []taskLoc              // where each of Tasks is in the file
	schedLines  map[string]int         // scheduling key -> line ("executor": defaults.executor's when it gives it)
	executorKey string                 // the key that gave Executor in the file, when not scheduling.executor
	checked     *gpusched.CheckedTasks // with Options.KeepChecked: Tasks as checked
}

// Checked returns the tasks as ParseWith checked them, with
// Options.KeepChecked (nil without): for gpusched.Planner.PlanChecked or
// gpusched.Scheduler.SubmitChecked, while Tasks is as ParseWith left it.
func (w *Workflow) Checked() *gpusched.CheckedTasks { return w.checked }

// Options changes how Parse and Load read a workflow.
type Options struct {
	// Executor, when not empty, is the executor of the tasks that name
	// none, in place of the file's scheduling.executor: a task's own
	// executor key still wins. It is what a command line's --executor
	// gives. It must name an executor a scheduler has (local), whether or
	// not a task takes it.
	Executor string
	// ExecutorFrom names where Executor came from in messages, e.g.
	// "--executor"; empty means "the default executor".
	ExecutorFrom string
	// DeclaredElsewhere: the custom resources the tasks take are declared
	// by what runs them (a daemon's gpusched daemon --resource), which
	// checks them, not by the file's scheduling.resources: a key of a
	// task's resources that is not a built-in one is taken as a custom
	// resource, declared or not.
	DeclaredElsewhere bool
	// KeepChecked keeps the tasks as the checks of SubmitMany read them
	// (Workflow.Checked), for a plan of them or their submission
	// (Scheduler.SubmitChecked): they are not checked again.
	// A command that submits the tasks does not need them.
	KeepChecked bool
}

// taskLoc is where a task and its fields are in the file.
type taskLoc struct {
	line     int         // the task's list item
	fields   []fieldLine // its keys, and its resources' as "resources.device"
	executor source      // where its executor came from
	vars     string      // a matrix task's values: "lr=1e-3, seed=1"
}

// source says where a task's executor came from.
type source uint8

const (
	ownExecutor     source = iota // its own executor key, or none at all
	fileExecutor                  // the file's scheduling.executor
	optionsExecutor               // Options.Executor
)

type fieldLine struct {
	key  string
	line int
}

// lineOf returns the line of field ("resources.memory_mib", "args[2]"),
// else of the key it belongs to ("resources", "args"), else the task's.
func (l *taskLoc) lineOf(field string) int {
	for _, f := range l.fields {
		if f.key == field {
			return f.line
		}
	}
	if i := strings.IndexAny(field, ".["); i > 0 {
		return l.lineOf(field[:i])
	}
	return l.line
}

// Error is one problem in a workflow file, located by line (0 if unknown).
type Error struct {
	Path string
	Line int
	Msg  string
	Err  error // the underlying validation error, if any
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

// Unwrap returns the validation error, so errors.Is(err, gpusched.ErrCycle)
// works on a located error too.
func (e *Error) Unwrap() error { return e.Err }

// MaxErrors is how many problems Parse lists; it counts the others.
const MaxErrors = 20

// ErrorList is what Parse and Load return when the file is invalid: every
// problem found, one *Error each, in file order (by line). Only the first
// MaxErrors are kept; More counts the others. errors.Is and errors.As see
// each of them, so errors.Is(err, gpusched.ErrCycle) holds when any
// problem is a cycle, and errors.As(err, &e) with e a *Error gives the
// first.
type ErrorList struct {
	Path string   // the workflow file
	Errs []*Error // at least one
	More int      // problems found beyond Errs
}

// Error returns one line per problem, joined by "\n", and a last line
// saying how many more there are, if any.
func (l *ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l.Errs {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	if l.More > 0 {
		fmt.Fprintf(&b, "\n%s: ... and %d more %s", l.Path, l.More, plural(l.More, "problem", "problems"))
	}
	return b.String()
}

// Unwrap returns the problems, for errors.Is and errors.As.
func (l *ErrorList) Unwrap() []error {
	out := make([]error, len(l.Errs))
	for i, e := range l.Errs {
		out[i] = e
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Load reads, parses and validates the workflow at path: every check that
// submitting its tasks would make runs here, so a workflow that loads can be
// run. When the file is invalid the error is an *ErrorList of every problem
// found, each naming the file and line.
func Load(path string) (*Workflow, error) { return LoadWith(path, Options{}) }

// LoadWith is Load with options.
func LoadWith(path string, opts Options) (*Workflow, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read workflow: %w", err)
	}
	return ParseWith(path, data, opts)
}

// Parse is Load on data already read from path.
//
// Parsing goes on after a problem, so that one run reports them all: a key
// it does not know, a value it cannot read or a field that validation
// refuses is reported and the rest of the file is still checked. A task
// with such a problem stays in the dependency graph, so that depending on
// it is not reported as well, but its own fields are not validated
// further. Invalid YAML stops everything at the first syntax error.
func Parse(path string, data []byte) (*Workflow, error) { return ParseWith(path, data, Options{}) }

// ParseWith is Parse with options. An Options.Executor that is not a
// valid name, or that no scheduler has, is the only problem it reports,
// without a line.
func ParseWith(path string, data []byte, opts Options) (*Workflow, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	w := &Workflow{Path: path, schedLines: map[string]int{}}
	p := &parser{path: path, data: data, base: filepath.Dir(abs), w: w, opts: opts}
	if opts.Executor != "" {
		if why := ExecutorProblem(opts.Executor); why != "" {
			return nil, p.fail(&Error{Path: path, Msg: cmp.Or(opts.ExecutorFrom, "the default executor") + ": " + why})
		}
	}
	if parsed != nil {
		parsed(data)
	}
	var top *yaml.Node
	f := newFastYAML(data)
	if n, ok := f.parse(true); ok {
		top, p.fast = n, f
	}
	if top == nil {
		var err *ErrorList
		if top, err = p.decode(data); err != nil {
			return nil, err
		}
	}
	p.top(top)
	p.applyExecutor()
	p.checkResources()
	for i := range w.Tasks {
		w.Tasks[i].Slurm = w.Tasks[i].Slurm.Over(w.Slurm)
	}
	if !p.schedBad {
		if err := w.Scheduling.Validate(); err != nil {
			p.add(w.locate(err))
		}
	}
	if len(p.errs) == 0 {
		// The common case, and the one that must be fast: the checks of
		// SubmitMany, which stop at the first problem. Only when there is
		// one does the slower search for all of them run.
		checked, err := gpusched.CheckTasks(w.Tasks)
		if err == nil {
			if opts.KeepChecked {
				w.checked = checked
			}
			return w, nil
		}
		p.checkTasks()
		if len(p.errs) == 0 { // a check that checkTasks does not make
			p.add(w.locate(err))
		}
	} else {
		p.checkTasks()
	}
	return nil, p.list()
}

// decode reads data with the YAML library, into the node under its one
// document.
func (p *parser) decode(data []byte) (*yaml.Node, *ErrorList) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, p.fail(&Error{Path: p.path, Msg: emptyWorkflow})
		}
		return nil, p.fail(p.yamlError(err))
	}
	var second yaml.Node
	if err := dec.Decode(&second); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, p.fail(p.yamlError(err))
		}
		return nil, p.fail(p.errorf(&second, "a second YAML document (after ---): a workflow file holds one"))
	}
	if len(doc.Content) == 0 {
		return nil, p.fail(&Error{Path: p.path, Msg: emptyWorkflow})
	}
	return doc.Content[0], nil
}

// parsed, when not nil, is called with every file ParseWith reads: the
// package's tests check there that the fast path reads each as the YAML
// library does.
var parsed func(data []byte)

const emptyWorkflow = "empty workflow: it needs a list of tasks under \"tasks:\""

// checkTasks runs, on every task, the checks SubmitMany makes, and keeps
// every problem they find. A field that had a problem while it was parsed
// holds what could be read of it, or nothing, so it is not checked again:
// one mistake, one message.
func (p *parser) checkTasks() {
	w := p.w
	told := map[Error]bool{} // a mistake in a matrix task or the defaults, told once
	add := func(i int, err error) {
		e := w.locateAt(i, err)
		var te *gpusched.TaskError
		if errors.As(err, &te) && (w.locs[i].vars != "" || p.defs != nil) {
			// The same line and message but for the task's id: the same
			// value, read once, that every task made from it takes.
			said := Error{Line: e.Line, Msg: strings.TrimPrefix(e.Msg, "task "+q(te.TaskID))}
			if told[said] {
				return
			}
			told[said] = true
		}
		p.add(e)
	}
	specs := make([]*task.Spec, len(w.Tasks))
	for i := range w.Tasks {
		sp := internalSpec(&w.Tasks[i])
		sp.Normalize()
		bad := p.badKeys[i]
		for _, err := range sp.Problems() {
			if err = public(err); !has(bad, taskKeys, fieldKey(err)) {
				add(i, err)
			}
		}
		if !has(bad, taskKeys, "args") {
			if err := (gpusched.CommandHandler{}).ValidatePayload(&w.Tasks[i]); err != nil {
				add(i, err)
			}
		}
		sp.Dependencies = graphDeps(&sp)
		specs[i] = &sp
	}
	for _, pr := range dag.Check(specs, map[string]struct{}{}, MaxErrors) {
		add(pr.Index, public(pr.Err))
	}
	p.checkExecutors()
}

// applyExecutor gives the tasks that name no executor the workflow's:
// Options.Executor, else the file's scheduling.executor.
func (p *parser) applyExecutor() {
	w := p.w
	from := fileExecutor
	if p.opts.Executor != "" {
		w.Executor, from = p.opts.Executor, optionsExecutor
	}
	if w.Executor == "" {
		return
	}
	for i := range w.Tasks {
		if w.Tasks[i].Executor == "" {
			w.Tasks[i].Executor = w.Executor
			w.locs[i].executor = from
		}
	}
}

// checkExecutors reports the executors that a fresh scheduler does not
// have (ValidateTasks knows which exist): at each task that names one
// itself, once for the file's scheduling.executor. Options.Executor was
// checked before the file was read.
func (p *parser) checkExecutors() {
	w := p.w
	refused := map[string]string{} // name -> why a scheduler refuses it ("" if it does not)
	workflowsSaid := false
	for i := range w.Tasks {
		t := &w.Tasks[i]
		if t.Executor == "" || has(p.badKeys[i], taskKeys, "executor") || w.locs[i].executor == optionsExecutor {
			continue
		}
		if _, ok := task.ValidExecutorName(t.Executor); !ok {
			continue // Problems said it
		}
		why, seen := refused[t.Executor]
		if !seen {
			why = executorRefused(t.Executor)
			refused[t.Executor] = why
		}
		if why == "" || (w.locs[i].executor == fileExecutor && workflowsSaid) {
			continue
		}
		if w.locs[i].executor == fileExecutor {
			workflowsSaid = true
		}
		err := &gpusched.TaskError{TaskID: t.ID, Field: "executor", Reason: why, Kind: gpusched.ErrInvalidTask}
		p.add(w.locateAt(i, err))
	}
}

// ExecutorProblem says why name cannot be given as Options.Executor: it is
// not a valid name, or a scheduler with the built-in executors does not
// have it (gpusched.ValidateTasks refuses it); "" when it can.
func ExecutorProblem(name string) string {
	if why, ok := task.ValidExecutorName(name); !ok {
		return why
	}
	return executorRefused(name)
}

// executorRefused says why ValidateTasks refuses the executor name, or ""
// when it does not. It asks about a task of its own, which has nothing
// else to refuse.
func executorRefused(name string) string {
	probe := gpusched.TaskSpec{ID: "executor-check", Payload: []string{"true"}, Executor: name}
	var te *gpusched.TaskError
	if err := gpusched.ValidateTasks([]gpusched.TaskSpec{probe}); errors.As(err, &te) && te.Field == "executor" {
		return te.Reason
	}
	return ""
}

// fieldKey returns the task key a validation error is about: "resources"
// for "resources.device", "args" for "payload[2]".
func fieldKey(err error) string {
	var te *gpusched.TaskError
	if !errors.As(err, &te) {
		return "dependencies" // a cycle
	}
	key := te.Field
	if i := strings.IndexAny(key, ".["); i > 0 {
		key = key[:i]
	}
	if key == "payload" {
		return "args"
	}
	return key
}

// internalSpec is t as the internal checks (task.Spec.Problems, dag.Check)
// take it: the same fields, the slices shared.
func internalSpec(t *gpusched.TaskSpec) task.Spec {
	return task.Spec{
		ID: t.ID, Kind: t.Kind, Dependencies: t.Dependencies, Payload: t.Payload, Priority: t.Priority,
		Resources: task.ResourceRequest{Device: task.Device(t.Resources.Device), MemoryMiB: t.Resources.MemoryMiB, Exclusive: t.Resources.Exclusive,
			GPUs: t.Resources.GPUs, MemoryAuto: t.Resources.MemoryAuto, MemoryMaxMiB: t.Resources.MemoryMaxMiB, Budget: t.Resources.Budget,
			CPUs: t.Resources.CPUs, MemoryMiBHost: t.Resources.MemoryMiBHost, Counters: t.Resources.Counters,
			MemoryHostAuto: t.Resources.MemoryHostAuto, MemoryHostMaxMiB: t.Resources.MemoryHostMaxMiB, HostBudget: t.Resources.HostBudget},
		Executor: t.Executor, Slurm: t.Slurm, Timeout: t.Timeout, Retries: t.Retries, RetryDelay: t.RetryDelay, RetryOnExitCodes: t.RetryOnExitCodes,
		RetryOnTimeout: t.RetryOnTimeout, Env: t.Env, Dir: t.Dir, Artifacts: t.Artifacts,
		HashArtifacts: t.HashArtifacts, Inputs: t.Inputs, HashInputs: t.HashInputs, OnComplete: t.OnComplete, OnFailure: t.OnFailure, CleanEnv: t.CleanEnv, Owner: t.Owner,
		DependencyOn: internalConditions(t.DependencyOn),
	}
}

// public gives a validation error of the internal checks (which report
// every problem) the type the gpusched package gives it, so that callers
// find a *gpusched.TaskError or *gpusched.CycleError whichever check
// reported it.
func public(err error) error {
	switch e := err.(type) {
	case *task.Error:
		return (*gpusched.TaskError)(e)
	case *task.CycleError:
		return (*gpusched.CycleError)(e)
	}
	return err
}

// graphDeps returns s's dependencies without those Validate already
// refuses (empty ids, the task itself, repeats), so that the graph check
// does not report them a second time.
func graphDeps(s *task.Spec) []string {
	out := make([]string, 0, len(s.Dependencies))
	var seen map[string]bool // for long lists (a task that gathers thousands)
	if len(s.Dependencies) > 8 {
		seen = make(map[string]bool, len(s.Dependencies))
	}
	for _, d := range s.Dependencies {
		switch {
		case d == "" || d == s.ID:
		case seen != nil:
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		case !slices.Contains(out, d):
			out = append(out, d)
		}
	}
	return out
}

// Locate turns a validation error about the workflow's tasks or
// scheduling settings (from gpusched.CheckGPUs, for example) into an *Error
// with the line of the task or field at fault.
func (w *Workflow) Locate(err error) error { return w.locate(err) }

func (w *Workflow) locate(err error) *Error {
	var te *gpusched.TaskError
	var ce *gpusched.CycleError
	var se *gpusched.SchedulingError
	id := ""
	switch {
	case errors.As(err, &te):
		id = te.TaskID
	case errors.As(err, &ce) && len(ce.Path) > 0:
		id = ce.Path[0]
	case errors.As(err, &se):
		return &Error{Path: w.Path, Line: w.schedLines[se.Field], Msg: err.Error(), Err: err}
	default:
		return &Error{Path: w.Path, Msg: err.Error(), Err: err}
	}
	if i := slices.IndexFunc(w.Tasks, func(t gpusched.TaskSpec) bool { return t.ID == id }); i >= 0 {
		return w.locateAt(i, err)
	}
	return &Error{Path: w.Path, Msg: err.Error(), Err: err}
}

// locateAt locates err, an error about Tasks[i].
func (w *Workflow) locateAt(i int, err error) *Error {
	loc := &w.locs[i]
	var te *gpusched.TaskError
	var ce *gpusched.CycleError
	switch {
	case errors.As(err, &te) && errors.Is(err, gpusched.ErrDuplicateTask):
		// Name the line of the first definition, not its place in a batch.
		first := slices.IndexFunc(w.Tasks[:i], func(t gpusched.TaskSpec) bool { return t.ID == te.TaskID })
		if first >= 0 {
			located := *te
			here := ""
			if loc.vars != "" {
				here = ", here" + as(loc.vars)
			}
			located.Reason = fmt.Sprintf("defined twice (first on line %d%s%s)", w.locs[first].line, as(w.locs[first].vars), here)
			err = &located
		}
		return &Error{Path: w.Path, Line: loc.lineOf("id"), Msg: err.Error(), Err: err}
	case errors.As(err, &te) && te.Field == "executor" && loc.executor == fileExecutor:
		// The file's default: said where it is set.
		return &Error{Path: w.Path, Line: w.schedLines["executor"], Msg: cmp.Or(w.executorKey, "scheduling.executor") + ": " + te.Reason, Err: err}
	case errors.As(err, &te):
		msg := err.Error()
		field := te.Field
		if rest, ok := strings.CutPrefix(field, "payload"); ok {
			// The command kind's payload is what the file calls args.
			field = "args" + rest
			named := *te
			named.Field = field
			msg = named.Error()
		}
		return &Error{Path: w.Path, Line: loc.lineOf(field), Msg: msg, Err: err}
	case errors.As(err, &ce):
		return &Error{Path: w.Path, Line: loc.lineOf("dependencies"), Msg: err.Error(), Err: err}
	}
	return &Error{Path: w.Path, Line: loc.line, Msg: err.Error(), Err: err}
}

// as tells which variant of a matrix task a message is about.
func as(vars string) string {
	if vars == "" {
		return ""
	}
	return " with " + vars
}

type parser struct {
	path string
	data []byte // the file, for hints about YAML errors
	base string // the workflow file's folder, absolute
	w    *Workflow
	opts Options

	errs     []*Error // every problem found, in the order found
	badKeys  []uint64 // per task of w.Tasks: its keys (by taskKeys position) that had a problem
	schedBad bool     // a problem was found parsing scheduling

	defs                *defaults // the file's defaults: section; nil when none
	defaultExecutor     string    // defaults.executor, once read
	defaultExecutorLine int
	defaultSlurm        *gpusched.SlurmSettings // defaults.slurm, once read (nil when invalid)
	defaultSlurmLine    int                     // 0: none
	slurmLine           int                     // the top-level slurm:'s; 0: none
	variants            int                     // the tasks the file's matrices expand to, so far
	globs               bool                    // a dependency is a glob
	unexpanded          bool                    // a task with an id could not be read: a glob may miss it

	fast *fastYAML // the fast path's reader, when it read the file; its tasks list is read as it is walked
}

func (p *parser) errorf(n *yaml.Node, format string, args ...any) *Error {
	return &Error{Path: p.path, Line: n.Line, Msg: fmt.Sprintf(format, args...)}
}

// add keeps a problem. A helper's error is always an *Error; anything else
// is kept unlocated.
func (p *parser) add(err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Path: p.path, Msg: err.Error(), Err: err}
	}
	p.errs = append(p.errs, e)
}

// fail returns the list of problems when e stops the parse.
func (p *parser) fail(e *Error) *ErrorList {
	p.errs = append(p.errs, e)
	return p.list()
}

// list returns the problems found, in file order, at most MaxErrors.
func (p *parser) list() *ErrorList {
	slices.SortStableFunc(p.errs, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
	l := &ErrorList{Path: p.path, Errs: p.errs}
	if len(l.Errs) > MaxErrors {
		l.More = len(l.Errs) - MaxErrors
		l.Errs = l.Errs[:MaxErrors:MaxErrors]
	}
	return l
}

// q quotes a value from the file for a message: one line, cut when long.
func q(s string) string { return elide.Quote(s) }

var yamlLine = regexp.MustCompile(`^yaml: (?:line (\d+): )?`)

// parserProblems are the messages of the YAML library's parser (as opposed
// to its scanner). For these it reports the 0-based line of the construct
// being parsed, so one is added to name the 1-based line people see.
var parserProblems = []string{
	"did not find expected <document start>",
	"did not find expected node content",
	"did not find expected key",
	"did not find expected '-' indicator",
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"found undefined tag handle",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
}

func (p *parser) yamlError(err error) *Error {
	msg := err.Error()
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
		if line > 0 && slices.ContainsFunc(parserProblems, func(pp string) bool { return strings.HasPrefix(msg, pp) }) {
			line++
		}
	}
	msg = "invalid YAML: " + elide.Line(msg, 300)
	if strings.HasPrefix(msg, "invalid YAML: did not find expected ',' or") && strings.Contains(p.line(line), "${") {
		// The { of ${name} ends a plain value inside [...] or {...}.
		msg += " (inside [...] or {...}, quote a value that holds ${...}: \"${name}\")"
	}
	return &Error{Path: p.path, Line: line, Msg: msg}
}

// line returns line n (from 1) of the file, or "".
func (p *parser) line(n int) string {
	if n < 1 {
		return ""
	}
	rest := p.data
	for range n - 1 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			return ""
		}
		rest = rest[i+1:]
	}
	if i := bytes.IndexByte(rest, '\n'); i >= 0 {
		rest = rest[:i]
	}
	return string(rest)
}

// fields walks a mapping node, calling visit for each known key. An
// unknown or repeated key, or an error from visit, is a problem: it is
// kept and the walk goes on. It reports whether n is a mapping, and two
// sets of keys, by their position in known: those whose value had a
// problem, and those that unknown keys were taken for ("did you mean").
func (p *parser) fields(n *yaml.Node, where string, known []string, visit func(key string, k, v *yaml.Node) error) (keys keySets) {
	if n.Kind != yaml.MappingNode {
		p.add(p.errorf(n, "%s must be a mapping of keys to values, not %s", where, kindName(n)))
		return keySets{}
	}
	keys.mapping = true
	var seen uint64 // by position in known (at most 64 keys)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		at := slices.Index(known, k.Value)
		if at < 0 {
			msg := fmt.Sprintf("%s: unknown key %s", where, q(k.Value))
			if hint, ok := misplaced[where+" "+k.Value]; ok {
				msg += " (" + hint + ")"
			} else if near := suggest.Closest(k.Value, slices.Values(known)); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
				keys.meant |= 1 << slices.Index(known, near)
			} else {
				msg += " (known keys: " + strings.Join(known, ", ") + ")"
			}
			p.add(p.errorf(k, "%s", msg))
			continue
		}
		if seen&(1<<at) != 0 {
			p.add(p.errorf(k, "%s: key %q appears twice", where, k.Value))
			continue
		}
		seen |= 1 << at
		before := len(p.errs)
		if err := visit(k.Value, k, v); err != nil {
			p.add(err)
		}
		if len(p.errs) > before {
			keys.bad |= 1 << at
		}
	}
	return keys
}

// keySets is what fields found; see there.
type keySets struct {
	mapping bool
	bad     uint64
	meant   uint64
}

// has reports whether set holds key, a key of known.
func has(set uint64, known []string, key string) bool {
	i := slices.Index(known, key)
	return i >= 0 && set&(1<<i) != 0
}

var topKeys = []string{"scheduling", "tasks", "slurm", "defaults"}

// misplaced tells, by "where key", where a key that is unknown where it
// was written belongs.
var misplaced = map[string]string{
	"workflow executor": "the default executor of a workflow's tasks goes under \"scheduling:\"",
}

func (p *parser) top(n *yaml.Node) {
	var tasksKey, tasks *yaml.Node
	keys := p.fields(n, "workflow", topKeys, func(key string, k, v *yaml.Node) error {
		switch key {
		case "scheduling":
			p.scheduling(v)
		case "slurm":
			p.w.Slurm, p.slurmLine = p.slurm(v, "slurm", nil), k.Line
		case "defaults":
			p.defaults(v)
		default:
			tasksKey, tasks = k, v // read last: the defaults apply to them
		}
		return nil
	})
	p.defaultSettings()
	if tasks != nil {
		p.tasks(tasks)
	}
	switch {
	case !keys.mapping:
	case tasksKey == nil && has(keys.meant, topKeys, "tasks"): // a misspelt "tasks:" said it
	case tasksKey == nil:
		p.add(p.errorf(n, "the workflow has no tasks: list them under \"tasks:\""))
	case tasks.Kind == yaml.SequenceNode && len(tasks.Content) == 0 && (p.fast == nil || tasks != p.fast.tasks):
		p.add(p.errorf(tasksKey, "the workflow has no tasks: the list under \"tasks:\" is empty"))
	}
}

// defaultSettings makes defaults.executor and defaults.slurm the
// workflow's, unless scheduling.executor or slurm: give them too.
func (p *parser) defaultSettings() {
	twice := func(key string, line int, other string, otherLine int) {
		p.add(&Error{Path: p.path, Line: line, Msg: fmt.Sprintf("%s: %s (line %d) says it too: keep one", key, other, otherLine)})
	}
	if p.defaultExecutor != "" {
		if line, ok := p.w.schedLines["executor"]; ok {
			twice("defaults.executor", p.defaultExecutorLine, "scheduling.executor", line)
		} else {
			p.w.Executor = p.defaultExecutor
			p.w.schedLines["executor"] = p.defaultExecutorLine
			p.w.executorKey = "defaults.executor"
		}
	}
	if p.defaultSlurmLine > 0 {
		if p.slurmLine > 0 {
			twice("defaults.slurm", p.defaultSlurmLine, "slurm", p.slurmLine)
		} else {
			p.w.Slurm = p.defaultSlurm
		}
	}
}

var schedulingKeys = []string{
	"max_parallel_tasks", "order", "executor", "timeout", "retries", "kill_grace",
	"retry_delay", "retry_delay_max", "on_complete_timeout",
	"gpu_safety_margin_mib", "gpu_cooldown", "gpu_placement", "visible_gpus",
	"gpu_quarantine_after", "gpu_quarantine_for", "gpu_poll_interval",
	"gpu_reserve_after", "gpu_unknown_timeout", "nvidia_smi_timeout",
	"on_run_end", "webhook",
	"cpus", "memory_mib_host", "resources",
}

func (p *parser) scheduling(n *yaml.Node) {
	s := &p.w.Scheduling
	before := len(p.errs)
	defer func() { p.schedBad = len(p.errs) > before }()
	p.fields(n, "scheduling", schedulingKeys, func(key string, k, v *yaml.Node) error {
		p.w.schedLines[key] = k.Line
		where := "scheduling." + key
		var err error
		switch key {
		case "max_parallel_tasks":
			s.MaxParallelTasks, err = p.integer(v, where)
		case "order":
			s.Order, err = p.scalar(v, where)
		case "executor":
			var name string
			if name, err = p.executor(v, where); err == nil {
				if why, ok := task.ValidExecutorName(name); !ok {
					err = p.errorf(v, "%s: %s", where, why)
				} else {
					p.w.Executor = name
				}
			}
		case "timeout":
			s.DefaultTimeout, err = p.duration(v, where)
		case "retries":
			s.DefaultRetries, err = p.integer(v, where)
		case "kill_grace":
			s.KillGrace, err = p.duration(v, where)
		case "retry_delay":
			s.DefaultRetryDelay, err = p.duration(v, where)
			s.DefaultRetryDelay = explicitZero(s.DefaultRetryDelay)
		case "retry_delay_max":
			s.RetryDelayMax, err = p.positiveDuration(v, where)
		case "on_complete_timeout":
			s.OnCompleteTimeout, err = p.duration(v, where)
			s.OnCompleteTimeout = explicitZero(s.OnCompleteTimeout)
		case "gpu_safety_margin_mib":
			var m int
			m, err = p.nonNegative(v, where)
			s.GPUSafetyMarginMiB = explicitZero(int64(m))
		case "gpu_cooldown":
			s.GPUCooldown, err = p.duration(v, where)
			s.GPUCooldown = explicitZero(s.GPUCooldown)
		case "gpu_placement":
			s.GPUPlacement, err = p.scalar(v, where)
		case "visible_gpus":
			s.VisibleGPUs, err = p.strings(v, where)
		case "gpu_quarantine_after":
			s.GPUQuarantineAfter, err = p.nonNegative(v, where)
			s.GPUQuarantineAfter = explicitZero(s.GPUQuarantineAfter)
		case "gpu_quarantine_for":
			s.GPUQuarantineFor, err = p.duration(v, where)
			s.GPUQuarantineFor = explicitZero(s.GPUQuarantineFor)
		case "gpu_poll_interval":
			s.GPUPollInterval, err = p.positiveDuration(v, where)
		case "gpu_reserve_after":
			if v.Kind == yaml.ScalarNode && v.Value == "never" {
				s.GPUReserveAfter = -1
				break
			}
			s.GPUReserveAfter, err = p.duration(v, where)
			if s.GPUReserveAfter == 0 {
				s.GPUReserveAfter = time.Nanosecond // "0": at once
			}
		case "gpu_unknown_timeout":
			s.GPUUnknownTimeout, err = p.positiveDuration(v, where)
		case "nvidia_smi_timeout":
			s.NvidiaSMITimeout, err = p.positiveDuration(v, where)
		case "cpus":
			s.CPUs, err = p.nonNegative(v, where)
		case "memory_mib_host":
			var m int
			m, err = p.nonNegative(v, where)
			s.MemoryMiBHost = int64(m)
		case "resources":
			s.Resources = p.declaredResources(v, where)
		case "on_run_end":
			s.OnRunEnd, err = p.command(v, where)
			s.OnRunEndDir = p.base // run where the tasks' relative dirs start
		case "webhook":
			s.Webhook, err = p.scalar(v, where)
		}
		return err
	})
}

// explicitZero maps a 0 written in the file to the Go API's "none"
// (negative), since 0 there means "the default".
func explicitZero[T int | int64 | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

func (p *parser) nonNegative(n *yaml.Node, where string) (int, error) {
	v, err := p.integer(n, where)
	if err == nil && v < 0 {
		err = p.errorf(n, "%s must not be negative (got %d)", where, v)
	}
	return v, err
}

func (p *parser) positiveDuration(n *yaml.Node, where string) (time.Duration, error) {
	d, err := p.duration(n, where)
	if err == nil && d == 0 {
		err = p.errorf(n, "%s must be more than 0", where)
	}
	return d, err
}

var taskKeys = []string{"id", "args", "dependencies", "priority", "timeout", "retries", "env", "dir", "resources",
	"executor", "artifacts", "hash_artifacts", "inputs", "hash_inputs", "on_complete", "on_failure", "retry_delay", "retry_on_exit_codes", "retry_on_timeout", "slurm",
	"matrix"}

func (p *parser) tasks(n *yaml.Node) {
	if n.Kind != yaml.SequenceNode {
		p.add(p.errorf(n, "tasks must be a list (each item starting with \"- id: ...\"), not %s", kindName(n)))
		return
	}
	if p.fast != nil && n == p.fast.tasks {
		count := p.fast.tasksCount
		p.w.Tasks = slices.Grow(p.w.Tasks, count)
		p.w.locs = slices.Grow(p.w.locs, count)
		p.badKeys = slices.Grow(p.badKeys, count)
		p.fast.items(p.task)
	} else {
		p.w.Tasks = slices.Grow(p.w.Tasks, len(n.Content))
		p.w.locs = slices.Grow(p.w.locs, len(n.Content))
		p.badKeys = slices.Grow(p.badKeys, len(n.Content))
		for i, tn := range n.Content {
			p.task(i, tn)
		}
	}
	if p.globs {
		p.expandGlobs()
	}
}

// fieldState is what reading a task's keys (or the defaults') noted
// besides the values.
type fieldState struct {
	set             uint64 // the keys given, by taskKeys position
	explicitRetries bool
	explicitTimeout bool
	escapes         bool     // a templated value holds a $${ to unescape
	vars            []string // the task's matrix variables; nil when it has none
	defaults        bool     // reading the defaults: no ${name} at all
	noTemplates     bool     // its matrix had a problem: templates are not checked
}

// task parses item i of the task list. A task without a usable id is
// checked for what can be checked, and left out of the graph. A task with
// a matrix becomes one task per combination of its values.
func (p *parser) task(i int, tn *yaml.Node) {
	if tn.Kind != yaml.MappingNode {
		p.add(p.errorf(tn, "tasks[%d] must be a mapping with id, args, ..., not %s", i, kindName(tn)))
		return
	}
	// The id and the matrix first, so that later errors can name the
	// task, and templates be checked against the matrix's names.
	var idNode, matrixNode *yaml.Node
	id, hasIDKey := "", false
	for j := 0; j+1 < len(tn.Content); j += 2 {
		switch tn.Content[j].Value {
		case "id":
			if hasIDKey {
				break
			}
			hasIDKey = true
			if v := tn.Content[j+1]; v.Kind != yaml.ScalarNode || v.Value == "" {
				p.add(p.errorf(v, "tasks[%d].id must be a non-empty string", i))
			} else {
				id, idNode = v.Value, v
			}
		case "matrix":
			if matrixNode == nil {
				matrixNode = tn.Content[j+1]
			}
		}
	}
	where := "task " + q(id)
	if id == "" {
		where = fmt.Sprintf("tasks[%d]", i)
	}
	var st fieldState
	var m *matrix
	if matrixNode != nil {
		if m = p.matrix(matrixNode, where+": matrix"); m != nil {
			st.vars = m.names
		} else {
			st.noTemplates = true // its names are unknown: said once, at the matrix
		}
	}
	if idNode != nil && !p.checkTemplates(idNode, where, "id", &st) {
		id = "" // an id that cannot be expanded names no task
	}
	if idNode != nil && matrixNode == nil && strings.Contains(id, "${") {
		// Elsewhere a task without a matrix keeps ${...} as written; in
		// an id it is a sweep's without its matrix.
		p.add(p.errorf(idNode, "%s: id: ${...}: only a task with a matrix has variables; add matrix: {NAME: [values]}", where))
		id = ""
	}
	if id != "" && m != nil && !p.matrixID(idNode, where, m) {
		id = ""
	}
	t := gpusched.TaskSpec{ID: id}
	loc := taskLoc{line: tn.Line, fields: make([]fieldLine, 0, len(tn.Content)/2)}
	hasArgs := false
	keys := p.fields(tn, where, taskKeys, func(key string, k, v *yaml.Node) error {
		switch key {
		case "id", "matrix":
			loc.fields = append(loc.fields, fieldLine{key, k.Line})
			return nil
		case "args":
			hasArgs = true
		}
		return p.taskField(key, k, v, &t, &loc, where, &st)
	})
	// A missing id or args that a misspelt key was meant to give is not
	// reported twice.
	if !hasIDKey && !has(keys.meant, taskKeys, "id") {
		p.add(p.errorf(tn, "tasks[%d] has no id", i))
	}
	if !hasArgs && !has(keys.meant, taskKeys, "args") {
		p.add(p.errorf(tn, "%s has no args: give the command to run, e.g. args: [python3, train.py]", where))
	}
	if id == "" || matrixNode != nil && m == nil {
		if hasIDKey {
			p.unexpanded = true // a glob may miss what it would have been
		}
		return // nothing can depend on it
	}
	st.finish(&t)
	bad := keys.bad
	if !hasArgs {
		bad |= 1 << slices.Index(taskKeys, "args")
	}
	if p.defs != nil {
		bad |= p.defs.apply(&t, &loc, st.set)
		st.escapes = st.escapes || p.defs.st.escapes
	}
	if m != nil {
		p.expand(&t, &loc, bad, m)
		return
	}
	if st.escapes {
		u := t // t itself stays on the stack
		eachTemplated(&u, unescape)
		t = u
	}
	p.appendTask(t, loc, bad)
}

// appendTask adds a task read from the file, its dir resolved against
// the file's folder.
func (p *parser) appendTask(t gpusched.TaskSpec, loc taskLoc, bad uint64) {
	switch {
	case t.Dir == "":
		t.Dir = p.base
	case !filepath.IsAbs(t.Dir):
		t.Dir = filepath.Join(p.base, t.Dir)
	}
	t.Resources.Counters = maps.Clone(t.Resources.Counters) // a matrix's variants share none
	p.w.Tasks = append(p.w.Tasks, t)
	p.w.locs = append(p.w.locs, loc)
	p.badKeys = append(p.badKeys, bad)
}

// finish applies what a file means by an explicit 0: "retries: 0" and
// "timeout: 0" are none, even if scheduling sets a default.
func (st *fieldState) finish(t *gpusched.TaskSpec) {
	if st.explicitRetries && t.Retries == 0 {
		t.Retries = gpusched.NoRetries
	}
	if st.explicitTimeout && t.Timeout == 0 {
		t.Timeout = gpusched.NoTimeout
	}
}

// taskField reads key, a key of a task or of the defaults other than id
// and matrix, into t, noting its line in loc. where names the task (or
// "defaults"). The dir is kept as written: appendTask resolves it once its
// templates are expanded.
func (p *parser) taskField(key string, k, v *yaml.Node, t *gpusched.TaskSpec, loc *taskLoc, where string, st *fieldState) error {
	loc.fields = append(loc.fields, fieldLine{key, k.Line})
	st.set |= 1 << slices.Index(taskKeys, key)
	field := where + ": " + key
	var err error
	switch key {
	case "args":
		var args []string
		if args, err = p.strings(v, field); err == nil {
			t.Payload = args
			for j, a := range args {
				if err := task.CheckArg(t.ID, "args", j, a); err != nil {
					p.add(&Error{Path: p.path, Line: v.Content[j].Line, Msg: err.Error(), Err: err})
				}
			}
		}
	case "dependencies":
		if t.Dependencies, t.DependencyOn, err = p.dependencies(v, field); err == nil {
			p.noteGlobs(v, loc)
		}
	case "priority":
		t.Priority, err = p.integer(v, field)
	case "timeout":
		t.Timeout, err = p.duration(v, field)
		st.explicitTimeout = true
	case "retries":
		t.Retries, err = p.integer(v, field)
		if err == nil && t.Retries < 0 {
			// Checked here: -1 would pass as gpusched.NoRetries.
			te := gpusched.TaskError{TaskID: t.ID, Field: "retries", Reason: fmt.Sprintf("must not be negative (got %d)", t.Retries), Kind: gpusched.ErrInvalidTask}
			msg := te.Error()
			if st.defaults {
				msg = where + ": retries " + te.Reason
			}
			err = &Error{Path: p.path, Line: v.Line, Msg: msg, Err: &te}
		}
		st.explicitRetries = true
	case "env":
		t.Env, err = p.env(v, field)
	case "dir":
		t.Dir, err = p.scalar(v, field)
	case "resources":
		t.Resources = p.resources(v, where, loc)
	case "executor":
		t.Executor, err = p.executor(v, field)
	case "artifacts":
		t.Artifacts, err = p.strings(v, field)
	case "hash_artifacts":
		t.HashArtifacts, err = p.boolean(v, field)
	case "inputs":
		if t.Inputs, err = p.strings(v, field); err == nil {
			for j := range t.Inputs {
				// Each item's own line, for the problems of one path.
				loc.fields = append(loc.fields, fieldLine{"inputs[" + strconv.Itoa(j) + "]", v.Content[j].Line})
			}
		}
	case "hash_inputs":
		t.HashInputs, err = p.boolean(v, field)
	case "on_complete":
		t.OnComplete, err = p.command(v, field)
	case "on_failure":
		t.OnFailure, err = p.command(v, field)
	case "retry_delay":
		t.RetryDelay, err = p.duration(v, field)
		if err == nil && t.RetryDelay == 0 {
			t.RetryDelay = gpusched.NoRetryDelay // "0": at once, whatever scheduling says
		}
	case "retry_on_exit_codes":
		t.RetryOnExitCodes, err = p.ints(v, field)
	case "retry_on_timeout":
		t.RetryOnTimeout, err = p.boolean(v, field)
	case "slurm":
		t.Slurm = p.slurm(v, where+": slurm", loc)
	}
	if err == nil && templatedKey(key) && !p.checkTemplates(v, where, key, st) && key == "dependencies" {
		t.Dependencies, t.DependencyOn = nil, nil // told: not "unknown dependency" as well
	}
	return err
}

func (p *parser) resources(n *yaml.Node, where string, loc *taskLoc) gpusched.ResourceRequest {
	var r gpusched.ResourceRequest
	where += ": resources"
	p.fields(n, where, resourceKeys(n), func(key string, k, v *yaml.Node) error {
		loc.fields = append(loc.fields, fieldLine{"resources." + key, k.Line})
		var err error
		switch key {
		case "device":
			var d string
			d, err = p.scalar(v, where+"."+key)
			r.Device = gpusched.Device(d)
		case "memory_mib":
			r.MemoryMiB, r.MemoryAuto, err = p.memoryBudget(v, where+"."+key)
		case "memory_mib_max":
			var m int
			m, err = p.integer(v, where+"."+key)
			r.MemoryMaxMiB = int64(m)
		case "exclusive":
			r.Exclusive, err = p.boolean(v, where+"."+key)
		case "gpus":
			r.GPUs, err = p.integer(v, where+"."+key)
		case "cpus":
			r.CPUs, err = p.nonNegative(v, where+"."+key)
		case "memory_mib_host":
			r.MemoryMiBHost, r.MemoryHostAuto, err = p.memoryBudget(v, where+"."+key)
			if err == nil && r.MemoryMiBHost < 0 {
				err = p.errorf(v, "%s.%s must not be negative (got %d)", where, key, r.MemoryMiBHost)
			}
		case "memory_mib_host_max":
			var m int
			m, err = p.integer(v, where+"."+key)
			r.MemoryHostMaxMiB = int64(m)
		default:
			// A custom resource, checked against scheduling.resources
			// once the whole file is read (checkResources).
			var units int
			if units, err = p.integer(v, where+"."+key); err == nil {
				if r.Counters == nil {
					r.Counters = map[string]int{}
				}
				r.Counters[key] = units
			}
		}
		return err
	})
	return r
}

// memoryBudget reads a memory budget: a whole number of MiB, or auto
// (learned from history).
func (p *parser) memoryBudget(n *yaml.Node, where string) (mib int64, auto bool, err error) {
	if n.Kind == yaml.ScalarNode && n.Value == "auto" {
		return 0, true, nil
	}
	s, err := p.scalar(n, where)
	if err != nil {
		return 0, false, err
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, false, p.errorf(n, "%s must be a whole number of MiB or auto, not %s", where, q(s))
	}
	return int64(v), false, nil
}

// slurmKeys are the keys of a slurm: mapping, at the top of the file or
// in a task.
var slurmKeys = []string{"partition", "account", "qos", "constraint", "cpus_per_task", "mem", "extra_args", "gpu_types"}

// slurm reads a slurm: mapping; loc, when not nil, notes its keys' lines
// ("slurm.mem") for the task's later errors. The values are checked as
// the task is (task.SlurmSettings.Validate), and, for the top-level one,
// here.
func (p *parser) slurm(n *yaml.Node, where string, loc *taskLoc) *gpusched.SlurmSettings {
	var s gpusched.SlurmSettings
	p.fields(n, where, slurmKeys, func(key string, k, v *yaml.Node) error {
		if loc != nil {
			loc.fields = append(loc.fields, fieldLine{"slurm." + key, k.Line})
		}
		at := where + "." + key
		var err error
		switch key {
		case "partition":
			s.Partition, err = p.scalar(v, at)
		case "account":
			s.Account, err = p.scalar(v, at)
		case "qos":
			s.QOS, err = p.scalar(v, at)
		case "constraint":
			s.Constraint, err = p.scalar(v, at)
		case "cpus_per_task":
			s.CPUsPerTask, err = p.nonNegative(v, at)
		case "mem":
			s.Mem, err = p.scalar(v, at)
		case "extra_args":
			s.ExtraArgs, err = p.strings(v, at)
		case "gpu_types":
			s.GPUTypes, err = p.gpuTypes(v, at, loc)
		}
		return err
	})
	if field, why := s.Validate(); field != "" && loc == nil {
		// Reported once, here: the tasks do not inherit it.
		p.add(p.errorf(n, "%s.%s: %s", where, field, why))
		return nil
	}
	return &s
}

// gpuTypes reads slurm's gpu_types: a mapping of GPU type names to their
// memory in MiB. loc, when not nil, notes each type's line
// ("slurm.gpu_types.a100"). Names and sizes are checked with the rest of
// the settings (task.SlurmSettings.Validate).
func (p *parser) gpuTypes(n *yaml.Node, where string, loc *taskLoc) (map[string]int64, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errorf(n, "%s must be a mapping of GPU type names to their memory in MiB, e.g. {a100: 81920, v100: 16384}, not %s", where, kindName(n))
	}
	out := make(map[string]int64, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if _, dup := out[k.Value]; dup {
			return nil, p.errorf(k, "%s: type %s appears twice", where, q(k.Value))
		}
		mib, err := p.integer(v, where+"."+elide.Line(k.Value, 64))
		if err != nil {
			return nil, err
		}
		out[k.Value] = int64(mib)
		if loc != nil {
			loc.fields = append(loc.fields, fieldLine{"slurm.gpu_types." + k.Value, k.Line})
		}
	}
	return out, nil
}

func (p *parser) scalar(n *yaml.Node, where string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", p.errorf(n, "%s must be a single value, not %s", where, kindName(n))
	}
	return n.Value, nil
}

// executor reads an executor's name; whether it is a valid one is checked
// with the task (or, for scheduling's, by the caller).
func (p *parser) executor(n *yaml.Node, where string) (string, error) {
	s, err := p.scalar(n, where)
	if err == nil && s == "" {
		err = p.errorf(n, "%s is empty: name an executor, e.g. local", where)
	}
	return s, err
}

func (p *parser) integer(n *yaml.Node, where string) (int, error) {
	s, err := p.scalar(n, where)
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, p.errorf(n, "%s must be a whole number, not %s", where, q(s))
	}
	return v, nil
}

func (p *parser) boolean(n *yaml.Node, where string) (bool, error) {
	s, err := p.scalar(n, where)
	if err != nil {
		return false, err
	}
	switch s {
	case "true", "True", "TRUE", "yes", "on":
		return true, nil
	case "false", "False", "FALSE", "no", "off":
		return false, nil
	}
	return false, p.errorf(n, "%s must be true or false, not %s", where, q(s))
}

func (p *parser) duration(n *yaml.Node, where string) (time.Duration, error) {
	s, err := p.scalar(n, where)
	if err != nil {
		return 0, err
	}
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, p.errorf(n, "%s: %s is not a duration; use Go syntax such as 90s, 30m or 2h", where, q(s))
	}
	if d < 0 {
		return 0, p.errorf(n, "%s must not be negative", where)
	}
	return d, nil
}

func (p *parser) ints(n *yaml.Node, where string) ([]int, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.errorf(n, "%s must be a list of whole numbers, e.g. [75, 143], not %s", where, kindName(n))
	}
	out := make([]int, 0, len(n.Content))
	for _, c := range n.Content {
		v, err := p.integer(c, where)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// command reads a notification's argv: a list of strings, not empty.
func (p *parser) command(n *yaml.Node, where string) ([]string, error) {
	argv, err := p.strings(n, where)
	if err == nil && len(argv) == 0 {
		err = p.errorf(n, "%s is empty: give a command, e.g. [sh, notify.sh]", where)
	}
	return argv, err
}

func (p *parser) strings(n *yaml.Node, where string) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.errorf(n, "%s must be a list, e.g. [a, b], not %s", where, kindName(n))
	}
	out := make([]string, 0, len(n.Content))
	for _, c := range n.Content {
		if c.Kind != yaml.ScalarNode {
			return nil, p.errorf(c, "%s: each item must be a single value, not %s", where, kindName(c))
		}
		out = append(out, c.Value)
	}
	return out, nil
}

func (p *parser) env(n *yaml.Node, where string) (map[string]string, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errorf(n, "%s must be a mapping of names to values, e.g. {SEED: \"1\"}, not %s", where, kindName(n))
	}
	out := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if _, dup := out[k.Value]; dup {
			return nil, p.errorf(k, "%s: key %s appears twice", where, q(k.Value))
		}
		if v.Kind != yaml.ScalarNode {
			return nil, p.errorf(v, "%s.%s must be a single value, not %s", where, elide.Line(k.Value, 64), kindName(v))
		}
		out[k.Value] = v.Value
	}
	return out, nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	if n.Tag == "!!null" {
		return "empty"
	}
	return "the value " + q(n.Value)
}
