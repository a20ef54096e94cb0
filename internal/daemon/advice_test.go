package daemon

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/gpusched/gpusched/client"
)

// GET /v1/budgets gives each task of the caller's once (the same id,
// command and dir in several runs), by its newest run, counting the
// attempts of all its runs; only tasks with a GPU or host memory budget;
// another user's tasks to root alone.
func TestBudgetsRoute(t *testing.T) {
	d := newTestDaemon(t, Config{})
	d.cfg.System, d.runAsAnyone = true, true
	alice, bob, root := peer{uid: 1000}, peer{uid: 1001}, peer{uid: 0}
	submit := func(p peer, tasks ...client.Task) string {
		t.Helper()
		rec := d.as(t, p, "POST", "/v1/runs", client.RunRequest{Kind: client.KindWorkflow, Name: "wf", Dir: "/", Tasks: tasks})
		var s client.Submitted
		if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &s) != nil {
			t.Fatalf("submit: %d %s", rec.Code, rec.Body)
		}
		return s.Run
	}
	prep := client.Task{ID: "prep", Command: []string{"true"}, MemoryMiBHost: 700}
	plain := client.Task{ID: "plain", Command: []string{"true"}}
	other := client.Task{ID: "prep", Command: []string{"true", "again"}, MemoryMiBHostAuto: true, MemoryMiBHostMax: 900}
	runs := []string{submit(alice, prep, plain), submit(alice, prep), submit(alice, other), submit(bob, prep)}
	if _, err := d.client.Wait(context.Background(), runs, nil); err != nil {
		t.Fatal(err)
	}
	get := func(p peer) []client.Budget {
		t.Helper()
		rec := d.as(t, p, "GET", "/v1/budgets", nil)
		var b client.Budgets
		if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &b) != nil {
			t.Fatalf("budgets: %d %s", rec.Code, rec.Body)
		}
		return b.Budgets
	}
	type row struct {
		task, owner string
		runs        int
		mib, asked  int64
		auto        bool
	}
	rows := func(bs []client.Budget) []row {
		var out []row
		for _, b := range bs {
			if b.Resource != "memory_mib_host" || !b.Ran {
				t.Errorf("%+v: want a host memory row of a task that ran", b)
			}
			out = append(out, row{b.Task, b.Owner, b.Runs, b.MemoryMiB, b.AskedMiB, b.MemoryAuto})
		}
		return out
	}
	aliceName, bobName := d.userName(1000), d.userName(1001)
	want := []row{{"2/prep", aliceName, 2, 700, 700, false}, {"3/prep", aliceName, 1, 0, 900, true}}
	if got := rows(get(alice)); !slices.Equal(got, want) {
		t.Errorf("alice's budgets: %+v, want %+v", got, want)
	}
	if got := rows(get(bob)); !slices.Equal(got, []row{{"4/prep", bobName, 1, 700, 700, false}}) {
		t.Errorf("bob's budgets: %+v", got)
	}
	if got := rows(get(root)); len(got) != 3 {
		t.Errorf("root's budgets: %+v, want everyone's 3", got)
	}
}
