package gpusched_test

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/gpusched/gpusched"
)

// nobody is the user the run-as tests run tasks as.
const nobody = 65534

// ownedRunDir is a scheduler's run directory that nobody can enter, with
// the log folder of each run (logs/RUN, where the logs of tasks RUN/TASK
// go) made nobody's, as a daemon running as root makes each run's.
func ownedRunDir(t *testing.T, runs ...string) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // t.TempDir's folders are 0700
	}
	for _, run := range runs {
		logs := filepath.Join(dir, gpusched.LogsDir, run)
		if err := os.MkdirAll(logs, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(logs, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A task whose Owner is another user runs as that user when the scheduler
// is root: its uid, HOME, USER, and a log of its own.
func TestOwnerRunsAsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a task as another user")
	}
	u, err := user.LookupId(strconv.Itoa(nobody))
	if err != nil {
		t.Skipf("no user %d: %v", nobody, err)
	}
	dir := ownedRunDir(t, "1", "2")
	s, err := gpusched.New(dir, gpusched.Scheduling{}, gpusched.WithQualifiedIDs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	script := `echo "uid=$(id -u) user=$USER home=$HOME"`
	if err := s.SubmitMany([]gpusched.TaskSpec{
		{ID: "1/mine", Owner: strconv.Itoa(nobody), Payload: []string{"sh", "-c", script}, Dir: "/"},
		{ID: "2/root", Owner: "0", Payload: []string{"sh", "-c", script}, Dir: "/"},
	}); err != nil {
		t.Fatal(err)
	}
	recs := run(t, s)
	for id, want := range map[string]struct {
		uid  int
		text string
	}{
		"1/mine": {nobody, "uid=65534 user=" + u.Username + " home=" + u.HomeDir + "\n"},
		"2/root": {0, "uid=0 "},
	} {
		r := recs[id]
		if r.State != gpusched.StateComplete {
			t.Fatalf("task %s: %+v", id, r)
		}
		path := r.LastAttempt().LogPath
		b, _ := os.ReadFile(path)
		if !strings.HasPrefix(string(b), want.text) {
			t.Errorf("task %s logged %q, want %q", id, b, want.text)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Sys().(*syscall.Stat_t).Uid; int(got) != want.uid {
			t.Errorf("task %s: log owned by uid %d, want %d", id, got, want.uid)
		}
	}
}

// An owner who is no longer a user fails the task at once, retries or
// not, saying so; nothing is written as root into the owner's folder.
func TestOwnerWhoIsNoUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a scheduler that is not root refuses every other owner before looking them up")
	}
	gone := 0
	for uid := 3_999_000; uid < 3_999_100; uid++ {
		if _, err := user.LookupId(strconv.Itoa(uid)); err != nil {
			gone = uid
			break
		}
	}
	if gone == 0 {
		t.Skip("no unused uid found")
	}
	s := newScheduler(t, gpusched.Scheduling{})
	if err := s.Submit(gpusched.TaskSpec{ID: "orphan", Owner: strconv.Itoa(gone), Retries: 3, Payload: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	r := run(t, s)["orphan"]
	if r.State != gpusched.StateFailed || len(r.Attempts) != 1 || !strings.Contains(r.Error, "task orphan cannot run as its owner") ||
		!strings.Contains(r.Error, strconv.Itoa(gone)) {
		t.Errorf("record = %+v: want one attempt, failed, naming the task and the user", r)
	}
	if _, err := os.Stat(r.LastAttempt().LogPath); err == nil {
		t.Errorf("a log was written for a task that never ran as its owner")
	}
}

// A scheduler that is not root cannot run another user's task: it fails
// at once, naming the task and both users.
func TestOwnerNeedsRoot(t *testing.T) {
	me := os.Geteuid()
	if me == 0 {
		t.Skip("as root every owner can be run as")
	}
	s := newScheduler(t, gpusched.Scheduling{})
	if err := s.Submit(gpusched.TaskSpec{ID: "theirs", Owner: strconv.Itoa(me + 1), Retries: 3, Payload: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	r := run(t, s)["theirs"]
	if r.State != gpusched.StateFailed || len(r.Attempts) != 1 || !strings.Contains(r.Error, "task theirs belongs to user "+strconv.Itoa(me+1)) ||
		!strings.Contains(r.Error, "not root") {
		t.Errorf("record = %+v: want one attempt, failed, naming the task and the user", r)
	}
}

// An owner who is no longer a user still owns the log folder the daemon
// gave them: the reason their task failed is written there, with their
// uid's rights (never root's), so that the log says why.
func TestOwnerWhoIsNoUserGetsTheReasonInTheLog(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a scheduler that is not root refuses every other owner before looking them up")
	}
	gone := 0
	for uid := 3_999_000; uid < 3_999_100; uid++ {
		if _, err := user.LookupId(strconv.Itoa(uid)); err != nil {
			gone = uid
			break
		}
	}
	if gone == 0 {
		t.Skip("no unused uid found")
	}
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // t.TempDir's folders are 0700
	}
	logs := filepath.Join(dir, gpusched.LogsDir) // its owner's, as a daemon makes logs/RUN
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(logs, gone, -1); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(logs, 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := gpusched.New(dir, gpusched.Scheduling{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Submit(gpusched.TaskSpec{ID: "orphan", Owner: strconv.Itoa(gone), Payload: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	r := run(t, s)["orphan"]
	if r.State != gpusched.StateFailed || len(r.Attempts) != 1 {
		t.Fatalf("record = %+v: want one attempt, failed", r)
	}
	path := r.LastAttempt().LogPath
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), "task orphan cannot run as its owner") {
		t.Fatalf("log %s holds %q (%v): want the reason", path, b, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != gone {
		t.Errorf("the log belongs to uid %d, want the owner's %d: written with rights the owner lacks", st.Uid, gone)
	}
}
