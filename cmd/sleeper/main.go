// Command sleeper is a test helper: a process that sleeps, exits with a
// chosen code, ignores SIGTERM, prints its environment, or leaves a
// grandchild behind, so that tests of timeouts, signals and process groups
// run against a real process.
//
//	sleeper [-sleep 10s] [-exit N] [-ignore-term] [-print TEXT] [-env NAME]...
//	        [-pidfile FILE] [-grandchild] [-touch FILE]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

type names []string

func (n *names) String() string     { return strings.Join(*n, ",") }
func (n *names) Set(v string) error { *n = append(*n, v); return nil }

func main() {
	sleep := flag.Duration("sleep", 0, "sleep this long before exiting")
	code := flag.Int("exit", 0, "exit with this code")
	ignoreTerm := flag.Bool("ignore-term", false, "ignore SIGTERM")
	text := flag.String("print", "", "print this line to stdout")
	errText := flag.String("stderr", "", "print this line to stderr")
	pidfile := flag.String("pidfile", "", "append this process's PID to FILE")
	grandchild := flag.Bool("grandchild", false, "start a copy of itself that ignores SIGTERM, sleeps an hour and appends its PID to -pidfile")
	touch := flag.String("touch", "", "create FILE before exiting")
	var envs names
	flag.Var(&envs, "env", "print NAME=value of this variable (repeatable)")
	flag.Parse()

	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	if *pidfile != "" {
		appendLine(*pidfile, fmt.Sprint(os.Getpid()))
	}
	if *text != "" {
		fmt.Println(*text)
	}
	if *errText != "" {
		fmt.Fprintln(os.Stderr, *errText)
	}
	for _, n := range envs {
		v, ok := os.LookupEnv(n)
		if !ok {
			v = "<unset>"
		}
		fmt.Printf("%s=%s\n", n, v)
	}
	if *grandchild {
		args := []string{"-ignore-term", "-sleep", "1h"}
		if *pidfile != "" {
			args = append(args, "-pidfile", *pidfile)
		}
		c := exec.Command(os.Args[0], args...)
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "sleeper: start grandchild:", err)
			os.Exit(3)
		}
		// Wait until the grandchild has written its PID, so tests know it.
		for deadline := time.Now().Add(5 * time.Second); *pidfile != "" && time.Now().Before(deadline); {
			b, _ := os.ReadFile(*pidfile)
			if strings.Count(string(b), "\n") >= 2 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	time.Sleep(*sleep)
	if *touch != "" {
		if err := os.WriteFile(*touch, nil, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "sleeper:", err)
			os.Exit(3)
		}
	}
	os.Exit(*code)
}

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sleeper:", err)
		os.Exit(3)
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}
