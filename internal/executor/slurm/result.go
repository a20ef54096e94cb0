package slurm

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
)

// outcome is the result file: how the attempt's command ended, as the
// helper inside the batch job saw it. It is written once, atomically
// (a temporary file renamed into place), so a reader sees all of it or
// nothing.
type outcome struct {
	V        int       `json:"v"`      // layout; 1
	Reason   string    `json:"reason"` // executor.EndReason's name
	Started  bool      `json:"started"`
	ExitCode int       `json:"exit_code"`
	Signal   int       `json:"signal,omitempty"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Error    string    `json:"error,omitempty"`
	Fault    string    `json:"fault,omitempty"` // "command", "environment" or ""
}

// outcomeOf records r.
func outcomeOf(r executor.Result) outcome {
	o := outcome{V: 1, Reason: r.Reason.String(), Started: r.Started, ExitCode: r.ExitCode,
		Signal: int(r.Signal), Start: r.Start, End: r.End}
	if r.Err != nil {
		o.Error = r.Err.Error()
		switch {
		case errors.Is(r.Err, executor.ErrCommand):
			o.Fault = "command"
		case errors.Is(r.Err, executor.ErrEnvironment):
			o.Fault = "environment"
		}
	}
	return o
}

// result is the executor's Result the outcome records.
func (o outcome) result() executor.Result {
	r := executor.Result{Reason: executor.ParseEndReason(o.Reason), Started: o.Started, ExitCode: o.ExitCode,
		Signal: syscall.Signal(o.Signal), Start: o.Start, End: o.End}
	if o.Error != "" {
		err := errors.New(o.Error)
		switch o.Fault {
		case "command":
			err = executor.CommandFault(err)
		case "environment":
			err = executor.EnvironmentFault(err)
		}
		r.Err = err
	}
	if r.Reason == 0 {
		r.Reason = executor.Infrastructure
	}
	return r
}

// writeOutcome writes o to path atomically (writeFileAtomic).
func writeOutcome(path string, o outcome) error {
	b, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	if err := writeFileAtomic(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("result: %w", err)
	}
	return nil
}

// readOutcome reads the result file at path; ok is false when there is
// none yet.
func readOutcome(path string) (o outcome, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return o, false, nil
	}
	if err != nil {
		return o, false, fmt.Errorf("read result %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &o); err != nil || o.V != 1 {
		return o, false, fmt.Errorf("read result %s: not a result file of gpusched (%q)", path, strings.TrimSpace(string(b[:min(len(b), 80)])))
	}
	return o, true, nil
}

// readStarted reads when the helper noted the command started; ok is
// false when it has not (yet).
func readStarted(result string) (t time.Time, ok bool) {
	b, err := os.ReadFile(startedFile(result))
	if err != nil {
		return t, false
	}
	t, err = time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
	return t, err == nil
}
