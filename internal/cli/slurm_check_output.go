package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/gpusched/gpusched/internal/executor/slurm"
)

// writeCheck prints rep for a person: a line saying what was checked,
// one line per finding (level, step, message) with its fix under it,
// and how many problems.
//
//	gpusched slurm check: flow.yaml (2 tasks on Slurm), run directory /home/u/.gpusched/flow
//	ok       controller    Slurmctld(primary) at head1 is UP
//	problem  partition     gpu: no node offers gpu:a100:1 (task train asks it); ...
//	                       fix: ask for a type the partition has (v100), ...
//	1 problem.
func writeCheck(w io.Writer, workflowPath string, tasks int, rep slurm.Report) error {
	what := "the default partition, no settings"
	if workflowPath != "" {
		what = fmt.Sprintf("%s (%s on Slurm)", workflowPath, countOf(tasks, "task"))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "gpusched slurm check: %s, run directory %s\n", what, rep.RunDir)
	for _, f := range rep.Findings {
		fmt.Fprintf(&b, "%-8s %-13s %s\n", f.Level, f.Step, f.Message)
		if f.Fix != "" {
			fmt.Fprintf(&b, "%-8s %-13s fix: %s\n", "", "", f.Fix)
		}
	}
	switch n := rep.Problems(); n {
	case 0:
		b.WriteString("nothing wrong.\n")
	default:
		fmt.Fprintf(&b, "%s.\n", countOf(n, "problem"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func countOf(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// writeCheckJSON prints rep as one JSON object, with "ok" and "problems"
// in front.
func writeCheckJSON(w io.Writer, rep slurm.Report) error {
	out := struct {
		OK       bool `json:"ok"`
		Problems int  `json:"problems"`
		slurm.Report
	}{rep.Problems() == 0, rep.Problems(), rep}
	if out.Findings == nil {
		out.Findings = []slurm.Finding{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
