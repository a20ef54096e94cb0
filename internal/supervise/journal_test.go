package supervise

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/executortest"
	"github.com/gpusched/gpusched/internal/testbin"
)

// A journal record reads back as it was written, whatever its id holds;
// a line cut short (a scheduler that died writing it) is skipped.
func TestJournalRoundTrip(t *testing.T) {
	f, err := createJournal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	since := time.Date(2026, 12, 2, 21, 23, 31, 123456789, time.UTC)
	want := []journalRecord{
		{ID: "abc.train.1", Task: "train", Attempt: 1, PID: 4242, PGID: 4242, StartTicks: 987654, Since: since,
			Timeout: 90 * time.Second, KillGrace: 5 * time.Second},
		{ID: "we\"ird\\id\n", Task: "t", Attempt: 2, PID: 7, PGID: 7, StartTicks: 1, Since: since, Cgroups: true},
	}
	for i := range want {
		if _, err := f.Write(appendJournalRecord(nil, &want[i])); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Write([]byte(`{"id":"cut","task":"x","attempt":1,"pid":9`)); err != nil {
		t.Fatal(err)
	}
	got, err := readJournal(f)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, want)
	}
}

// The journal is no file anyone sees in the run directory.
func TestJournalUnnamed(t *testing.T) {
	dir := t.TempDir()
	f, err := createJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Errorf("the run directory holds %v; the journal should have no name", names)
	}
}

// BenchmarkJournalNote is what a scheduler spends per attempt on its
// journal: one record encoded and appended (see docs/benchmarks.md).
func BenchmarkJournalNote(b *testing.B) {
	f, err := createJournal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	e := &Journaled{journal: f}
	job := executor.Job{TaskID: "t1234", Attempt: 1, Token: "0123456789ab.t1234.1", Timeout: time.Hour, KillGrace: 10 * time.Second}
	p := executor.Process{PID: 123456, PGID: 123456, StartTicks: 1575879}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if err := e.note(job, p, now); err != nil {
			b.Fatal(err)
		}
	}
}

// Journaled runs attempts in this process as local.Executor does, and
// holds to the same suite: attempts die with the process that runs them,
// so Recover, through a supervisor that never heard of them, reports
// every orphan Lost and kills what is left of it. Every attempt that ran
// is in the journal.
func TestJournaledConformance(t *testing.T) {
	dir := t.TempDir()
	f, err := createJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := executortest.Harness{
		New:     func(*testing.T) executor.Executor { return &Journaled{journal: f, sup: Executor{RunDir: dir}} },
		Sleeper: testbin.MustBuild("cmd/sleeper"),
	}
	t.Run("suite", func(t *testing.T) {
		executortest.Run(t, h)
		executortest.RunLocal(t, h)
	})
	recs, err := readJournal(f)
	if err != nil || len(recs) == 0 {
		t.Fatalf("the journal holds %d record(s) (%v) after the suite ran its attempts", len(recs), err)
	}
	for _, r := range recs {
		if r.PID <= 0 || r.PGID != r.PID || r.StartTicks == 0 || r.Since.IsZero() {
			t.Errorf("journal record %+v: want the attempt's process and start", r)
		}
	}
}

// Once its attempts are over, closing a Journaled empties its journal:
// the supervisor has nothing to read after a scheduler that ended well.
func TestJournaledCloseEmpties(t *testing.T) {
	dir := t.TempDir()
	f, err := createJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	e := &Journaled{journal: f, sup: Executor{RunDir: dir}}
	job := executor.Job{TaskID: "t", Attempt: 1, Args: []string{testbin.MustBuild("cmd/sleeper")}, Token: "tok-close",
		LogPath: filepath.Join(dir, "t.log")}
	if r := e.Execute(context.Background(), job, executor.Hooks{}); r.Reason != executor.Exited {
		t.Fatalf("attempt: %+v", r)
	}
	if recs, _ := readJournal(f); len(recs) != 1 || recs[0].ID != job.Token {
		t.Fatalf("journal before Close: %+v; want the attempt", recs)
	}
	e.Close()
	if fi, _ := f.Stat(); fi.Size() != 0 {
		t.Errorf("journal after Close holds %d bytes; want none", fi.Size())
	}
}
