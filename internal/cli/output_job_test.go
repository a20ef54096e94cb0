package cli

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	gpusched "github.com/gpusched/gpusched"
)

// The engine tells a batch job's command start with the job unchanged;
// the plain output says each state of the job once, and again after the
// attempt ended (a retry's job may say the same).
func TestPlainOutputSaysAJobOnce(t *testing.T) {
	var out bytes.Buffer
	p := newPlainDisplay(&out, io.Discard)
	p.line = func(ev gpusched.Event) string { return ev.Kind.String() + " " + jobText(ev.Attempt.Job) }
	job := func(state, node string) gpusched.Event {
		return gpusched.Event{Kind: gpusched.EventJob, TaskID: "a", Time: time.Unix(0, 0),
			Attempt: gpusched.Attempt{Number: 1, Job: &gpusched.RemoteJob{System: "Slurm", ID: "7", State: state, Node: node}}}
	}
	p.observe(job("PENDING", ""))
	p.observe(job("RUNNING", "n1"))
	p.observe(job("RUNNING", "n1")) // the command started
	p.observe(gpusched.Event{Kind: gpusched.EventRetrying, TaskID: "a"})
	p.observe(job("RUNNING", "n1")) // the retry's job, told anew
	if err := p.q.close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"job Slurm job 7 PENDING", "job Slurm job 7 RUNNING on n1", "retrying ", "job Slurm job 7 RUNNING on n1"}
	if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
