package cli_test

import (
	"cmp"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// attemptTimes returns, from "gpusched status --json" of workflow wf, the
// start and end of every attempt, by task.
func attemptTimes(t *testing.T, wf string) map[string][][2]time.Time {
	t.Helper()
	r := gs(t, "", "status", "--json", wf)
	r.want(t, 0)
	var s struct {
		Tasks []struct {
			ID      string `json:"id"`
			State   string `json:"state"`
			History []struct {
				Start time.Time `json:"start"`
				End   time.Time `json:"end"`
			} `json:"history"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	out := map[string][][2]time.Time{}
	for _, tk := range s.Tasks {
		if tk.State != "complete" {
			t.Errorf("%s is %s, want complete", tk.ID, tk.State)
		}
		for _, a := range tk.History {
			if a.End.IsZero() {
				t.Fatalf("%s: an attempt that has not ended", tk.ID)
			}
			out[tk.ID] = append(out[tk.ID], [2]time.Time{a.Start, a.End})
		}
	}
	return out
}

// mostAtOnce is the most attempts that ran at the same time.
func mostAtOnce(times map[string][][2]time.Time) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, as := range times {
		for _, a := range as {
			edges = append(edges, edge{a[0], 1}, edge{a[1], -1})
		}
	}
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.delta, b.delta)) })
	most, now := 0, 0
	for _, e := range edges {
		now += e.delta
		most = max(most, now)
	}
	return most
}

// Three tasks of 2 cores on --cpus 4 run two at a time, though -j 8 gives
// slots for all: the two first wait for each other (a barrier), so they
// did run together, and the attempts' times show the third ran alone.
func TestRunCPUsTwoAtATime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	barrier := `touch "started-$GPUSCHED_TASK_ID"; i=0
while [ "$(ls | grep -c '^started-')" -lt 2 ]; do
  i=$((i+1)); if [ $i -gt 200 ]; then echo "barrier not reached"; exit 9; fi; sleep 0.02
done; sleep 0.2`
	src := "tasks:\n"
	for _, id := range []string{"c1", "c2", "c3"} {
		src += "  - id: " + id + "\n    args: " + sh(barrier) + "\n    resources: {cpus: 2}\n"
	}
	wf := writeFile(t, filepath.Join(dir, "cpus.yaml"), src)
	gs(t, "", "run", "-j", "8", "--cpus", "4", "--no-progress", wf).want(t, 0)
	if n := mostAtOnce(attemptTimes(t, wf)); n != 2 {
		t.Errorf("%d attempts ran at once, want 2", n)
	}
}

// A custom resource of one unit serializes its takers: each would fail
// (exit 7) if another ran beside it.
func TestRunLicenseSerializes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	excl := `mkdir busy || exit 7; sleep 0.2; rmdir busy`
	src := "scheduling:\n  resources: {licenses: 1}\ntasks:\n"
	for _, id := range []string{"l1", "l2"} {
		src += "  - id: " + id + "\n    args: " + sh(excl) + "\n    resources: {licenses: 1}\n"
	}
	wf := writeFile(t, filepath.Join(dir, "lic.yaml"), src)
	gs(t, "", "run", "-j", "4", "--no-progress", wf).want(t, 0)
	if n := mostAtOnce(attemptTimes(t, wf)); n != 1 {
		t.Errorf("%d attempts ran at once, want 1", n)
	}
}

// A task that asks for more than there is, or for a resource nobody
// declared, is refused before anything runs: exit 2, the file and line.
func TestValidateHostResources(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wide := writeFile(t, filepath.Join(dir, "wide.yaml"), "tasks:\n  - id: a\n    args: [true]\n    resources:\n      cpus: 8\n")
	r := gs(t, dir, "validate", "--cpus", "4", wide)
	r.want(t, 2)
	if msg := oneLineError(t, r); !strings.HasPrefix(msg, "gpusched: "+wide+":5: ") || !strings.Contains(msg, "asks for 8 cpus; this scheduler's tasks may take 4 in all") {
		t.Errorf("validate --cpus 4: %q", msg)
	}
	gs(t, dir, "validate", "--cpus", "8", wide).want(t, 0)
	r = gs(t, dir, "run", "--cpus", "4", "--no-progress", wide)
	r.want(t, 2)
	if msg := oneLineError(t, r); !strings.Contains(msg, wide+":5: ") {
		t.Errorf("run --cpus 4: %q", msg)
	}
	if exists(filepath.Join(dir, ".gpusched")) {
		t.Error("a refused run made its run directory")
	}
	lic := writeFile(t, filepath.Join(dir, "lic.yaml"), "tasks:\n  - id: a\n    args: [true]\n    resources: {licenses: 1}\n")
	r = gs(t, dir, "validate", lic)
	r.want(t, 2)
	if msg := oneLineError(t, r); !strings.HasPrefix(msg, "gpusched: "+lic+":4: ") || !strings.Contains(msg, `unknown key "licenses"`) {
		t.Errorf("validate an undeclared resource: %q", msg)
	}
	r = gs(t, dir, "validate", "--cpus", "0", wide)
	r.want(t, 2)
	oneLineError(t, r)
}
