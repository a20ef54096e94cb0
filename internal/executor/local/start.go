package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gpusched/gpusched/internal/executor"
)

// checkDir makes sure the working directory exists and is a folder; a
// missing one is the command's fault.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return executor.CommandFault(fmt.Errorf("working directory %s: not a directory", dir))
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	err = fmt.Errorf("working directory %s: %w", dir, err)
	for _, e := range []error{syscall.ENOENT, syscall.ENOTDIR, syscall.EACCES, syscall.ELOOP, syscall.ENAMETOOLONG} {
		if errors.Is(err, e) {
			return executor.CommandFault(err)
		}
	}
	return err
}

// lookPath finds name the way a shell would with the job's own PATH: a name
// with a slash is taken as is (relative to dir), a bare name is searched.
// Not finding it is the command's fault.
func lookPath(name string, env []string, dir string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	pathVar := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathVar = v
		}
	}
	for _, d := range filepath.SplitList(pathVar) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		full := p
		if !filepath.IsAbs(full) && dir != "" {
			full = filepath.Join(dir, p)
		}
		if fi, err := os.Stat(full); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			if !filepath.IsAbs(p) {
				// exec resolves relative paths against the child's dir.
				return "./" + p, nil
			}
			return p, nil
		}
	}
	return "", executor.CommandFault(fmt.Errorf("start %s: executable file not found in PATH", name))
}

// startError describes why starting path failed, classified: what exec
// says about the program (missing, not executable, not a format the kernel
// runs) is the command's fault; lack of processes, memory or descriptors
// is the environment's.
func startError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Op == "fork/exec" {
		err = pe.Err
	}
	err = fmt.Errorf("start %s: %w", path, err)
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return err
	}
	switch errno {
	case syscall.ENOENT, syscall.EACCES, syscall.ENOEXEC, syscall.ENOTDIR, syscall.EISDIR,
		syscall.ELOOP, syscall.ENAMETOOLONG, syscall.E2BIG, syscall.ELIBBAD:
		return executor.CommandFault(err)
	case syscall.EAGAIN, syscall.ENOMEM, syscall.EMFILE, syscall.ENFILE:
		return executor.EnvironmentFault(err)
	}
	return err
}
