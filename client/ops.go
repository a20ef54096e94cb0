package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
)

// Version asks the daemon which gpusched it is and what API versions it
// serves (GET /v1/version).
func (c *Client) Version(ctx context.Context) (Version, error) {
	var v Version
	err := c.do(ctx, http.MethodGet, "/v1/version", nil, nil, &v)
	return v, err
}

// Command is one command to submit as a run of its own.
type Command struct {
	Args []string // the argv, run without a shell
	// Name is shown in the queue; empty: the program's name.
	Name string
	// Dir is its working directory and Env its whole environment; a
	// nil Env means the daemon's own.
	Dir       string
	Env       map[string]string
	GPUMiB    int64 // a GPU memory budget; 0 with Exclusive false: a CPU task
	Exclusive bool
	// GPUs is how many cards a GPU task takes at once (Task.GPUs); 0: one.
	GPUs int
	// CPUs, MemoryMiBHost and Resources are what it takes of the
	// machine's cores, host memory and the daemon's custom resources
	// (Task.CPUs, MemoryMiBHost, Resources).
	CPUs          int
	MemoryMiBHost int64
	Resources     map[string]int
	After         []string // daemon ids that must complete first
	// AfterOn gives, by an id of After, when it is satisfied if not by
	// completion: "failure" or "any" (Task.AfterOn).
	AfterOn  map[string]string
	Priority int
	Timeout  time.Duration
	Retries  *int // nil: the daemon's default
	// Key makes the submission harmless to repeat (RunRequest.Key).
	Key string
}

// Submit queues one command as a run and returns its id (POST /v1/runs).
func (c *Client) Submit(ctx context.Context, cmd Command) (Submitted, error) {
	name := cmd.Name
	if name == "" && len(cmd.Args) > 0 {
		name = path.Base(cmd.Args[0])
	}
	return c.submit(ctx, RunRequest{Kind: KindCommand, Name: name, Dir: cmd.Dir, Env: cmd.Env, Key: cmd.Key,
		Tasks: []Task{{Command: cmd.Args, After: cmd.After, AfterOn: cmd.AfterOn, Priority: cmd.Priority, GPUMiB: cmd.GPUMiB,
			Exclusive: cmd.Exclusive, GPUs: cmd.GPUs, Timeout: Duration(cmd.Timeout), Retries: cmd.Retries,
			CPUs: cmd.CPUs, MemoryMiBHost: cmd.MemoryMiBHost, Resources: cmd.Resources}}})
}

// Workflow is a workflow's tasks to submit as one run.
type Workflow struct {
	Name  string            // shown in the queue: the workflow file's name
	Dir   string            // the tasks' working directory unless they name theirs
	Env   map[string]string // the tasks' environment; nil: the daemon's
	Tasks []Task
	Key   string
}

// SubmitWorkflow queues a workflow's tasks as one run (POST /v1/runs).
func (c *Client) SubmitWorkflow(ctx context.Context, wf Workflow) (Submitted, error) {
	return c.submit(ctx, RunRequest{Kind: KindWorkflow, Name: wf.Name, Dir: wf.Dir, Env: wf.Env, Tasks: wf.Tasks, Key: wf.Key})
}

func (c *Client) submit(ctx context.Context, r RunRequest) (Submitted, error) {
	var s Submitted
	err := c.do(ctx, http.MethodPost, "/v1/runs", nil, r, &s)
	return s, err
}

// Queue lists tasks (GET /v1/tasks), in submission order.
func (c *Client) Queue(ctx context.Context, o QueueOptions) ([]TaskInfo, error) {
	var out Queue
	err := c.do(ctx, http.MethodGet, "/v1/tasks", o.query(), nil, &out)
	return out.Tasks, err
}

// QueueJSON writes the daemon's answer to GET /v1/tasks, {"tasks": [...]}
// (see Queue), to w as it comes, without decoding it: for a program that
// passes it on.
func (c *Client) QueueJSON(ctx context.Context, o QueueOptions, w io.Writer) error {
	resp, err := c.send(ctx, http.MethodGet, "/v1/tasks", o.query(), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("read the daemon's queue: %w", err)
	}
	return nil
}

func (o QueueOptions) query() url.Values {
	q := url.Values{}
	if o.All {
		q.Set("all", "1")
	}
	if o.User != "" {
		q.Set("user", o.User)
	}
	if len(o.States) > 0 {
		q.Set("state", strings.Join(o.States, ","))
	}
	for _, id := range o.IDs {
		q.Add("id", id)
	}
	return q
}

// Runs lists the runs (GET /v1/runs), oldest first.
func (c *Client) Runs(ctx context.Context) ([]RunInfo, error) {
	var out struct {
		Runs []RunInfo `json:"runs"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/runs", nil, nil, &out)
	return out.Runs, err
}

// Cancel cancels tasks and runs by id (POST /v1/cancel) and returns the
// tasks it cancelled, once each has ended.
func (c *Client) Cancel(ctx context.Context, ids ...string) ([]string, error) {
	var out Cancelled
	err := c.do(ctx, http.MethodPost, "/v1/cancel", nil, CancelRequest{IDs: ids}, &out)
	return out.Cancelled, err
}

// Pause pauses tasks and runs by id (POST /v1/pause); no id: every task
// of the caller's (root: every task). With stop, running ones are stopped
// too (SIGSTOP). It returns the tasks it paused or stopped.
func (c *Client) Pause(ctx context.Context, stop bool, ids ...string) ([]string, error) {
	out := Paused{}
	err := c.do(ctx, http.MethodPost, "/v1/pause", nil, PauseRequest{IDs: orEmpty(ids), Stop: stop}, &out)
	return out.Paused, err
}

// Resume resumes paused tasks and runs by id (POST /v1/resume); no id:
// every paused task of the caller's (root: every one). It returns the
// tasks it resumed.
func (c *Client) Resume(ctx context.Context, ids ...string) ([]string, error) {
	out := Resumed{}
	err := c.do(ctx, http.MethodPost, "/v1/resume", nil, ResumeRequest{IDs: orEmpty(ids)}, &out)
	return out.Resumed, err
}

// Retry runs failed, cancelled or blocked tasks again (POST /v1/retry),
// with the tasks they blocked; a run's id stands for those of its tasks.
// It returns every task made pending again.
func (c *Client) Retry(ctx context.Context, ids ...string) ([]string, error) {
	out := Retried{}
	err := c.do(ctx, http.MethodPost, "/v1/retry", nil, RetryRequest{IDs: ids}, &out)
	return out.Retried, err
}

func orEmpty(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

// GPUs returns the daemon's view of the cards (GET /v1/gpus).
func (c *Client) GPUs(ctx context.Context) (GPUs, error) {
	var g GPUs
	err := c.do(ctx, http.MethodGet, "/v1/gpus", nil, nil, &g)
	return g, err
}

// Shutdown asks the daemon to exit (POST /v1/shutdown) and returns its
// PID; see ShutdownRequest for what becomes of its tasks. It returns once
// the daemon has answered, not once it is gone.
func (c *Client) Shutdown(ctx context.Context, killTasks bool) (int, error) {
	var out ShuttingDown
	err := c.do(ctx, http.MethodPost, "/v1/shutdown", nil, ShutdownRequest{KillTasks: killTasks}, &out)
	return out.PID, err
}

// Budgets returns, for each task of the caller's (root: everyone's) that
// asks for GPU memory or sets a host memory budget, what it asked for and
// what it used at peak in its recent runs (GET /v1/budgets), oldest first.
func (c *Client) Budgets(ctx context.Context) ([]Budget, error) {
	var out Budgets
	err := c.do(ctx, http.MethodGet, "/v1/budgets", nil, nil, &out)
	return out.Budgets, err
}
