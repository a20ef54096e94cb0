package gpusched

// Notifications beyond a task's completion: a task's failure for good
// (on_failure, FailureEventHandler), the end of a Run (on_run_end), and a
// webhook told of failures, runs' ends and quarantined cards. Each is an
// outbox event, written in the transaction of what it reports and
// delivered at least once by the engine (internal/engine/outbox.go); this
// file decides which events a transition asks for and delivers them.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/gpusched/gpusched/internal/elide"
	"github.com/gpusched/gpusched/internal/engine"
	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// Webhook delivery.
const (
	// WebhookTimeout bounds each POST to a webhook, answer included.
	WebhookTimeout = 10 * time.Second
	// WebhookTries is how many failed POSTs of one event, counted across
	// runs, make gpusched give it up (reported as an EventDeliveryFailed
	// with GaveUp). Between tries it waits 1s, 2s, 4s... up to 1m; a Run
	// waits for at most four tries of an event before it returns, the
	// event staying for the next run.
	WebhookTries = engine.WebhookTries
)

// The events a webhook is sent (WebhookEvent.Event).
const (
	WebhookTaskFailed      = "task-failed"
	WebhookRunEnded        = "run-ended"
	WebhookCardQuarantined = "card-quarantined"
)

// WebhookEvent is the JSON body POSTed to Scheduling.Webhook. Every event
// has ID, Event, Time and RunDir; the other fields are those of its event.
// A receiver should key what it does on ID: an event may arrive more than
// once (gpusched can die after the POST, before it saves the answer).
type WebhookEvent struct {
	// ID is the event's id in the run directory, the same on every try.
	ID     int64     `json:"id"`
	Event  string    `json:"event"` // WebhookTaskFailed, WebhookRunEnded or WebhookCardQuarantined
	Time   time.Time `json:"time"`  // when it happened
	RunDir string    `json:"run_dir"`

	// task-failed: the task, its attempts, how the last one ended, and
	// why the task failed (as FailureEvent says). card-quarantined: the
	// card's index, and why (Error).
	Task       string `json:"task,omitempty"`
	Attempts   *int   `json:"attempts,omitempty"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	Signal     string `json:"signal,omitempty"`
	Error      string `json:"error,omitempty"`
	AttemptLog string `json:"attempt_log,omitempty"`
	Card       *int   `json:"card,omitempty"`

	// run-ended: the run's summary, its fields beside the others.
	*RunSummary
}

// RunSummary is how a Run ended, as on_run_end reads it on its stdin (one
// JSON object) and a webhook's run-ended event carries it.
type RunSummary struct {
	RunDir  string    `json:"run_dir"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended"`
	// Interrupted: the Run was stopped before its end (Ctrl-C, its
	// context, Close); Reason says how. Tasks not started are pending.
	Interrupted bool   `json:"interrupted"`
	Reason      string `json:"reason,omitempty"`
	Total       int    `json:"total"`
	// Counts has every state's count, by its name ("complete", "failed",
	// "blocked", "cancelled", "pending", "running"), zeros included.
	Counts map[string]int `json:"counts"`
	// Failed lists the failed tasks' ids in submission order, the first
	// MaxSummaryFailed of them; FailedMore counts the others.
	Failed     []string `json:"failed"`
	FailedMore int      `json:"failed_more,omitempty"`
}

// MaxSummaryFailed is how many failed tasks a RunSummary names.
const MaxSummaryFailed = 1000

// failurePayload is what a failure event carries.
type failurePayload struct {
	Attempts   int    `json:"attempts"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	Signal     string `json:"signal,omitempty"`
	Error      string `json:"error"`
	AttemptLog string `json:"attempt_log,omitempty"`
}

// runEndPayload is what a run-end event carries: the command, as the
// settings said when the run ended, and the summary.
type runEndPayload struct {
	Args    []string   `json:"args"`
	Dir     string     `json:"dir,omitempty"`
	Summary RunSummary `json:"summary"`
}

// webhookPayload is what a webhook event carries: where it goes, as the
// settings said when it was written, and what (ID is set at delivery).
type webhookPayload struct {
	URL  string       `json:"url"`
	Body WebhookEvent `json:"body"`
}

// WithUserAgent sets the User-Agent of the webhook's requests. Default:
// "gpusched/VERSION", the module's version as the build knows it ("dev"
// when it does not).
func WithUserAgent(ua string) Option {
	return func(o *options) { o.userAgent = ua }
}

// defaultUserAgent names this build of gpusched.
func defaultUserAgent() string {
	v := "dev"
	if bi, ok := debug.ReadBuildInfo(); ok {
		mod := bi.Main
		for _, d := range bi.Deps {
			if d.Path == "github.com/gpusched/gpusched" {
				mod = *d
			}
		}
		if mod.Path == "github.com/gpusched/gpusched" && mod.Version != "" && mod.Version != "(devel)" {
			v = mod.Version
		}
	}
	return "gpusched/" + v
}

// webhookProblem says what is wrong with a webhook URL; "" if nothing.
func webhookProblem(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL again
		}
		return fmt.Sprintf("%s is not a URL: %v", quoteURL(raw), err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("%s is not an http or https URL", quoteURL(raw))
	case u.Host == "":
		return fmt.Sprintf("%s has no host", quoteURL(raw))
	}
	return ""
}

// quoteURL quotes a URL for a message: only its scheme and host, since
// its path or query often holds a secret (a chat service's hook token).
func quoteURL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return strconv.Quote(u.Scheme + "://" + u.Host + "/…")
	}
	// Not a URL with a host: up to the first "/" after a scheme's "//".
	head, rest := raw, ""
	start := 0
	if i := strings.Index(raw, "//"); i >= 0 {
		start = i + 2
	}
	if i := strings.IndexByte(raw[start:], '/'); i >= 0 {
		head, rest = raw[:start+i], raw[start+i:]
	}
	if rest != "" && rest != "/" {
		head += "/…"
	}
	return elide.Quote(head)
}

// notices returns the outbox events a recorded transition asks for: a
// task failed for good asks for its failure event (if its kind has a
// handler for it) and the webhook's; a card quarantined for the
// webhook's. Called on the engine's loop.
func (s *Scheduler) notices(ev engine.Event, sp *task.Spec, rec *task.Record) []engine.Notice {
	switch ev.Kind {
	case engine.Failed:
		if sp == nil || rec == nil {
			return nil
		}
		f := failurePayload{Attempts: len(rec.Attempts), ExitCode: rec.ExitCode, Error: rec.Error}
		if a := rec.LastAttempt(); a != nil {
			f.ExitCode, f.Signal, f.AttemptLog = a.ExitCode, a.Signal, a.LogPath
		}
		var out []engine.Notice
		if s.wantsFailureEvent(sp) {
			out = append(out, engine.Notice{Kind: store.EventFailure, Payload: mustJSON(f)})
		}
		if s.settings.Webhook != "" {
			attempts := f.Attempts
			out = append(out, s.webhookNotice(WebhookEvent{Event: WebhookTaskFailed, Time: ev.Time, Task: ev.TaskID,
				Attempts: &attempts, ExitCode: f.ExitCode, Signal: f.Signal, Error: f.Error, AttemptLog: f.AttemptLog}))
		}
		return out
	case engine.CardQuarantined:
		if s.settings.Webhook != "" {
			card := ev.Card
			return []engine.Notice{s.webhookNotice(WebhookEvent{Event: WebhookCardQuarantined, Time: ev.Time, Card: &card, Error: ev.Error})}
		}
	case engine.Started, engine.Retrying, engine.Completed, engine.TaskBlocked, engine.TaskCancelled,
		engine.DeliveryFailed, engine.GPUUnknown, engine.GPUKnown, engine.Adopted, engine.JobChanged:
	}
	return nil
}

// wantsFailureEvent: a failure produces an outbox event when the kind has
// a failure event handler with something to do.
func (s *Scheduler) wantsFailureEvent(sp *task.Spec) bool {
	switch h := s.handlers[sp.Kind].(type) {
	case CommandHandler:
		return len(sp.OnFailure) > 0
	case FailureEventHandler:
		return h != nil
	}
	return false
}

func (s *Scheduler) webhookNotice(body WebhookEvent) engine.Notice {
	body.RunDir = s.runDir
	return engine.Notice{Kind: store.EventWebhook, Payload: mustJSON(webhookPayload{URL: s.settings.Webhook, Body: body})}
}

// runEnded returns the events of a Run's end: on_run_end's and the
// webhook's. Called on the engine's loop.
func (s *Scheduler) runEnded(end engine.RunEnd) []engine.Notice {
	if len(s.settings.OnRunEnd) == 0 && s.settings.Webhook == "" {
		return nil
	}
	sum := s.summary(end)
	var out []engine.Notice
	if len(s.settings.OnRunEnd) > 0 {
		p := runEndPayload{Args: s.settings.OnRunEnd, Dir: s.settings.OnRunEndDir, Summary: sum}
		out = append(out, engine.Notice{Kind: store.EventRunEnd, Payload: mustJSON(p)})
	}
	if s.settings.Webhook != "" {
		out = append(out, s.webhookNotice(WebhookEvent{Event: WebhookRunEnded, Time: end.Ended, RunSummary: &sum}))
	}
	return out
}

// summary sums a Run's end up.
func (s *Scheduler) summary(end engine.RunEnd) RunSummary {
	sum := RunSummary{RunDir: s.runDir, Started: end.Started, Ended: end.Ended, Total: len(end.Records),
		Counts: map[string]int{}, Failed: []string{}}
	if end.Stopped != nil {
		sum.Interrupted, sum.Reason = true, oneLine(end.Stopped.Error())
	}
	for st := task.Pending; st <= task.Cancelled; st++ {
		sum.Counts[st.String()] = 0
	}
	for _, r := range end.Records {
		sum.Counts[r.State.String()]++
		if r.State == task.Failed {
			if len(sum.Failed) < MaxSummaryFailed {
				sum.Failed = append(sum.Failed, r.ID)
			} else {
				sum.FailedMore++
			}
		}
	}
	return sum
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode %T: %v", v, err)) // our own types: cannot fail
	}
	return b
}

// deliverFailure hands a failure event to its kind's handler.
func (s *Scheduler) deliverFailure(ctx context.Context, d engine.Delivery) error {
	if d.Spec == nil {
		return fmt.Errorf("failure event %d: the definition of task %q is not known", d.EventID, d.TaskID)
	}
	h, ok := s.handlers[d.Spec.Kind].(FailureEventHandler)
	if !ok {
		return fmt.Errorf("no failure event handler is registered for kind %q", d.Spec.Kind)
	}
	var f failurePayload
	if err := json.Unmarshal(d.Payload, &f); err != nil {
		return fmt.Errorf("read failure event %d: %w", d.EventID, err)
	}
	return h.OnFailureEvent(ctx, FailureEvent{
		ID: d.EventID, TaskID: d.TaskID, Time: d.Created, Attempts: f.Attempts, ExitCode: f.ExitCode, Signal: f.Signal,
		Error: f.Error, AttemptLog: f.AttemptLog, Spec: publicSpec(d.Spec), Tries: d.Tries,
		LogPath: s.eventLog(d), RunDir: s.runDir, Env: map[string]string{"GPUSCHED_RUN_DIR": s.runDir},
	})
}

// eventLog is where the command of event d writes: logs/TASK.event-ID.log,
// beside its task's attempts' logs (engine.AttemptLog), or, for a run's
// end, logs/run-end.event-ID.log (event ids are unique in a run directory,
// so that is no task's). Until issue 14 they were logs/TASK/event-ID.log
// and logs/run-end/event-ID.log; nothing reads them back by name.
func (s *Scheduler) eventLog(d engine.Delivery) string {
	name := d.TaskID
	if name == "" {
		name = "run-end"
	}
	return filepath.Join(s.runDir, LogsDir, name+".event-"+strconv.FormatInt(d.EventID, 10)+".log")
}

// deliverRunEnd runs on_run_end: the summary on its stdin, its counts in
// its environment, its output in its event's log. Exit code 0 delivers.
func (s *Scheduler) deliverRunEnd(ctx context.Context, d engine.Delivery) error {
	var p runEndPayload
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		return fmt.Errorf("read run-end event %d: %w", d.EventID, err)
	}
	if len(p.Args) == 0 {
		return nil
	}
	sum := p.Summary
	interrupted := "0"
	if sum.Interrupted {
		interrupted = "1"
	}
	vars := []string{"GPUSCHED_RUN_DIR=" + s.runDir, "GPUSCHED_EVENT_ID=" + strconv.FormatInt(d.EventID, 10),
		"GPUSCHED_RUN_TOTAL=" + strconv.Itoa(sum.Total), "GPUSCHED_RUN_INTERRUPTED=" + interrupted, "CUDA_VISIBLE_DEVICES="}
	for _, st := range []task.State{task.Complete, task.Failed, task.Blocked, task.Cancelled, task.Pending} {
		vars = append(vars, fmt.Sprintf("GPUSCHED_RUN_%s=%d", upper(st.String()), sum.Counts[st.String()]))
	}
	stdin := append(mustJSON(sum), '\n')
	log := s.eventLog(d)
	err := runWithInput(ctx, p.Args, environ(vars), p.Dir, log, s.runDir, stdin, s.settings.KillGrace)
	if err != nil {
		return fmt.Errorf("on_run_end: %w (log %s)", err, log)
	}
	return nil
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// runWithInput runs argv as an attempt is run (its own process group,
// stopped with SIGTERM then SIGKILL grace later when ctx is done, what
// it leaves behind killed), with input on its stdin and its output
// appended to logPath (never opened through a link below runDir).
func runWithInput(ctx context.Context, argv, env []string, dir, logPath, runDir string, input []byte, grace time.Duration) error {
	// The input from a file, not a pipe: nothing to copy, nothing to
	// wait for if the command never reads it.
	in, err := os.CreateTemp("", "gpusched-run-end-*.json")
	if err != nil {
		return fmt.Errorf("write its input: %w", err)
	}
	os.Remove(in.Name())
	defer in.Close()
	if _, err := in.Write(input); err != nil {
		return fmt.Errorf("write its input: %w", err)
	}
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("write its input: %w", err)
	}
	res := (&local.Executor{}).Execute(ctx, executor.Job{
		TaskID: "run-end", Args: argv, Env: env, Dir: dir, LogPath: logPath, LogRoot: runDir, KillGrace: grace, Stdin: in,
	}, executor.Hooks{})
	switch {
	case res.Err != nil:
		return res.Err
	case res.Reason == executor.Cancelled:
		return fmt.Errorf("stopped (%w)", context.Cause(ctx))
	case res.Signal != 0:
		return fmt.Errorf("killed by %s", executor.SignalName(res.Signal))
	case res.ExitCode != 0:
		return fmt.Errorf("exit code %d", res.ExitCode)
	}
	return nil
}

// webhookClient posts to webhooks: a short timeout, no redirects (a
// redirect of a POST may turn it into a GET, or hand the body to another
// host).
var webhookClient = &http.Client{
	Timeout:       WebhookTimeout,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// postWebhook POSTs a webhook event; a 2xx answer delivers it.
func (s *Scheduler) postWebhook(ctx context.Context, d engine.Delivery) error {
	var p webhookPayload
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		return fmt.Errorf("read webhook event %d: %w", d.EventID, err)
	}
	p.Body.ID = d.EventID
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL, bytes.NewReader(mustJSON(p.Body)))
	if err != nil {
		return fmt.Errorf("post to %s: %v", quoteURL(p.URL), err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.userAgent)
	resp, err := webhookClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message holds the whole URL
		}
		return fmt.Errorf("post to %s: %w", quoteURL(p.URL), err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("post to %s: answered %s", quoteURL(p.URL), resp.Status)
	}
	return nil
}
