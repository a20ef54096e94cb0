package slurm

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// queueFormat is the fixed squeue output format the tracker asks for:
// job id, state, reason, node list, start time, name, separated by "|"
// (none of which Slurm puts in these fields).
const queueFormat = "%i|%T|%r|%N|%S|%j"

// jobState is what Slurm says of one job.
type jobState struct {
	ID     string
	State  string    // Slurm's state, e.g. PENDING, RUNNING, COMPLETED, TIMEOUT
	Reason string    // why it waits or ended, e.g. Resources, JobHeldUser
	Node   string    // where it runs or ran
	Start  time.Time // when it started running; zero while it waits
	Name   string
	Exit   string // "CODE:SIGNAL" or a raw wait status, from scontrol; "" from squeue
}

// held reports whether the job waits for a release.
func (s jobState) held() bool {
	return s.State == "PENDING" && strings.HasPrefix(s.Reason, "JobHeld")
}

// eachRow calls fn with the fields of each non-blank line of out, a
// Slurm program's output in a format of fields separated by |; it stops
// at fn's first error.
func eachRow(out []byte, fn func(line string, f []string) error) error {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if err := fn(line, strings.Split(line, "|")); err != nil {
			return err
		}
	}
	return sc.Err()
}

// parseQueue reads squeue's output in queueFormat, one job a line.
func parseQueue(out []byte) ([]jobState, error) {
	var jobs []jobState
	err := eachRow(out, func(line string, f []string) error {
		if len(f) < 6 {
			return fmt.Errorf("read squeue output: %q has %d fields, want 6", line, len(f))
		}
		s := jobState{ID: f[0], State: baseState(f[1]), Reason: f[2], Node: f[3], Name: strings.Join(f[5:], "|")}
		if s.State == "RUNNING" || terminal(s.State) || s.State == "COMPLETING" {
			s.Start = parseTime(f[4])
		}
		jobs = append(jobs, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return jobs, nil
}

// parseShowJob reads "scontrol show job ID"'s KEY=VALUE output.
func parseShowJob(out []byte) (jobState, error) {
	kv := map[string]string{}
	for _, field := range strings.Fields(string(out)) {
		if k, v, ok := strings.Cut(field, "="); ok {
			if _, seen := kv[k]; !seen {
				kv[k] = v
			}
		}
	}
	if kv["JobId"] == "" || kv["JobState"] == "" {
		return jobState{}, fmt.Errorf("read scontrol output: no JobId or JobState in %q", truncate(string(out), 120))
	}
	s := jobState{ID: kv["JobId"], State: baseState(kv["JobState"]), Reason: kv["Reason"], Node: kv["NodeList"],
		Name: kv["JobName"], Exit: kv["ExitCode"]}
	if s.Node == "(null)" {
		s.Node = ""
	}
	if s.State != "PENDING" {
		s.Start = parseTime(kv["StartTime"])
	}
	return s, nil
}

// baseState drops the flags some versions append ("CANCELLED by 1000").
func baseState(s string) string {
	s, _, _ = strings.Cut(s, " ")
	return strings.TrimSuffix(s, "+")
}

// parseTime reads Slurm's local timestamps; zero for "N/A", "Unknown"...
func parseTime(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02T15:04:05", s, time.Local)
	if err != nil {
		return time.Time{}
	}
	return t
}

// terminal reports whether Slurm's state means the job has ended.
func terminal(state string) bool {
	switch state {
	case "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "PREEMPTED", "NODE_FAIL",
		"BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT":
		return true
	}
	return false
}

// decodeExit reads a job's exit as Slurm reports it: "CODE:SIGNAL"
// (scontrol, sacct), or a raw wait status ("768" is exit 3, "9" is
// SIGKILL) as its REST interface and job completion records give it.
func decodeExit(s string) (code int, sig syscall.Signal, err error) {
	if a, b, ok := strings.Cut(s, ":"); ok {
		c, err1 := strconv.Atoi(a)
		n, err2 := strconv.Atoi(b)
		if err1 != nil || err2 != nil || c < 0 || n < 0 {
			return 0, 0, fmt.Errorf("read exit code %q: not CODE:SIGNAL", s)
		}
		return c, syscall.Signal(n), nil
	}
	raw, err := strconv.Atoi(s)
	if err != nil || raw < 0 {
		return 0, 0, fmt.Errorf("read exit code %q: not a wait status", s)
	}
	ws := syscall.WaitStatus(raw)
	if ws.Signaled() {
		return 0, ws.Signal(), nil
	}
	return ws.ExitStatus(), 0, nil
}

// parseJobID reads "sbatch --parsable"'s answer: "ID" or "ID;CLUSTER".
func parseJobID(out []byte) (string, error) {
	s := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 { // warnings go before
		s = strings.TrimSpace(s[i+1:])
	}
	id, _, _ := strings.Cut(s, ";")
	if _, err := strconv.ParseUint(id, 10, 64); err != nil {
		return "", fmt.Errorf("read sbatch's job id: %q is not one", truncate(s, 80))
	}
	return id, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
