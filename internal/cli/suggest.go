package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/budget"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
	"github.com/gpusched/gpusched/internal/workflow"
)

func newSuggestCmd() *cobra.Command {
	var runDir string
	var asJSON bool
	var route routeFlags
	c := &cobra.Command{
		Use:   "suggest [WORKFLOW] [--run-dir DIR | --daemon | --socket PATH | --local] [--json]",
		Short: "Propose GPU and host memory budgets from what tasks really used",
		Long: `Show, for each GPU task, the budget its last attempt asked for
(ASKED), the most GPU memory it was seen to use over its recent attempts
(PEAK, over ATTEMPTS of them, at most 5), and a proposed budget: the peak
plus 10% (at least 512 MiB), rounded up to a multiple of 256 MiB, which is
what memory_mib: auto would ask for. A note flags a budget far above the
peak ("wasted": at least 1.5 times the proposal and 2048 MiB more) and a
peak near or above the budget ("OOM risk": the peak plus its margin is
more than what was asked). A task that sets memory_mib_host (a number or
auto) has a second row, its BUDGET starting with "host", with its peak
resident memory (RSS) by the same rule.

With WORKFLOW, its tasks are shown in file order, from its run
directory (or --run-dir); attempts of an earlier definition of a task
(another command, env, dir...) are not counted. Without it, every task
of the run directory (--run-dir, or the one run under ./.gpusched).
Only attempts that ended by themselves with a peak seen count. Nothing is
written; a run may be going.

Through a daemon: with --daemon or --socket PATH, or without --run-dir
and --local where gpusched run would go through a daemon ($GPUSCHED_SOCKET
set, or a system daemon answering), the daemon's history is read instead
of a run directory: each task of yours (root: everyone's) once, as
memory_mib: auto tells tasks apart (the same id within its run, command
and dir), shown by its newest run's id (13/train), its attempts over its
runs counted together. With WORKFLOW, its tasks as a run of it through the
daemon would have them. --local reads the run directory.

--json prints {"run_dir": ... (or "daemon": SOCKET), "tasks": [{"id", "resource",
"memory_mib", "memory_auto", "memory_mib_max", "asked_mib", "peak_mib",
"attempts", "proposed_mib", "flag"}]}; resource is "memory_mib" (GPU) or
"memory_mib_host", whose budget, auto and maximum the next three give;
flag is "wasted", "oom-risk" or absent, and the sizes are 0 when not
known; through a daemon each also has "owner" and "runs" (the runs of it
read).`,
		Args: optionalWorkflow,
		RunE: func(c *cobra.Command, args []string) error {
			if runDir != "" {
				if route.daemon || route.socket != "" {
					return inputf("--run-dir reads a run directory; it cannot go with --daemon or --socket, which read a daemon's history")
				}
				route.local = true
			}
			rt, err := chooseRoute(c.Context(), route)
			if err != nil {
				return err
			}
			if rt.daemon {
				return suggestThroughDaemon(c, firstArg(args), rt, asJSON)
			}
			return runSuggest(c.OutOrStdout(), firstArg(args), runDir, asJSON)
		},
	}
	c.Flags().StringVar(&runDir, "run-dir", "", "run directory")
	c.Flags().BoolVar(&route.daemon, "daemon", false, "read the daemon's history (the one gpusched submit finds)")
	c.Flags().StringVar(&route.socket, "socket", "", "read the history of the daemon on this socket")
	c.Flags().BoolVar(&route.local, "local", false, "read the run directory even where runs go through a daemon")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON for other programs")
	return c
}

// suggestion is one line of gpusched suggest: a task's budget of one
// resource.
type suggestion struct {
	ID           string      `json:"id"`
	Resource     string      `json:"resource"`   // its workflow key
	MemoryMiB    int64       `json:"memory_mib"` // as set; 0 for auto
	MemoryAuto   bool        `json:"memory_auto,omitempty"`
	MemoryMaxMiB int64       `json:"memory_mib_max,omitempty"`
	AskedMiB     int64       `json:"asked_mib"`
	PeakMiB      int64       `json:"peak_mib"`
	Attempts     int         `json:"attempts"`
	ProposedMiB  int64       `json:"proposed_mib"`
	Flag         budget.Flag `json:"flag,omitempty"`
	Owner        string      `json:"owner,omitempty"` // through a daemon: whose task
	Runs         int         `json:"runs,omitempty"`  // through a daemon: the runs of it read
	exclusive    bool
	ran          bool // the run directory has attempts of it
	res          budget.Resource
}

// suggested reports whether the suggestions advise r's budget of res:
// every GPU task's GPU memory, and the host memory of a task that sets
// it.
func suggested(r *task.ResourceRequest, res budget.Resource) bool {
	if res == budget.HostMemory {
		return r.MemoryHostAuto || r.MemoryMiBHost > 0
	}
	return r.GPU()
}

// adviseAll appends to out the suggestions for task sp, one per resource
// it is advised on.
func adviseAll(out []suggestion, sp *task.Spec, row *store.Row) []suggestion {
	for _, res := range budget.Resources {
		if suggested(&sp.Resources, res) {
			out = append(out, advise(sp, row, res))
		}
	}
	return out
}

func runSuggest(w io.Writer, workflowPath, runDir string, asJSON bool) error {
	dir, err := findRunDir(runDir, workflowPath)
	if err != nil {
		return err
	}
	rows, err := loadRows(dir)
	if err != nil {
		return err
	}
	var out []suggestion
	if workflowPath != "" {
		wf, err := loadWorkflowWith(workflowPath, workflow.Options{})
		if err != nil {
			return err
		}
		out, err = suggestFor(wf.Tasks, rows)
		if err != nil {
			return err
		}
	} else {
		out = suggestAll(rows)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if out == nil {
			out = []suggestion{}
		}
		return enc.Encode(struct {
			RunDir string       `json:"run_dir"`
			Tasks  []suggestion `json:"tasks"`
		}{dir, out})
	}
	writeSuggestions(w, dir, out)
	return nil
}

// suggestFor advises the tasks of a workflow, from rows.
func suggestFor(tasks []gpusched.TaskSpec, rows []store.Row) ([]suggestion, error) {
	byID := make(map[string]*store.Row, len(rows))
	for i := range rows {
		byID[rows[i].ID] = &rows[i]
	}
	var out []suggestion
	for i := range tasks {
		if r := tasks[i].Resources; !r.GPU() && !r.MemoryHostAuto && r.MemoryMiBHost == 0 {
			continue
		}
		// The public and the internal definitions share their JSON.
		b, err := json.Marshal(&tasks[i])
		if err != nil {
			return nil, fmt.Errorf("read task %q: %w", tasks[i].ID, err)
		}
		cur, err := task.DecodeSpec(b)
		if err != nil {
			return nil, fmt.Errorf("read task %q: %w", tasks[i].ID, err)
		}
		out = adviseAll(out, &cur, byID[cur.ID])
	}
	return out, nil
}

// suggestAll advises every task of the run directory, as it was last
// defined.
func suggestAll(rows []store.Row) []suggestion {
	var out []suggestion
	for i := range rows {
		sp, err := task.DecodeSpec(rows[i].Spec)
		if err != nil {
			continue
		}
		out = adviseAll(out, &sp, &rows[i])
	}
	return out
}

// advise is the suggestion for task sp's budget of res, whose row (nil:
// none) holds its attempts, counting those of sp's definition only.
func advise(sp *task.Spec, row *store.Row, res budget.Resource) suggestion {
	r := sp.Resources
	s := suggestion{ID: sp.ID, Resource: res.String(), res: res}
	switch res {
	case budget.HostMemory:
		s.MemoryAuto, s.MemoryMaxMiB = r.MemoryHostAuto, r.MemoryHostMaxMiB
		if !r.MemoryHostAuto {
			s.MemoryMiB = r.MemoryMiBHost
		}
	default:
		s.MemoryAuto, s.MemoryMaxMiB, s.exclusive = r.MemoryAuto, r.MemoryMaxMiB, r.Exclusive
		if !r.MemoryAuto {
			s.MemoryMiB = r.MemoryMiB
		}
	}
	if row == nil {
		return s
	}
	var prev *task.Spec
	if p, err := task.DecodeSpec(row.Spec); err == nil {
		prev = &p
	}
	since := budget.Since(prev, row.Attempts, sp)
	ad := budget.Advise(res, row.Attempts, since)
	s.AskedMiB, s.PeakMiB, s.Attempts, s.ProposedMiB, s.Flag = ad.AskedMiB, ad.PeakMiB, ad.Attempts, ad.ProposedMiB, ad.Flag
	s.ran = len(row.Attempts) > 0 && row.Attempts[len(row.Attempts)-1].Number >= since
	return s
}

func writeSuggestions(w io.Writer, dir string, out []suggestion) {
	writeSuggestionsFrom(w, "run directory "+dir, out)
}

// writeSuggestionsFrom writes the suggestions read from where ("run
// directory DIR", "the daemon at SOCKET").
func writeSuggestionsFrom(w io.Writer, where string, out []suggestion) {
	if len(out) == 0 {
		fmt.Fprintf(w, "no GPU task, nor one with memory_mib_host (%s)\n", where)
		return
	}
	mib := func(v int64) string {
		if v == 0 {
			return "-"
		}
		return strconv.FormatInt(v, 10)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tBUDGET\tASKED\tPEAK\tATTEMPTS\tPROPOSED\tNOTE")
	for _, s := range out {
		setting := mib(s.MemoryMiB)
		switch {
		case s.MemoryAuto && s.MemoryMaxMiB > 0:
			setting = fmt.Sprintf("auto (max %d)", s.MemoryMaxMiB)
		case s.MemoryAuto:
			setting = "auto"
		case s.MemoryMiB == 0 && s.exclusive:
			setting = "exclusive"
		}
		if s.res == budget.HostMemory {
			setting = "host " + setting
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", s.ID, setting, mib(s.AskedMiB), mib(s.PeakMiB), s.Attempts, mib(s.ProposedMiB), s.note())
	}
	tw.Flush()
	fmt.Fprintf(w, "\nPROPOSED is the peak of the last %d attempts + %d%% (at least %d MiB), rounded up to %d MiB;\n"+
		"memory_mib: auto (memory_mib_host: auto for a host row) asks for it at each run (%s)\n", budget.Window, budget.MarginPercent, budget.MinMarginMiB, budget.StepMiB, where)
}

// note says what is remarkable about a suggestion.
func (s suggestion) note() string {
	switch {
	case s.Flag == budget.Wasted:
		return fmt.Sprintf("wasted: asks %.1f× its peak", float64(s.AskedMiB)/float64(s.PeakMiB))
	case s.Flag == budget.OOMRisk && s.PeakMiB > s.AskedMiB:
		return "OOM risk: its peak is above what it asked for"
	case s.Flag == budget.OOMRisk:
		return "OOM risk: its peak is within the margin of what it asked for"
	case !s.ran:
		return "no attempt of this definition yet"
	case s.Attempts == 0 && s.res == budget.HostMemory:
		return "no peak seen (no attempt ended by itself with its memory sampled while it ran)"
	case s.Attempts == 0:
		return "no peak seen (no attempt ended by itself on a card polled while it ran)"
	}
	return ""
}

// budgetNote says how the budgets learned from history were chosen, for
// status and a run's first lines: the GPU memory one, then the host
// memory one, "; " between; "" for a request that learns none.
func budgetNote(r gpusched.ResourceRequest) string {
	gpu, host := gpuBudgetNote(r), hostBudgetNote(r)
	if gpu != "" && host != "" {
		return gpu + "; " + host
	}
	return gpu + host
}

// gpuBudgetNote is budgetNote for the GPU memory budget alone.
func gpuBudgetNote(r gpusched.ResourceRequest) string {
	if !r.MemoryAuto || r.Budget == nil {
		return ""
	}
	return budget.Describe(budget.GPUMemory, r.MemoryMiB, r.Budget)
}

// hostBudgetNote is budgetNote for the host memory budget alone.
func hostBudgetNote(r gpusched.ResourceRequest) string {
	if !r.MemoryHostAuto || r.HostBudget == nil {
		return ""
	}
	return budget.Describe(budget.HostMemory, r.MemoryMiBHost, r.HostBudget)
}
