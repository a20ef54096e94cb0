// Command sleeper is a test helper: a process that sleeps, exits with a
// chosen code, ignores SIGTERM, prints its environment, or leaves a
// grandchild behind (in its process group or escaped from it), so that
// tests of timeouts, signals and process groups run against a real
// process.
//
//	sleeper [-sleep 10s] [-exit N] [-ignore-term] [-print TEXT] [-env NAME]...
//	        [-pidfile FILE] [-grandchild [-escape setsid|pgid] [-clear-env]
//	        [-polite FILE]] [-on-term FILE] [-wait FILE] [-touch FILE]
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
	escape := flag.String("escape", "", "start the grandchild in a new session (setsid) or process group (pgid)")
	clearEnv := flag.Bool("clear-env", false, "start the grandchild with an empty environment")
	polite := flag.String("polite", "", "the grandchild obeys SIGTERM: it appends \"TERM PID\" to FILE and exits")
	wait := flag.String("wait", "", "wait until FILE exists before sleeping")
	onTerm := flag.String("on-term", "", "on SIGTERM, append \"TERM PID\" to FILE and exit")
	var envs names
	flag.Var(&envs, "env", "print NAME=value of this variable (repeatable)")
	flag.Parse()

	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	if *onTerm != "" {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		go func() {
			<-c
			appendLine(*onTerm, fmt.Sprint("TERM ", os.Getpid()))
			os.Exit(0)
		}()
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
		if *polite != "" {
			args = []string{"-on-term", *polite, "-sleep", "1h"}
		}
		if *pidfile != "" {
			args = append(args, "-pidfile", *pidfile)
		}
		c := exec.Command(os.Args[0], args...)
		switch *escape {
		case "":
		case "setsid":
			c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		case "pgid":
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		default:
			fmt.Fprintln(os.Stderr, "sleeper: -escape must be setsid or pgid")
			os.Exit(2)
		}
		if *clearEnv {
			c.Env = []string{}
		}
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
	for *wait != "" {
		if _, err := os.Stat(*wait); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
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
