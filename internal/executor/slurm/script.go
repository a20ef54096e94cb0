package slurm

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpusched/gpusched/internal/executor"
)

// files are where an attempt's own files go in the run directory, beside
// its log: the batch script and the result file.
type files struct {
	script, result, started string
}

func filesOf(job executor.Job) files {
	base := strings.TrimSuffix(job.LogPath, ".log")
	return files{script: base + ".sbatch", result: base + ".result", started: base + ".started"}
}

// startedFile is the file beside result where the helper notes when the
// command started.
func startedFile(result string) string { return strings.TrimSuffix(result, ".result") + ".started" }

// jobName names an attempt's batch job, so that it can be found again
// without its id (squeue --name): the attempt's token carries the run,
// the task and the attempt.
func jobName(job executor.Job) string {
	if job.Token != "" {
		return "gpusched." + job.Token
	}
	return fmt.Sprintf("gpusched.%s.%d", job.TaskID, job.Attempt)
}

// comment is the job's --comment, for people reading squeue.
func comment(job executor.Job) string {
	return fmt.Sprintf("gpusched task=%s attempt=%d", job.TaskID, job.Attempt)
}

// heredocEnd ends the attempt's JSON in the script; JSON on one line
// never is this line.
const heredocEnd = "GPUSCHED_ATTEMPT_END"

// scriptFor is the wrapper script of job: a shell script that hands the
// helper (binary, run with AttemptCommand) the attempt as JSON on its
// standard input. No shell ever reads the task's arguments, folder or
// environment: they are JSON strings in a quoted here-document.
func scriptFor(binary string, job executor.Job, result string) ([]byte, error) {
	sp := attemptSpec{Args: job.Args, Env: job.Env, Dir: job.Dir, LogPath: job.LogPath, LogRoot: job.LogRoot,
		Result: result, Timeout: job.Timeout, KillGrace: job.KillGrace, Token: job.Token}
	b, err := json.Marshal(sp)
	if err != nil {
		return nil, fmt.Errorf("write the batch script of task %s: %w", job.TaskID, err)
	}
	var s strings.Builder
	s.WriteString("#!/bin/sh\n")
	fmt.Fprintf(&s, "# gpusched: task %s, attempt %d. Written by gpusched for Slurm; do not edit.\n", job.TaskID, job.Attempt)
	s.WriteString("# The helper runs the command below without a shell, in its folder, with exactly\n")
	s.WriteString("# its environment (plus Slurm's SLURM_* and GPU variables), passes SIGTERM on,\n")
	s.WriteString("# and writes how it ended to the result file (a temporary file, then renamed).\n")
	fmt.Fprintf(&s, "exec %s %s <<'%s'\n%s\n%s\n", shQuote(binary), AttemptCommand, heredocEnd, b, heredocEnd)
	return []byte(s.String()), nil
}

// shQuote quotes s for a POSIX shell: in single quotes, each single
// quote of s closed, escaped and opened again.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// writeFileAtomic writes b to path (mode perm) through a temporary file
// beside it, synced, then renamed into place: never through a link
// planted there, and never seen half written.
func writeFileAtomic(path string, b []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
