package daemon_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/gpusched/gpusched/client"
	"github.com/gpusched/gpusched/internal/gpu/fakegpu"
	"github.com/gpusched/gpusched/internal/testbin"
)

// Tasks of a system daemon run as their owners: real Unix users, created
// by the test (as root, with useradd), connecting over the socket as
// themselves.

// unixUser is a user a test acts as.
type unixUser struct {
	name     string
	uid, gid int
	home     string // a folder of the user's, for its files
}

// testUser returns Unix user name, creating it (no home, no shell) if it
// does not exist, and removing it when the test ends if it made it. It
// skips the test when it is not root or useradd is missing.
func testUser(t *testing.T, w *world, name string) unixUser {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create users and act as them")
	}
	u, err := user.Lookup(name)
	if err != nil {
		if _, err := exec.LookPath("useradd"); err != nil {
			t.Skip("needs useradd to create a user")
		}
		if out, err := exec.Command("useradd", "-M", "-s", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
			t.Skipf("useradd %s: %v: %s", name, err, out)
		}
		t.Cleanup(func() {
			if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
				t.Logf("userdel %s: %v: %s", name, err, out)
			}
		})
		if u, err = user.Lookup(name); err != nil {
			t.Fatal(err)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	home := filepath.Join(w.dir, name)
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, uid, gid); err != nil {
		t.Fatal(err)
	}
	return unixUser{name: name, uid: uid, gid: gid, home: home}
}

// openWorld is a world whose folder other users may enter, with the
// gpusched binary where they can run it, and a system daemon (root) on a
// socket they may connect to. Its socket is made 0666, as the system
// socket's group (SystemGroup) would let them in.
func openWorld(t *testing.T, extraEnv ...string) (w *world, bin, sock, state string) {
	t.Helper()
	w = newWorld(t)
	open := filepath.Join(w.dir, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(w.dir, 0o755)
	bin = copyExecutable(t, gpuschedBin, filepath.Join(open, "gpusched"))
	sock, state = filepath.Join(open, "s"), filepath.Join(w.dir, "state")
	w.socket = sock
	w.env = append(w.env, extraEnv...)
	w.start(t, "--system", "--socket", sock, "--state-dir", state)
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	return w, bin, sock, state
}

// copyExecutable copies the program at from to to, mode 0755.
func copyExecutable(t *testing.T, from, to string) string {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return to
}

// as runs gpusched (bin) as user u, in u's folder, with env.
func (u unixUser) as(t *testing.T, bin string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + u.home}, env...)
	cmd.Dir = u.home
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid)}}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func ownerOf(t *testing.T, path string) (uid int, mode os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid), fi.Mode()
}

// A user's task runs as that user, its log is theirs in a folder of
// theirs; users touch no task but their own, and root touches all.
func TestTasksRunAsTheirOwners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create users and act as them")
	}
	w, bin, sock, state := openWorld(t)
	alice, bob := testUser(t, w, "gpusched-t1"), testUser(t, w, "gpusched-t2")
	ctx := context.Background()
	c := w.client(t)
	if _, err := c.Submit(ctx, client.Command{Args: []string{"sleep", "30"}, Name: "root's"}); err != nil { // run 1
		t.Fatal(err)
	}
	out, errOut, code := alice.as(t, bin, nil, "submit", "--socket", sock, "--", "sh", "-c", `id -u > uid; echo "uid=$(id -u) user=$USER home=$HOME"`)
	if code != 0 || strings.TrimSpace(out) != "2" {
		t.Fatalf("alice submits: %q %q %d", out, errOut, code)
	}
	out, errOut, code = alice.as(t, bin, nil, "submit", "--socket", sock, "--", "sleep", "30") // run 3
	if code != 0 || strings.TrimSpace(out) != "3" {
		t.Fatalf("alice submits: %q %q %d", out, errOut, code)
	}
	waitState(t, c, "2", "complete")
	if b, err := os.ReadFile(filepath.Join(alice.home, "uid")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(alice.uid) {
		t.Errorf("alice's task wrote uid %q (%v), want %d", b, err, alice.uid)
	}
	if uid, _ := ownerOf(t, filepath.Join(alice.home, "uid")); uid != alice.uid {
		t.Errorf("alice's task made a file of uid %d, want hers (%d)", uid, alice.uid)
	}
	if uid, mode := ownerOf(t, filepath.Join(state, "logs", "2")); uid != alice.uid || mode.Perm() != 0o700 || !mode.IsDir() {
		t.Errorf("run 2's log folder: uid %d, mode %v; want alice's (%d), a folder 0700", uid, mode, alice.uid)
	}
	log := filepath.Join(state, "logs", "2", "cmd.attempt-1.log")
	if uid, _ := ownerOf(t, log); uid != alice.uid {
		t.Errorf("alice's log is uid %d's, want hers (%d)", uid, alice.uid)
	}
	want := fmt.Sprintf("uid=%d user=%s home=", alice.uid, alice.name)
	out, errOut, code = alice.as(t, bin, nil, "logs", "--socket", sock, "2")
	if code != 0 || !strings.Contains(out, want) {
		t.Errorf("alice reads her log: %q %q %d, want %q", out, errOut, code, want)
	}
	out, _, code = w.gs(t, w.dir, nil, "logs", "--socket", sock, "2")
	if code != 0 || !strings.Contains(out, want) {
		t.Errorf("root reads alice's log: %q %d", out, code)
	}
	// Nobody else's: alice touches not root's, bob not alice's.
	for _, c := range []struct {
		who   unixUser
		args  []string
		owner string
	}{
		{alice, []string{"logs", "1"}, "root"}, {alice, []string{"cancel", "1"}, "root"},
		{bob, []string{"logs", "2"}, alice.name}, {bob, []string{"cancel", "3"}, alice.name},
	} {
		_, errOut, code := c.who.as(t, bin, nil, append(c.args, "--socket", sock)...)
		if code != 1 || !strings.Contains(errOut, "belongs to "+c.owner+": only they and root may") {
			t.Errorf("%s %v: %q %d, want refused", c.who.name, c.args, errOut, code)
		}
	}
	if tk := waitState(t, c, "3", "running"); tk.Owner != alice.name || tk.UID != alice.uid {
		t.Errorf("run 3 is %s's (%d), want alice's", tk.Owner, tk.UID)
	}
	// A planted link in her log folder is not followed by the daemon.
	os.Remove(log)
	if err := os.Symlink("/etc/shadow", log); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = alice.as(t, bin, nil, "logs", "--socket", sock, "2")
	if code == 0 || strings.Contains(out, "root:") {
		t.Errorf("alice reads a link to /etc/shadow as her log: %q %q %d", out, errOut, code)
	}
	// Root cancels alice's task; she cancels her own.
	if _, err := c.Cancel(ctx, "3"); err != nil {
		t.Errorf("root cancels alice's task: %v", err)
	}
	if _, errOut, code := alice.as(t, bin, nil, "cancel", "--socket", sock, "2"); code != 0 {
		t.Errorf("alice cancels her own (finished) task: %q %d", errOut, code)
	}
}

// Two users' GPU workflows share one ledger of the same cards: each task
// runs as its owner, none is given memory another holds, all complete.
func TestTwoUsersShareTheCards(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create users and act as them")
	}
	smi, err := testbin.Build("cmd/fake-nvidia-smi")
	if err != nil {
		t.Fatal(err)
	}
	job, err := testbin.Build("cmd/fake-gpu-job")
	if err != nil {
		t.Fatal(err)
	}
	// The fake machine's files, written by both users' jobs.
	gpuDir, err := os.MkdirTemp("", "gsgpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(gpuDir) })
	os.Chmod(gpuDir, 0o777)
	gpuState, record := filepath.Join(gpuDir, "state.json"), filepath.Join(gpuDir, "events.jsonl")
	if err := fakegpu.Save(gpuState, fakegpu.State{Cards: []fakegpu.Card{{Index: 0, UUID: "GPU-fade0000-7e57-4000-8000-000000000000", TotalMiB: 10000}}}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{gpuState + ".lock", record} {
		if err := os.WriteFile(f, nil, 0o666); err != nil {
			t.Fatal(err)
		}
		os.Chmod(f, 0o666)
	}
	w, bin, sock, _ := openWorld(t, "GPUSCHED_NVIDIA_SMI="+smi, fakegpu.EnvState+"="+gpuState)
	job = copyExecutable(t, job, filepath.Join(w.dir, "open", "fake-gpu-job"))
	users := []unixUser{testUser(t, w, "gpusched-t1"), testUser(t, w, "gpusched-t2")}
	// Each workflow alone fits the card (6000 of 10000 MiB); both at once
	// do not, so the ledger must make some wait.
	var wf strings.Builder
	wf.WriteString("tasks:\n")
	for i := range 2 {
		fmt.Fprintf(&wf, "  - id: t%d\n    resources: {device: cuda, memory_mib: 3000}\n    retries: 0\n    args: [%q, --mem, \"3000\", --duration, 500ms, --record, %q]\n", i, job, record)
	}
	errs := make(chan error, len(users))
	for _, u := range users {
		path := filepath.Join(u.home, "wf.yaml")
		if err := os.WriteFile(path, []byte(wf.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		go func() {
			env := []string{fakegpu.EnvState + "=" + gpuState}
			out, errOut, code := u.as(t, bin, env, "submit", "--socket", sock, path)
			if code != 0 {
				errs <- fmt.Errorf("%s submits: %q %q %d", u.name, out, errOut, code)
				return
			}
			out, errOut, code = u.as(t, bin, env, "wait", "--socket", sock, strings.TrimSpace(out))
			if code != 0 {
				errs <- fmt.Errorf("%s waits: %q %q %d", u.name, out, errOut, code)
				return
			}
			errs <- nil
		}()
	}
	for range users {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	q, err := w.client(t).Queue(context.Background(), client.QueueOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]int{}
	for _, tk := range q {
		if tk.State != "complete" {
			t.Errorf("task %s of %s: %s (%s)", tk.ID, tk.Owner, tk.State, tk.Error)
		}
		owners[tk.Owner]++
	}
	if len(q) != 4 || owners[users[0].name] != 2 || owners[users[1].name] != 2 {
		t.Errorf("queue %+v: want two tasks of each user", q)
	}
	events, err := fakegpu.ReadEvents(record)
	if err != nil {
		t.Fatal(err)
	}
	starts := 0
	for _, e := range events {
		switch e.Kind {
		case fakegpu.EventOOM:
			t.Errorf("a job ran out of GPU memory: %+v", e)
		case fakegpu.EventStart:
			starts++
		}
	}
	if starts != 4 {
		t.Errorf("%d fake GPU jobs started, want 4: %+v", starts, events)
	}
}
