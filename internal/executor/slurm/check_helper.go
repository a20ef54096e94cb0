package slurm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ProbeCommand is the first argument that makes a program built with
// MaybeAttempt answer a probe job of Check (see runProbe) instead of
// running: "PROGRAM __gpusched-slurm-probe TOKEN FOLDER [PATH...]".
const ProbeCommand = "__gpusched-slurm-probe"

// The files of a probe job, in its folder (under the run directory):
// Check writes the marker before it submits; the job writes the report.
const (
	probeMarker = "marker"
	probeReport = "probe.json"
	probeLog    = "probe.log"
)

// probeAnswer is what a probe job writes back: where it ran and what it
// saw.
type probeAnswer struct {
	V           int      `json:"v"` // layout; 1
	Token       string   `json:"token"`
	Host        string   `json:"host"`
	Node        string   `json:"node,omitempty"`   // SLURMD_NODENAME
	JobID       string   `json:"job_id,omitempty"` // SLURM_JOB_ID
	SawMarker   bool     `json:"saw_marker"`
	MarkerError string   `json:"marker_error,omitempty"`
	Missing     []string `json:"missing,omitempty"` // of the paths it was asked to look for
}

// runProbe is the probe job's command (args: TOKEN FOLDER [PATH...]):
// it reads the marker in FOLDER, which must hold TOKEN, looks for each
// PATH, and writes what it found to the report in FOLDER, atomically. It
// prints one line to out (the job's log) and returns 0 when it saw the
// marker and wrote the report, else 1; 2 for arguments it cannot read.
func runProbe(args []string, out io.Writer) int {
	if len(args) < 2 {
		fmt.Fprintf(out, "gpusched slurm probe: want TOKEN FOLDER [PATH...], got %q\n", args)
		return 2
	}
	token, dir := args[0], args[1]
	a := probeAnswer{V: 1, Token: token, Node: os.Getenv("SLURMD_NODENAME"), JobID: os.Getenv("SLURM_JOB_ID")}
	a.Host, _ = os.Hostname()
	b, err := os.ReadFile(filepath.Join(dir, probeMarker))
	switch {
	case err != nil:
		a.MarkerError = err.Error()
	case strings.TrimSpace(string(b)) != token:
		a.MarkerError = fmt.Sprintf("%s holds another check's token: this is another folder at the same path", filepath.Join(dir, probeMarker))
	default:
		a.SawMarker = true
	}
	for _, p := range args[2:] {
		if _, err := os.Stat(p); err != nil {
			a.Missing = append(a.Missing, p)
		}
	}
	enc, _ := json.Marshal(a)
	werr := writeFileAtomic(filepath.Join(dir, probeReport), append(enc, '\n'), 0o644)
	fmt.Fprintf(out, "gpusched slurm probe: host %s, node %s, job %s: marker seen: %v", a.Host, a.Node, a.JobID, a.SawMarker)
	if a.MarkerError != "" {
		fmt.Fprintf(out, " (%s)", a.MarkerError)
	}
	if werr != nil {
		fmt.Fprintf(out, "; report not written: %v", werr)
	}
	fmt.Fprintln(out)
	if werr != nil || !a.SawMarker {
		return 1
	}
	return 0
}

// readProbeAnswer reads the report a probe job wrote in dir; ok is false
// when there is none.
func readProbeAnswer(dir string) (a probeAnswer, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, probeReport))
	if errors.Is(err, os.ErrNotExist) {
		return a, false, nil
	}
	if err != nil {
		return a, false, fmt.Errorf("read the probe's report: %w", err)
	}
	if err := json.Unmarshal(b, &a); err != nil || a.V != 1 {
		return a, false, fmt.Errorf("read the probe's report: %q is not one", truncate(strings.TrimSpace(string(b)), 80))
	}
	return a, true, nil
}
