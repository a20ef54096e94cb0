// Package metrics exposes what a gpusched daemon does in the Prometheus
// text format: counters fed by the scheduler's events as they happen, and
// gauges read from a snapshot of the daemon's state at each scrape.
//
// Every metric is listed in docs/daemon.md.
package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gpusched/gpusched"
)

// Snapshot is the daemon's state at one moment, as the gauges show it.
type Snapshot struct {
	// Tasks counts tasks by owner and state.
	Tasks []TaskCount
	// Waiting counts pending tasks by why they wait (the engine's reason
	// kind: dependencies, slot, gpu-fit, ...).
	Waiting map[string]int
	// Cards are the GPUs as admission sees them.
	Cards []gpusched.CardView
	// EventsPending counts completion events not yet delivered.
	EventsPending int
}

// TaskCount is how many tasks of one owner are in one state.
type TaskCount struct {
	User  string
	State string
	N     int
}

// Metrics holds the counters and reads the gauges. Observe may be called
// from any goroutine.
type Metrics struct {
	reg        *prometheus.Registry
	admissions *prometheus.CounterVec
	ended      *prometheus.CounterVec
	finished   *prometheus.CounterVec
	oomRetries *prometheus.CounterVec
}

// New makes the metrics; snapshot is called once per scrape and must be
// safe to call from any goroutine.
func New(snapshot func() Snapshot) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.admissions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gpusched_admissions_total",
		Help: "Attempts admitted (started), by owner and by what they were admitted to: a GPU card or a CPU slot.",
	}, []string{"user", "resource"})
	m.ended = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gpusched_attempts_ended_total",
		Help: "Attempts that ended, by how: exited, signalled, timed-out, cancelled, lost, preempted, node-failure, infrastructure, unrunnable.",
	}, []string{"reason"})
	m.finished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gpusched_tasks_finished_total",
		Help: "Tasks that reached an end state, by owner and state (complete, failed, blocked, cancelled).",
	}, []string{"user", "state"})
	m.oomRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gpusched_oom_retries_total",
		Help: "Attempts that ran out of GPU memory and are retried with a larger request, by owner.",
	}, []string{"user"})
	m.reg.MustRegister(m.admissions, m.ended, m.finished, m.oomRetries, &gauges{snapshot: snapshot},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// oomMark is how the scheduler's attempt error reports an out-of-memory
// failure whose retry asks for more memory (internal/engine gpu.go).
const oomMark = "out of memory"

// Observe counts what ev reports; user is the owner of ev's task ("" for
// events about cards).
func (m *Metrics) Observe(ev gpusched.Event, user string) {
	switch ev.Kind {
	case gpusched.EventStarted:
		res := "cpu"
		if ev.Attempt.GPU != nil {
			res = "gpu"
		}
		m.admissions.WithLabelValues(user, res).Inc()
	case gpusched.EventRetrying:
		m.attemptEnded(ev)
		if strings.Contains(ev.Attempt.Error, oomMark) && strings.Contains(ev.Attempt.Error, "request grows") {
			m.oomRetries.WithLabelValues(user).Inc()
		}
	case gpusched.EventComplete:
		m.attemptEnded(ev)
		m.finished.WithLabelValues(user, "complete").Inc()
	case gpusched.EventFailed:
		m.attemptEnded(ev)
		m.finished.WithLabelValues(user, "failed").Inc()
	case gpusched.EventCancelled:
		m.attemptEnded(ev)
		m.finished.WithLabelValues(user, "cancelled").Inc()
	case gpusched.EventBlocked:
		m.finished.WithLabelValues(user, "blocked").Inc()
	case gpusched.EventAdopted, gpusched.EventDeliveryFailed, gpusched.EventCardQuarantined,
		gpusched.EventGPUUnknown, gpusched.EventGPUKnown, gpusched.EventJob:
	}
}

// attemptEnded counts the end of ev's attempt, if it had one.
func (m *Metrics) attemptEnded(ev gpusched.Event) {
	if ev.Attempt.Number == 0 || ev.Attempt.EndReason == "" {
		return
	}
	m.ended.WithLabelValues(ev.Attempt.EndReason).Inc()
}

// gauges reads a snapshot at each scrape and reports it.
type gauges struct {
	snapshot func() Snapshot
	mu       sync.Mutex // one snapshot at a time
}

var (
	descTasks = prometheus.NewDesc("gpusched_tasks",
		"Tasks the daemon knows, by owner and state.", []string{"user", "state"}, nil)
	descWaiting = prometheus.NewDesc("gpusched_tasks_waiting",
		"Pending tasks, by why they wait (the scheduler's reason).", []string{"reason"}, nil)
	descCardTotal = prometheus.NewDesc("gpusched_card_total_mib",
		"A card's memory, as nvidia-smi reports it.", []string{"card", "uuid"}, nil)
	descCardUsed = prometheus.NewDesc("gpusched_card_used_mib",
		"A card's memory in use, as nvidia-smi reports it.", []string{"card", "uuid"}, nil)
	descCardForeign = prometheus.NewDesc("gpusched_card_foreign_mib",
		"A card's memory held by processes that are not the daemon's tasks (and by the driver).", []string{"card", "uuid"}, nil)
	descCardCharged = prometheus.NewDesc("gpusched_card_charged_mib",
		"A card's memory charged to the daemon's running tasks.", []string{"card", "uuid"}, nil)
	descCardState = prometheus.NewDesc("gpusched_card_state",
		"1 for a card's current state (ok, cooling, quarantined, unknown, hidden), 0 for the others.", []string{"card", "uuid", "state"}, nil)
	descEvents = prometheus.NewDesc("gpusched_completion_events_pending",
		"Completion events recorded and not yet delivered.", nil, nil)
)

// cardStates are the states a card may be in, as gpusched_card_state names
// them.
var cardStates = []gpusched.CardState{gpusched.CardOK, gpusched.CardCooling, gpusched.CardQuarantined, gpusched.CardUnknown, gpusched.CardHidden}

func (g *gauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTasks, descWaiting, descCardTotal, descCardUsed, descCardForeign,
		descCardCharged, descCardState, descEvents} {
		ch <- d
	}
}

func (g *gauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	s := g.snapshot()
	g.mu.Unlock()
	for _, t := range s.Tasks {
		ch <- prometheus.MustNewConstMetric(descTasks, prometheus.GaugeValue, float64(t.N), t.User, t.State)
	}
	for reason, n := range s.Waiting {
		ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(n), reason)
	}
	for _, c := range s.Cards {
		idx := strconv.Itoa(c.Index)
		ch <- prometheus.MustNewConstMetric(descCardTotal, prometheus.GaugeValue, float64(c.TotalMiB), idx, c.UUID)
		ch <- prometheus.MustNewConstMetric(descCardUsed, prometheus.GaugeValue, float64(c.UsedMiB), idx, c.UUID)
		ch <- prometheus.MustNewConstMetric(descCardForeign, prometheus.GaugeValue, float64(c.ForeignMiB), idx, c.UUID)
		ch <- prometheus.MustNewConstMetric(descCardCharged, prometheus.GaugeValue, float64(c.ChargedMiB), idx, c.UUID)
		for _, st := range cardStates {
			v := 0.0
			if c.State == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descCardState, prometheus.GaugeValue, v, idx, c.UUID, stateName(st))
		}
	}
	ch <- prometheus.MustNewConstMetric(descEvents, prometheus.GaugeValue, float64(s.EventsPending))
}

// stateName is a card state as a label value.
func stateName(s gpusched.CardState) string {
	switch s {
	case gpusched.CardOK:
		return "ok"
	case gpusched.CardCooling:
		return "cooling"
	case gpusched.CardQuarantined:
		return "quarantined"
	case gpusched.CardUnknown:
		return "unknown"
	case gpusched.CardHidden:
		return "hidden"
	}
	return "state-" + strconv.Itoa(int(s))
}
