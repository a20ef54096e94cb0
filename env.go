package gpusched

import (
	"os"
	"strconv"
	"strings"

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
	return environFrom(os.Environ(), vars, extras...)
}

// environFrom is environ with base in place of gpusched's own
// environment.
func environFrom(base, vars []string, extras ...map[string]string) []string {
	env := base
	for _, extra := range extras {
		for k, v := range extra {
			env = append(env, k+"="+v)
		}
	}
	return dedupEnv(append(env, vars...))
}

// dedupEnv keeps the last value of each variable, as a shell would.
func dedupEnv(env []string) []string {
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
