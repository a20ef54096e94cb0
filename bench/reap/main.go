// Command reap runs a command and reports its wall time and the CPU time
// of every process it started, including those that outlive it.
//
//	reap -o FILE CMD [ARG...]
//
// It writes "WALL USER SYS" (seconds) to FILE: WALL from the start until
// CMD exits; USER and SYS summed over CMD and all its descendants, which
// reap waits for after CMD exits. It makes itself a child subreaper
// (PR_SET_CHILD_SUBREAPER), so a process that detaches from CMD (the
// supervisor of a gpusched run directory, which runs the scheduler and
// lingers a second after it) is still its descendant and counted, which
// /usr/bin/time misses. It exits with CMD's exit code.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	out := flag.String("o", "", "the file that receives WALL USER SYS")
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: reap -o FILE CMD [ARG...]")
		os.Exit(2)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "reap: become a subreaper:", err)
		os.Exit(1)
	}
	c := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	start := time.Now()
	err := c.Run()
	wall := time.Since(start)
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		fmt.Fprintln(os.Stderr, "reap:", err)
		os.Exit(1)
	}
	for { // the descendants that outlived CMD, now ours
		if _, err := unix.Wait4(-1, nil, 0, nil); err == unix.ECHILD {
			break
		} else if err != nil && err != unix.EINTR {
			fmt.Fprintln(os.Stderr, "reap: wait:", err)
			break
		}
	}
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &ru); err != nil {
		fmt.Fprintln(os.Stderr, "reap: getrusage:", err)
		os.Exit(1)
	}
	sec := func(t unix.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	line := fmt.Sprintf("%.3f %.3f %.3f\n", wall.Seconds(), sec(ru.Utime), sec(ru.Stime))
	if err := os.WriteFile(*out, []byte(line), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "reap:", err)
		os.Exit(1)
	}
	os.Exit(code)
}
