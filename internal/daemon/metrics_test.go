package daemon

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	gpusched "github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/client"
)

// oneCard is a GPU probe that always reads the same idle card.
type oneCard struct{}

func (oneCard) Snapshot(context.Context) (gpusched.GPUSnapshot, error) {
	return gpusched.GPUSnapshot{Time: time.Now(), Cards: []gpusched.GPUCard{
		{Index: 0, UUID: "GPU-metrics", Name: "Test", TotalMiB: 81920, UsedMiB: 1000, FreeMiB: 80920},
	}}, nil
}

// families is a scrape, parsed: metric families by name.
type families map[string]*dto.MetricFamily

// scrapeURL gets url through hc and parses the answer strictly as the
// Prometheus text format.
func scrapeURL(t *testing.T, hc *http.Client, url string) families {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("GET %s: content type %q, want the text format", url, ct)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: not the Prometheus text format: %v", url, err)
	}
	return fams
}

// value is the sample of family name with exactly the labels given (a
// counter's or a gauge's), and whether there is one.
func (f families) value(name string, labels ...string) (float64, bool) {
	fam := f[name]
	if fam == nil {
		return 0, false
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
next:
	for _, m := range fam.Metric {
		if len(m.Label) != len(want) {
			continue
		}
		for _, l := range m.Label {
			if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

// unixHTTP is an HTTP client that reaches the daemon on socket.
func unixHTTP(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
}

// A scrape over the socket, and one on the TCP listener, show what the
// daemon did: tasks by owner and state, why tasks wait, admissions,
// attempts' ends, the card, no completion events pending.
func TestMetricsOverTheSocketAndTCP(t *testing.T) {
	d := newTestDaemon(t, Config{Scheduling: gpusched.Scheduling{MaxParallelTasks: 1}, MetricsListen: "127.0.0.1:0",
		Options: []gpusched.Option{gpusched.WithProbe(oneCard{})}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	none := 0
	gpuTask := cmd("true")
	gpuTask.GPUMiB = 4000
	for _, c := range []client.Command{cmd("true"), cmd("true"), {Args: []string{"false"}, Dir: "/", Retries: &none}, gpuTask} {
		if _, err := d.client.Submit(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.client.Wait(ctx, []string{"1", "2", "3", "4"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.Submit(ctx, cmd("sleep", "60")); err != nil { // 5 runs,
		t.Fatal(err)
	}
	if _, err := d.client.Submit(ctx, cmd("true")); err != nil { // 6 waits for its slot
		t.Fatal(err)
	}
	me := d.userName(os.Getuid())
	overSocket := func() families { return scrapeURL(t, unixHTTP(d.socket), "http://gpusched/v1/metrics") }
	want := []struct {
		name   string
		labels []string
		v      float64
	}{
		{"gpusched_tasks", []string{"user", me, "state", "complete"}, 3},
		{"gpusched_tasks", []string{"user", me, "state", "failed"}, 1},
		{"gpusched_tasks", []string{"user", me, "state", "running"}, 1},
		{"gpusched_tasks", []string{"user", me, "state", "pending"}, 1},
		{"gpusched_tasks_waiting", []string{"reason", "slot"}, 1},
		{"gpusched_admissions_total", []string{"user", me, "resource", "cpu"}, 4},
		{"gpusched_admissions_total", []string{"user", me, "resource", "gpu"}, 1},
		{"gpusched_attempts_ended_total", []string{"reason", "exited"}, 4},
		{"gpusched_tasks_finished_total", []string{"user", me, "state", "complete"}, 3},
		{"gpusched_tasks_finished_total", []string{"user", me, "state", "failed"}, 1},
		{"gpusched_card_total_mib", []string{"card", "0", "uuid", "GPU-metrics"}, 81920},
		{"gpusched_card_charged_mib", []string{"card", "0", "uuid", "GPU-metrics"}, 0},
		{"gpusched_card_state", []string{"card", "0", "uuid", "GPU-metrics", "state", "ok"}, 1},
		{"gpusched_card_state", []string{"card", "0", "uuid", "GPU-metrics", "state", "quarantined"}, 0},
		{"gpusched_completion_events_pending", nil, 0},
	}
	mismatches := func(f families) []string {
		var bad []string
		for _, w := range want {
			if v, ok := f.value(w.name, w.labels...); !ok || v != w.v {
				bad = append(bad, fmt.Sprintf("%s%v = %v (present %v), want %v", w.name, w.labels, v, ok, w.v))
			}
		}
		return bad
	}
	// The counters follow the events a moment after they happen: scrape
	// until they have caught up.
	var bad []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if bad = mismatches(overSocket()); len(bad) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(bad) > 0 {
		t.Errorf("over the socket:\n%s", strings.Join(bad, "\n"))
	}
	f := overSocket()
	if _, ok := f.value("gpusched_oom_retries_total", "user", me); ok {
		t.Error("an out-of-memory retry counted, none happened")
	}

	// The TCP listener serves the same, at /metrics and nothing else.
	if d.metricsLn == nil {
		t.Fatal("no metrics listener though MetricsListen was set")
	}
	base := "http://" + d.metricsLn.Addr().String()
	tcp := scrapeURL(t, http.DefaultClient, base+"/metrics")
	if bad := mismatches(tcp); len(bad) > 0 {
		t.Errorf("over TCP:\n%s", strings.Join(bad, "\n"))
	}
	names := func(f families) string {
		var out []string
		for n := range f {
			if strings.HasPrefix(n, "gpusched_") {
				out = append(out, n)
			}
		}
		sort.Strings(out)
		return strings.Join(out, " ")
	}
	if names(tcp) != names(f) {
		t.Errorf("TCP serves %s; the socket %s", names(tcp), names(f))
	}
	doc, err := os.ReadFile("../../docs/daemon.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range strings.Fields(names(f)) {
		if !strings.Contains(string(doc), "| `"+n+"` |") {
			t.Errorf("docs/daemon.md does not list %s in its table of metrics", n)
		}
	}
	for _, path := range []string{"/v1/tasks", "/v1/metrics", "/v1/version", "/"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s over TCP: %s, want 404 (metrics only)", path, resp.Status)
		}
	}
	resp, err := http.Post(base+"/metrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics over TCP: %s, want 405", resp.Status)
	}
}

// Without MetricsListen nothing listens on TCP, and another user of a
// per-user daemon cannot read its metrics.
func TestMetricsOffTCPAndOwnUserOnly(t *testing.T) {
	d := newTestDaemon(t, Config{})
	if d.metricsLn != nil {
		t.Errorf("a metrics listener on %s without MetricsListen", d.metricsLn.Addr())
	}
	if rec := d.as(t, peer{uid: d.uid + 1}, http.MethodGet, "/v1/metrics", nil); rec.Code != http.StatusForbidden {
		t.Errorf("another user: %d, want 403", rec.Code)
	}
	rec := d.as(t, peer{uid: d.uid}, http.MethodGet, "/v1/metrics", nil)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "\ngpusched_completion_events_pending 0\n") {
		t.Errorf("the daemon's user: %d %q", rec.Code, rec.Body)
	}
}
