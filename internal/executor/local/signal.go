package local

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/gpusched/gpusched/internal/executor"
)

var _ executor.Signaler = (*Executor)(nil)

// Signal sends sig to the process group of the attempt of h; see
// executor.Signaler.
func (e *Executor) Signal(h executor.Handle, sig syscall.Signal) error { return Signal(h, sig) }

// Signal sends sig to the process group of the local attempt of h, once
// its leader is known to be the attempt's own (the same start time, so
// not a recycled PID).
func Signal(h executor.Handle, sig syscall.Signal) error {
	p, err := DecodeHandle(h)
	if err != nil {
		return err
	}
	if p.PID <= 0 || p.PGID <= 0 {
		return errors.New("signal attempt: its process is not known")
	}
	if p.StartTicks != 0 && StartTicks(p.PID) != p.StartTicks {
		return fmt.Errorf("signal attempt: its process %d is gone", p.PID)
	}
	if err := syscall.Kill(-p.PGID, sig); err != nil {
		return fmt.Errorf("signal process group %d: %w", p.PGID, err)
	}
	return nil
}
