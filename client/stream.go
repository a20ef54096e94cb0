package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// MaxLine is the longest line of a stream a client reads.
const MaxLine = 4 << 20

// lines calls f with each JSON line of r until f returns false, r ends,
// or a line cannot be read.
func lines[T any](r io.Reader, f func(T) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLine)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return fmt.Errorf("read a line of the daemon's stream: %w", err)
		}
		if !f(v) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}

// errStreamEnded: a stream ended before its last line (the daemon went
// away).
var errStreamEnded = errors.New("the daemon's stream ended early")

// Wait blocks until every task of ids (tasks or runs) is finished, calling
// each, if not nil, with each task as it finishes (and at once with those
// finished already), and returns them all in the order they finished. When
// the daemon goes away meanwhile (a restart), Wait dials its socket again,
// backing off from 100 ms to 2 s, and asks again for the tasks it has not
// seen finish; it gives up when ctx is done. Check each TaskInfo's State:
// Wait does not fail because a task did.
func (c *Client) Wait(ctx context.Context, ids []string, each func(TaskInfo)) ([]TaskInfo, error) {
	seen := map[string]bool{}
	var done []TaskInfo
	backoff := 100 * time.Millisecond
	for {
		err := c.waitOnce(ctx, ids, func(t TaskInfo) {
			if seen[t.ID] {
				return
			}
			seen[t.ID] = true
			done = append(done, t)
			if each != nil {
				each(t)
			}
		})
		if err == nil {
			return done, nil
		}
		if ctx.Err() != nil {
			return done, context.Cause(ctx)
		}
		var de *Error
		if errors.As(err, &de) {
			return done, err // the daemon refused: asking again won't help
		}
		// Gone, or going: wait, then ask again.
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return done, context.Cause(ctx)
		}
		backoff = min(2*backoff, 2*time.Second)
		c.http.CloseIdleConnections()
	}
}

// waitOnce is one POST /v1/wait: nil once its end line came.
func (c *Client) waitOnce(ctx context.Context, ids []string, f func(TaskInfo)) error {
	resp, err := c.send(ctx, http.MethodPost, "/v1/wait", nil, WaitRequest{IDs: ids})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	ended := false
	err = lines(resp.Body, func(l WaitLine) bool {
		if l.Task != nil {
			f(*l.Task)
		}
		ended = l.End
		return !ended
	})
	if ended {
		return nil
	}
	if err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
		err = errStreamEnded
	}
	return err
}

// LogOptions say which log Logs prints and how.
type LogOptions struct {
	Attempt int  // the attempt; 0: the last
	Follow  bool // go on as it is written, across attempts, until the task ends
}

// Logs writes task id's log to w (GET /v1/logs). With Follow it goes on
// until the task is finished, writing "--- attempt N ---" lines between
// attempts, and returns the task's final state.
func (c *Client) Logs(ctx context.Context, id string, o LogOptions, w io.Writer) (state string, err error) {
	q := url.Values{"id": {id}}
	if o.Attempt > 0 {
		q.Set("attempt", strconv.Itoa(o.Attempt))
	}
	if o.Follow {
		q.Set("follow", "1")
	}
	resp, err := c.send(ctx, http.MethodGet, "/v1/logs", q, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	first := true
	var werr error
	ended := false
	err = lines(resp.Body, func(l LogLine) bool {
		switch {
		case l.End:
			state, ended = l.State, true
			return false
		case l.Attempt > 0:
			if !first {
				_, werr = fmt.Fprintf(w, "--- attempt %d ---\n", l.Attempt)
			}
			first = false
		case l.Text != "":
			_, werr = io.WriteString(w, l.Text)
		case l.Data != nil:
			_, werr = w.Write(l.Data)
		}
		return werr == nil
	})
	switch {
	case werr != nil:
		return "", werr
	case ended:
		return state, nil
	case err == nil || errors.Is(err, io.ErrUnexpectedEOF):
		return "", errStreamEnded
	}
	return "", err
}

// Events calls f with each event the daemon commits from now on (or after
// event from, while it still keeps it), until f returns false or ctx is
// done (GET /v1/events). A user who is not root sees the events of their
// own tasks, and those of the GPUs.
func (c *Client) Events(ctx context.Context, from uint64, f func(Event) bool) error {
	s, err := c.Subscribe(ctx, from)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Each(f)
}

// EventStream is an open GET /v1/events.
type EventStream struct {
	ctx  context.Context // the one it was opened with
	body io.ReadCloser
}

// Subscribe opens GET /v1/events (see Events) and returns once the daemon
// has subscribed: every event it commits from then on is on the stream,
// so that a caller can subscribe, then submit, and miss nothing of its
// run. Read it with Each; Close it when done.
func (c *Client) Subscribe(ctx context.Context, from uint64) (*EventStream, error) {
	q := url.Values{}
	if from > 0 {
		q.Set("from", strconv.FormatUint(from, 10))
	}
	resp, err := c.send(ctx, http.MethodGet, "/v1/events", q, nil)
	if err != nil {
		return nil, err
	}
	return &EventStream{ctx: ctx, body: resp.Body}, nil
}

// Each calls f with each event of the stream until f returns false, the
// stream ends (the daemon went away: an error) or the context it was
// opened with is done.
func (s *EventStream) Each(f func(Event) bool) error {
	err := lines(s.body, f)
	if s.ctx.Err() != nil {
		return context.Cause(s.ctx)
	}
	return err
}

// Close closes the stream.
func (s *EventStream) Close() error { return s.body.Close() }
