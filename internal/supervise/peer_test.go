package supervise_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/executortest"
)

// TestPeerOfAnotherUserRefused: the supervisor talks only to processes of
// its own user, even when its socket's mode would let others in.
func TestPeerOfAnotherUserRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("connecting as another user needs root")
	}
	// A run directory others may enter, unlike t.TempDir's.
	dir, err := os.MkdirTemp("", "gpusched-peer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Cleanup(func() { stopSupervisor(t, dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	a := newExecutor(t, dir)
	if r := a.Execute(context.Background(), executortest.NewJob(t, sleeper), executor.Hooks{}); r.Reason != executor.Exited {
		t.Fatalf("result = %+v", r)
	}
	sock := filepath.Join(dir, "supervisor.sock")
	if err := os.Chmod(sock, 0o666); err != nil { // as a careless person might
		t.Fatal(err)
	}
	if got := helloAs(0, sock, hello); !strings.Contains(got, `\"type\":\"hello\"`) {
		t.Fatalf("as our own user: %s; want the supervisor's hello (else this test proves nothing)", got)
	}
	if got := helloAs(65534, sock, hello); !strings.HasPrefix(got, "read 0 bytes") && !strings.Contains(got, "connection reset") {
		t.Errorf("as uid 65534: %s; want the connection closed without an answer", got)
	}
}

// hello is what a client of this version says first.
const hello = `{"type":"hello","version":1}`

// helloAs says hello (a line) on the socket at path from a thread that
// runs as uid, and tells what came back.
func helloAs(uid int, path, hello string) string {
	got := make(chan string, 1)
	go func() {
		// Never unlocked: the thread, with its new identity, ends with
		// this goroutine. The raw call changes this thread's identity
		// alone, which is all the kernel looks at when it connects.
		runtime.LockOSThread()
		if uid != 0 {
			if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, ^uintptr(0), uintptr(uid), ^uintptr(0)); e != 0 {
				got <- "setresuid: " + e.Error()
				return
			}
		}
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			got <- "socket: " + err.Error()
			return
		}
		defer unix.Close(fd)
		tv := unix.NsecToTimeval((10 * time.Second).Nanoseconds())
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
			got <- "connect: " + err.Error()
			return
		}
		unix.Write(fd, []byte(hello+"\n"))
		buf := make([]byte, 4096)
		n, err := unix.Read(fd, buf)
		got <- fmt.Sprintf("read %d bytes (%q), %v", max(n, 0), buf[:max(n, 0)], err)
	}()
	return <-got
}

// TestOtherVersionRefused: a client that speaks another version of the
// protocol is told so and hung up on.
func TestOtherVersionRefused(t *testing.T) {
	dir := runDir(t)
	a := newExecutor(t, dir)
	a.Execute(context.Background(), executortest.NewJob(t, sleeper), executor.Hooks{})
	got := helloAs(os.Getuid(), filepath.Join(dir, "supervisor.sock"), `{"type":"hello","version":99}`)
	if !strings.Contains(got, `\"type\":\"error\"`) || !strings.Contains(got, "version 1") {
		t.Errorf("hello with version 99: %s; want an error naming version 1", got)
	}
}
