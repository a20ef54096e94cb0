package slurm

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"
)

// sighting is what the tracker learnt of a job in one round: the result
// file, once it is there; else what Slurm says, or that Slurm no longer
// knows the job (gone).
type sighting struct {
	outcome *outcome
	started time.Time // when the command started, once the helper noted it
	state   jobState
	gone    bool
	err     error // the result file could not be read
}

// watch is one job the tracker follows for a watcher; the tracker sends
// on ch, the watcher receives (only the latest sighting is kept).
type watch struct {
	id      string
	result  string
	ch      chan sighting
	started time.Time // owned by the tracker's goroutine: when the helper noted the start
}

// signalReq asks the tracker to signal jobs: sig "" cancels them.
type signalReq struct {
	ids   []string
	sig   string // "TERM", "USR1"... or "" for a plain scancel
	batch bool   // --batch: the batch step alone (the helper), not its children
}

// tracker is the one goroutine that asks Slurm about the executor's jobs:
// one batched squeue per round for all of them, the result files first,
// scontrol for a job squeue no longer lists, and sacct (sacct.go) for the
// jobs scontrol no longer knows either. Rounds come fast after a job
// is added or a state changes, and slow down (doubling to the maximum)
// while nothing changes. It also sends cancels, batched.
type tracker struct {
	cmds     Commands
	min, max time.Duration
	add      chan *watch
	remove   chan *watch
	signal   chan signalReq
	stop     chan struct{}
	done     chan struct{}
	health   *health
	acct     *accounting // sacct, for jobs the controller forgot; owned by run's goroutine

	// Owned by run's goroutine.
	watches map[*watch]struct{}
	last    map[string]string // job id -> its state and reason last round
}

func newTracker(cmds Commands, min, max time.Duration, h *health) *tracker {
	t := &tracker{cmds: cmds, min: min, max: max, health: h,
		add: make(chan *watch), remove: make(chan *watch), signal: make(chan signalReq, 64),
		stop: make(chan struct{}), done: make(chan struct{}), acct: newAccounting(cmds, max),
		watches: map[*watch]struct{}{}, last: map[string]string{}}
	go t.run()
	return t
}

// follow starts following job id, whose result file is result.
func (t *tracker) follow(id, result string) *watch {
	w := &watch{id: id, result: result, ch: make(chan sighting, 1)}
	if t == nil { // the executor was closed
		return w
	}
	select {
	case t.add <- w:
	case <-t.stop:
	}
	return w
}

// unfollow stops following w.
func (t *tracker) unfollow(w *watch) {
	if t == nil {
		return
	}
	select {
	case t.remove <- w:
	case <-t.stop:
	}
}

// send asks for a signal; it never blocks the caller for long.
func (t *tracker) send(r signalReq) {
	if t == nil {
		return
	}
	select {
	case t.signal <- r:
	case <-t.stop:
	}
}

// close stops the tracker; the jobs go on in Slurm.
func (t *tracker) close() {
	close(t.stop)
	<-t.done
}

func (t *tracker) run() {
	defer close(t.done)
	interval := t.min
	timer := time.NewTimer(interval)
	defer timer.Stop()
	soon := func() {
		interval = t.min
		timer.Reset(interval)
	}
	for {
		select {
		case <-t.stop:
			return
		case w := <-t.add:
			t.watches[w] = struct{}{}
			soon()
		case w := <-t.remove:
			delete(t.watches, w)
		case r := <-t.signal:
			t.sendSignals(r)
		case <-timer.C:
			changed := t.round()
			if changed {
				interval = t.min
			} else {
				interval = min(2*interval, t.max)
			}
			if !t.health.up() {
				interval = max(interval, t.health.retryIn())
			}
			timer.Reset(interval)
		}
	}
}

// sendSignals sends r and whatever other requests are queued, one scancel
// per kind of signal.
func (t *tracker) sendSignals(first signalReq) {
	type kind struct {
		sig   string
		batch bool
	}
	groups := map[kind][]string{}
	var order []kind
	addReq := func(r signalReq) {
		k := kind{r.sig, r.batch}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r.ids...)
	}
	addReq(first)
	for more := true; more; {
		select {
		case r := <-t.signal:
			addReq(r)
		default:
			more = false
		}
	}
	for _, k := range order {
		args := []string{}
		if k.batch {
			args = append(args, "--batch")
		}
		if k.sig != "" {
			args = append(args, "--signal="+k.sig)
		}
		ids := slices.Compact(slices.Sorted(slices.Values(groups[k])))
		// scancel's exit status says nothing of what became of the jobs
		// (one may have ended meanwhile): their state tells.
		_, _ = t.cmds.Run(context.Background(), "scancel", append(args, ids...)...)
	}
}

// round looks at every job followed once and tells its watcher. It
// reports whether anything changed since the last round.
func (t *tracker) round() bool {
	changed := false
	t.acct.prune(t.watches)
	var ask []*watch
	for w := range t.watches {
		o, ok, err := readOutcome(w.result)
		switch {
		case err != nil:
			t.tell(w, sighting{err: err})
			delete(t.watches, w)
			changed = true
		case ok:
			t.tell(w, sighting{outcome: &o})
			delete(t.watches, w)
			changed = true
		default:
			if w.started.IsZero() {
				if at, ok := readStarted(w.result); ok {
					w.started = at
					changed = true
				}
			}
			if s, ok := t.acct.known(w.id); ok { // it ended, accounting said
				t.tell(w, sighting{state: s, started: w.started})
				continue
			}
			ask = append(ask, w)
		}
	}
	if len(ask) == 0 {
		return changed
	}
	ids := make([]string, len(ask))
	for i, w := range ask {
		ids[i] = w.id
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	states, err := t.queue(ids)
	if err != nil {
		return changed
	}
	var forgotten []*watch // neither squeue nor scontrol knows them
	for _, w := range ask {
		s, ok := states[w.id]
		if !ok {
			// squeue no longer lists it: ask scontrol, which may still
			// remember how it ended.
			out, err := t.cmds.Run(context.Background(), "scontrol", "show", "job", w.id)
			switch err = classify(err); {
			case err == nil:
				if s, err = parseShowJob(out); err != nil {
					continue
				}
				states[w.id] = s
			case invalidJob(err):
				forgotten = append(forgotten, w)
				continue
			default:
				t.health.note(err)
				continue
			}
		}
		if key := s.State + "/" + s.Reason; t.last[w.id] != key {
			t.last[w.id] = key
			changed = true
		}
		t.tell(w, sighting{state: s, started: w.started})
	}
	if len(forgotten) > 0 && t.forgotten(forgotten) {
		changed = true
	}
	asked := make(map[string]bool, len(ids))
	for _, id := range ids {
		asked[id] = true
	}
	for id := range t.last {
		if !asked[id] {
			delete(t.last, id)
		}
	}
	return changed
}

// queue asks squeue about ids in one call; every state, finished ones
// included (--states=all), while the controller remembers them.
func (t *tracker) queue(ids []string) (map[string]jobState, error) {
	if t == nil {
		return map[string]jobState{}, errors.New("slurm executor closed")
	}
	out, err := t.cmds.Run(context.Background(), "squeue", "--jobs="+strings.Join(ids, ","), "--states=all",
		"--noheader", "--format="+queueFormat)
	err = classify(err)
	t.health.note(err)
	states := map[string]jobState{}
	switch {
	case invalidJob(err):
		return states, nil // none of them is known
	case err != nil:
		return nil, err
	}
	jobs, err := parseQueue(out)
	if err != nil {
		return nil, err
	}
	for _, s := range jobs {
		states[s.ID] = s
	}
	return states, nil
}

// tell gives w's watcher s, replacing a sighting it has not taken yet.
func (t *tracker) tell(w *watch, s sighting) {
	for {
		select {
		case w.ch <- s:
			return
		default:
		}
		select {
		case <-w.ch:
		default:
		}
	}
}

// health is whether the controller answers, shared by the tracker and
// submissions: while it does not, submissions wait.
type health struct {
	mu    sync.Mutex // guards the fields below
	down  bool
	since time.Time
	why   error
	tries int
}

func newHealth() *health { return &health{} }

// note records the outcome of a call to the controller.
func (h *health) note(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if errors.Is(err, ErrUnreachable) {
		if !h.down {
			h.down, h.since = true, time.Now()
		}
		h.why = err
		h.tries++
		return
	}
	h.down, h.why, h.tries = false, nil, 0
}

// up reports whether the controller answered last.
func (h *health) up() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.down
}

// retryIn is how long to wait before asking a controller that did not
// answer again: 1 s, doubling per failure, at most 30 s.
func (h *health) retryIn() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := time.Second << min(h.tries, 5)
	return min(d, 30*time.Second)
}

// state says whether the controller is down, since when and why.
func (h *health) state() (down bool, since time.Time, why error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down, h.since, h.why
}
