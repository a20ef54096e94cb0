package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Commands runs Slurm's client programs (sbatch, squeue, scontrol,
// scancel). Run returns the program's standard output; a failure to run
// it or a non-zero exit is an error that carries its standard error.
type Commands interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// PathCommands runs Slurm's programs found in PATH (or in Dir, when set),
// each bounded by Timeout (default 60 s).
type PathCommands struct {
	Dir     string
	Timeout time.Duration
}

// Run runs name with args.
func (p PathCommands) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cmpDuration(p.Timeout, time.Minute))
	defer cancel()
	prog := name
	if p.Dir != "" {
		prog = p.Dir + "/" + name
	}
	cmd := exec.CommandContext(ctx, prog, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			// Killed at its timeout, Run says "signal: killed": keep
			// the reason, which classify reads (a controller that does
			// not answer).
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		return out.Bytes(), &CommandError{Name: name, Err: err, Stderr: strings.TrimSpace(errb.String())}
	}
	return out.Bytes(), nil
}

// CommandError is a Slurm program that failed.
type CommandError struct {
	Name   string // sbatch, squeue...
	Err    error
	Stderr string
}

func (e *CommandError) Error() string {
	if e.Stderr != "" {
		return fmt.Sprintf("%s: %s", e.Name, oneLine(e.Stderr))
	}
	return fmt.Sprintf("%s: %v", e.Name, e.Err)
}

func (e *CommandError) Unwrap() error { return e.Err }

// ErrUnreachable marks an error of a Slurm program that could not reach
// the controller (or timed out): nothing is wrong with the request, and
// it is to be tried again later.
var ErrUnreachable = errors.New("slurm controller unreachable")

// unreachableSigns are what Slurm's programs print when slurmctld does
// not answer, or answers that it is too busy.
var unreachableSigns = []string{
	"Unable to contact slurm controller", "Socket timed out", "Connection refused", "Connection timed out",
	"Zero Bytes were transmitted", "Slurm temporarily unable", "temporarily unavailable",
	"Transport endpoint is not connected", "slurm_receive_msg", "Communication connection failure",
}

// classify marks err as ErrUnreachable when its program could not reach
// the controller or was killed at its timeout.
func classify(err error) error {
	var ce *CommandError
	if err == nil || !errors.As(err, &ce) {
		return err
	}
	if errors.Is(ce.Err, context.DeadlineExceeded) {
		return fmt.Errorf("%w (%w)", err, ErrUnreachable)
	}
	var ee *exec.Error
	if errors.As(ce.Err, &ee) {
		return err // the program is not installed: no use waiting
	}
	for _, s := range unreachableSigns {
		if strings.Contains(ce.Stderr, s) {
			return fmt.Errorf("%w (%w)", err, ErrUnreachable)
		}
	}
	return err
}

// invalidJob reports whether err is squeue's or scontrol's answer about
// job ids the controller does not know (any more).
func invalidJob(err error) bool {
	var ce *CommandError
	return errors.As(err, &ce) && strings.Contains(ce.Stderr, "Invalid job id")
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

func cmpDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
