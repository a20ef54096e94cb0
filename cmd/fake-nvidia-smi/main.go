// Command fake-nvidia-smi answers the nvidia-smi questions gpusched asks,
// from the fake GPU state file named by $FAKE_GPU_STATE (see package
// fakegpu), so that tests can run the real probe on machines without a GPU:
//
//	fake-nvidia-smi --query-gpu=index,uuid,name,memory.total,memory.used,memory.free --format=csv
//	fake-nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv
//	fake-nvidia-smi topo -m
//
// topo -m prints the state's topology as it is (a real capture, say), or
// a matrix of its cards in which every pair is PHB apart
// (fakegpu.State.TopologyText).
//
// --format takes csv with optional noheader and nounits, as nvidia-smi
// does. Memory is reported as nvidia-smi would: used = the card's foreign
// memory plus what live processes hold on it; free = total - used -
// reserved. Processes that have died are left out.
//
// Exit statuses: 0 on success; 2 for a bad flag or field; 9 with the
// driver-failure message when $FAKE_GPU_STATE is unset, the file is missing
// or its mode is "driver-failure"; 15 when a card is lost (its error line
// goes to stderr, the other cards are reported); 1 when the state file is
// unreadable. In mode "hang" it never answers.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gpusched/gpusched/internal/gpu/fakegpu"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv(fakegpu.EnvState), os.Stdout, os.Stderr))
}

// Exit statuses, as nvidia-smi uses them.
const (
	exitOK            = 0
	exitBroken        = 1
	exitBadArgs       = 2
	exitDriverFailure = 9
	exitGPULost       = 15
)

// query is a parsed command line.
type query struct {
	topo     bool     // topo -m: the topology matrix
	apps     bool     // --query-compute-apps rather than --query-gpu
	fields   []string // as given, trimmed
	noheader bool
	nounits  bool
}

// Fields the fake can answer, and whether each is an amount of memory.
var (
	gpuFields = map[string]bool{
		"index": false, "uuid": false, "name": false, "pci.bus_id": false, "count": false,
		"memory.total": true, "memory.used": true, "memory.free": true, "memory.reserved": true,
	}
	appsFields = map[string]bool{
		"pid": false, "gpu_uuid": false, "gpu_name": false, "gpu_bus_id": false,
		"process_name": false, "name": false,
		"used_memory": true, "used_gpu_memory": true,
	}
)

func parseArgs(args []string) (query, error) {
	if len(args) > 0 && args[0] == "topo" {
		if len(args) != 2 || (args[1] != "-m" && args[1] != "--matrix") {
			return query{}, fmt.Errorf("only topo -m is faked, not %q", strings.Join(args, " "))
		}
		return query{topo: true}, nil
	}
	fs := flag.NewFlagSet("fake-nvidia-smi", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are printed once, by run
	gpu := fs.String("query-gpu", "", "comma-separated gpu fields")
	apps := fs.String("query-compute-apps", "", "comma-separated compute-app fields")
	format := fs.String("format", "", "csv[,noheader][,nounits]")
	if err := fs.Parse(args); err != nil {
		return query{}, err
	}
	if fs.NArg() > 0 {
		return query{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var q query
	var list string
	var known map[string]bool
	switch {
	case *gpu != "" && *apps != "":
		return query{}, errors.New("give one of --query-gpu and --query-compute-apps")
	case *gpu != "":
		list, known = *gpu, gpuFields
	case *apps != "":
		q.apps, list, known = true, *apps, appsFields
	default:
		return query{}, errors.New("only --query-gpu=... and --query-compute-apps=... are faked")
	}
	for f := range strings.SplitSeq(list, ",") {
		f = strings.TrimSpace(f)
		if _, ok := known[strings.ToLower(f)]; !ok {
			return query{}, fmt.Errorf("field %q is not a valid field to query", f)
		}
		q.fields = append(q.fields, f)
	}
	csv := false
	for opt := range strings.SplitSeq(*format, ",") {
		switch strings.TrimSpace(opt) {
		case "csv":
			csv = true
		case "noheader":
			q.noheader = true
		case "nounits":
			q.nounits = true
		default:
			return query{}, fmt.Errorf("bad --format %q: want csv[,noheader][,nounits]", *format)
		}
	}
	if !csv {
		return query{}, fmt.Errorf("bad --format %q: want csv[,noheader][,nounits]", *format)
	}
	return q, nil
}

func run(args []string, statePath string, stdout, stderr io.Writer) int {
	q, err := parseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "fake-nvidia-smi: %v\n", err)
		return exitBadArgs
	}
	if statePath == "" {
		fmt.Fprintln(stdout, fakegpu.DriverFailureMessage)
		return exitDriverFailure
	}
	s, err := fakegpu.Load(statePath)
	switch {
	case errors.Is(err, fakegpu.ErrNoState):
		fmt.Fprintln(stdout, fakegpu.DriverFailureMessage)
		return exitDriverFailure
	case err != nil:
		fmt.Fprintf(stderr, "fake-nvidia-smi: %v\n", err)
		return exitBroken
	}
	switch s.Mode {
	case fakegpu.ModeDriverFailure:
		fmt.Fprintln(stdout, fakegpu.DriverFailureMessage)
		return exitDriverFailure
	case fakegpu.ModeHang:
		for {
			time.Sleep(time.Hour)
		}
	}
	if q.topo {
		fmt.Fprint(stdout, s.TopologyText())
		return exitOK
	}
	s.DropDead()
	return report(s, q, stdout, stderr)
}

// report prints the table for q. Lost cards get nvidia-smi's error line on
// stderr instead of a row (and hide their processes), and make the exit
// status exitGPULost.
func report(s fakegpu.State, q query, stdout, stderr io.Writer) int {
	known := gpuFields
	if q.apps {
		known = appsFields
	}
	status := exitOK
	lost := map[string]bool{}
	for _, c := range s.Cards {
		if c.Lost {
			lost[c.UUID] = true
			status = exitGPULost
			fmt.Fprintf(stderr, "Unable to determine the device handle for GPU%d: %s: Unknown Error\n", c.Index, shortBus(c.Bus()))
		}
	}
	if !q.noheader {
		cols := make([]string, len(q.fields))
		for i, f := range q.fields {
			cols[i] = f
			if known[strings.ToLower(f)] {
				cols[i] += " [MiB]"
			}
		}
		fmt.Fprintln(stdout, strings.Join(cols, ", "))
	}
	mem := func(na bool, n int64) string {
		switch {
		case na:
			return "[N/A]"
		case q.nounits:
			return strconv.FormatInt(n, 10)
		}
		return strconv.FormatInt(n, 10) + " MiB"
	}
	row := func(value func(field string) string) {
		cells := make([]string, len(q.fields))
		for i, f := range q.fields {
			cells[i] = value(strings.ToLower(f))
		}
		fmt.Fprintln(stdout, strings.Join(cells, ", "))
	}
	if !q.apps {
		for _, c := range s.Cards {
			if c.Lost {
				continue
			}
			row(func(f string) string {
				switch f {
				case "index":
					return strconv.Itoa(c.Index)
				case "uuid":
					return c.UUID
				case "name":
					return c.DisplayName()
				case "pci.bus_id":
					return c.Bus()
				case "count":
					return strconv.Itoa(len(s.Cards))
				case "memory.total":
					return mem(c.NA, c.TotalMiB)
				case "memory.used":
					return mem(c.NA, s.UsedMiB(c))
				case "memory.free":
					return mem(c.NA, s.FreeMiB(c))
				case "memory.reserved":
					return mem(c.NA, c.ReservedMiB)
				}
				return "[N/A]"
			})
		}
		return status
	}
	for _, p := range s.Processes {
		c, _ := s.CardByUUID(p.GPUUUID)
		if lost[c.UUID] {
			continue
		}
		row(func(f string) string {
			switch f {
			case "pid":
				return strconv.Itoa(p.PID)
			case "gpu_uuid":
				return c.UUID
			case "gpu_name":
				return c.DisplayName()
			case "gpu_bus_id":
				return c.Bus()
			case "process_name", "name":
				if p.Name == "" {
					return "[N/A]"
				}
				return p.Name
			case "used_memory", "used_gpu_memory":
				return mem(c.NA, p.UsedMiB)
			}
			return "[N/A]"
		})
	}
	return status
}

// shortBus turns "00000000:34:00.0" into "0000:34:00.0", the form
// nvidia-smi's error lines use.
func shortBus(bus string) string {
	dom, rest, ok := strings.Cut(bus, ":")
	if ok && len(dom) == 8 && strings.HasPrefix(dom, "0000") {
		return dom[4:] + ":" + rest
	}
	return bus
}
