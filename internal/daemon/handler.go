package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/client"
)

// MaxBody is the largest request body taken; a larger one is refused
// (413). It leaves room for a workflow of some thousands of tasks, each
// with an environment.
const MaxBody = 16 << 20

// who may use a route.
type access uint8

const (
	anyone access = iota // whoever can connect (GET /v1/version)
	users                // the daemon's own user (per-user daemon), everyone (system daemon)
	admins               // the daemon's own user and root (stopping it)
)

type route struct {
	method string
	access access
	serve  func(w http.ResponseWriter, r *http.Request, p peer) error
}

// handler routes requests: exact paths under /v1/, each with one method;
// anything else is a JSON error.
func (d *Daemon) handler() http.Handler {
	routes := map[string]route{
		"/v1/version":  {http.MethodGet, anyone, d.version},
		"/v1/shutdown": {http.MethodPost, admins, d.shutdown},
		"/v1/runs":     {"", users, d.runsRoute},
		"/v1/tasks":    {http.MethodGet, users, d.queue},
		"/v1/cancel":   {http.MethodPost, users, d.cancel},
		"/v1/pause":    {http.MethodPost, users, d.pause},
		"/v1/resume":   {http.MethodPost, users, d.resume},
		"/v1/retry":    {http.MethodPost, users, d.retry},
		"/v1/wait":     {http.MethodPost, users, d.wait},
		"/v1/logs":     {http.MethodGet, users, d.logs},
		"/v1/gpus":     {http.MethodGet, users, d.gpus},
		"/v1/events":   {http.MethodGet, users, d.events},
		"/v1/metrics":  {http.MethodGet, users, d.metricsRoute},
		"/v1/budgets":  {http.MethodGet, users, d.budgets},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt, ok := routes[r.URL.Path]
		if !ok {
			writeError(w, errorf(http.StatusNotFound, "no route %s %s (see docs/daemon.md)", r.Method, r.URL.Path))
			return
		}
		if rt.method != "" && r.Method != rt.method {
			w.Header().Set("Allow", rt.method)
			writeError(w, errorf(http.StatusMethodNotAllowed, "%s takes %s, not %s", r.URL.Path, rt.method, r.Method))
			return
		}
		p := peerFrom(r.Context())
		if err := d.allow(rt.access, p); err != nil {
			writeError(w, err)
			return
		}
		if err := rt.serve(w, r, p); err != nil {
			writeError(w, err)
		}
	})
}

// allow says whether peer p may use a route of access a.
func (d *Daemon) allow(a access, p peer) error {
	switch {
	case p.err != nil:
		return errorf(http.StatusForbidden, "who is asking cannot be told: %v", p.err)
	case a == anyone, p.uid == d.uid:
		return nil
	case a == admins && p.uid == 0:
		return nil
	case a == admins && d.uid == 0:
		return errorf(http.StatusForbidden, "only root may stop this daemon")
	case a == admins:
		return errorf(http.StatusForbidden, "only %s and root may stop this daemon", d.userName(d.uid))
	case !d.cfg.System:
		return errorf(http.StatusForbidden, "this is %s's own gpusched daemon; it serves nobody else (start your own: gpusched daemon)", d.userName(d.uid))
	}
	return nil
}

// owns reports whether p may act on run r's tasks and read their
// commands, environment and logs: its owner and root may.
func owns(p peer, r *run) bool { return p.uid == 0 || p.uid == r.uid }

// forbidden is the error for acting on another user's task.
func (d *Daemon) forbidden(t target, what string) error {
	return errorf(http.StatusForbidden, "task %s belongs to %s: only they and root may %s it", t.show, t.run.user, what)
}

// decode reads a request's JSON body into v: at most MaxBody bytes, one
// value, no field v does not have.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, MaxBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			return bodyError(err)
		}
		return errorf(http.StatusBadRequest, "request body: more than one JSON value")
	}
	return nil
}

// decodeOptional is decode for a body that may be empty.
func decodeOptional(w http.ResponseWriter, r *http.Request, v any) error {
	if r.ContentLength == 0 {
		return nil
	}
	err := decode(w, r, v)
	var he *httpError
	if errors.As(err, &he) && he.msg == emptyBody {
		return nil
	}
	return err
}

const emptyBody = "request body: empty; send a JSON object"

// bodyError says what is wrong with a request body.
func bodyError(err error) error {
	var mbe *http.MaxBytesError
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var ne net.Error
	switch {
	case errors.As(err, &mbe):
		return errorf(http.StatusRequestEntityTooLarge, "request body: larger than %d bytes", mbe.Limit)
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, os.ErrDeadlineExceeded):
		return errorf(http.StatusRequestTimeout, "request body: not sent in time")
	case errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, emptyBody)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, "request body: malformed JSON: it ends early")
	case errors.As(err, &se):
		return errorf(http.StatusBadRequest, "request body: malformed JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.As(err, &te):
		return errorf(http.StatusBadRequest, "request body: field %q: a %s cannot be a %s", te.Field, te.Value, te.Type)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return errorf(http.StatusBadRequest, "request body: unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return errorf(http.StatusBadRequest, "request body: %s", oneLine(strings.TrimPrefix(err.Error(), "json: ")))
}

// writeJSON writes v as the answer.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode the answer: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// writeError answers with err's status and message, on one line.
func writeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	var he *httpError
	var te *gpusched.TaskError
	var ce *gpusched.CycleError
	switch {
	case errors.As(err, &he):
		status = he.status
	case errors.As(err, &te), errors.As(err, &ce), errors.Is(err, gpusched.ErrUnknownDependency),
		errors.Is(err, gpusched.ErrDuplicateTask), errors.Is(err, gpusched.ErrInvalidTask):
		status = http.StatusBadRequest
	case errors.Is(err, gpusched.ErrUnknownTask):
		status = http.StatusNotFound
	case errors.Is(err, gpusched.ErrClosed), errors.Is(err, errRunsClosed):
		status = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	b, _ := json.Marshal(client.ErrorBody{Error: oneLine(err.Error())})
	_, _ = w.Write(append(b, '\n'))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// stream is an answer of newline-delimited JSON values, each flushed as it
// is written. Its connection's deadlines are lifted: a stream lasts as
// long as what it follows.
type stream struct {
	enc *json.Encoder
	rc  *http.ResponseController
	buf []byte // copyLog's, kept across the reads of a followed log
}

func startStream(w http.ResponseWriter) *stream {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	return &stream{enc: json.NewEncoder(w), rc: rc}
}

// send writes one line and flushes it.
func (s *stream) send(v any) error {
	if err := s.enc.Encode(v); err != nil {
		return err
	}
	return s.rc.Flush()
}

// version answers GET /v1/version. Its form never changes.
func (d *Daemon) version(w http.ResponseWriter, _ *http.Request, _ peer) error {
	mode := "user"
	if d.cfg.System {
		mode = "system"
	}
	return writeJSON(w, http.StatusOK, client.Version{Build: d.cfg.Build, APIMin: APIMin, APIMax: APIMax, PID: os.Getpid(),
		Mode: mode, UID: d.uid, Socket: d.cfg.Socket, StateDir: d.cfg.StateDir, Started: d.started})
}

// shutdown answers POST /v1/shutdown, then stops the daemon. Its form
// never changes.
func (d *Daemon) shutdown(w http.ResponseWriter, r *http.Request, _ peer) error {
	var req client.ShutdownRequest
	if err := decodeOptional(w, r, &req); err != nil {
		return err
	}
	// A failed answer (the client left) still stops the daemon: it was
	// asked to.
	_ = writeJSON(w, http.StatusOK, client.ShuttingDown{PID: os.Getpid()})
	d.requestStop(req.KillTasks)
	return nil
}

// runsRoute serves /v1/runs: GET lists, POST submits.
func (d *Daemon) runsRoute(w http.ResponseWriter, r *http.Request, p peer) error {
	switch r.Method {
	case http.MethodGet:
		return d.listRuns(w, r, p)
	case http.MethodPost:
		return d.submit(w, r, p)
	}
	w.Header().Set("Allow", "GET, POST")
	return errorf(http.StatusMethodNotAllowed, "/v1/runs takes GET or POST, not %s", r.Method)
}
