//go:build unix

package nvidiasmi

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// ownGroup makes cmd the leader of a new process group and makes
// cancellation kill that whole group.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
}
