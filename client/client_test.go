package client

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// serve answers on a unix socket in a short temporary folder.
func serve(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gsc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return path
}

func version(w http.ResponseWriter) {
	json.NewEncoder(w).Encode(Version{Build: "test", APIMin: 1, APIMax: 1, PID: 1})
}

// Dial tries --socket alone, else $GPUSCHED_SOCKET alone, else the
// per-user socket then the system one.
func TestCandidates(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/7")
	t.Setenv(SocketEnv, "")
	if got := Candidates(""); !slices.Equal(got, []string{"/run/user/7/gpusched/gpusched.sock", SystemSocket}) {
		t.Errorf("defaults: %v", got)
	}
	t.Setenv(SocketEnv, "/e.sock")
	if got := Candidates(""); !slices.Equal(got, []string{"/e.sock"}) {
		t.Errorf("with %s: %v", SocketEnv, got)
	}
	if got := Candidates("/x.sock"); !slices.Equal(got, []string{"/x.sock"}) {
		t.Errorf("explicit: %v", got)
	}
	t.Setenv("XDG_RUNTIME_DIR", "")
	if got := UserSocketDir(); !strings.HasPrefix(got, os.TempDir()+"/gpusched-") {
		t.Errorf("without XDG_RUNTIME_DIR: %s", got)
	}
}

// No daemon: ErrNoDaemon, naming the socket tried.
func TestDialNoDaemon(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.sock")
	_, err := Dial(context.Background(), path)
	if !errors.Is(err, ErrNoDaemon) || !strings.Contains(err.Error(), path) || !Unreachable(err) {
		t.Errorf("Dial: %v", err)
	}
}

// A refusal carries the daemon's status and message; an answer that is
// not the daemon's JSON still says something.
func TestErrors(t *testing.T) {
	path := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/version":
			version(w)
		case "/v1/tasks":
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":"no run 9"}` + "\n"))
		default:
			http.Error(w, "teapot", http.StatusTeapot)
		}
	})
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Queue(context.Background(), QueueOptions{IDs: []string{"9"}})
	var ce *Error
	if !errors.As(err, &ce) || ce.Status != 404 || ce.Message != "no run 9" {
		t.Errorf("Queue: %#v", err)
	}
	_, err = c.Cancel(context.Background(), "1")
	if !errors.As(err, &ce) || ce.Status != 418 || !strings.Contains(ce.Message, "teapot") {
		t.Errorf("Cancel: %#v", err)
	}
}

// Wait asks again when its stream ends early (the daemon restarted), and
// reports each task once.
func TestWaitReconnects(t *testing.T) {
	var calls atomic.Int32
	path := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/version" {
			version(w)
			return
		}
		enc := json.NewEncoder(w)
		enc.Encode(WaitLine{Task: &TaskInfo{ID: "1", State: "complete"}})
		if calls.Add(1) == 1 {
			return // cut short, as by a daemon killed
		}
		enc.Encode(WaitLine{Task: &TaskInfo{ID: "2", State: "failed"}})
		enc.Encode(WaitLine{End: true})
	})
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var each []string
	got, err := c.Wait(ctx, []string{"1", "2"}, func(ti TaskInfo) { each = append(each, ti.ID) })
	if err != nil || len(got) != 2 || strings.Join(each, ",") != "1,2" || calls.Load() != 2 {
		t.Errorf("Wait: %+v %v, each %v, %d calls", got, err, each, calls.Load())
	}
}

// Durations are written as Go writes them, and read back.
func TestDurationJSON(t *testing.T) {
	b, _ := json.Marshal(Task{Command: []string{"x"}, Timeout: Duration(90 * time.Second)})
	if !strings.Contains(string(b), `"timeout":"1m30s"`) {
		t.Errorf("encoded %s", b)
	}
	var back Task
	if err := json.Unmarshal(b, &back); err != nil || time.Duration(back.Timeout) != 90*time.Second {
		t.Errorf("decoded %v, %v", back.Timeout, err)
	}
	if err := json.Unmarshal([]byte(`{"timeout":"soon"}`), &back); err == nil {
		t.Error("a bad duration was taken")
	}
}

// Logs writes the text and the bytes of a log, with a line between
// attempts, and returns the task's state.
func TestLogs(t *testing.T) {
	path := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/version" {
			version(w)
			return
		}
		enc := json.NewEncoder(w)
		for _, l := range []LogLine{{Attempt: 1}, {Text: "one\n"}, {Attempt: 2}, {Data: []byte{0xff, '\n'}}, {End: true, State: "complete"}} {
			enc.Encode(l)
		}
	})
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	state, err := c.Logs(context.Background(), "1", LogOptions{Follow: true}, &out)
	if err != nil || state != "complete" || out.String() != "one\n--- attempt 2 ---\n\xff\n" {
		t.Errorf("Logs: %q %q %v", out.String(), state, err)
	}
}

// Subscribe returns once the daemon has answered the subscription (its
// headers), before any event: what is committed after it returns comes on
// the stream. A refusal is an *Error.
func TestSubscribe(t *testing.T) {
	release := make(chan struct{})
	path := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/version":
			version(w)
			return
		case r.URL.Query().Get("from") == "9":
			w.WriteHeader(http.StatusGone)
			w.Write([]byte(`{"error":"events after 9: gone"}`))
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-release // an event committed after the subscriber is told it is subscribed
		json.NewEncoder(w).Encode(Event{Seq: 1, Kind: "started", Task: "3/a"})
	})
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Subscribe(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	close(release)
	var got []Event
	err = s.Each(func(ev Event) bool { got = append(got, ev); return false })
	if err != nil || len(got) != 1 || got[0].Task != "3/a" {
		t.Errorf("Each: %v, %v", got, err)
	}
	var ce *Error
	if _, err := c.Subscribe(context.Background(), 9); !errors.As(err, &ce) || ce.Status != http.StatusGone {
		t.Errorf("Subscribe from a forgotten event: %v", err)
	}
}
