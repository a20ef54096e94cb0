package daemon

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/client"
)

// logPoll is how often a followed log is read for more.
const logPoll = 100 * time.Millisecond

// logs serves GET /v1/logs?id=ID[&attempt=N][&follow=1[&offset=B]]: a
// task's log as a stream (client.LogLine). Without follow it sends the
// attempt's log as it is, then the end; with follow it goes on as the log
// grows and through the task's later attempts, and ends when the task is
// finished. With offset (and attempt) it begins at byte B of the
// attempt's log: where a follower cut off by a restart had got to. Only
// the task's owner and root may read it.
func (d *Daemon) logs(w http.ResponseWriter, r *http.Request, p peer) error {
	q := r.URL.Query()
	ts, err := d.resolve(q.Get("id"))
	if err != nil {
		return err
	}
	if len(ts) != 1 {
		names := make([]string, 0, 3)
		for _, t := range ts[:min(3, len(ts))] {
			names = append(names, t.show)
		}
		return errorf(http.StatusBadRequest, "run %d has %d tasks: name one (%s...)", ts[0].run.id, len(ts), strings.Join(names, ", "))
	}
	t := ts[0]
	if !owns(p, t.run) {
		return d.forbidden(t, "read the log of")
	}
	attempt := 0
	if a := q.Get("attempt"); a != "" {
		if attempt, err = strconv.Atoi(a); err != nil || attempt < 1 {
			return errorf(http.StatusBadRequest, "attempt %q: give a number from 1", a)
		}
	}
	follow := q.Get("follow") == "1" || q.Get("follow") == "true"
	var offset int64
	if o := q.Get("offset"); o != "" {
		if offset, err = strconv.ParseInt(o, 10, 64); err != nil || offset < 0 || attempt == 0 || !follow {
			return errorf(http.StatusBadRequest, "offset %q: give a number of bytes from 0, with attempt and follow", o)
		}
	}
	rec, ok := d.lookup(t.id)
	if !ok {
		return errorf(http.StatusNotFound, "task %s is not in the scheduler", t.show)
	}
	if !follow {
		a, err := pickAttempt(t, rec, attempt)
		if err != nil {
			return err
		}
		f, err := d.openLog(a.LogPath, t.run)
		if err != nil {
			return err
		}
		defer f.Close()
		s := startStream(w)
		if s.send(client.LogLine{Attempt: a.Number}) != nil {
			return nil
		}
		if _, err := copyLog(s, f, true); err != nil {
			return nil
		}
		_ = s.send(client.LogLine{End: true, State: rec.State.String()})
		return nil
	}
	if attempt > 0 && (len(rec.Attempts) == 0 || attempt > rec.Attempts[len(rec.Attempts)-1].Number) && rec.State.Terminal() {
		_, err := pickAttempt(t, rec, attempt)
		return err
	}
	s := startStream(w)
	d.follow(r, s, t, attempt, offset)
	return nil
}

// follow streams task t's log from attempt (0: the last), from byte
// offset of it, until the task is finished and its last log read, the
// client leaves or the daemon stops.
func (d *Daemon) follow(r *http.Request, s *stream, t target, attempt int, offset int64) {
	tick := time.NewTicker(logPoll)
	defer tick.Stop()
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	cur := attempt
	for {
		rec, ok := d.lookup(t.id)
		if !ok {
			return
		}
		if cur == 0 && len(rec.Attempts) > 0 {
			cur = rec.Attempts[len(rec.Attempts)-1].Number
		}
		var a *gpusched.Attempt
		for i := range rec.Attempts {
			if rec.Attempts[i].Number == cur {
				a = &rec.Attempts[i]
			}
		}
		if a != nil && f == nil {
			var err error
			if f, err = d.openLog(a.LogPath, t.run); err != nil && !errors.Is(err, os.ErrNotExist) {
				return
			}
			if f != nil && cur == attempt && offset > 0 {
				if _, err := f.Seek(offset, io.SeekStart); err != nil {
					return
				}
			}
			if f != nil && s.send(client.LogLine{Attempt: cur}) != nil {
				return
			}
		}
		if f != nil {
			if _, err := copyLog(s, f, false); err != nil {
				return
			}
		}
		switch {
		case a != nil && a.Ended() && cur < rec.LastAttempt().Number:
			// Read to its end after it ended: on to the next attempt.
			if f != nil {
				f.Close()
			}
			f, cur = nil, cur+1
			continue
		case rec.State.Terminal() && (a == nil || a.Ended()):
			if f != nil { // what was written since the last read
				if _, err := copyLog(s, f, true); err != nil {
					return
				}
			}
			_ = s.send(client.LogLine{End: true, State: rec.State.String()})
			return
		}
		select {
		case <-tick.C:
		case <-r.Context().Done():
			return
		case <-d.stopping:
			return
		}
	}
}

// pickAttempt returns attempt n of a task (0: its last).
func pickAttempt(t target, rec gpusched.Record, n int) (*gpusched.Attempt, error) {
	if len(rec.Attempts) == 0 {
		return nil, errorf(http.StatusConflict, "task %s has not started yet (%s)", t.show, rec.State)
	}
	if n == 0 {
		return rec.LastAttempt(), nil
	}
	for i := range rec.Attempts {
		if rec.Attempts[i].Number == n {
			return &rec.Attempts[i], nil
		}
	}
	return nil, errorf(http.StatusNotFound, "task %s has no attempt %d (it has attempts %d to %d)", t.show, n,
		rec.Attempts[0].Number, rec.LastAttempt().Number)
}

// copyLog sends what f holds from its offset on, in lines of at most
// 32 KiB: UTF-8 as text, anything else as data. Unless final, a
// character cut at the end of a read waits for the next.
func copyLog(s *stream, f *os.File, final bool) (int64, error) {
	if s.buf == nil {
		s.buf = make([]byte, 32<<10)
	}
	buf := s.buf
	var total int64
	for {
		n, err := f.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			// Keep a character cut in two for the next read.
			if cut := incompleteTail(chunk); cut > 0 && err == nil && !final {
				chunk = chunk[:n-cut]
				if _, serr := f.Seek(int64(-cut), io.SeekCurrent); serr != nil {
					chunk = buf[:n]
				}
			}
			line := client.LogLine{Text: string(chunk)}
			if !utf8.Valid(chunk) {
				line = client.LogLine{Data: append([]byte(nil), chunk...)}
			}
			if len(chunk) > 0 {
				if serr := s.send(line); serr != nil {
					return total, serr
				}
			}
			total += int64(len(chunk))
			if len(chunk) == 0 {
				return total, nil // only a cut character: wait for the rest
			}
		}
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// incompleteTail returns how many bytes at the end of b begin a UTF-8
// character that b does not finish (0 to 3).
func incompleteTail(b []byte) int {
	for i := 1; i <= 3 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < 0x80 {
			return 0 // ASCII: complete
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return i
			}
			return 0
		}
	}
	return 0
}
