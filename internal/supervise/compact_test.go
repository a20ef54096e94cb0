package supervise

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
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

// TestKeptResultsSweep: a sweep line drops the records before it of every
// attempt it does not list; those after it stay.
func TestKeptResultsSweep(t *testing.T) {
	rec := func(id string) string {
		b, err := json.Marshal(record(id, executor.Result{Reason: executor.Exited, Started: true}, executor.Process{PID: 1}))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tt := range []struct {
		lines []string
		want  string
	}{
		{[]string{rec("a"), rec("b"), rec("c"), `{"version":1,"sweep":["b","gone"]}`, rec("d")}, "b d"},
		{[]string{rec("a"), rec("b"), `{"version":1,"sweep":["b"]}`, rec("d"), `{"version":1,"sweep":[]}`, rec("e")}, "e"},
		{[]string{rec("a"), `{"version":1,"forget":["a"]}`, rec("a"), `{"version":1,"sweep":["a"]}`}, "a"},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, resultsName), []byte(strings.Join(tt.lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		lines, err := keptResults(filepath.Join(dir, resultsName))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range lines {
			id, _ := recordID(l)
			got = append(got, id)
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("%v: kept %q, want %q", tt.lines, strings.Join(got, " "), tt.want)
		}
	}
}
