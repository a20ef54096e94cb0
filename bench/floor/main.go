// Command floor is the least a program can do to run many commands in
// parallel with a log file each: the floor that bench/throughput.sh
// measures gpusched against. It starts each command with its output in a
// file of its own, all in one folder, at most -j at a time, and does
// nothing else: no state, no process group, no retries, no scan.
//
//	floor -j 2 -logs DIR -n 2000 -- /bin/true     the same argv 2000 times
//	floor -j 2 -logs DIR < commands               one command a line, split on blanks
//
// It exits 1 if a command could not start or did not exit 0.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

func main() {
	j := flag.Int("j", 2, "commands run at once")
	n := flag.Int("n", 0, "run the argv after -- this many times (else read commands from stdin)")
	logs := flag.String("logs", "", "the folder for the log files (created if missing)")
	flag.Parse()
	if *logs == "" || *j < 1 {
		fmt.Fprintln(os.Stderr, "floor: -logs DIR is required, and -j at least 1")
		os.Exit(2)
	}
	cmds, err := commands(*n, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(2)
	}
	if err := os.MkdirAll(*logs, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
	if failed := run(cmds, *j, *logs); failed > 0 {
		fmt.Fprintf(os.Stderr, "floor: %d of %d commands failed\n", failed, len(cmds))
		os.Exit(1)
	}
}

// commands is the argv run n times, or with n 0, the lines of stdin.
func commands(n int, argv []string) ([][]string, error) {
	if n > 0 {
		if len(argv) == 0 {
			return nil, fmt.Errorf("-n %d needs a command after --", n)
		}
		out := make([][]string, n)
		for i := range out {
			out[i] = argv
		}
		return out, nil
	}
	var out [][]string
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 {
			out = append(out, f)
		}
	}
	return out, sc.Err()
}

// run runs cmds, j at a time, the i-th with its output in logs/i.log, and
// returns how many failed.
func run(cmds [][]string, j int, logs string) int {
	next := make(chan int)
	var mu sync.Mutex
	failed := 0
	var wg sync.WaitGroup
	for range j {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := one(cmds[i], filepath.Join(logs, strconv.Itoa(i+1)+".log")); err != nil {
					fmt.Fprintln(os.Stderr, "floor:", err)
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}
		}()
	}
	for i := range cmds {
		next <- i
	}
	close(next)
	wg.Wait()
	return failed
}

// one runs argv with its stdout and stderr appended to the file at log.
func one(argv []string, log string) error {
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	c := exec.Command(argv[0], argv[1:]...)
	c.Stdout, c.Stderr = f, f
	if err := c.Run(); err != nil {
		return fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return nil
}
