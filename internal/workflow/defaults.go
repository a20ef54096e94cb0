package workflow

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/task"
)

// defaultKeys are the keys of defaults:, the task keys that make sense for
// every task. executor and slurm are the workflow's settings of the same
// name (scheduling.executor and the top-level slurm:), written where a
// reader of defaults looks for them.
var defaultKeys = []string{"priority", "timeout", "retries", "retry_delay", "retry_on_exit_codes", "retry_on_timeout",
	"env", "dir", "resources", "executor", "hash_artifacts", "inputs", "hash_inputs", "on_complete", "on_failure", "slurm"}

// defaults is the file's defaults: section, read as a task is.
type defaults struct {
	t   gpusched.TaskSpec
	loc taskLoc    // the lines of its keys
	st  fieldState // st.set: the keys it gives, by taskKeys position
	bad uint64     // the keys that had a problem, by taskKeys position
}

func (p *parser) defaults(n *yaml.Node) {
	d := &defaults{st: fieldState{defaults: true}, loc: taskLoc{line: n.Line}}
	keys := p.fields(n, "defaults", defaultKeys, func(key string, k, v *yaml.Node) error {
		switch key {
		case "executor":
			name, err := p.executor(v, "defaults.executor")
			if err == nil {
				if why, ok := task.ValidExecutorName(name); !ok {
					return p.errorf(v, "defaults.executor: %s", why)
				}
				p.defaultExecutor, p.defaultExecutorLine = name, k.Line
			}
			return err
		case "slurm":
			p.defaultSlurm, p.defaultSlurmLine = p.slurm(v, "defaults.slurm", nil), k.Line
			return nil
		}
		return p.taskField(key, k, v, &d.t, &d.loc, "defaults", &d.st)
	})
	for i, key := range defaultKeys {
		if keys.bad&(1<<i) != 0 {
			d.bad |= 1 << slices.Index(taskKeys, key)
		}
	}
	d.st.finish(&d.t)
	p.defs = d
}

// apply gives t, whose file gives the keys set (by taskKeys position),
// the defaults of the others, and notes their lines (the defaults') in
// loc. env is merged, the task's names winning; so is resources, key by
// key, except that a task that says device: cpu takes none of the GPU
// keys; inputs are the defaults' followed by the task's. It returns the keys given that had a problem in the defaults.
func (d *defaults) apply(t *gpusched.TaskSpec, loc *taskLoc, set uint64) (bad uint64) {
	for i, key := range taskKeys {
		bit := uint64(1) << i
		if d.st.set&bit == 0 {
			continue
		}
		own := set&bit != 0
		switch {
		case !own:
		case key == "env":
			bad |= d.bad & bit
			env := maps.Clone(d.t.Env)
			maps.Copy(env, t.Env)
			t.Env = env
			continue
		case key == "resources":
			bad |= d.bad & bit
			d.mergeResources(t, loc)
			continue
		case key == "inputs":
			// The defaults' first, then the task's own: what every task
			// reads (the code) and what this one reads.
			bad |= d.bad & bit
			d.mergeInputs(t, loc)
			continue
		default:
			continue
		}
		loc.fields = append(loc.fields, fieldLine{key, d.loc.lineOf(key)})
		bad |= d.bad & bit
		switch key {
		case "priority":
			t.Priority = d.t.Priority
		case "timeout":
			t.Timeout = d.t.Timeout
		case "retries":
			t.Retries = d.t.Retries
		case "retry_delay":
			t.RetryDelay = d.t.RetryDelay
		case "retry_on_exit_codes":
			t.RetryOnExitCodes = slices.Clone(d.t.RetryOnExitCodes)
		case "retry_on_timeout":
			t.RetryOnTimeout = d.t.RetryOnTimeout
		case "env":
			t.Env = maps.Clone(d.t.Env)
		case "dir":
			t.Dir = d.t.Dir
		case "resources":
			t.Resources = d.t.Resources
			t.Resources.Counters = maps.Clone(t.Resources.Counters)
			d.resourceLines(loc, func(string) bool { return true })
		case "hash_artifacts":
			t.HashArtifacts = d.t.HashArtifacts
		case "inputs":
			t.Inputs = slices.Clone(d.t.Inputs)
			d.inputLines(loc)
		case "hash_inputs":
			t.HashInputs = d.t.HashInputs
		case "on_complete":
			t.OnComplete = slices.Clone(d.t.OnComplete)
		case "on_failure":
			t.OnFailure = slices.Clone(d.t.OnFailure)
		}
	}
	return bad
}

// mergeInputs gives t, which has inputs of its own, the defaults' before
// them, renumbering the lines of its items in loc.
func (d *defaults) mergeInputs(t *gpusched.TaskSpec, loc *taskLoc) {
	k := len(d.t.Inputs)
	for i, f := range loc.fields {
		if j, ok := inputItem(f.key); ok {
			loc.fields[i].key = "inputs[" + strconv.Itoa(j+k) + "]"
		}
	}
	d.inputLines(loc)
	t.Inputs = append(slices.Clone(d.t.Inputs), t.Inputs...)
}

// inputLines notes in loc the lines of the defaults' inputs items.
func (d *defaults) inputLines(loc *taskLoc) {
	for _, f := range d.loc.fields {
		if _, ok := inputItem(f.key); ok {
			loc.fields = append(loc.fields, f)
		}
	}
}

// inputItem returns j for the field key "inputs[j]".
func inputItem(key string) (int, bool) {
	rest, ok := strings.CutPrefix(key, "inputs[")
	if !ok {
		return 0, false
	}
	j, err := strconv.Atoi(strings.TrimSuffix(rest, "]"))
	return j, err == nil
}

// mergeResources gives t, which has resources of its own, the defaults'
// for the keys it does not give. A key added to resources is merged here.
func (d *defaults) mergeResources(t *gpusched.TaskSpec, loc *taskLoc) {
	own := func(key string) bool {
		return slices.ContainsFunc(loc.fields, func(f fieldLine) bool { return f.key == "resources."+key })
	}
	taken := map[string]bool{}
	given := func(key string) bool {
		return !own(key) && slices.ContainsFunc(d.loc.fields, func(f fieldLine) bool { return f.key == "resources."+key })
	}
	if given("device") {
		t.Resources.Device, taken["device"] = d.t.Resources.Device, true
	}
	if own("device") && t.Resources.Device == gpusched.CPU {
		// A CPU task among GPU defaults: the GPU keys are not for it.
	} else {
		if given("memory_mib") {
			t.Resources.MemoryMiB, t.Resources.MemoryAuto, taken["memory_mib"] = d.t.Resources.MemoryMiB, d.t.Resources.MemoryAuto, true
		}
		if given("memory_mib_max") && t.Resources.MemoryAuto {
			// A cap of auto budgets: not for a task that sets its own number.
			t.Resources.MemoryMaxMiB, taken["memory_mib_max"] = d.t.Resources.MemoryMaxMiB, true
		}
		if given("exclusive") {
			t.Resources.Exclusive, taken["exclusive"] = d.t.Resources.Exclusive, true
		}
		if given("gpus") {
			t.Resources.GPUs, taken["gpus"] = d.t.Resources.GPUs, true
		}
	}
	// The machine's resources are for every task, whatever its device.
	if given("cpus") {
		t.Resources.CPUs, taken["cpus"] = d.t.Resources.CPUs, true
	}
	if given("memory_mib_host") {
		t.Resources.MemoryMiBHost, t.Resources.MemoryHostAuto, taken["memory_mib_host"] = d.t.Resources.MemoryMiBHost, d.t.Resources.MemoryHostAuto, true
	}
	if given("memory_mib_host_max") && t.Resources.MemoryHostAuto {
		// A cap of auto budgets: not for a task that sets its own number.
		t.Resources.MemoryHostMaxMiB, taken["memory_mib_host_max"] = d.t.Resources.MemoryHostMaxMiB, true
	}
	for name, units := range d.t.Resources.Counters {
		if given(name) {
			if t.Resources.Counters == nil {
				t.Resources.Counters = map[string]int{}
			}
			t.Resources.Counters[name], taken[name] = units, true
		}
	}
	d.resourceLines(loc, func(key string) bool { return taken[key] })
}

// resourceLines notes in loc the lines of the defaults' resources keys
// that take says were taken.
func (d *defaults) resourceLines(loc *taskLoc, take func(key string) bool) {
	for _, f := range d.loc.fields {
		if key, ok := strings.CutPrefix(f.key, "resources."); ok && take(key) {
			loc.fields = append(loc.fields, f)
		}
	}
}
