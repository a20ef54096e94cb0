package slurm

import (
	"cmp"
	"context"
	"encoding"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

// Checking a cluster: Check answers "will gpusched's jobs run here?"
// before a workflow does, in four steps, each a few findings:
//
//	programs    sbatch, squeue, scontrol, scancel, sinfo are there;
//	            scontrol ping answers
//	partitions  each partition the tasks name (or the default) exists and
//	            is up; what its nodes offer; GPUs, CPUs, memory and a
//	            constraint no node of it offers
//	probe       a tiny job per set of settings, through the executor's own
//	            path (held, handle, release, tracking): the helper runs on
//	            a node, reads a marker in the run directory and writes back
//	accounting  sacct answers, or accounting is off (gpusched does not
//	            need it)
//
// A step that cannot be taken (no controller, no sbatch) says so and the
// ones that need it are skipped.

// CheckConfig is what Check looks at. Only RunDir is required.
type CheckConfig struct {
	// Executor is how the probe job is run: an executor made from it
	// (Binary, Commands and PollMin, PollMax, LostGrace; the others are
	// set for one job). Its zero value is the programs in PATH and this
	// program as the helper, as for "gpusched run".
	Executor Config
	// RunDir is the folder the probe job writes into, which the compute
	// nodes must see at the same path: the workflow's run directory. It
	// is made if missing, and what Check makes there is removed.
	RunDir string
	// Tasks are the workflow's tasks that run on Slurm; none: the
	// default partition, with no settings.
	Tasks []CheckTask
	// Wait bounds each probe job, from its submission: a job still
	// pending then is cancelled, with Slurm's reason. Default 2 min.
	Wait time.Duration
}

// CheckTask is what one task asks of Slurm.
type CheckTask struct {
	ID string
	// Slurm are its settings, the workflow's merged under its own; nil:
	// none.
	Slurm *task.SlurmSettings
	// GPUs is how many whole GPUs it asks (gres gpu), of GPUType when
	// that is not empty.
	GPUs    int
	GPUType string
	// LaterGPUTypes are the types it may ask after running out of GPU
	// memory (those of its gpu_types larger than GPUType): a partition
	// must offer them too.
	LaterGPUTypes []string
	// CPUs and MemoryMiBHost are its resources.cpus and memory_mib_host
	// (for one learned from history, the most it may be), which its job
	// asks as --cpus-per-task and --mem unless its slurm: keys say
	// otherwise (executor.Job's fields of the same names).
	CPUs          int
	MemoryMiBHost int64
	// Time is its job's --time (its timeout plus kill grace); 0 none.
	Time time.Duration
	// Dir is its folder, which the nodes must see too; "" none.
	Dir string
}

func (c CheckConfig) withDefaults() CheckConfig {
	c.Wait = cmp.Or(c.Wait, 2*time.Minute)
	c.Executor.PollMin = cmp.Or(c.Executor.PollMin, 250*time.Millisecond)
	c.Executor.PollMax = cmp.Or(c.Executor.PollMax, 2*time.Second)
	// A job that ended is waited for this long for its files: a shared
	// file system may show them late, but the wait is for a person.
	c.Executor.LostGrace = cmp.Or(c.Executor.LostGrace, min(15*time.Second, max(c.Wait/4, time.Second)))
	c.Executor.SubmitRetries = -1 // a refusal is reported, not retried (New reads -1 as none)
	if c.Executor.Commands == nil {
		c.Executor.Commands = PathCommands{}
	}
	return c
}

// Level is how much a finding weighs.
type Level uint8

// The levels. Only a Problem makes a report fail.
const (
	LevelOK      Level = iota // checked, and as it should be
	LevelNote                 // worth knowing; nothing to fix
	LevelProblem              // gpusched's jobs would fail or never run: Fix says what to do
)

func (l Level) String() string {
	switch l {
	case LevelOK:
		return "ok"
	case LevelNote:
		return "note"
	case LevelProblem:
		return "problem"
	}
	return fmt.Sprintf("Level(%d)", uint8(l))
}

// MarshalText writes the level's name.
func (l Level) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

var _ encoding.TextMarshaler = Level(0)

// The steps of a check, as findings name them.
const (
	StepPrograms   = "programs"
	StepController = "controller"
	StepRunDir     = "run directory"
	StepPartition  = "partition"
	StepProbe      = "probe"
	StepAccounting = "accounting"
)

// Finding is one line of a report.
type Finding struct {
	Step    string `json:"step"`
	Level   Level  `json:"level"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"` // for a problem: what to do
}

// Report is what Check found, in the order it looked.
type Report struct {
	RunDir     string          `json:"run_dir"`
	Findings   []Finding       `json:"findings"`
	Partitions []PartitionInfo `json:"partitions,omitempty"` // those the tasks use
	Probes     []Probe         `json:"probes,omitempty"`
}

// Problems is how many findings are problems: 0 when all is well.
func (r Report) Problems() int {
	n := 0
	for _, f := range r.Findings {
		if f.Level == LevelProblem {
			n++
		}
	}
	return n
}

// Check looks at the Slurm cluster that cfg.Executor reaches as
// gpusched's jobs would use it (see the steps above) and reports what it
// found; it fails only through the report. The probe jobs are bounded by
// cfg.Wait and cancelled when ctx is done; every file Check made is
// removed before it returns.
func Check(ctx context.Context, cfg CheckConfig) Report {
	cfg = cfg.withDefaults()
	c := &checker{cfg: cfg, cmds: cfg.Executor.Commands, rep: Report{RunDir: cfg.RunDir}}
	have := c.programs()
	up := false
	if have["scontrol"] {
		up = c.controller(ctx)
	} else {
		c.add(StepController, LevelNote, "not asked: there is no scontrol", "")
	}
	var usable map[string]bool // partitions known fit for a probe; nil: not known
	switch {
	case !up:
		c.add(StepPartition, LevelNote, "not looked at: the controller does not answer", "")
	case !have["sinfo"]:
		c.add(StepPartition, LevelNote, "not looked at: there is no sinfo", "")
	default:
		usable = c.partitions(ctx)
	}
	switch {
	case !up:
		c.add(StepProbe, LevelNote, "not submitted: the controller does not answer", "")
	case !have["sbatch"]:
		c.add(StepProbe, LevelNote, "not submitted: there is no sbatch", "")
	default:
		c.probes(ctx, usable)
	}
	if ctx.Err() != nil {
		c.add(StepAccounting, LevelNote, "not asked: the check was interrupted", "")
	} else {
		c.accounting(ctx)
	}
	return c.rep
}

// checker is one run of Check; one goroutine uses it, but for the probes
// (see probes).
type checker struct {
	cfg  CheckConfig
	cmds Commands
	rep  Report
}

func (c *checker) add(step string, l Level, msg, fix string) {
	c.rep.Findings = append(c.rep.Findings, Finding{Step: step, Level: l, Message: msg, Fix: fix})
}

// checkedPrograms are the programs the executor calls, and sinfo, which
// Check does.
var checkedPrograms = []string{"sbatch", "squeue", "scontrol", "scancel", "sinfo"}

// pathLooker is a Commands that can say where it finds a program
// (PathCommands can): Check then reports the programs that are missing.
type pathLooker interface {
	LookPath(name string) (string, error)
}

// LookPath returns where Run finds the program name: in Dir when set,
// else in PATH.
func (p PathCommands) LookPath(name string) (string, error) {
	if p.Dir == "" {
		return exec.LookPath(name)
	}
	prog := filepath.Join(p.Dir, name)
	info, err := os.Stat(prog)
	if err == nil && (info.IsDir() || info.Mode().Perm()&0o111 == 0) {
		err = fmt.Errorf("%s is not an executable file", prog)
	}
	if err != nil {
		return "", fmt.Errorf("look for %s: %w", name, err)
	}
	return prog, nil
}

// programs reports which of checkedPrograms are missing; it returns the
// ones present (all, when the Commands cannot say).
func (c *checker) programs() map[string]bool {
	have := map[string]bool{}
	l, ok := c.cmds.(pathLooker)
	if !ok {
		for _, p := range checkedPrograms {
			have[p] = true
		}
		c.add(StepPrograms, LevelNote, "not looked for: the executor's Commands cannot say where programs are", "")
		return have
	}
	var missing, folders []string
	for _, p := range checkedPrograms {
		path, err := l.LookPath(p)
		if err != nil {
			missing = append(missing, p)
			continue
		}
		have[p] = true
		if d := filepath.Dir(path); !slices.Contains(folders, d) {
			folders = append(folders, d)
		}
	}
	if len(missing) > 0 {
		where := "PATH"
		if pc, ok := c.cmds.(PathCommands); ok && pc.Dir != "" {
			where = pc.Dir
		}
		c.add(StepPrograms, LevelProblem, fmt.Sprintf("%s not found in %s", strings.Join(missing, ", "), where),
			"run gpusched on a machine where Slurm's client programs work (a login node), or add their folder to PATH")
		return have
	}
	c.add(StepPrograms, LevelOK, fmt.Sprintf("%s in %s", strings.Join(checkedPrograms, ", "), strings.Join(folders, ", ")), "")
	return have
}

// controller asks scontrol ping whether the controller answers.
func (c *checker) controller(ctx context.Context) bool {
	out, err := c.cmds.Run(ctx, "scontrol", "ping")
	up, said := parsePing(out)
	fix := "start slurmctld, or point SLURM_CONF at the cluster's slurm.conf"
	if conf := os.Getenv("SLURM_CONF"); conf != "" {
		fix += " (SLURM_CONF is " + conf + ")"
	}
	switch {
	case up:
		c.add(StepController, LevelOK, said, "")
	case said != "":
		c.add(StepController, LevelProblem, said, fix)
	case err != nil:
		c.add(StepController, LevelProblem, "scontrol ping: "+errText(err), fix)
	default:
		c.add(StepController, LevelProblem, fmt.Sprintf("scontrol ping: no answer read from %q", truncate(string(out), 80)), fix)
	}
	return up
}

// parsePing reads scontrol ping's answer, one line per controller
// ("Slurmctld(primary) at vm is UP"): up when one is; said is the
// controllers' lines, joined.
func parsePing(out []byte) (up bool, said string) {
	var lines []string
	for l := range strings.Lines(string(out)) {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "Slurmctld") {
			continue
		}
		lines = append(lines, l)
		if strings.HasSuffix(l, " is UP") {
			up = true
		}
	}
	return up, strings.Join(lines, "; ")
}

// accounting asks sacct about the probe's job (or the last hour): gpusched
// never needs it, so what it says is only a note.
func (c *checker) accounting(ctx context.Context) {
	if l, ok := c.cmds.(pathLooker); ok {
		if _, err := l.LookPath("sacct"); err != nil {
			c.add(StepAccounting, LevelNote, "no sacct here: gpusched does not need it", "")
			return
		}
	}
	args := []string{"--noheader", "--allocations", "--parsable2", "--format=JobID,State"}
	var ids []string
	for _, p := range c.rep.Probes {
		if p.JobID != "" {
			ids = append(ids, p.JobID)
		}
	}
	if len(ids) > 0 {
		args = append(args, "--jobs="+joinIDs(ids))
	} else {
		args = append(args, "--starttime=now-1hours")
	}
	_, err := c.cmds.Run(ctx, "sacct", args...)
	switch {
	case err != nil && strings.Contains(errText(err), "accounting storage is disabled"):
		c.add(StepAccounting, LevelNote, "off (sacct: Slurm accounting storage is disabled): gpusched does not need it", "")
	case err != nil:
		c.add(StepAccounting, LevelNote, "sacct does not answer ("+errText(err)+"): gpusched does not need it", "")
	default:
		c.add(StepAccounting, LevelOK, "sacct answers", "")
	}
}

// errText is err's message on one line, a Slurm program's standard error
// when it has one.
func errText(err error) string {
	var ce *CommandError
	if errors.As(err, &ce) && ce.Stderr != "" {
		return oneLine(ce.Stderr)
	}
	return oneLine(err.Error())
}
