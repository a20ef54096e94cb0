package supervise

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
)

func TestResultRoundTrip(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	cases := []executor.Result{
		{Reason: executor.Exited, Started: true, ExitCode: 3, Start: start, End: start.Add(time.Second)},
		{Reason: executor.Signalled, Started: true, Signal: syscall.SIGSEGV, Start: start, End: start},
		{Reason: executor.Signalled, Started: true, Signal: syscall.Signal(99), Start: start, End: start},
		{Reason: executor.Unrunnable, Err: executor.CommandFault(errors.New("start x: no such file")), End: start},
		{Reason: executor.Infrastructure, Err: executor.EnvironmentFault(errors.New("open log: EMFILE")), End: start},
		{Reason: executor.Infrastructure, Err: errors.New("stopped"), End: start},
	}
	dir := t.TempDir()
	f, err := openResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, want := range cases {
		if err := appendResult(f, record("tok", want, executor.Process{})); err != nil {
			t.Fatal(err)
		}
		got, ok, err := ReadResult(dir, executor.Orphan{Job: executor.Job{Token: "tok"}})
		if !ok || err != nil {
			t.Fatalf("ReadResult = %v, %v", ok, err)
		}
		if got.Reason != want.Reason || got.Started != want.Started || got.ExitCode != want.ExitCode || got.Signal != want.Signal ||
			!got.Start.Equal(want.Start) || !got.End.Equal(want.End) {
			t.Errorf("read %+v, want %+v (the last record of the attempt)", got, want)
		}
		if (got.Err == nil) != (want.Err == nil) || got.Err != nil && got.Err.Error() != want.Err.Error() {
			t.Errorf("error %v, want %v", got.Err, want.Err)
		}
		for _, class := range []error{executor.ErrCommand, executor.ErrEnvironment} {
			if errors.Is(got.Err, class) != errors.Is(want.Err, class) {
				t.Errorf("error %v: errors.Is %v = %v, want %v", got.Err, class, errors.Is(got.Err, class), errors.Is(want.Err, class))
			}
		}
	}
}

// TestResultOfWhichAttempt: a record is an orphan's only when its token
// and, where both are known, its process match; a line cut short is
// skipped.
func TestResultOfWhichAttempt(t *testing.T) {
	dir := t.TempDir()
	f, err := openResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := executor.Process{PID: 1234, PGID: 1234, StartTicks: 99}
	appendResult(f, record("a", executor.Result{Reason: executor.Exited, Started: true, ExitCode: 4}, p))
	appendResult(f, record("b", executor.Result{Reason: executor.Exited, Started: true, ExitCode: 5}, p))
	f.WriteString(`{"version":1,"id":"b","reason":"exi`) // a crash in the middle of a write

	orphan := func(token string, p executor.Process) executor.Orphan {
		o := executor.Orphan{Job: executor.Job{Token: token}}
		if p.PID != 0 {
			o.Handle = local.EncodeHandle(p)
		}
		return o
	}
	cases := []struct {
		name string
		o    executor.Orphan
		ok   bool
		code int
	}{
		{"same token and process", orphan("a", p), true, 4},
		{"same token, no handle", orphan("a", executor.Process{}), true, 4},
		{"same token, another process", orphan("a", executor.Process{PID: 1234, PGID: 1234, StartTicks: 100}), false, 0},
		{"another token", orphan("c", p), false, 0},
		{"no token", orphan("", p), false, 0},
		{"before a cut line", orphan("b", p), true, 5},
	}
	for _, c := range cases {
		r, ok, err := ReadResult(dir, c.o)
		if err != nil || ok != c.ok || ok && r.ExitCode != c.code {
			t.Errorf("%s: ReadResult = %+v, %v, %v; want found %v, exit code %d", c.name, r, ok, err, c.ok, c.code)
		}
	}
	if _, ok, err := ReadResult(t.TempDir(), orphan("a", p)); ok || err != nil {
		t.Errorf("no results file: ReadResult = %v, %v; want nothing, no error", ok, err)
	}
}

// TestRecordIDQuick: the lines appendResult writes are sorted by id
// without being decoded.
func TestRecordIDQuick(t *testing.T) {
	b, _ := json.Marshal(record("run.task-1.2", executor.Result{Reason: executor.Exited}, executor.Process{}))
	if id, ok := recordID(b); !ok || id != "run.task-1.2" {
		t.Errorf("recordID(%s) = %q, %v", b, id, ok)
	}
	b, _ = json.Marshal(record(`odd"id`, executor.Result{Reason: executor.Exited}, executor.Process{}))
	if _, ok := recordID(b); ok {
		t.Errorf("recordID(%s) read an id that needs unquoting", b)
	}
}

// TestResultsNoLinks: the results file is never written or read through a
// symbolic link.
func TestResultsNoLinks(t *testing.T) {
	const precious = "precious\n"
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "target")
	os.WriteFile(target, []byte(precious), 0o644)
	os.Symlink(target, filepath.Join(dir, resultsName))
	if f, err := openResults(dir); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		if f != nil {
			f.Close()
		}
		t.Errorf("open a planted link for appending: %v, want refused", err)
	}
	if _, _, err := ReadResult(dir, executor.Orphan{Job: executor.Job{Token: "tok"}}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("read through a planted link: %v, want refused", err)
	}
	if b, _ := os.ReadFile(target); string(b) != precious {
		t.Errorf("file behind the planted link = %q, want it unchanged", b)
	}
}
