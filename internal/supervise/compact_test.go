package supervise

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/internal/executor"
)

// TestKeptResults: a compaction keeps, in order, every record that no
// later forget line names for its process, and lines of another layout;
// it drops forgotten records, forget lines and lines cut short.
func TestKeptResults(t *testing.T) {
	dir := t.TempDir()
	f, err := openResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ended := executor.Result{Reason: executor.Exited, Started: true}
	add := func(id string, pid int) {
		t.Helper()
		if err := appendResult(f, record(id, ended, executor.Process{PID: pid})); err != nil {
			t.Fatal(err)
		}
	}
	raw := func(s string) {
		t.Helper()
		if _, err := f.WriteString(s + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	add("a", 10)
	add("b", 11)
	add("c", 12)
	add("d", 13)
	raw(`{"version":99,"id":"future"}`)
	raw(`{"version":1,"forget":["a","b","x"],"pids":[10,99,5]}`) // b: another process's
	add("a", 20)                                                 // the same token again, later
	raw(`{"version":1,"forget":["c"]}`)                          // no pid: every record of c
	raw(`{"version":1,"id":"e","rea`)                            // cut short by a crash
	add("e", 14)

	lines, err := keptResults(filepath.Join(dir, resultsName))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		id, _ := recordID(l)
		if strings.Contains(string(l), `"version":99`) {
			id = "v99"
		}
		got = append(got, id)
	}
	want := "b d v99 a e"
	if strings.Join(got, " ") != want {
		t.Errorf("kept %q, want %q", strings.Join(got, " "), want)
	}
	if !strings.Contains(string(lines[3]), `"pid":20`) {
		t.Errorf("kept record of a = %s, want the later one (pid 20)", lines[3])
	}
}

// TestKeptResultsNoFile: a run directory without results has nothing to
// compact, and says so.
func TestKeptResultsNoFile(t *testing.T) {
	if _, err := keptResults(filepath.Join(t.TempDir(), resultsName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("keptResults of no file: err = %v, want one that says it does not exist", err)
	}
}
