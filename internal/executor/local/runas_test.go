package local_test

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
)

// otherUser returns the user "nobody" for tests that run an attempt as
// another user; they need root.
func otherUser(t *testing.T) *executor.User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running as another user needs root")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody here: %v", err)
	}
	var uid uint64
	for _, c := range u.Uid {
		uid = uid*10 + uint64(c-'0')
	}
	eu, err := executor.LookupUser(uint32(uid))
	if err != nil {
		t.Fatal(err)
	}
	return eu
}

// userRoot makes a log root below a folder anyone may enter, owned by u.
func userRoot(t *testing.T, u *executor.User) string {
	t.Helper()
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} { // testing's folders are 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	root := filepath.Join(base, "logs")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(root, int(u.UID), int(u.GID)); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestRunsAsUser: the attempt's process has the user's uid, gid and
// environment, and its log (and the folder made for it) belong to the user.
func TestRunsAsUser(t *testing.T) {
	u := otherUser(t)
	root := userRoot(t, u)
	logPath := filepath.Join(root, "t", "attempt-1.log")
	job := executor.Job{TaskID: "t", Attempt: 1, LogRoot: root, LogPath: logPath, KillGrace: time.Second,
		Args: []string{"/bin/sh", "-c", `echo "uid=$(id -u) gid=$(id -g) home=$HOME user=$USER logname=$LOGNAME"`},
		Env:  []string{"PATH=/usr/bin:/bin", "HOME=/root", "USER=root"}, Dir: "/", User: u}
	r := (&local.Executor{}).Execute(context.Background(), job, executor.Hooks{})
	if r.Err != nil || r.ExitCode != 0 {
		t.Fatalf("result = %+v", r)
	}
	out, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	want := "uid=" + itoa(u.UID) + " gid=" + itoa(u.GID) + " home=" + u.Home + " user=" + u.Name + " logname=" + u.Name
	if got := strings.TrimSpace(string(out)); got != want {
		t.Errorf("the task saw %q, want %q", got, want)
	}
	for _, p := range []string{logPath, filepath.Dir(logPath)} {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != u.UID {
			t.Errorf("%s belongs to uid %d, want %d", p, st.Uid, u.UID)
		}
	}
}

// TestUserLogNotWithRootsRights: a log folder the user may not write is
// refused with an error naming it, though the scheduler (root) could write
// there; nothing runs.
func TestUserLogNotWithRootsRights(t *testing.T) {
	u := otherUser(t)
	root := t.TempDir() // root's, 0700
	ran := filepath.Join(t.TempDir(), "ran")
	job := executor.Job{TaskID: "t", Attempt: 1, LogRoot: root, LogPath: filepath.Join(root, "t", "attempt-1.log"),
		Args: []string{"/bin/sh", "-c", "touch " + ran}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/", User: u}
	r := (&local.Executor{}).Execute(context.Background(), job, executor.Hooks{})
	if r.Started || r.Err == nil {
		t.Fatalf("result = %+v, want a failure to open the log", r)
	}
	if !strings.Contains(r.Err.Error(), root) || !strings.Contains(r.Err.Error(), u.Name) {
		t.Errorf("error %q names neither the folder nor the user", r.Err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the task ran")
	}
	if _, err := os.Stat(filepath.Join(root, "t")); err == nil {
		t.Error("a log folder was created with root's rights")
	}
}

// TestOpenLogAsLeavesIdentity: after OpenLogAs this process creates files
// as itself again.
func TestOpenLogAsLeavesIdentity(t *testing.T) {
	u := otherUser(t)
	root := userRoot(t, u)
	for range 20 {
		f, err := local.OpenLogAs(root, filepath.Join(root, "x.log"), u)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	p := filepath.Join(t.TempDir(), "mine")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != uint32(os.Geteuid()) {
		t.Errorf("a file created afterwards belongs to uid %d", st.Uid)
	}
}

func itoa(n uint32) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
