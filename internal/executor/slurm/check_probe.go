package slurm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/task"
)

// Probe is what one probe job found: a job with one set of the tasks'
// settings that runs the helper on a node, reads back through the run
// directory, and is gone when Check returns.
type Probe struct {
	Options []string `json:"options"`         // its sbatch options from the settings
	Tasks   []string `json:"tasks,omitempty"` // the tasks with these settings
	JobID   string   `json:"job_id,omitempty"`
	State   string   `json:"state,omitempty"`  // Slurm's, when last asked
	Reason  string   `json:"reason,omitempty"` // why it waited or ended, as Slurm says
	Node    string   `json:"node,omitempty"`
	Host    string   `json:"host,omitempty"` // the host name the helper saw
	// Ran: the helper ran on the node and its files came back; SawRunDir:
	// it also read the marker Check wrote in the run directory.
	Ran       bool    `json:"ran"`
	SawRunDir bool    `json:"saw_run_dir"`
	Seconds   float64 `json:"seconds,omitempty"` // from submission to its files back
}

// probeTimeout is a probe job's own timeout: sbatch gets --time=1.
const probeTimeout = 30 * time.Second

// probeGroup is the tasks that share the settings a probe takes.
type probeGroup struct {
	settings *task.SlurmSettings // partition, account, qos, constraint, extra_args; 1 CPU
	tasks    []CheckTask
}

// probeGroups groups tasks by the settings a probe job takes from them
// (not cpus_per_task or mem: a probe is tiny); one group with no
// settings when there are no tasks.
func probeGroups(tasks []CheckTask) []probeGroup {
	key := func(s *task.SlurmSettings) string {
		return strings.Join(append([]string{s.Partition, s.Account, s.QOS, s.Constraint}, s.ExtraArgs...), "\x00")
	}
	var gs []probeGroup
	var keys []string
	if len(tasks) == 0 {
		tasks = []CheckTask{{}} // the default partition, no settings
	}
	for _, t := range tasks {
		s := &task.SlurmSettings{CPUsPerTask: 1}
		if t.Slurm != nil {
			s.Partition, s.Account, s.QOS, s.Constraint = t.Slurm.Partition, t.Slurm.Account, t.Slurm.QOS, t.Slurm.Constraint
			s.ExtraArgs = slices.Clone(t.Slurm.ExtraArgs)
		}
		k := key(s)
		i := slices.Index(keys, k)
		if i < 0 {
			i = len(gs)
			keys = append(keys, k)
			gs = append(gs, probeGroup{settings: s})
		}
		if t.ID != "" {
			gs[i].tasks = append(gs[i].tasks, t)
		}
	}
	return gs
}

// options are the sbatch options a probe of g is given from its settings.
func (g probeGroup) options() []string {
	o := []string{}
	s := g.settings
	for _, kv := range [][2]string{{"partition", s.Partition}, {"account", s.Account}, {"qos", s.QOS}, {"constraint", s.Constraint}} {
		if kv[1] != "" {
			o = append(o, "--"+kv[0]+"="+kv[1])
		}
	}
	return append(o, s.ExtraArgs...)
}

// probes submits one probe job per group of settings, at once, except
// to a partition known unfit (usable false; nil: none known), and
// reports each.
func (c *checker) probes(ctx context.Context, usable map[string]bool) {
	groups := probeGroups(c.cfg.Tasks)
	cleanup, err := makeDirs(c.cfg.RunDir)
	if err != nil {
		c.add(StepRunDir, LevelProblem, err.Error(), "give a run directory you can write, on a file system the compute nodes share (--run-dir)")
		return
	}
	defer cleanup()
	binary, berr := helperBinary(c.cfg.Executor)
	ex := New(c.cfg.Executor)
	defer ex.Close()
	type answer struct {
		fs    []Finding
		probe *Probe
	}
	answers := make([]answer, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		switch {
		case usable != nil && !usable[g.settings.Partition]:
			name := g.settings.Partition
			if name == "" {
				name = "the default partition"
			}
			answers[i].fs = []Finding{{Step: StepProbe, Level: LevelNote, Message: fmt.Sprintf("not submitted to %s: see its problem above", name)}}
		case berr != nil:
			answers[i].fs = []Finding{{Step: StepProbe, Level: LevelProblem, Message: "not submitted: " + berr.Error(),
				Fix: "run the gpusched binary itself, or give the executor a helper binary"}}
		default:
			wg.Go(func() {
				fs, p := c.probe(ctx, ex, binary, g)
				answers[i] = answer{fs, &p}
			})
		}
	}
	wg.Wait()
	for _, a := range answers {
		c.rep.Findings = append(c.rep.Findings, a.fs...)
		if a.probe != nil {
			c.rep.Probes = append(c.rep.Probes, *a.probe)
		}
	}
}

// helperBinary is the program a batch job runs as its helper, as the
// executor picks it (Config.Binary).
func helperBinary(cfg Config) (string, error) {
	if cfg.Binary != "" {
		return cfg.Binary, nil
	}
	self, err := os.Executable()
	if err != nil || !helperReady.Load() {
		return "", errors.New("this program cannot serve as its Slurm jobs' helper (it does not call gpusched.SupervisorMain)")
	}
	return self, nil
}

// makeDirs makes dir and the folders above it that are missing; cleanup
// removes those it made, if they are empty by then.
func makeDirs(dir string) (cleanup func(), err error) {
	var made []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		made = append(made, d)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make run directory %s: %w", dir, err)
	}
	return func() {
		for _, d := range made {
			os.Remove(d)
		}
	}, nil
}

// probeFacts are what a probe job left: what judgeProbe reads.
type probeFacts struct {
	group       probeGroup
	binary      string
	runDir      string
	token       string
	wait        time.Duration
	result      executor.Result
	jobID       string   // "" when it was never submitted
	state       jobState // Slurm's, when last asked; zero when it could not be
	timedOut    bool     // still going at wait: cancelled
	interrupted bool     // ctx was done first: cancelled
	unconfirmed bool     // the cancel was not confirmed
	answer      *probeAnswer
	answerErr   error
	logTail     string
	elapsed     time.Duration
}

// probe runs one probe job for g and judges it. Its folder, under the
// run directory, is removed once the job is over.
func (c *checker) probe(ctx context.Context, ex *Executor, binary string, g probeGroup) ([]Finding, Probe) {
	f := probeFacts{group: g, binary: binary, runDir: c.cfg.RunDir, wait: c.cfg.Wait}
	fail := func(err error) ([]Finding, Probe) {
		return []Finding{{Step: StepProbe, Level: LevelProblem, Message: err.Error(),
			Fix: "give a run directory you can write, on a file system the compute nodes share (--run-dir)"}}, Probe{Options: g.options()}
	}
	dir, err := os.MkdirTemp(c.cfg.RunDir, ".slurm-check-")
	if err != nil {
		return fail(fmt.Errorf("make the probe's folder: %w", err))
	}
	defer os.RemoveAll(dir)
	f.token = randomToken()
	if err := writeFileAtomic(filepath.Join(dir, probeMarker), []byte(f.token+"\n"), 0o644); err != nil {
		return fail(fmt.Errorf("write the probe's marker: %w", err))
	}
	args := []string{binary, ProbeCommand, f.token, dir}
	for _, t := range g.tasks {
		if t.Dir != "" && !slices.Contains(args[4:], t.Dir) {
			args = append(args, t.Dir)
		}
	}
	job := executor.Job{TaskID: "slurm-check", Attempt: 1, Args: args, Dir: dir,
		LogPath: filepath.Join(dir, probeLog), LogRoot: dir, Timeout: probeTimeout,
		Token: "check." + f.token[:12], Slurm: g.settings}
	ids := make(chan string, 1)
	hooks := executor.Hooks{Submitted: func(h executor.Handle) error {
		if d, err := decodeHandle(h); err == nil {
			ids <- d.JobID
		}
		return nil
	}}
	jctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	done := make(chan executor.Result, 1)
	begun := time.Now()
	go func() { done <- ex.Execute(jctx, job, hooks) }()
	timer := time.NewTimer(c.cfg.Wait)
	defer timer.Stop()
	select {
	case f.result = <-done:
		f.elapsed = time.Since(begun)
	case <-timer.C:
		f.timedOut = true
	case <-ctx.Done():
		f.interrupted = true
	}
	select {
	case f.jobID = <-ids:
	default:
	}
	if f.timedOut || f.interrupted {
		if f.jobID != "" {
			f.state, _ = c.jobState(f.jobID) // before the cancel: why it waits
		}
		cancel()
		select {
		case f.result = <-done:
		case <-time.After(c.cfg.Executor.LostGrace + time.Minute):
			f.unconfirmed = true
		}
		if f.jobID == "" {
			select {
			case f.jobID = <-ids:
			default:
			}
		}
	} else if f.jobID != "" {
		f.state, _ = c.jobState(f.jobID)
	}
	helperDone := f.result.Reason != executor.Lost && f.result.Reason != executor.Infrastructure && !f.timedOut && !f.interrupted
	if f.jobID != "" && !terminal(f.state.State) && !helperDone {
		// Not known to have ended, and its helper did not say it did
		// (Slurm forgot it, the executor gave up on it, its cancel was
		// not confirmed): a probe is never left behind.
		c.cancelJob(f.jobID)
	}
	if a, ok, err := readProbeAnswer(dir); ok {
		f.answer = &a
	} else {
		f.answerErr = err
	}
	f.logTail = tail(filepath.Join(dir, probeLog), 3)
	return judgeProbe(f)
}

// jobState asks Slurm about job id (scontrol show job: its state, reason,
// node and exit code).
func (c *checker) jobState(id string) (jobState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.cmds.Run(ctx, "scontrol", "show", "job", id)
	if err != nil {
		return jobState{}, err
	}
	return parseShowJob(out)
}

// cancelJob cancels job id, whatever its state; an error is no news (it
// ended).
func (c *checker) cancelJob(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.cmds.Run(ctx, "scancel", id)
}

func randomToken() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// tail is the last n lines of the file at path, on one line; "" when it
// cannot be read.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b[max(0, len(b)-4096):])), "\n")
	return oneLine(strings.Join(lines[max(0, len(lines)-n):], "\n"))
}

// Fixes a probe's problems point to.
const (
	fixShared = "put the run directory on a file system the compute nodes share, at the same path " +
		"(gpusched run --run-dir DIR, or the workflow in such a folder)"
	fixBinary = "put gpusched at the same path on the compute nodes (on the shared file system), the same version as here"
)

// judgeProbe is step 3 of Check, without Slurm: what the probe job f
// left says about the cluster.
func judgeProbe(f probeFacts) ([]Finding, Probe) {
	p := Probe{Options: f.group.options(), JobID: f.jobID, State: f.state.State, Reason: f.state.Reason, Node: f.state.Node}
	for _, t := range f.group.tasks {
		p.Tasks = append(p.Tasks, t.ID)
	}
	what := "the probe job"
	if f.jobID != "" {
		what = "job " + f.jobID
	}
	if len(p.Options) > 0 {
		what += " (" + strings.Join(p.Options, " ") + ")"
	}
	on := ""
	if p.Node != "" {
		on = " on node " + p.Node
	}
	var fs []Finding
	add := func(l Level, msg, fix string) {
		fs = append(fs, Finding{Step: StepProbe, Level: l, Message: msg, Fix: fix})
	}
	cancelled := "; cancelled"
	if f.unconfirmed {
		cancelled = "; its cancel was not confirmed: scancel " + f.jobID
	}
	a := f.answer
	if a != nil && a.Token != f.token {
		a = nil // another check's
	}
	if a != nil {
		p.Host = a.Host
		p.Node = cmpOr(p.Node, a.Node)
		on = " on node " + p.Node
	}
	ranOK := f.result.Reason == executor.Exited && f.result.ExitCode == 0
	switch {
	case f.interrupted:
		add(LevelProblem, what+": interrupted before it ended"+cancelled, "")
	case f.jobID == "" && f.timedOut:
		msg := fmt.Sprintf("%s: not submitted within %v", what, f.wait)
		if err := f.result.Err; err != nil && !errors.Is(err, context.Canceled) {
			msg += " (" + errText(err) + ")"
		}
		add(LevelProblem, msg, "see that sbatch works here, and that the controller answers it")
	case f.jobID == "":
		msg := "not submitted"
		if f.result.Err != nil {
			msg = errText(f.result.Err)
		}
		add(LevelProblem, fmt.Sprintf("%s: sbatch refused it: %s", what, msg), sbatchFix(msg))
	case f.timedOut && p.State == "PENDING":
		add(LevelProblem, fmt.Sprintf("%s: still PENDING after %v (Slurm's reason: %s)%s", what, f.wait, cmpOr(p.Reason, "none given"), cancelled),
			pendingFix(p.Reason))
	case a != nil && a.SawMarker:
		p.Ran, p.SawRunDir = true, true
		p.Seconds = f.elapsed.Round(100 * time.Millisecond).Seconds()
		add(LevelOK, fmt.Sprintf("%s ran%s (host %s): the helper %s ran there, read the marker written in %s, and its files came back",
			what, on, a.Host, f.binary, f.runDir), "")
		if !ranOK && !f.timedOut {
			add(LevelNote, fmt.Sprintf("%s ended %s", what, resultText(f.result)), "")
		}
		if len(a.Missing) > 0 {
			add(LevelProblem, fmt.Sprintf("node %s does not see the folders of %s: %s", p.Node, taskList(f.group.tasks), strings.Join(a.Missing, ", ")),
				"put the tasks' folders (dir:) on the shared file system, at the same paths")
		}
	case a != nil:
		p.Ran = true
		add(LevelProblem, fmt.Sprintf("%s ran%s (host %s), but did not see the marker written in %s: %s", what, on, a.Host, f.runDir, a.MarkerError),
			fixShared+"; a file system that shows new files late (a cache) delays every task")
	case !f.timedOut && f.result.Reason != executor.Lost && f.result.Reason != executor.Infrastructure:
		// The helper wrote the result file, so the run directory is
		// shared, but the probe did not answer.
		add(LevelProblem, fmt.Sprintf("%s ran%s, but the helper's probe did not answer (%s)%s", what, on, resultText(f.result), logNote(f.logTail)), fixBinary)
	case p.Reason == "JobLaunchFailure":
		add(LevelProblem, fmt.Sprintf("%s: Slurm could not start it%s (JobLaunchFailure): the node cannot open its log in %s%s", what, on, f.runDir, logNote(f.logTail)), fixShared)
	case f.state.Exit == "127:0" || strings.Contains(f.logTail, "not found") || strings.Contains(f.logTail, "No such file"):
		add(LevelProblem, fmt.Sprintf("%s: the helper %s does not run%s%s", what, f.binary, on, logNote(f.logTail)), fixBinary)
	case f.timedOut && !terminal(p.State):
		add(LevelProblem, fmt.Sprintf("%s: %s%s, and nothing it wrote came back to %s within %v%s", what, cmpOr(p.State, "in an unknown state"), on, f.runDir, f.wait, cancelled),
			fixShared+"; or wait longer (--wait) if the cluster starts jobs slowly")
	case p.State == "":
		add(LevelProblem, fmt.Sprintf("%s left Slurm (squeue and scontrol no longer know it), and nothing it wrote came back to %s%s",
			what, f.runDir, logNote(f.logTail)), fixShared)
	default:
		state := p.State
		if f.state.Exit != "" && f.state.Exit != "0:0" {
			state += " (exit " + f.state.Exit + ")"
		}
		add(LevelProblem, fmt.Sprintf("%s ended %s%s, and nothing it wrote came back to %s%s", what, state, on, f.runDir, logNote(f.logTail)), fixShared)
	}
	if f.answerErr != nil {
		add(LevelNote, f.answerErr.Error(), "")
	}
	return fs, p
}

func resultText(r executor.Result) string {
	switch {
	case r.Reason == executor.Exited:
		return fmt.Sprintf("exit %d", r.ExitCode)
	case r.Err != nil:
		return fmt.Sprintf("%s: %s", r.Reason, oneLine(r.Err.Error()))
	}
	return r.Reason.String()
}

func logNote(tail string) string {
	if tail == "" {
		return ""
	}
	return "; its log ends: " + truncate(tail, 300)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// sbatchFix is what to do about sbatch's refusal msg.
func sbatchFix(msg string) string {
	for _, f := range []struct{ sign, fix string }{
		{"invalid account", "set slurm.account to an account of yours (sacctmgr show associations user=$USER lists them)"},
		{"invalid qos", "set slurm.qos to a QOS your account may use"},
		{"invalid partition", "set slurm.partition to a partition sinfo lists"},
		{"feature", "change slurm.constraint to features the partition's nodes have (sinfo -o \"%P %f\")"},
		{"node configuration is not available", "no node of the partition can give what the options ask: check slurm.partition, slurm.constraint and slurm.extra_args"},
		{"time limit", "the partition's time limit is shorter than asked: check slurm.extra_args, or choose another partition"},
		{"Unable to contact", "the controller did not answer: run again when it does"},
	} {
		if strings.Contains(strings.ToLower(msg), strings.ToLower(f.sign)) {
			return f.fix
		}
	}
	return "check the workflow's slurm: settings against sbatch's message"
}

// pendingFix is what to do about a job that waits for reason.
func pendingFix(reason string) string {
	switch {
	case reason == "Priority", reason == "Resources", reason == "None", reason == "":
		return "the cluster is busy and the probe waits its turn: run again with a longer --wait"
	case reason == "PartitionConfig":
		return "the options ask more than the partition's nodes have (CPUs, memory, GPUs): check slurm.extra_args, or choose another partition"
	case reason == "PartitionTimeLimit":
		return "the time asked is over the partition's limit: check slurm.extra_args"
	case reason == "PartitionDown", reason == "PartitionInactive", reason == "NodeDown", strings.HasPrefix(reason, "ReqNodeNotAvail"):
		return "the partition's nodes are down, drained or reserved: ask the cluster's administrators, or choose another partition"
	case reason == "BeginTime":
		return "the job asks to start later: remove --begin from slurm.extra_args"
	case strings.HasPrefix(reason, "Dependency"):
		return "the job waits for another: remove --dependency from slurm.extra_args (gpusched orders the tasks itself)"
	case strings.HasPrefix(reason, "JobHeld"):
		return "the job stayed held: scontrol release did not take; see scontrol show job"
	case strings.HasPrefix(reason, "Assoc"), strings.HasPrefix(reason, "QOS"):
		return "a limit of the account or QOS holds it: check slurm.account and slurm.qos (sacctmgr show associations user=$USER)"
	case reason == "InvalidAccount", reason == "InvalidQOS":
		return "set slurm.account and slurm.qos to ones you may use"
	case reason == "BadConstraints":
		return "no node can meet slurm.constraint: change it"
	}
	return "see Slurm's documentation of this reason (man squeue, JOB REASON CODES)"
}
