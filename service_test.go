package gpusched_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched"
)

// serve starts Serve on s and stops it when the test ends.
func serve(t *testing.T, s *gpusched.Scheduler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func sh(id, script string, deps ...string) gpusched.TaskSpec {
	return gpusched.TaskSpec{ID: id, Payload: []string{"sh", "-c", script}, Dependencies: deps}
}

// A served scheduler runs tasks submitted at any time, Wait follows them
// to their end, and qualified ids group them into runs with their logs
// under logs/RUN/TASK.
func TestServeWaitQualifiedIDs(t *testing.T) {
	s := newScheduler(t, gpusched.Scheduling{}, gpusched.WithQualifiedIDs())
	serve(t, s)
	if err := s.SubmitMany([]gpusched.TaskSpec{sh("1/a", "echo a"), sh("1/b", "exit 3", "1/a")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(sh("2/a", "echo two", "1/a")); err != nil {
		t.Fatal(err)
	}
	recs, err := s.Wait(context.Background(), []string{"2/a", "1/b", "1/a"})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{recs[0].State.String(), recs[1].State.String(), recs[2].State.String()}
	if want := []string{"complete", "failed", "complete"}; !slices.Equal(got, want) {
		t.Fatalf("states %v, want %v", got, want)
	}
	log := recs[0].LastAttempt().LogPath
	if want := filepath.Join(s.RunDir(), "logs", "2", "a.attempt-1.log"); log != want {
		t.Errorf("log %s, want %s", log, want)
	}
	if b, _ := os.ReadFile(log); string(b) != "two\n" {
		t.Errorf("log holds %q", b)
	}
	if r, ok := s.Record("1/b"); !ok || r.ExitCode == nil || *r.ExitCode != 3 {
		t.Errorf("Record(1/b) = %+v, %v", r, ok)
	}
	if cards, known := s.Cards(); known || cards != nil {
		t.Errorf("Cards() = %v, %v with no GPU task run: want unknown", cards, known)
	}
	if _, ok := s.Record("3/x"); ok {
		t.Error("Record of a task never submitted says it is held")
	}
	if _, err := s.Wait(context.Background(), []string{"9/z"}); !errors.Is(err, gpusched.ErrUnknownTask) {
		t.Errorf("Wait on an unknown task: %v, want ErrUnknownTask", err)
	}
}

// Ids with more than one "/", or a part that is not a valid id, are
// refused; without WithQualifiedIDs, any "/" is.
func TestQualifiedIDsRefused(t *testing.T) {
	q := newScheduler(t, gpusched.Scheduling{}, gpusched.WithQualifiedIDs())
	for _, id := range []string{"1/a/b", "/a", "1/", "1/.a", "-1/a"} {
		err := q.Submit(sh(id, "true"))
		if !errors.Is(err, gpusched.ErrInvalidTask) {
			t.Errorf("qualified %q: %v, want ErrInvalidTask", id, err)
		}
	}
	plain := newScheduler(t, gpusched.Scheduling{})
	if err := plain.Submit(sh("1/a", "true")); !errors.Is(err, gpusched.ErrInvalidTask) {
		t.Errorf("plain scheduler took 1/a: %v", err)
	}
}

// A subscriber sees every committed event in order, numbered, and can
// resume after the last one it read.
func TestSubscribeNumbersAndResumes(t *testing.T) {
	s := newScheduler(t, gpusched.Scheduling{})
	sub, err := s.Subscribe(0, 64)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, s)
	if err := s.Submit(sh("a", "true")); err != nil {
		t.Fatal(err)
	}
	var seen []gpusched.Event
	for ev := range sub.C() {
		seen = append(seen, ev)
		if ev.Kind == gpusched.EventComplete {
			break
		}
	}
	sub.Close()
	if len(seen) != 2 || seen[0].Kind != gpusched.EventStarted || seen[0].Seq != 1 || seen[1].Seq != 2 || seen[1].TaskID != "a" {
		t.Fatalf("events %+v, want started (1) then complete (2) of a", seen)
	}
	again, err := s.Subscribe(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if ev := <-again.C(); ev.Seq != 2 || ev.Kind != gpusched.EventComplete {
		t.Errorf("resumed after 1 with %+v, want event 2", ev)
	}
	if _, err := s.Subscribe(99, 0); !errors.Is(err, gpusched.ErrNotPublished) {
		t.Errorf("Subscribe(99): %v, want ErrNotPublished", err)
	}
}

// A keyed batch submitted twice is added once; its key on other ids is
// refused.
func TestSubmitKeyed(t *testing.T) {
	s := newScheduler(t, gpusched.Scheduling{})
	ctx := context.Background()
	if err := s.SubmitKeyed(ctx, "k1", []gpusched.TaskSpec{sh("a", "true")}); err != nil {
		t.Fatal(err)
	}
	if err := s.SubmitKeyed(ctx, "k1", []gpusched.TaskSpec{sh("a", "true")}); err != nil {
		t.Errorf("the same batch again: %v", err)
	}
	if err := s.SubmitKeyed(ctx, "k1", []gpusched.TaskSpec{sh("b", "true")}); !errors.Is(err, gpusched.ErrKeyReused) {
		t.Errorf("the key on another batch: %v, want ErrKeyReused", err)
	}
	if n := len(s.Records()); n != 1 {
		t.Errorf("%d tasks, want 1", n)
	}
}

// CleanEnv gives the task exactly its Env (and gpusched's variables),
// nothing of the scheduler's environment; without it, Env is added.
func TestCleanEnv(t *testing.T) {
	t.Setenv("GPUSCHED_TEST_INHERITED", "yes")
	dir := t.TempDir()
	s := newScheduler(t, gpusched.Scheduling{})
	script := "env > " + dir + "/$GPUSCHED_TASK_ID"
	clean := gpusched.TaskSpec{ID: "clean", Payload: []string{"/bin/sh", "-c", script}, Env: map[string]string{"MINE": "1"}, CleanEnv: true}
	added := gpusched.TaskSpec{ID: "added", Payload: []string{"/bin/sh", "-c", script}, Env: map[string]string{"MINE": "1"}}
	if err := s.SubmitMany([]gpusched.TaskSpec{clean, added}); err != nil {
		t.Fatal(err)
	}
	run(t, s)
	read := func(id string) string { b, _ := os.ReadFile(filepath.Join(dir, id)); return string(b) }
	c, a := read("clean"), read("added")
	if !strings.Contains(c, "MINE=1") || strings.Contains(c, "GPUSCHED_TEST_INHERITED") || !strings.Contains(c, "GPUSCHED_TASK_ID=clean") {
		t.Errorf("clean environment:\n%s", c)
	}
	if !strings.Contains(a, "MINE=1") || !strings.Contains(a, "GPUSCHED_TEST_INHERITED=yes") {
		t.Errorf("added environment:\n%s", a)
	}
}

// Stored returns what an earlier scheduler left, definitions with their
// argv as []string, so that a completed task submitted again is kept.
func TestStoredAfterReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := gpusched.New(dir, gpusched.Scheduling{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SubmitMany([]gpusched.TaskSpec{sh("a", "true"), sh("b", "exit 1", "a")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = gpusched.New(dir, gpusched.Scheduling{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stored, err := s.Stored()
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 2 || stored[0].Spec.ID != "a" || stored[1].Record.State != gpusched.StateFailed {
		t.Fatalf("stored %+v", stored)
	}
	if _, ok := stored[0].Spec.Payload.([]string); !ok {
		t.Errorf("payload %T, want []string", stored[0].Spec.Payload)
	}
	if open, err := s.StoredUnfinished(); err != nil || len(open) != 0 {
		t.Errorf("StoredUnfinished of finished tasks = %+v, %v; want none", open, err)
	}
	if err := s.Submit(stored[0].Spec); err != nil {
		t.Fatal(err)
	}
	recs, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].State != gpusched.StateComplete || len(recs[0].Attempts) != 1 || recs[0].Rerun != "" {
		t.Errorf("a submitted again: %+v, want kept complete with its one attempt", recs)
	}
}

// With retirement, a finished task leaves the scheduler's memory but not
// its database: Lookup reads it, a plain submission of its id is a
// duplicate, and SubmitAgain runs a failed one again with what it
// blocked, attempt numbers going on.
func TestRetirementLookupAndSubmitAgain(t *testing.T) {
	s := newScheduler(t, gpusched.Scheduling{}, gpusched.WithRetirement())
	serve(t, s)
	marker := filepath.Join(t.TempDir(), "marker")
	fail, after := sh("a", "test -e "+marker), sh("b", "echo b", "a")
	if err := s.SubmitMany([]gpusched.TaskSpec{fail, after}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if recs, err := s.Wait(ctx, []string{"a", "b"}); err != nil || recs[0].State != gpusched.StateFailed || recs[1].State != gpusched.StateBlocked {
		t.Fatalf("first run: %+v %v", recs, err)
	}
	var held bool
	for range 1000 { // retired once its end is committed: soon after Wait answers
		if _, held = s.Record("a"); !held {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if held {
		t.Fatal("task a is still held after it failed")
	}
	st, ok, err := s.Lookup("a")
	if err != nil || !ok || st.Record.State != gpusched.StateFailed || len(st.Record.Attempts) != 1 || !slices.Equal(st.Spec.Payload.([]string), fail.Payload.([]string)) {
		t.Fatalf("Lookup(a) = %+v, %v, %v", st, ok, err)
	}
	if _, ok, err := s.Lookup("nope"); ok || err != nil {
		t.Errorf("Lookup(nope) = %v, %v", ok, err)
	}
	if err := s.Submit(fail); !errors.Is(err, gpusched.ErrDuplicateTask) {
		t.Errorf("plain submit of a retired id: %v, want a duplicate", err)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.SubmitAgain(ctx, []gpusched.TaskSpec{fail, after}); err != nil {
		t.Fatal(err)
	}
	recs, err := s.Wait(ctx, []string{"a", "b"})
	if err != nil || recs[0].State != gpusched.StateComplete || recs[1].State != gpusched.StateComplete {
		t.Fatalf("submitted again: %+v %v", recs, err)
	}
	if n := recs[0].LastAttempt().Number; n != 2 {
		t.Errorf("task a's attempt %d, want 2 (its history kept)", n)
	}
}

// A task held pending that counted a retired task's end (on: any) waits
// for its new end once SubmitAgain takes the retired task up again, as
// Retry has it for a task held: it starts after it, not before.
func TestSubmitAgainRelinksHeldDependents(t *testing.T) {
	s := newScheduler(t, gpusched.Scheduling{MaxParallelTasks: 4}, gpusched.WithRetirement())
	serve(t, s)
	dir := t.TempDir()
	gateA, gateG, again := filepath.Join(dir, "gate-a"), filepath.Join(dir, "gate-g"), filepath.Join(dir, "again")
	wait := func(file string) string { return "until [ -e " + file + " ]; do sleep 0.02; done; " }
	a := sh("a", "if [ -e "+again+" ]; then "+wait(gateA)+"fi; exit 1")
	a.Retries = gpusched.NoRetries
	g := sh("g", wait(gateG))
	b := sh("b", "true", "a", "g")
	b.DependencyOn = map[string]gpusched.DependencyCondition{"a": gpusched.AfterAny}
	if err := s.SubmitMany([]gpusched.TaskSpec{a, g, b}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if recs, err := s.Wait(ctx, []string{"a"}); err != nil || recs[0].State != gpusched.StateFailed {
		t.Fatalf("a: %+v %v", recs, err)
	}
	for range 1000 {
		if _, held := s.Record("a"); !held {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, held := s.Record("a"); held {
		t.Fatal("task a is still held after it failed")
	}
	if err := os.WriteFile(again, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.SubmitAgain(ctx, []gpusched.TaskSpec{a}); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Record("b"); r.State != gpusched.StatePending || s.Waiting("b")["b"].Kind != gpusched.WaitDependencies {
		t.Errorf("b once a is taken up again: %s, waiting %+v; want it waiting for its dependencies", r.State, s.Waiting("b"))
	}
	// g ends while a runs again: b still waits for a.
	if err := os.WriteFile(gateG, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if recs, err := s.Wait(ctx, []string{"g"}); err != nil || recs[0].State != gpusched.StateComplete {
		t.Fatalf("g: %+v %v", recs, err)
	}
	if r, _ := s.Record("b"); r.State != gpusched.StatePending || len(r.Attempts) != 0 {
		t.Errorf("b once g completed, while a runs again: %+v", r)
	}
	if err := os.WriteFile(gateA, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	recs, err := s.Wait(ctx, []string{"a", "b"})
	if err != nil || recs[0].State != gpusched.StateFailed || recs[1].State != gpusched.StateComplete {
		t.Fatalf("after the gate: %+v %v", recs, err)
	}
	if aEnd, bStart := recs[0].LastAttempt().End, recs[1].LastAttempt().Start; bStart.Before(aEnd) {
		t.Errorf("b started at %v, before a's new end at %v", bStart, aEnd)
	}
}
