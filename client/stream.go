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
// attempts, and returns the task's final state. When the daemon goes away
// meanwhile (a restart), a follower dials its socket again as Wait does
// and goes on from the attempt and byte it had reached, so that nothing
// is written twice or left out; it gives up when ctx is done.
func (c *Client) Logs(ctx context.Context, id string, o LogOptions, w io.Writer) (state string, err error) {
	f := &logFollower{w: w, attempt: o.Attempt}
	if !o.Follow {
		return f.once(ctx, c, id, false)
	}
	backoff := 100 * time.Millisecond
	for {
		state, err := f.once(ctx, c, id, true)
		if err == nil || f.werr != nil {
			return state, err
		}
		if ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		var de *Error
		if errors.As(err, &de) {
			return "", err // the daemon refused: asking again won't help
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
		backoff = min(2*backoff, 2*time.Second)
		c.http.CloseIdleConnections()
	}
}

// logFollower is where a Logs call stands: the attempt it writes and the
// bytes of it written, to go on from after a reconnection.
type logFollower struct {
	w       io.Writer
	attempt int   // the attempt being written; 0 before the first
	offset  int64 // bytes of it written
	started bool  // an attempt was begun (the next gets a header)
	werr    error // writing to w failed: give up
}

// once is one GET /v1/logs: the state once its end line came.
func (f *logFollower) once(ctx context.Context, c *Client, id string, follow bool) (state string, err error) {
	q := url.Values{"id": {id}}
	if f.attempt > 0 {
		q.Set("attempt", strconv.Itoa(f.attempt))
	}
	if follow {
		q.Set("follow", "1")
		if f.offset > 0 {
			q.Set("offset", strconv.FormatInt(f.offset, 10))
		}
	}
	resp, err := c.send(ctx, http.MethodGet, "/v1/logs", q, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	ended := false
	err = lines(resp.Body, func(l LogLine) bool {
		switch {
		case l.End:
			state, ended = l.State, true
			return false
		case l.Attempt > 0:
			if l.Attempt == f.attempt && f.started {
				return true // the one it was writing, opened again
			}
			if f.started {
				_, f.werr = fmt.Fprintf(f.w, "--- attempt %d ---\n", l.Attempt)
			}
			f.attempt, f.offset, f.started = l.Attempt, 0, true
		case l.Text != "":
			_, f.werr = io.WriteString(f.w, l.Text)
			f.offset += int64(len(l.Text))
		case l.Data != nil:
			_, f.werr = f.w.Write(l.Data)
			f.offset += int64(len(l.Data))
		}
		return f.werr == nil
	})
	switch {
	case f.werr != nil:
		return "", f.werr
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
