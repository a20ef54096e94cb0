package cli_test

// End-to-end tests of "gpusched report": a real run (CPU tasks, and GPU
// tasks on the fake nvidia-smi), then the report of it, read back.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/gpu/fakegpu"
	"github.com/gpusched/gpusched/internal/testbin"
)

// reportCtx is cancelled a little before the test binary's deadline, so a
// command that hangs is stopped with its output shown rather than the
// binary killed; there is no other bound on how long a command may take.
func reportCtx(t *testing.T) (context.Context, context.CancelFunc) {
	if deadline, ok := t.Deadline(); ok {
		return context.WithDeadline(t.Context(), deadline.Add(-10*time.Second))
	}
	return context.WithCancel(t.Context())
}

// reportGS runs gpusched with env added to its environment.
func reportGS(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := reportCtx(t)
	defer cancel()
	cmd := command(ctx, "", args...)
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("gpusched %s did not finish before the test's deadline\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.stdout, r.stderr)
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("gpusched %s: %v", strings.Join(args, " "), err)
	}
	return r
}

var (
	reportBarRE   = regexp.MustCompile(`<rect class="o-([a-z-]+)" [^>]*><title>([^<]*)</title>`)
	reportRowRE   = regexp.MustCompile(`<tr id="t\d+"><td class="id">([^<]*)</td>`)
	reportHTTPRE  = regexp.MustCompile(`(?i)https?:`)
	reportExtRE   = regexp.MustCompile(`(?i)<link\b|<img\b|<iframe\b|\bsrc\s*=|@import|url\(\s*['"]?[a-z]+:`)
	reportSVGNS   = `xmlns="http://www.w3.org/2000/svg"`
	reportLaneFmt = `data-lane="%s"`
)

// checkReportHTML checks the structure of a report: a whole page that refers
// to nothing outside itself, the given bars by outcome, a row per task.
func checkReportHTML(t *testing.T, html string, outcomes map[string]int, tasks []string, lanes []string) {
	t.Helper()
	if !strings.HasPrefix(html, "<!DOCTYPE html>") || !strings.HasSuffix(strings.TrimSpace(html), "</html>") {
		t.Fatalf("the report is not a whole HTML page:\n%.300s", html)
	}
	if got, ns := len(reportHTTPRE.FindAllString(html, -1)), strings.Count(html, reportSVGNS); got != ns || ns == 0 {
		t.Errorf("%d http(s) URLs in the report, %d of them the SVG namespace; want nothing else", got, ns)
	}
	if m := reportExtRE.FindAllString(html, 5); len(m) > 0 {
		t.Errorf("the report refers to outside resources: %q", m)
	}
	got := map[string]int{}
	for _, m := range reportBarRE.FindAllStringSubmatch(html, -1) {
		got[m[1]]++
		id, _, ok := strings.Cut(m[2], " · attempt ")
		if !ok || !strings.Contains(strings.Join(tasks, "\n")+"\n", id+"\n") {
			t.Errorf("a bar's title does not start with a task id: %q", m[2])
		}
	}
	for k, v := range outcomes {
		if got[k] != v {
			t.Errorf("%d %s bars, want %d (all: %v)", got[k], k, v, got)
		}
	}
	var rows []string
	for _, m := range reportRowRE.FindAllStringSubmatch(html, -1) {
		rows = append(rows, m[1])
	}
	if strings.Join(rows, ",") != strings.Join(tasks, ",") {
		t.Errorf("table rows %v, want one per task in order: %v", rows, tasks)
	}
	for _, l := range lanes {
		if !strings.Contains(html, strings.Replace(reportLaneFmt, "%s", l, 1)) {
			t.Errorf("no lane %s in the report", l)
		}
	}
}

// A finished run with CPU and GPU tasks, a failure with a retry and a
// blocked task: the report is written to RUN_DIR/report.html (its path
// printed), elsewhere with -o, to stdout with "-o -", and shows every
// attempt, both cards' lanes and memory, and every task. The state database
// is not changed.
func TestReport(t *testing.T) {
	t.Parallel()
	smi, err := testbin.Build("cmd/fake-nvidia-smi")
	if err != nil {
		t.Fatal(err)
	}
	job, err := testbin.Build("cmd/fake-gpu-job")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	state := filepath.Join(dir, "gpu-state.json")
	err = fakegpu.Save(state, fakegpu.State{Cards: []fakegpu.Card{
		{Index: 0, UUID: "GPU-5e90c7a1-0000-4000-8000-000000000000", TotalMiB: 81559, ForeignMiB: 4000},
		{Index: 1, UUID: "GPU-5e90c7a1-0000-4000-8000-000000000001", TotalMiB: 81559},
	}})
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"GPUSCHED_NVIDIA_SMI=" + smi, fakegpu.EnvState + "=" + state}
	wf := writeFile(t, filepath.Join(dir, "rep.yaml"), `
scheduling:
  max_parallel_tasks: 4
  gpu_cooldown: 0
  gpu_poll_interval: 100ms
tasks:
  - id: prep
    args: `+sh("sleep 0.2")+`
  - id: big
    dependencies: [prep]
    args: [`+q(job)+`, --mem, "30000", --duration, 800ms]
    resources: {device: cuda, memory_mib: 30000}
  - id: small
    dependencies: [prep]
    args: [`+q(job)+`, --mem, "20000", --duration, 600ms]
    resources: {device: cuda, memory_mib: 20000}
  - id: flaky
    retries: 1
    args: `+sh("exit 3")+`
  - id: after
    dependencies: [flaky]
    args: `+sh("true")+`
  - id: side
    args: `+sh("sleep 0.3")+`
`)
	reportGS(t, env, "run", wf).want(t, 1)
	runDir := filepath.Join(dir, ".gpusched", "rep")
	db := readFile(t, filepath.Join(runDir, "state.db"))
	tasks := []string{"prep", "big", "small", "flaky", "after", "side"}
	outcomes := map[string]int{"complete": 4, "failed": 2, "timed-out": 0, "cancelled": 0, "interrupted": 0, "running": 0}
	lanes := []string{"gpu-0/1", "gpu-1/1", "cpu-1", "cpu-2"}

	r := reportGS(t, nil, "report", wf)
	r.want(t, 0)
	path := filepath.Join(runDir, "report.html")
	if r.stdout != path+"\n" || r.stderr != "" {
		t.Errorf("report printed %q (stderr %q), want its path %s", r.stdout, r.stderr, path)
	}
	html := readFile(t, path)
	checkReportHTML(t, html, outcomes, tasks, lanes)
	for _, s := range []string{"<dt>run</dt><dd>" + runDir + "</dd>", "<dt>cards</dt><dd>2</dd>", "<dt>attempts</dt><dd>6</dd>",
		`<span class="st s-complete">4 complete</span>`, `<span class="st s-failed">1 failed</span>`, `<span class="st s-blocked">1 blocked</span>`,
		"not running", `<figure class="mem" data-card="0">`, `<figure class="mem" data-card="1">`, `class="m-charged"`, "blocked"} {
		if !strings.Contains(html, s) {
			t.Errorf("the report does not contain %q", s)
		}
	}
	// The GPU bars say where they ran and with how much memory.
	if !regexp.MustCompile(`<title>big · attempt 1 · complete\n[^<]*\nGPU [01] · asked 30000 MiB`).MatchString(html) {
		t.Errorf("big's bar does not give its card and memory:\n%s", regexp.MustCompile(`<title>big[^<]*`).FindString(html))
	}
	if got := readFile(t, filepath.Join(runDir, "state.db")); got != db {
		t.Error("report changed state.db")
	}
	for _, f := range listTree(t, runDir) {
		if strings.HasPrefix(filepath.Base(f), ".report.html") {
			t.Errorf("a temporary file is left in the run directory: %s", f)
		}
	}

	// -o FILE, by --run-dir; -o - to stdout.
	other := filepath.Join(dir, "out", "r.html")
	if err := os.MkdirAll(filepath.Dir(other), 0o755); err != nil {
		t.Fatal(err)
	}
	r = reportGS(t, nil, "report", "--run-dir", runDir, "-o", other)
	r.want(t, 0)
	if r.stdout != other+"\n" {
		t.Errorf("report -o printed %q, want %s", r.stdout, other)
	}
	checkReportHTML(t, readFile(t, other), outcomes, tasks, lanes)
	r = reportGS(t, nil, "report", "-o", "-", wf)
	r.want(t, 0)
	checkReportHTML(t, r.stdout, outcomes, tasks, lanes)

	// Errors: no run there (1), too many arguments (2), an unwritable file (1).
	r = reportGS(t, nil, "report", "--run-dir", filepath.Join(dir, "nothing"))
	r.want(t, 1)
	if msg := oneLineError(t, r); !strings.Contains(msg, "no run found") {
		t.Errorf("report of no run: %q", msg)
	}
	reportGS(t, nil, "report", wf, wf).want(t, 2)
	if r := reportGS(t, nil, "report", "--help"); r.code != 0 || !strings.Contains(r.stdout, "Usage:\n  gpusched report [WORKFLOW]") {
		t.Errorf("report --help: exit %d, output %q", r.code, r.stdout)
	}
	if r := reportGS(t, nil, "--help"); !strings.Contains(r.stdout, "  report ") {
		t.Errorf("gpusched --help does not list report:\n%s", r.stdout)
	}
	r = reportGS(t, nil, "report", wf, "-o", filepath.Join(dir, "no", "such", "dir", "r.html"))
	r.want(t, 1)
	oneLineError(t, r)
}

// While a run is going, the report shows its running attempt up to now.
func TestReportLive(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, filepath.Join(dir, "live.yaml"), `
scheduling:
  kill_grace: 200ms
tasks:
  - id: quick
    args: `+sh("true")+`
  - id: long
    dependencies: [quick]
    args: `+sh("sleep 60")+`
`)
	ctx, cancel := reportCtx(t)
	defer cancel()
	cmd := command(ctx, "", "run", wf)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	// Not the status helper: it fails on the database that is not there
	// yet, or not yet set up, in the first moments of the run.
	waitFor(t, time.Minute, "long to be running", func() bool {
		r := reportGS(t, nil, "status", "--json", wf)
		var s statusJSON
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &s) != nil {
			return false
		}
		for _, tk := range s.Tasks {
			if tk.ID == "long" {
				return tk.State == "running"
			}
		}
		return false
	})
	r := reportGS(t, nil, "report", "-o", "-", wf)
	r.want(t, 0)
	checkReportHTML(t, r.stdout, map[string]int{"complete": 1, "running": 1}, []string{"quick", "long"}, []string{"cpu-1"})
	for _, s := range []string{"running: the report shows the run as of", `<line class="now"`, "now (", `<span class="st s-running">1 running</span>`} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("the report of a live run does not contain %q", s)
		}
	}
}

// A run whose scheduler was killed during an attempt, then resumed: the
// report shows two runs, the second marked where it began, and the
// interrupted attempt drawn solid to the first run's last record and faded
// on to the resumption, not as if the first run had gone on.
func TestReportResumed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	again := filepath.Join(dir, "again")
	wf := writeFile(t, filepath.Join(dir, "resume.yaml"), `
tasks:
  - id: first
    args: `+sh("true")+`
  - id: slow
    dependencies: [first]
    args: `+sh("if [ -e "+again+" ]; then exit 0; fi; touch "+again+"; exec sleep 60")+`
`)
	run := startRun(t, wf)
	waitFor(t, time.Minute, "slow to be running", func() bool {
		r := reportGS(t, nil, "status", "--json", wf)
		var s statusJSON
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &s) != nil {
			return false
		}
		for _, tk := range s.Tasks {
			if tk.ID == "slow" {
				return tk.State == "running"
			}
		}
		return false
	})
	if err := run.cmd.Process.Kill(); err != nil { // the scheduler dies; slow's process lives on
		t.Fatal(err)
	}
	<-run.done
	// Its supervisor too, so slow's outcome is lost: it is recorded
	// interrupted (not adopted).
	var s statusJSON
	if r := reportGS(t, nil, "status", "--json", wf); json.Unmarshal([]byte(r.stdout), &s) != nil {
		t.Fatalf("status: %s", r.stderr)
	}
	killSupervisor(t, s.RunDir)
	reportGS(t, nil, "run", wf).want(t, 0) // kills the leftover sleep, runs slow again

	r := reportGS(t, nil, "report", "-o", "-", wf)
	r.want(t, 0)
	html := r.stdout
	checkReportHTML(t, html, map[string]int{"complete": 2, "interrupted": 1}, []string{"first", "slow"}, []string{"cpu-1"})
	for _, s := range []string{"<dt>runs</dt>", "interrupted with 1 attempt running", "resumed: attempts of the run before were recorded as interrupted",
		">run 1</text>", ">run 2</text>", `<rect class="gap"`, `<line class="run"`, "running at its run&#39;s last record"} {
		if !strings.Contains(html, s) {
			t.Errorf("the report of a resumed run does not contain %q", s)
		}
	}
	if n := strings.Count(html, `<rect class="o-interrupted tail"`); n != 1 {
		t.Errorf("%d faded tails, want one for the interrupted attempt", n)
	}
}
