package daemon

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/metrics"
)

// Metrics: GET /v1/metrics on the socket, and, when Config.MetricsListen
// is set, GET /metrics on a TCP listener of its own for a scraper that
// cannot read a unix socket (nothing else is served there). Counters are
// fed by a subscription to the scheduler's events, each event counted
// under its task's owner; gauges are read from the records and the cards
// at each scrape (snapshot).

// metricsBuffer bounds the events the metrics' subscription lets wait.
const metricsBuffer = 4096

// startMetrics makes the metrics, subscribes them to the scheduler's
// events, and listens on Config.MetricsListen if set. Called once, from
// start, before the scheduler serves.
func (d *Daemon) startMetrics() error {
	d.metrics = metrics.New(d.snapshot)
	sub, err := d.sched.Subscribe(0, metricsBuffer)
	if err != nil {
		return fmt.Errorf("subscribe metrics to the scheduler's events: %w", err)
	}
	if addr := d.cfg.MetricsListen; addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			sub.Close()
			return fmt.Errorf("listen for metrics on %s: %w", addr, err)
		}
		d.metricsLn = ln
	}
	go d.feedMetrics(sub)
	return nil
}

// serveMetrics serves GET /metrics on the metrics listener, if any, until
// the daemon stops.
func (d *Daemon) serveMetrics() {
	if d.metricsLn == nil {
		return
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", d.metrics.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10, ErrorLog: d.log}
	go func() {
		<-d.stopping
		srv.Close()
	}()
	d.log.Printf("metrics on http://%s/metrics", d.metricsLn.Addr())
	if err := srv.Serve(d.metricsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
		d.log.Printf("metrics listener %s: %v", d.metricsLn.Addr(), err)
	}
}

// metricsRoute serves GET /v1/metrics: the metrics in the Prometheus text
// format.
func (d *Daemon) metricsRoute(w http.ResponseWriter, r *http.Request, _ peer) error {
	d.metrics.Handler().ServeHTTP(w, r)
	return nil
}

// feedMetrics counts each event of sub under its task's owner, until the
// daemon stops or the scheduler closes. A subscription dropped for falling
// behind is taken up again after the last event counted (or from now on,
// those no longer being kept: the counters then miss some).
func (d *Daemon) feedMetrics(sub *gpusched.Subscription) {
	var last uint64
	for {
		if !d.countEvents(sub, &last) {
			return
		}
		err := sub.Err()
		sub.Close()
		if !errors.Is(err, gpusched.ErrSlowSubscriber) {
			return // the scheduler closed
		}
		sub, err = d.sched.Subscribe(last, metricsBuffer)
		if errors.Is(err, gpusched.ErrTooOld) {
			d.log.Printf("metrics fell behind the events; the counters miss some")
			sub, err = d.sched.Subscribe(0, metricsBuffer)
		}
		if err != nil {
			d.log.Printf("metrics: subscribe to the events again: %v", err)
			return
		}
	}
}

// countEvents counts sub's events until it ends (true) or the daemon stops
// (false, sub closed).
func (d *Daemon) countEvents(sub *gpusched.Subscription, last *uint64) bool {
	for {
		select {
		case ev, ok := <-sub.C():
			if !ok {
				return true
			}
			*last = ev.Seq
			d.metrics.Observe(ev, d.ownerName(ev.TaskID))
			if st, ok := endState(ev.Kind); ok {
				d.tasks.note(ev.TaskID, summaryOfEvent(&ev, st))
				d.learned.forget(ev.TaskID)
			}
		case <-d.stopping:
			sub.Close()
			return false
		}
	}
}

// endState is the state a task is in after an event of kind k, when the
// event ends the task.
func endState(k gpusched.EventKind) (gpusched.State, bool) {
	switch k {
	case gpusched.EventComplete:
		return gpusched.StateComplete, true
	case gpusched.EventFailed:
		return gpusched.StateFailed, true
	case gpusched.EventCancelled:
		return gpusched.StateCancelled, true
	case gpusched.EventBlocked:
		return gpusched.StateBlocked, true
	case gpusched.EventStarted, gpusched.EventRetrying, gpusched.EventAdopted, gpusched.EventDeliveryFailed,
		gpusched.EventCardQuarantined, gpusched.EventGPUUnknown, gpusched.EventGPUKnown, gpusched.EventJob:
	}
	return 0, false
}

// ownerName is the user name of the owner of the scheduler's task id; ""
// for none (an event about the cards).
func (d *Daemon) ownerName(id string) string {
	if id == "" {
		return ""
	}
	if rn, _, ok := d.runOf(id); ok {
		return rn.user
	}
	return ""
}

// snapshot is the daemon's state as the gauges show it: every task it
// knows (finished ones from before it started too) by owner and state,
// the pending ones by why they wait (the kind the queue shows), the
// cards as admission sees them, and the completion events not delivered.
func (d *Daemon) snapshot() metrics.Snapshot {
	recs := d.liveRecords()
	type key struct{ user, state string }
	counts := map[key]int{}
	s := metrics.Snapshot{Waiting: map[string]int{}}
	for _, rn := range d.runs.all() {
		for i := range rn.tasks {
			m := &rn.tasks[i]
			id := qualify(rn.id, m.inner)
			rec := recs[id]
			if rec == nil { // finished: the scheduler may have retired it
				if st, ok := d.stateOf(recs, id); ok {
					counts[key{rn.user, st.String()}]++
				}
				continue
			}
			counts[key{rn.user, rec.State.String()}]++
			if rec.State == gpusched.StatePending {
				if _, kind := d.waitingReason(rec, m, recs); kind != "" {
					s.Waiting[kind]++
				}
			}
		}
	}
	for k, n := range counts {
		s.Tasks = append(s.Tasks, metrics.TaskCount{User: k.user, State: k.state, N: n})
	}
	slices.SortFunc(s.Tasks, func(a, b metrics.TaskCount) int {
		return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.State, b.State))
	})
	s.Cards, _ = d.sched.Cards()
	s.EventsPending = d.sched.EventsPending()
	return s
}
