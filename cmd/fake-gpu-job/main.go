// Command fake-gpu-job pretends to be a CUDA job, for tests on machines
// without a GPU. It takes memory on every card CUDA would give it, in the
// fake GPU state named by $FAKE_GPU_STATE (see package fakegpu), holds it
// for a while and gives it back.
//
//	fake-gpu-job [--mem MiB] [--duration 2s] [--grow-to MiB --grow-after 500ms]
//	             [--exit N] [--name NAME] [--record FILE]
//
// The cards are the entries of CUDA_VISIBLE_DEVICES (uuids or indices;
// indices are nvidia-smi's when CUDA_DEVICE_ORDER=PCI_BUS_ID), as
// fakegpu.State.Devices reads them: a job given several cards, as a task
// with resources.gpus is, takes --mem (and grows to --grow-to) on each, as
// a data-parallel job holds its model on each of its GPUs. The job checks
// for room and registers its PID with the memory on all its cards in one
// locked step, all or nothing; when a card has less free memory than asked
// for it prints PyTorch's "RuntimeError: CUDA out of memory. Tried to
// allocate N MiB (GPU i; X MiB total capacity; Y MiB free)" to stderr and
// exits 1. With no visible device (or no state, or a lost card) a job
// asking for memory prints a CUDA error and exits 1; a job with --mem 0 and
// no --grow-to uses no GPU at all.
//
// Once registered it prints "fake-gpu-job pid=P gpu=UUID mem=M index=I"
// (gpu=none index=-1 without a GPU; on several cards their uuids and
// indices, comma-separated, and M what it holds on each) on stdout, grows to --grow-to at
// --grow-after if asked (failing with the OOM message when there is no
// room), and lives until --duration has passed since the start, or until
// the growth if that comes later. It then gives its memory back and exits
// with --exit. SIGTERM and SIGINT give the memory back too and exit 143 and
// 130. With --record FILE every step (start, grow, oom, end) is appended to
// FILE as a fakegpu.Event JSON line, under the state lock: one per card.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpusched/gpusched/internal/gpu/fakegpu"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	mem       int64
	growTo    int64
	growAfter time.Duration
	duration  time.Duration
	exit      int
	name      string
	recordTo  string
}

func parseArgs(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("fake-gpu-job", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are printed once, by run
	fs.Int64Var(&o.mem, "mem", 0, "GPU memory to take at start, in MiB")
	fs.Int64Var(&o.growTo, "grow-to", 0, "GPU memory to hold after --grow-after, in MiB (0: no growth)")
	fs.DurationVar(&o.growAfter, "grow-after", 0, "when to grow, from the start")
	fs.DurationVar(&o.duration, "duration", 0, "how long to run, from the start")
	fs.IntVar(&o.exit, "exit", 0, "exit status at the end")
	fs.StringVar(&o.name, "name", "fake-gpu-job", "process name to register")
	fs.StringVar(&o.recordTo, "record", "", "file to append JSON event lines to")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	switch {
	case fs.NArg() > 0:
		return options{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.mem < 0:
		return options{}, errors.New("--mem must not be negative")
	case o.growTo != 0 && o.growTo < o.mem:
		return options{}, errors.New("--grow-to must not be below --mem")
	case o.duration < 0 || o.growAfter < 0:
		return options{}, errors.New("durations must not be negative")
	}
	return o, nil
}

// job is one run: what it was asked to do and what it holds.
type job struct {
	options
	pid   int
	state string // state file path
	// cards are the cards it holds memory on (the first allocation finds
	// them); nil without a GPU.
	cards  []fakegpu.Card
	held   int64 // on each card
	stdout io.Writer
	stderr io.Writer
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "fake-gpu-job: %v\n", err)
		return 2
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	j := &job{options: o, pid: os.Getpid(), state: os.Getenv(fakegpu.EnvState), stdout: stdout, stderr: stderr}
	start := time.Now()
	if j.mem > 0 || j.growTo > 0 {
		if code, ok := j.allocate(j.mem, fakegpu.EventStart); !ok {
			return code
		}
	} else if err := j.record(nil, fakegpu.Event{Kind: fakegpu.EventStart}); err != nil {
		fmt.Fprintf(stderr, "fake-gpu-job: %v\n", err)
		return 1
	}
	gpu, index := "none", "-1"
	if len(j.cards) > 0 {
		uuids, indices := make([]string, len(j.cards)), make([]string, len(j.cards))
		for i, c := range j.cards {
			uuids[i], indices[i] = c.UUID, strconv.Itoa(c.Index)
		}
		gpu, index = strings.Join(uuids, ","), strings.Join(indices, ",")
	}
	fmt.Fprintf(stdout, "fake-gpu-job pid=%d gpu=%s mem=%d index=%s\n", j.pid, gpu, j.held, index)

	if j.growTo > j.held {
		if code, stop := j.wait(sigs, time.Until(start.Add(j.growAfter))); stop {
			return code
		}
		if code, ok := j.allocate(j.growTo-j.held, fakegpu.EventGrow); !ok {
			return j.finish(code, "")
		}
	}
	if code, stop := j.wait(sigs, time.Until(start.Add(j.duration))); stop {
		return code
	}
	return j.finish(j.exit, "")
}

// wait sleeps for d. When a signal comes first it gives the memory back
// and returns the exit status for the signal and true.
func (j *job) wait(sigs <-chan os.Signal, d time.Duration) (int, bool) {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-t.C:
		return 0, false
	case sig := <-sigs:
		code := 130
		if sig == syscall.SIGTERM {
			code = 143
		}
		return j.finish(code, sig.String()), true
	}
}

// allocate takes mib more MiB on each of the job's cards (finding them on
// the first call), all or none, and records kind on each. It prints the
// CUDA error and returns false with exit status 1 when that fails.
func (j *job) allocate(mib int64, kind string) (int, bool) {
	if j.state == "" {
		fmt.Fprintln(j.stderr, "RuntimeError: Found no NVIDIA driver on your system.")
		return 1, false
	}
	var oom *fakegpu.OOMError
	err := fakegpu.Update(j.state, func(s *fakegpu.State) error {
		if s.Mode == fakegpu.ModeDriverFailure {
			return fakegpu.ErrNoState
		}
		if j.cards == nil {
			cards, err := s.Devices(os.Getenv("CUDA_VISIBLE_DEVICES"), os.Getenv("CUDA_DEVICE_ORDER"))
			if err != nil {
				return err
			}
			j.cards = cards
		}
		// A refusal on one card leaves the state as it was (Update saves
		// nothing on an error): only it is recorded.
		grants := make([]fakegpu.Grant, len(j.cards))
		for i, c := range j.cards {
			g, err := s.Allocate(j.pid, c.UUID, j.name, mib)
			if errors.As(err, &oom) {
				return errors.Join(err, j.record(&c, fakegpu.Event{Kind: fakegpu.EventOOM, MemMiB: mib,
					FreeMiB: oom.FreeMiB, TotalMiB: oom.Card.TotalMiB}))
			}
			if err != nil {
				return err
			}
			grants[i] = g
		}
		for i, g := range grants {
			if err := j.record(&j.cards[i], fakegpu.Event{Kind: kind, MemMiB: g.HeldMiB, FreeMiB: g.FreeBefore, TotalMiB: g.Card.TotalMiB}); err != nil {
				return err
			}
		}
		j.held = grants[0].HeldMiB
		return nil
	})
	switch {
	case err == nil:
		return 0, true
	case oom != nil:
		fmt.Fprintf(j.stderr, "RuntimeError: %v\n", oom)
	case errors.Is(err, fakegpu.ErrNoState):
		fmt.Fprintln(j.stderr, "RuntimeError: Found no NVIDIA driver on your system.")
	case errors.Is(err, fakegpu.ErrNoDevice):
		fmt.Fprintln(j.stderr, "RuntimeError: CUDA error: no CUDA-capable device is detected")
	case errors.Is(err, fakegpu.ErrCardLost):
		fmt.Fprintln(j.stderr, "RuntimeError: CUDA error: unknown error")
	default:
		fmt.Fprintf(j.stderr, "fake-gpu-job: %v\n", err)
	}
	return 1, false
}

// finish gives the job's memory back, records the end (on each card) and
// returns code.
func (j *job) finish(code int, signal string) int {
	end := fakegpu.Event{Kind: fakegpu.EventEnd, Exit: code, Signal: signal}
	var err error
	if len(j.cards) == 0 {
		err = j.record(nil, end) // no GPU memory, no lock needed
	} else {
		err = fakegpu.Update(j.state, func(s *fakegpu.State) error {
			held := make([]int64, len(j.cards))
			for _, p := range s.Processes {
				if i := slices.IndexFunc(j.cards, func(c fakegpu.Card) bool { return c.UUID == p.GPUUUID }); p.PID == j.pid && i >= 0 {
					held[i] += p.UsedMiB
				}
			}
			s.Release(j.pid)
			for i := range j.cards {
				e := end
				e.MemMiB, e.FreeMiB, e.TotalMiB = held[i], s.FreeMiB(j.cards[i]), j.cards[i].TotalMiB
				if err := j.record(&j.cards[i], e); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		fmt.Fprintf(j.stderr, "fake-gpu-job: give memory back: %v\n", err)
	}
	return code
}

// record appends e, completed with the job's identity and card c (nil:
// none), to the record file.
func (j *job) record(c *fakegpu.Card, e fakegpu.Event) error {
	if j.recordTo == "" {
		return nil
	}
	e.Time, e.PID, e.Index = time.Now(), j.pid, -1
	if c != nil {
		e.GPU, e.Index = c.UUID, c.Index
	}
	return fakegpu.AppendEvent(j.recordTo, e)
}
