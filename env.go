package gpusched

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/gpusched/gpusched/internal/engine"
)

// env is the attempt's environment: the scheduler's own, the command's
// additions, then gpusched's variables, which always win.
func (r runner) env(req engine.AttemptRequest, extra map[string]string) []string {
	vars := []string{
		"GPUSCHED_TASK_ID=" + req.Spec.ID,
		"GPUSCHED_ATTEMPT=" + strconv.Itoa(req.Number),
		"GPUSCHED_RUN_DIR=" + r.s.runDir,
		// The attempt's token (GPUSCHED_ATTEMPT_TOKEN) is set by the
		// executor, from Job.Token.
	}
	if g := req.GPU; g != nil {
		// Exactly the cards it was admitted to, numbered as nvidia-smi
		// does, in the order chosen (the closest first).
		cards := g.Cards()
		index, uuid := make([]string, len(cards)), make([]string, len(cards))
		for i, c := range cards {
			index[i], uuid[i] = strconv.Itoa(c.Index), c.UUID
		}
		vars = append(vars,
			"CUDA_VISIBLE_DEVICES="+strings.Join(index, ","),
			"CUDA_DEVICE_ORDER=PCI_BUS_ID",
			"GPUSCHED_GPU_INDEX="+strings.Join(index, ","),
			"GPUSCHED_GPU_UUID="+strings.Join(uuid, ","),
			"GPUSCHED_GPU_MEMORY_MIB="+strconv.FormatInt(g.MemoryMiB, 10),
		)
	} else {
		// No card: a CPU task must not take GPU memory nobody accounts for.
		vars = append(vars, "CUDA_VISIBLE_DEVICES=")
	}
	if req.Spec.CleanEnv {
		// The task's own environment in place of the scheduler's.
		return environFrom(nil, vars, req.Spec.Env, extra)
	}
	return environ(vars, extra)
}

// environ is the environment of a process gpusched starts: its own, then
// the variables of each map in turn, then vars (KEY=VALUE), which always
// win; a variable set twice keeps its last value.
func environ(vars []string, extras ...map[string]string) []string {
	return overlay(ownEnviron(), vars, extras)
}

// environFrom is environ with base in place of gpusched's own
// environment.
func environFrom(base, vars []string, extras ...map[string]string) []string {
	return overlay(dedupEnv(base), vars, extras)
}

// overlay is base, whose variables are each set once, less what extras
// and vars set, then what they set (each variable once, its last value),
// in the order dedupEnv would give the lot.
func overlay(base, vars []string, extras []map[string]string) []string {
	n := len(vars)
	for _, extra := range extras {
		n += len(extra)
	}
	over := make([]string, 0, n)
	for _, extra := range extras {
		for k, v := range extra {
			over = append(over, k+"="+v)
		}
	}
	over = dedupEnv(append(over, vars...))
	keys := make([]string, len(over))
	for i, kv := range over {
		keys[i], _, _ = strings.Cut(kv, "=")
	}
	var set map[string]bool // for many keys; a few are compared in turn
	if len(keys) > 16 {
		set = make(map[string]bool, len(keys))
		for _, k := range keys {
			set[k] = true
		}
	}
	out := make([]string, 0, len(base)+len(over))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if set != nil && !set[k] || set == nil && !slices.Contains(keys, k) {
			out = append(out, kv)
		}
	}
	return append(out, over...)
}

// ownEnv is gpusched's own environment as os.Environ last gave it, and
// that deduplicated: the dedup (a map of some fifty variables) is made
// again only when the environment changes, not for every attempt.
var ownEnv atomic.Pointer[[2][]string]

// ownEnviron is dedupEnv(os.Environ()).
func ownEnviron() []string {
	raw := os.Environ()
	if c := ownEnv.Load(); c != nil && slices.Equal(c[0], raw) {
		return c[1]
	}
	uniq := dedupEnv(slices.Clone(raw))
	ownEnv.Store(&[2][]string{raw, uniq})
	return uniq
}

// dedupEnv keeps the last value of each variable, as a shell would.
func dedupEnv(env []string) []string {
	if len(env) <= dedupByScan {
		return dedupScan(env)
	}
	last := make(map[string]int, len(env))
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		last[k] = i
	}
	out := env[:0:0]
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if last[k] == i {
			out = append(out, kv)
		}
	}
	return out
}

// dedupByScan is the most variables dedupEnv compares in turn instead of
// through a map: an attempt's own few (its id, attempt, run directory,
// cards) came through a map every time, a fifth of making its
// environment.
const dedupByScan = 16

// dedupScan is dedupEnv for a few variables: each is kept unless a later
// one sets it again.
func dedupScan(env []string) []string {
	out := env[:0:0]
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		later := false
		for _, next := range env[i+1:] {
			if strings.HasPrefix(next, k) && (len(next) == len(k) || next[len(k)] == '=') {
				later = true
				break
			}
		}
		if !later {
			out = append(out, kv)
		}
	}
	return out
}
