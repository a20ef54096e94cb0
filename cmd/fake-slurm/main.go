// Command fake-slurm plays Slurm's client programs for tests, on this
// machine alone: installed (linked) as sbatch, squeue, scontrol,
// scancel, sinfo or sacct, it acts as the one its name says; "fake-slurm NAME ARGS..."
// does the same, and "fake-slurm admin ..." plays the cluster's
// administrator (preempt, fail the node, forget a job).
//
// Its state lives in the folder $FAKE_SLURM_DIR: one JSON file per job
// the controller knows under jobs/, one per job it forgot under acct/
// (what accounting keeps), a lock, and calls.log, where every call is appended as a
// line (the program and its arguments), so a test can count calls. Jobs
// run as real processes: releasing a job (or submitting it not held)
// starts "fake-slurm run-job ID" in a session of its own, which runs the
// batch script with /bin/sh, its output appended to --output, and
// records how it ended; as Slurm does, it gives the script
// SLURM_CPUS_PER_TASK and SLURM_MEM_PER_NODE (MB) when --cpus-per-task and
// --mem were given, and CUDA_VISIBLE_DEVICES for --gres=gpu. Its answers
// copy real Slurm's formats (see
// internal/executor/slurm/testdata), for the options gpusched uses only.
//
// Files in $FAKE_SLURM_DIR that change its behaviour:
//
//	down          every call fails as when slurmctld does not answer
//	sbatch-fail   "N message": the next N sbatch calls fail with message
//	start-delay   a duration: how long a released job stays PENDING (read
//	              again while it waits: lowering it starts waiting jobs)
//	kill-wait     a duration: SIGTERM to SIGKILL on cancel (default 1s)
//	sbatch-kill-caller  the next sbatch submits the job, then kills its
//	              caller (SIGKILL) before it answers: a crash between
//	              sbatch and saving the job id
//	nodes         the cluster's nodes, as sinfo --Node prints them (see
//	              check.go); sbatch takes their partitions only. Default:
//	              node fake1 in partition debug, 2 CPUs, gres gpu:2
//	pending-reason  a reason: released jobs stay PENDING with it
//	unshared      jobs fail to start as on a node that cannot open their
//	              --output (FAILED, JobLaunchFailure, exit 0:53)
//	accounting    accounting is on: sacct answers about every job, those
//	              the controller forgot included; without this file sacct
//	              fails as where AccountingStorageType is none
//	slurmdbd-down "N": the next N sacct calls fail as when slurmdbd does
//	              not answer
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// job is one batch job as the fake controller keeps it.
type job struct {
	ID        int       `json:"id"`
	Name      string    `json:"name"`
	Comment   string    `json:"comment"`
	Script    string    `json:"script"` // the copy taken at submission
	Output    string    `json:"output"`
	Append    bool      `json:"append"`
	Chdir     string    `json:"chdir"`
	ExportAll bool      `json:"export_all"`
	Env       []string  `json:"env"` // the submitter's, for --export=ALL
	Gres      string    `json:"gres,omitempty"`
	TimeMin   int       `json:"time_min,omitempty"`
	Args      []string  `json:"args"`
	Held      bool      `json:"held"`
	State     string    `json:"state"`
	Reason    string    `json:"reason"`
	Node      string    `json:"node,omitempty"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	Exit      string    `json:"exit"` // CODE:SIGNAL
	SID       int       `json:"sid,omitempty"`
	ShellPID  int       `json:"shell_pid,omitempty"`
	// CPUsPerTask and MemMB are --cpus-per-task and --mem (in MB), as
	// the job's SLURM_CPUS_PER_TASK and SLURM_MEM_PER_NODE say them; 0:
	// not given.
	CPUsPerTask int   `json:"cpus_per_task,omitempty"`
	MemMB       int64 `json:"mem_mb,omitempty"`
}

var dir string

func main() {
	dir = os.Getenv("FAKE_SLURM_DIR")
	if dir == "" {
		fmt.Fprintln(os.Stderr, "fake-slurm: FAKE_SLURM_DIR is not set")
		os.Exit(2)
	}
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	if name == "fake-slurm" {
		if len(args) == 0 {
			fmt.Fprintln(os.Stderr, "usage: fake-slurm sbatch|squeue|scontrol|scancel|sinfo|sacct|admin|run-job ARGS...")
			os.Exit(2)
		}
		name, args = args[0], args[1:]
	}
	if name != "run-job" && name != "admin" {
		logCall(name, args)
		// sacct asks slurmdbd, not the controller.
		if _, err := os.Stat(filepath.Join(dir, "down")); err == nil && name != "sacct" && !whenDown(name, args) {
			fail(name, "Unable to contact slurm controller (connect failure)")
		}
	}
	switch name {
	case "sbatch":
		sbatch(args)
	case "squeue":
		squeue(args)
	case "scontrol":
		scontrol(args)
	case "scancel":
		scancel(args)
	case "sinfo":
		sinfo(args)
	case "sacct":
		sacct(args)
	case "run-job":
		runJob(args[0])
	case "admin":
		admin(args)
	default:
		fmt.Fprintf(os.Stderr, "fake-slurm: unknown program %q\n", name)
		os.Exit(2)
	}
}

func fail(prog, msg string) {
	switch prog {
	case "sbatch":
		fmt.Fprintf(os.Stderr, "sbatch: error: %s\n", msg)
	case "squeue", "scontrol":
		fmt.Fprintf(os.Stderr, "slurm_load_jobs error: %s\n", msg)
	case "sinfo":
		fmt.Fprintf(os.Stderr, "slurm_load_partitions: %s\n", msg)
	default:
		fmt.Fprintf(os.Stderr, "%s: error: %s\n", prog, msg)
	}
	os.Exit(1)
}

func logCall(name string, args []string) {
	f, err := os.OpenFile(filepath.Join(dir, "calls.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, strings.Join(append([]string{name}, args...), " "))
}

// locked runs f holding the controller's lock.
func locked(f func()) {
	l, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		panic(err)
	}
	defer l.Close()
	if err := syscall.Flock(int(l.Fd()), syscall.LOCK_EX); err != nil {
		panic(err)
	}
	defer syscall.Flock(int(l.Fd()), syscall.LOCK_UN)
	f()
}

func jobPath(id int) string { return filepath.Join(dir, "jobs", strconv.Itoa(id)+".json") }

func load(id int) (*job, bool) {
	b, err := os.ReadFile(jobPath(id))
	if err != nil {
		return nil, false
	}
	var j job
	if json.Unmarshal(b, &j) != nil {
		return nil, false
	}
	return &j, true
}

func save(j *job) {
	b, _ := json.Marshal(j)
	tmp := jobPath(j.ID) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		panic(err)
	}
	if err := os.Rename(tmp, jobPath(j.ID)); err != nil {
		panic(err)
	}
}

func all() []*job {
	ents, _ := os.ReadDir(filepath.Join(dir, "jobs"))
	var out []*job
	for _, e := range ents {
		id, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".json"))
		if err != nil || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		if j, ok := load(id); ok {
			out = append(out, j)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

func ended(state string) bool {
	switch state {
	case "PENDING", "RUNNING", "COMPLETING":
		return false
	}
	return true
}

// opts splits --key=value options from the operands.
func opts(args []string) (map[string]string, []string) {
	o := map[string]string{}
	var rest []string
	for _, a := range args {
		if k, ok := strings.CutPrefix(a, "--"); ok {
			key, v, _ := strings.Cut(k, "=")
			o[key] = v
			continue
		}
		rest = append(rest, a)
	}
	return o, rest
}

func sbatch(args []string) {
	o, rest := opts(args)
	if f := filepath.Join(dir, "sbatch-fail"); fileExists(f) {
		b, _ := os.ReadFile(f)
		nStr, msg, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
		if n, _ := strconv.Atoi(nStr); n > 0 {
			if n == 1 {
				os.Remove(f)
			} else {
				os.WriteFile(f, []byte(fmt.Sprintf("%d %s", n-1, msg)), 0o644)
			}
			fail("sbatch", msg)
		}
	}
	if len(rest) != 1 {
		fail("sbatch", "want one batch script")
	}
	if p := o["partition"]; p != "" && !knownPartition(p) {
		fail("sbatch", "Batch job submission failed: Invalid partition name specified")
	}
	script, err := os.ReadFile(rest[0])
	if err != nil {
		fail("sbatch", fmt.Sprintf("Unable to open file %s", rest[0]))
	}
	j := &job{Name: o["job-name"], Comment: o["comment"], Output: o["output"], Append: o["open-mode"] == "append",
		Chdir: o["chdir"], ExportAll: o["export"] != "NONE", Gres: o["gres"], Args: args, State: "PENDING", Reason: "Priority"}
	if j.ExportAll {
		j.Env = os.Environ()
	}
	if j.Chdir == "" {
		j.Chdir, _ = os.Getwd()
	}
	if j.Output == "" {
		j.Output = filepath.Join(j.Chdir, "slurm-%j.out")
	}
	if t := o["time"]; t != "" {
		j.TimeMin, _ = strconv.Atoi(t)
	}
	if c := o["cpus-per-task"]; c != "" {
		if j.CPUsPerTask, err = strconv.Atoi(c); err != nil || j.CPUsPerTask < 1 {
			fail("sbatch", "Invalid --cpus-per-task argument: "+c)
		}
	}
	if m := o["mem"]; m != "" {
		if j.MemMB = memMB(m); j.MemMB <= 0 {
			fail("sbatch", "Invalid --mem specification")
		}
	}
	_, j.Held = o["hold"]
	if j.Held {
		j.Reason = "JobHeldUser"
	}
	locked(func() {
		os.MkdirAll(filepath.Join(dir, "jobs"), 0o755)
		os.MkdirAll(filepath.Join(dir, "scripts"), 0o755)
		n := 0
		if b, err := os.ReadFile(filepath.Join(dir, "next")); err == nil {
			n, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		n++
		os.WriteFile(filepath.Join(dir, "next"), []byte(strconv.Itoa(n)), 0o644)
		j.ID = n
		j.Script = filepath.Join(dir, "scripts", strconv.Itoa(n)+".sh")
		os.WriteFile(j.Script, script, 0o700)
		save(j)
	})
	if !j.Held {
		spawn(j.ID)
	}
	if f := filepath.Join(dir, "sbatch-kill-caller"); fileExists(f) {
		// The caller dies between sbatch and saving what it answered.
		os.Remove(f)
		syscall.Kill(os.Getppid(), syscall.SIGKILL)
		os.Exit(1)
	}
	if _, ok := o["parsable"]; ok {
		fmt.Println(j.ID)
	} else {
		fmt.Printf("Submitted batch job %d\n", j.ID)
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// memMB is sbatch's --mem in MB: a number with an optional unit K, M
// (the default), G or T; 0 for anything else.
func memMB(s string) int64 {
	num, unit := s, "M"
	if i := len(s) - 1; i > 0 && strings.ContainsAny(s[i:], "KkMmGgTt") {
		num, unit = s[:i], strings.ToUpper(s[i:])
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	switch unit {
	case "K":
		return (n + 1023) / 1024
	case "G":
		return n * 1024
	case "T":
		return n * 1024 * 1024
	}
	return n
}

// spawn starts the runner of job id in a session of its own.
func spawn(id int) {
	self, _ := os.Executable()
	cmd := exec.Command(self, "run-job", strconv.Itoa(id))
	cmd.Args[0] = "fake-slurm"
	cmd.Env = append(os.Environ(), "FAKE_SLURM_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	devnull, _ := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	if err := cmd.Start(); err != nil {
		fail("scontrol", "cannot start job: "+err.Error())
	}
	cmd.Process.Release()
}

func durationFile(name string, def time.Duration) time.Duration {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return def
	}
	d, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil {
		return def
	}
	return d
}

// runJob is a job's runner: it waits out the start delay, runs the batch
// script and records the end, unless the job was ended meanwhile.
func runJob(idStr string) {
	id, _ := strconv.Atoi(idStr)
	for begun := time.Now(); time.Since(begun) < durationFile("start-delay", 0); {
		// Read again while it waits: a job cancelled meanwhile leaves no
		// runner behind, and a shorter delay starts it.
		time.Sleep(50 * time.Millisecond)
		if j, ok := load(id); !ok || j.State != "PENDING" || j.Held {
			return
		}
	}
	var j *job
	gone := false
	reason := controlFile("pending-reason")
	locked(func() {
		var ok bool
		if j, ok = load(id); !ok || j.State != "PENDING" || j.Held {
			gone = true
			return
		}
		if reason != "" { // it waits for ever
			j.Reason, gone = reason, true
			save(j)
			return
		}
		j.State, j.Reason, j.Node, j.Start = "RUNNING", "None", "fake1", time.Now()
		j.SID = os.Getpid() // the runner leads the job's session
		save(j)
	})
	if gone {
		return
	}
	if fileExists(filepath.Join(dir, "unshared")) {
		// The node cannot open --output: slurmd fails the job so.
		finish(id, "FAILED", "JobLaunchFailure", "0:53")
		return
	}
	env := j.Env
	if !j.ExportAll {
		// What --export=NONE leaves: the user's login variables and
		// Slurm's own.
		env = []string{"HOME=" + os.Getenv("HOME"), "PATH=/usr/bin:/bin", "USER=" + os.Getenv("USER"), "SHELL=/bin/sh"}
	}
	env = append(env, "SLURM_JOB_ID="+idStr, "SLURM_JOBID="+idStr, "SLURM_JOB_NAME="+j.Name, "SLURMD_NODENAME=fake1",
		"SLURM_EXPORT_ENV=NONE", "ENVIRONMENT=BATCH")
	if j.CPUsPerTask > 0 {
		env = append(env, "SLURM_CPUS_PER_TASK="+strconv.Itoa(j.CPUsPerTask))
	}
	if j.MemMB > 0 {
		env = append(env, "SLURM_MEM_PER_NODE="+strconv.FormatInt(j.MemMB, 10))
	}
	if n, ok := strings.CutPrefix(j.Gres, "gpu:"); ok {
		// gpu:N or gpu:TYPE:N: the count is last.
		k, _ := strconv.Atoi(n[strings.LastIndexByte(n, ':')+1:])
		var devs []string
		for i := range k {
			devs = append(devs, strconv.Itoa(i))
		}
		env = append(env, "CUDA_VISIBLE_DEVICES="+strings.Join(devs, ","))
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if !j.Append {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	out, err := os.OpenFile(strings.ReplaceAll(j.Output, "%j", idStr), flags, 0o644)
	if err != nil {
		finish(id, "FAILED", "JobLaunchFailure", "1:0")
		return
	}
	cmd := exec.Command("/bin/sh", j.Script)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = j.Chdir, env, out, out
	if err := cmd.Start(); err != nil {
		finish(id, "FAILED", "JobLaunchFailure", "1:0")
		return
	}
	locked(func() {
		if j, ok := load(id); ok {
			j.ShellPID = cmd.Process.Pid
			save(j)
		}
	})
	if j.TimeMin > 0 {
		limit := time.Duration(j.TimeMin) * durationFile("minute", time.Minute)
		time.AfterFunc(limit, func() { stop(id, "TIMEOUT", "TimeLimit", false) })
	}
	err = cmd.Wait()
	exit := "0:0"
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		ws := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			exit = fmt.Sprintf("0:%d", int(ws.Signal()))
		} else {
			exit = fmt.Sprintf("%d:0", ws.ExitStatus())
		}
	}
	state, reason := "COMPLETED", "None"
	if exit != "0:0" {
		state, reason = "FAILED", "NonZeroExitCode"
	}
	finish(id, state, reason, exit)
	// What the script left in the job's session goes with the job.
	killSession(os.Getpid(), syscall.SIGKILL)
}

// finish records the end of job id, unless it ended otherwise already.
func finish(id int, state, reason, exit string) {
	locked(func() {
		j, ok := load(id)
		if !ok {
			return
		}
		if !ended(j.State) {
			j.State, j.Reason = state, reason
		}
		j.Exit, j.End = exit, time.Now()
		save(j)
	})
}

// stop ends job id in state: a pending job at once; a running one gets
// SIGTERM, then SIGKILL after the kill wait (at once with now).
func stop(id int, state, reason string, now bool) {
	var sid int
	locked(func() {
		j, ok := load(id)
		if !ok || ended(j.State) {
			return
		}
		if j.State == "PENDING" {
			j.End = time.Now()
		}
		j.State, j.Reason, sid = state, reason, j.SID
		save(j)
	})
	if sid == 0 {
		return
	}
	if !now {
		killSession(sid, syscall.SIGTERM)
		time.Sleep(durationFile("kill-wait", time.Second))
	}
	killSession(sid, syscall.SIGKILL)
}

// killSession sends sig to every process of session sid but this one
// and the session's leader (the job's runner, which records its end).
func killSession(sid int, sig syscall.Signal) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || pid == sid {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 3 {
			if n, _ := strconv.Atoi(f[3]); n == sid {
				syscall.Kill(pid, sig)
			}
		}
	}
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "N/A"
	}
	return t.Format("2006-01-02T15:04:05")
}

func squeue(args []string) {
	o, _ := opts(args)
	if f, ok := o["format"]; ok && f != "%i|%T|%r|%N|%S|%j" {
		fail("squeue", "fake-slurm knows the format %i|%T|%r|%N|%S|%j only")
	}
	want := map[int]bool{}
	if s := o["jobs"]; s != "" {
		for _, f := range strings.Split(s, ",") {
			n, _ := strconv.Atoi(f)
			want[n] = true
		}
	}
	allStates := strings.EqualFold(o["states"], "all")
	var lines []string
	known := 0
	for _, j := range all() {
		if len(want) > 0 && !want[j.ID] || o["name"] != "" && j.Name != o["name"] {
			continue
		}
		known++
		if !allStates && ended(j.State) {
			continue
		}
		start := j.Start
		lines = append(lines, fmt.Sprintf("%d|%s|%s|%s|%s|%s", j.ID, j.State, j.Reason, j.Node, fmtTime(start), j.Name))
	}
	if len(want) > 0 && known == 0 {
		fail("squeue", "Invalid job id specified")
	}
	if _, ok := o["noheader"]; !ok {
		fmt.Println("JOBID|STATE|REASON|NODELIST|START_TIME|NAME")
	}
	for _, l := range lines {
		fmt.Println(l)
	}
}

func scontrol(args []string) {
	switch {
	case len(args) == 3 && args[0] == "show" && args[1] == "job":
		id, _ := strconv.Atoi(args[2])
		j, ok := load(id)
		if !ok {
			fail("scontrol", "Invalid job id specified")
		}
		exit := j.Exit
		if exit == "" {
			exit = "0:0"
		}
		fmt.Printf("JobId=%d JobName=%s\n   JobState=%s Reason=%s Dependency=(null)\n   ExitCode=%s\n   StartTime=%s EndTime=%s\n   NodeList=%s\n   Comment=%s\n   StdOut=%s\n\n",
			j.ID, j.Name, j.State, j.Reason, exit, fmtTime(j.Start), fmtTime(j.End), orNull(j.Node), j.Comment, j.Output)
	case len(args) == 1 && args[0] == "ping":
		ping()
	case len(args) == 2 && args[0] == "release":
		for _, s := range strings.Split(args[1], ",") {
			id, _ := strconv.Atoi(s)
			release := false
			locked(func() {
				j, ok := load(id)
				if ok && j.Held && j.State == "PENDING" {
					j.Held, j.Reason, release = false, "Priority", true
					save(j)
				}
			})
			if release {
				spawn(id)
			}
		}
	default:
		fail("scontrol", "fake-slurm knows ping, show job ID and release IDS only")
	}
}

func orNull(s string) string {
	if s == "" {
		return "(null)"
	}
	return s
}

func scancel(args []string) {
	o, ids := opts(args)
	sig := o["signal"]
	_, batch := o["batch"]
	for _, s := range ids {
		id, _ := strconv.Atoi(s)
		j, ok := load(id)
		if !ok || ended(j.State) {
			fmt.Fprintf(os.Stderr, "scancel: error: Kill job error on job id %s: Job/step already completing or completed\n", s)
			continue
		}
		switch {
		case sig == "":
			stop(id, "CANCELLED", "None", false)
		case batch && j.ShellPID != 0:
			syscall.Kill(j.ShellPID, signalNamed(sig))
		case !batch && sig == "KILL":
			stop(id, "CANCELLED", "None", true)
		default:
			// Real Slurm sends other signals to the job's steps, not to
			// the batch script; a batch job without steps gets nothing.
		}
	}
}

func signalNamed(s string) syscall.Signal {
	switch strings.TrimPrefix(s, "SIG") {
	case "TERM":
		return syscall.SIGTERM
	case "KILL":
		return syscall.SIGKILL
	case "USR1":
		return syscall.SIGUSR1
	case "USR2":
		return syscall.SIGUSR2
	case "INT":
		return syscall.SIGINT
	}
	n, _ := strconv.Atoi(s)
	return syscall.Signal(n)
}

func admin(args []string) {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: fake-slurm admin preempt|nodefail|oom|forget|vanish ID")
		os.Exit(2)
	}
	id, _ := strconv.Atoi(args[1])
	switch args[0] {
	case "preempt":
		stop(id, "PREEMPTED", "None", false)
	case "nodefail":
		stop(id, "NODE_FAIL", "NodeDown", true)
	case "oom":
		stop(id, "OUT_OF_MEMORY", "OutOfMemory", true)
	case "forget": // MinJobAge went by: accounting alone remembers the job
		forget(id)
	case "vanish": // the job dies with its node, and the controller forgets it
		j, ok := load(id)
		// Accounting keeps it as it last heard (running): forgotten
		// first, so that its runner cannot record an end.
		forget(id)
		if ok && j.SID != 0 {
			syscall.Kill(j.SID, syscall.SIGKILL)
			killSession(j.SID, syscall.SIGKILL)
		}
	default:
		fmt.Fprintf(os.Stderr, "fake-slurm admin: unknown %q\n", args[0])
		os.Exit(2)
	}
}

func acctPath(id int) string { return filepath.Join(dir, "acct", strconv.Itoa(id)+".json") }

// forget moves job id's record from the controller to accounting.
func forget(id int) {
	locked(func() {
		os.MkdirAll(filepath.Join(dir, "acct"), 0o755)
		os.Rename(jobPath(id), acctPath(id))
	})
}

// sacct answers the two queries gpusched makes, as real sacct prints
// them: the tracker's "-X --noheader --parsable2 --jobs=IDS
// --format=JobID,State,ExitCode,NodeList" and the check's "--noheader
// --allocations --parsable2 --format=JobID,State" (with --jobs, or about
// every job). It knows the jobs of the controller and those it forgot;
// unknown ids are left out. Without the accounting file, it fails as
// sacct does where accounting is off (sacct-disabled.stderr).
func sacct(args []string) {
	if !fileExists(filepath.Join(dir, "accounting")) {
		fmt.Fprintln(os.Stderr, "Slurm accounting storage is disabled")
		os.Exit(1)
	}
	if f := filepath.Join(dir, "slurmdbd-down"); fileExists(f) {
		b, _ := os.ReadFile(f)
		if n, _ := strconv.Atoi(strings.TrimSpace(string(b))); n > 0 {
			if n == 1 {
				os.Remove(f)
			} else {
				os.WriteFile(f, []byte(strconv.Itoa(n-1)), 0o644)
			}
			fmt.Fprintln(os.Stderr, "sacct: error: slurm_persist_conn_open_without_init: failed to open persistent connection to host:localhost:6819: Connection refused")
			fmt.Fprintln(os.Stderr, "sacct: error: Sending PersistInit msg: Connection refused")
			fmt.Fprintln(os.Stderr, "sacct: error: Problem talking to the database: Connection refused")
			os.Exit(1)
		}
	}
	o, rest := opts(args)
	_, noheader := o["noheader"]
	_, parsable := o["parsable2"]
	_, allocations := o["allocations"]
	allocations = allocations || len(rest) == 1 && rest[0] == "-X"
	long := o["format"] == "JobID,State,ExitCode,NodeList"
	if !noheader || !parsable || !allocations || !long && o["format"] != "JobID,State" {
		fmt.Fprintln(os.Stderr, "fake-slurm: sacct knows --allocations (-X) --noheader --parsable2 --format=JobID,State[,ExitCode,NodeList] only")
		os.Exit(2)
	}
	var jobs []*job
	if o["jobs"] == "" {
		jobs = append(all(), forgotten()...)
	}
	for _, s := range strings.Split(o["jobs"], ",") {
		id, err := strconv.Atoi(s)
		if err != nil {
			continue
		}
		j, ok := load(id)
		if !ok {
			b, err := os.ReadFile(acctPath(id))
			if err != nil || json.Unmarshal(b, &j) != nil {
				continue
			}
		}
		jobs = append(jobs, j)
	}
	for _, j := range jobs {
		state := j.State
		if state == "CANCELLED" {
			state = "CANCELLED by 0"
		}
		if !long {
			fmt.Printf("%d|%s\n", j.ID, state)
			continue
		}
		exit := j.Exit
		if exit == "" {
			exit = "0:0"
		}
		node := j.Node
		if node == "" {
			node = "None assigned"
		}
		fmt.Printf("%d|%s|%s|%s\n", j.ID, state, exit, node)
	}
}

// forgotten returns the jobs the controller forgot, which accounting
// keeps.
func forgotten() []*job {
	ents, _ := os.ReadDir(filepath.Join(dir, "acct"))
	var out []*job
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, "acct", e.Name()))
		var j job
		if err == nil && json.Unmarshal(b, &j) == nil {
			out = append(out, &j)
		}
	}
	return out
}
