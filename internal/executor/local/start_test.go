package local

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/gpusched/gpusched/internal/executor"
)

// TestStartErrorClasses covers the faults tests cannot cause for real on
// every machine (EAGAIN, ENOMEM: root ignores RLIMIT_NPROC).
func TestStartErrorClasses(t *testing.T) {
	for _, c := range []struct {
		err   error
		class error // nil: neither
	}{
		{&fs.PathError{Op: "fork/exec", Path: "/x/prog", Err: syscall.ENOENT}, executor.ErrCommand},
		{&fs.PathError{Op: "fork/exec", Path: "/x/prog", Err: syscall.EACCES}, executor.ErrCommand},
		{&fs.PathError{Op: "fork/exec", Path: "/x/prog", Err: syscall.ENOEXEC}, executor.ErrCommand},
		{&fs.PathError{Op: "fork/exec", Path: "/x/prog", Err: syscall.E2BIG}, executor.ErrCommand},
		{&fs.PathError{Op: "fork/exec", Path: "/x/prog", Err: syscall.EAGAIN}, executor.ErrEnvironment},
		{&fs.PathError{Op: "fork/exec", Path: "/x/prog", Err: syscall.ENOMEM}, executor.ErrEnvironment},
		{&fs.PathError{Op: "fork/exec", Path: "/x/prog", Err: syscall.EMFILE}, executor.ErrEnvironment},
		{&fs.PathError{Op: "open", Path: "/dev/null", Err: syscall.ENFILE}, executor.ErrEnvironment},
		{&fs.PathError{Op: "fork/exec", Path: "/x/prog", Err: syscall.ETXTBSY}, nil},
		{errors.New("something else"), nil},
	} {
		err := startError("/x/prog", c.err)
		for _, class := range []error{executor.ErrCommand, executor.ErrEnvironment} {
			if got, want := errors.Is(err, class), class == c.class; got != want {
				t.Errorf("startError(%v): errors.Is(%v) = %v, want %v", c.err, class, got, want)
			}
		}
		if !strings.HasPrefix(err.Error(), "start /x/prog: ") || strings.Count(err.Error(), "/x/prog") != 1 {
			t.Errorf("startError(%v) = %q, want the program named once", c.err, err)
		}
		var errno syscall.Errno
		if fmt.Sprint(c.err) != "something else" && !errors.As(err, &errno) {
			t.Errorf("startError(%v) = %q hides the errno", c.err, err)
		}
	}
}
