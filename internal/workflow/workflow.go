package workflow

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/suggest"
)

// Workflow is a loaded workflow file.
type Workflow struct {
	// Path is the file it was read from.
	Path string
	// Scheduling holds the file's scheduling settings.
	Scheduling gpusched.Scheduling
	// Tasks are the file's tasks in file order, with Dir made absolute
	// (relative to the file's folder, which is also the default).
	Tasks []gpusched.TaskSpec

	lines map[string]int // "task/<id>/<field>" or "scheduling/<field>" -> line
}

// Error is a problem in a workflow file, located by line (0 if unknown).
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

// Load reads, parses and validates the workflow at path: every check that
// submitting its tasks would make runs here, so a workflow that loads can be
// run. Errors are *Error values naming the file and line.
func Load(path string) (*Workflow, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read workflow: %w", err)
	}
	return Parse(path, data)
}

// Parse is Load on data already read from path.
func Parse(path string, data []byte) (*Workflow, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	w := &Workflow{Path: path, lines: map[string]int{}}
	p := parser{path: path, base: filepath.Dir(abs), w: w}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{Path: path, Msg: "empty workflow: it needs a list of tasks under \"tasks:\""}
		}
		return nil, p.yamlError(err)
	}
	var second yaml.Node
	if err := dec.Decode(&second); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, p.yamlError(err)
		}
		return nil, p.errorf(&second, "a second YAML document (after ---): a workflow file holds one")
	}
	if len(doc.Content) == 0 {
		return nil, &Error{Path: path, Msg: "empty workflow: it needs a list of tasks under \"tasks:\""}
	}
	if err := p.top(doc.Content[0]); err != nil {
		return nil, err
	}
	if err := w.Scheduling.Validate(); err != nil {
		return nil, w.Locate(err)
	}
	if err := gpusched.ValidateTasks(w.Tasks); err != nil {
		return nil, w.Locate(err)
	}
	return w, nil
}

// Locate turns a validation error into an *Error with the line of the task
// or field at fault.
func (w *Workflow) Locate(err error) error {
	var te *gpusched.TaskError
	var ce *gpusched.CycleError
	var se *gpusched.SchedulingError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "payload" {
			field = "args"
		}
		line := w.lines["task/"+te.TaskID+"/"+field]
		if line == 0 {
			line = w.lines["task/"+te.TaskID+"/"+strings.Split(field, ".")[0]]
		}
		if line == 0 {
			line = w.lines["task/"+te.TaskID]
		}
		msg := strings.Replace(err.Error(), ": payload: ", ": args: ", 1)
		return &Error{Path: w.Path, Line: line, Msg: msg, Err: err}
	case errors.As(err, &ce):
		return &Error{Path: w.Path, Line: w.lines["task/"+ce.Path[0]+"/dependencies"], Msg: err.Error(), Err: err}
	case errors.As(err, &se):
		return &Error{Path: w.Path, Line: w.lines["scheduling/"+se.Field], Msg: err.Error(), Err: err}
	}
	return &Error{Path: w.Path, Msg: err.Error(), Err: err}
}

type parser struct {
	path string
	base string // the workflow file's folder, absolute
	w    *Workflow
}

func (p *parser) errorf(n *yaml.Node, format string, args ...any) error {
	return &Error{Path: p.path, Line: n.Line, Msg: fmt.Sprintf(format, args...)}
}

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

func (p *parser) yamlError(err error) error {
	msg := err.Error()
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
		if line > 0 && slices.ContainsFunc(parserProblems, func(pp string) bool { return strings.HasPrefix(msg, pp) }) {
			line++
		}
	}
	return &Error{Path: p.path, Line: line, Msg: "invalid YAML: " + msg}
}

// fields walks a mapping node, calling visit for each known key and failing
// on unknown or repeated ones.
func (p *parser) fields(n *yaml.Node, where string, known []string, visit func(key string, k, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return p.errorf(n, "%s must be a mapping of keys to values, not %s", where, kindName(n))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !slices.Contains(known, k.Value) {
			msg := fmt.Sprintf("%s: unknown key %q", where, k.Value)
			if near := suggest.Closest(k.Value, slices.Values(known)); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			} else {
				msg += " (known keys: " + strings.Join(known, ", ") + ")"
			}
			return p.errorf(k, "%s", msg)
		}
		if seen[k.Value] {
			return p.errorf(k, "%s: key %q appears twice", where, k.Value)
		}
		seen[k.Value] = true
		if err := visit(k.Value, k, v); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) top(n *yaml.Node) error {
	var tasksKey *yaml.Node
	err := p.fields(n, "workflow", []string{"scheduling", "tasks"}, func(key string, k, v *yaml.Node) error {
		switch key {
		case "scheduling":
			return p.scheduling(v)
		default:
			tasksKey = k
			return p.tasks(v)
		}
	})
	switch {
	case err != nil:
		return err
	case tasksKey == nil:
		return p.errorf(n, "the workflow has no tasks: list them under \"tasks:\"")
	case len(p.w.Tasks) == 0:
		return p.errorf(tasksKey, "the workflow has no tasks: the list under \"tasks:\" is empty")
	}
	return nil
}

var schedulingKeys = []string{
	"max_parallel_tasks", "timeout", "retries", "kill_grace",
	"gpu_safety_margin_mib", "gpu_cooldown", "gpu_placement", "visible_gpus",
	"gpu_quarantine_after", "gpu_quarantine_for", "gpu_poll_interval",
	"gpu_reserve_after", "gpu_unknown_timeout", "nvidia_smi_timeout",
}

func (p *parser) scheduling(n *yaml.Node) error {
	s := &p.w.Scheduling
	return p.fields(n, "scheduling", schedulingKeys, func(key string, k, v *yaml.Node) error {
		p.w.lines["scheduling/"+key] = k.Line
		where := "scheduling." + key
		var err error
		switch key {
		case "max_parallel_tasks":
			s.MaxParallelTasks, err = p.integer(v, where)
		case "timeout":
			s.DefaultTimeout, err = p.duration(v, where)
		case "retries":
			s.DefaultRetries, err = p.integer(v, where)
		case "kill_grace":
			s.KillGrace, err = p.duration(v, where)
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
	"artifacts", "hash_artifacts", "on_complete"}

func (p *parser) tasks(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return p.errorf(n, "tasks must be a list (each item starting with \"- id: ...\"), not %s", kindName(n))
	}
	for i, tn := range n.Content {
		if tn.Kind != yaml.MappingNode {
			return p.errorf(tn, "tasks[%d] must be a mapping with id, args, ..., not %s", i, kindName(tn))
		}
		// The id first, so that later errors can name the task.
		id := ""
		for j := 0; j+1 < len(tn.Content); j += 2 {
			if tn.Content[j].Value == "id" {
				v := tn.Content[j+1]
				if v.Kind != yaml.ScalarNode || v.Value == "" {
					return p.errorf(v, "tasks[%d].id must be a non-empty string", i)
				}
				id = v.Value
			}
		}
		if id == "" {
			return p.errorf(tn, "tasks[%d] has no id", i)
		}
		t := gpusched.TaskSpec{ID: id, Dir: p.base}
		p.w.lines["task/"+id] = tn.Line
		where := fmt.Sprintf("task %q", id)
		explicitRetries, explicitTimeout := false, false
		err := p.fields(tn, where, taskKeys, func(key string, k, v *yaml.Node) error {
			p.w.lines["task/"+id+"/"+key] = k.Line
			field := where + ": " + key
			var err error
			switch key {
			case "id":
			case "args":
				var args []string
				args, err = p.strings(v, field)
				t.Payload = args
			case "dependencies":
				t.Dependencies, err = p.strings(v, field)
			case "priority":
				t.Priority, err = p.integer(v, field)
			case "timeout":
				t.Timeout, err = p.duration(v, field)
				explicitTimeout = true
			case "retries":
				t.Retries, err = p.integer(v, field)
				if err == nil && t.Retries < 0 {
					// Checked here: -1 would pass as gpusched.NoRetries.
					te := gpusched.TaskError{TaskID: id, Field: "retries", Reason: fmt.Sprintf("must not be negative (got %d)", t.Retries), Kind: gpusched.ErrInvalidTask}
					err = &Error{Path: p.path, Line: v.Line, Msg: te.Error(), Err: &te}
				}
				explicitRetries = true
			case "env":
				t.Env, err = p.env(v, field)
			case "dir":
				var d string
				if d, err = p.scalar(v, field); err == nil {
					if !filepath.IsAbs(d) {
						d = filepath.Join(p.base, d)
					}
					t.Dir = d
				}
			case "resources":
				t.Resources, err = p.resources(v, id)
			case "artifacts":
				t.Artifacts, err = p.strings(v, field)
			case "hash_artifacts":
				t.HashArtifacts, err = p.boolean(v, field)
			case "on_complete":
				t.OnComplete, err = p.strings(v, field)
				if err == nil && len(t.OnComplete) == 0 {
					err = p.errorf(v, "%s is empty: give a command, e.g. [sh, notify.sh]", field)
				}
			}
			return err
		})
		if err != nil {
			return err
		}
		// In a file, "retries: 0" and "timeout: 0" are explicit: none, even
		// if scheduling sets a default.
		if explicitRetries && t.Retries == 0 {
			t.Retries = gpusched.NoRetries
		}
		if explicitTimeout && t.Timeout == 0 {
			t.Timeout = gpusched.NoTimeout
		}
		if t.Payload == nil {
			return p.errorf(tn, "%s has no args: give the command to run, e.g. args: [python3, train.py]", where)
		}
		p.w.Tasks = append(p.w.Tasks, t)
	}
	return nil
}

func (p *parser) resources(n *yaml.Node, id string) (gpusched.ResourceRequest, error) {
	var r gpusched.ResourceRequest
	where := fmt.Sprintf("task %q: resources", id)
	err := p.fields(n, where, []string{"device", "memory_mib", "exclusive"}, func(key string, k, v *yaml.Node) error {
		p.w.lines["task/"+id+"/resources."+key] = k.Line
		var err error
		switch key {
		case "device":
			var d string
			d, err = p.scalar(v, where+"."+key)
			r.Device = gpusched.Device(d)
		case "memory_mib":
			var m int
			m, err = p.integer(v, where+"."+key)
			r.MemoryMiB = int64(m)
		case "exclusive":
			r.Exclusive, err = p.boolean(v, where+"."+key)
		}
		return err
	})
	return r, err
}

func (p *parser) scalar(n *yaml.Node, where string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", p.errorf(n, "%s must be a single value, not %s", where, kindName(n))
	}
	return n.Value, nil
}

func (p *parser) integer(n *yaml.Node, where string) (int, error) {
	s, err := p.scalar(n, where)
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, p.errorf(n, "%s must be a whole number, not %q", where, s)
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
	return false, p.errorf(n, "%s must be true or false, not %q", where, s)
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
		return 0, p.errorf(n, "%s: %q is not a duration; use Go syntax such as 90s, 30m or 2h", where, s)
	}
	if d < 0 {
		return 0, p.errorf(n, "%s must not be negative", where)
	}
	return d, nil
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
			return nil, p.errorf(k, "%s: key %q appears twice", where, k.Value)
		}
		if v.Kind != yaml.ScalarNode {
			return nil, p.errorf(v, "%s.%s must be a single value, not %s", where, k.Value, kindName(v))
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
	return fmt.Sprintf("the value %q", n.Value)
}
