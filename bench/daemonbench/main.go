// Command daemonbench measures the gpusched daemon: submissions per second
// through the Go client with 0, 10,000 and 100,000 tasks queued, through
// the command line (a process per submit), the time of gpusched queue
// --json over every task, and the time from a submit to its task's start
// on an idle daemon. See docs/benchmarks.md.
//
//	go build -o /tmp/gpusched ./cmd/gpusched
//	go run ./bench/daemonbench -gpusched /tmp/gpusched [-queued 0,10000,100000]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpusched/gpusched/client"
)

func main() {
	bin := flag.String("gpusched", "gpusched", "the gpusched binary")
	queued := flag.String("queued", "0,10000,100000", "tasks queued before each measurement")
	n := flag.Int("n", 4000, "submissions measured at each level")
	workers := flag.Int("workers", 16, "concurrent submitters")
	cli := flag.Int("cli", 200, "submissions through the command line")
	flag.Parse()
	if err := run(*bin, *queued, *n, *workers, *cli); err != nil {
		fmt.Fprintln(os.Stderr, "daemonbench:", err)
		os.Exit(1)
	}
}

func run(bin, queued string, n, workers, cliN int) error {
	dir, err := os.MkdirTemp("", "gsb")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	// An idle daemon: from submit to start.
	c, stop, err := startDaemon(bin, filepath.Join(dir, "idle"), "4")
	if err != nil {
		return err
	}
	var lat []time.Duration
	for range 100 {
		t0 := time.Now()
		s, err := c.Submit(ctx, client.Command{Args: []string{"true"}})
		if err != nil {
			return err
		}
		ts, err := c.Wait(ctx, []string{s.Run}, nil)
		if err != nil {
			return err
		}
		lat = append(lat, ts[0].Started.Sub(t0))
	}
	slices.Sort(lat)
	fmt.Printf("submit to start, idle daemon: median %v, p90 %v, max %v (100 tasks, one at a time)\n",
		lat[len(lat)/2].Round(10*time.Microsecond), lat[len(lat)*9/10].Round(10*time.Microsecond), lat[len(lat)-1].Round(10*time.Microsecond))
	stop()

	// A daemon with one slot, held: what is queued waits.
	c, stop, err = startDaemon(bin, filepath.Join(dir, "busy"), "1")
	if err != nil {
		return err
	}
	defer stop()
	blocker, err := c.Submit(ctx, client.Command{Args: []string{"sleep", "3600"}})
	if err != nil {
		return err
	}
	have := 0
	for _, level := range strings.Split(queued, ",") {
		want, err := strconv.Atoi(level)
		if err != nil {
			return err
		}
		if err := fill(ctx, c, blocker.Run, want-have); err != nil {
			return err
		}
		have = max(have, want)
		rate, err := submitRate(ctx, c.Socket(), blocker.Run, n, workers)
		if err != nil {
			return err
		}
		have += n
		fmt.Printf("Go client, %d workers, %d tasks queued: %.0f submissions/s\n", workers, want, rate)
	}
	t0 := time.Now()
	for range cliN {
		cmd := exec.Command(bin, "submit", "--socket", c.Socket(), "--after", blocker.Run, "--", "true")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("submit: %v: %s", err, out)
		}
	}
	have += cliN
	fmt.Printf("command line, one process per submit, one at a time, %d queued: %.0f submissions/s\n", have, float64(cliN)/time.Since(t0).Seconds())
	var times []time.Duration
	for range 5 {
		t0 := time.Now()
		cmd := exec.Command(bin, "queue", "--json", "--all", "--socket", c.Socket())
		cmd.Stdout = nil
		if err := cmd.Run(); err != nil {
			return err
		}
		times = append(times, time.Since(t0))
	}
	slices.Sort(times)
	fmt.Printf("gpusched queue --json --all, %d tasks: median %v, best %v (5 runs)\n", have+1, times[2].Round(time.Millisecond), times[0].Round(time.Millisecond))
	return nil
}

// startDaemon starts a daemon with -j jobs on a state directory of its own.
func startDaemon(bin, dir, jobs string) (*client.Client, func(), error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	sock := filepath.Join(dir, "s")
	cmd := exec.Command(bin, "daemon", "--socket", sock, "--state-dir", filepath.Join(dir, "state"), "-j", jobs)
	logf, _ := os.Create(filepath.Join(dir, "log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := client.Dial(context.Background(), sock)
		if err == nil {
			stop := func() {
				c.Shutdown(context.Background(), true)
				cmd.Wait()
			}
			return c, stop, nil
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			return nil, nil, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fill queues n tasks after the blocker, as workflow runs of 1,000.
func fill(ctx context.Context, c *client.Client, blocker string, n int) error {
	for n > 0 {
		k := min(n, 1000)
		tasks := make([]client.Task, k)
		for i := range tasks {
			tasks[i] = client.Task{ID: "t" + strconv.Itoa(i), Command: []string{"true"}, After: []string{blocker}}
		}
		if _, err := c.SubmitWorkflow(ctx, client.Workflow{Name: "fill", Tasks: tasks}); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// submitRate submits n commands from workers clients at once, each after
// the blocker (so they stay queued), and returns submissions per second.
func submitRate(ctx context.Context, socket, blocker string, n, workers int) (float64, error) {
	clients := make([]*client.Client, workers)
	for i := range clients {
		c, err := client.Dial(ctx, socket)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		clients[i] = c
	}
	env := map[string]string{"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME")}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	t0 := time.Now()
	for i, c := range clients {
		wg.Go(func() {
			for j := i; j < n; j += workers {
				if _, err := c.Submit(ctx, client.Command{Args: []string{"true"}, After: []string{blocker}, Env: env, Dir: "/"}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(t0)
	close(errs)
	for err := range errs {
		return 0, err
	}
	return float64(n) / el.Seconds(), nil
}
