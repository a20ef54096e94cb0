package store

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

// Every card of an attempt on several is saved in the order chosen and
// read back; an attempt on one card keeps GPUs nil; a later write of the
// attempt replaces them.
func TestAttemptCardsRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	for name, open := range map[string]func(t *testing.T) Store{
		"memory": func(*testing.T) Store { return NewMemory() },
		"sqlite": func(t *testing.T) Store {
			s, err := OpenSQLite(path, filepath.Dir(path))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			t0 := time.Unix(1700000000, 0)
			first, one := 3, 2
			b := &Batch{
				Tasks: []TaskWrite{{ID: "a", Seq: 1, Kind: "command", Spec: []byte(`{}`), State: task.Running}},
				Attempts: []AttemptWrite{
					{TaskID: "a", Attempt: task.Attempt{Number: 1, Start: t0, GPU: &one}},
					{TaskID: "a", Attempt: task.Attempt{Number: 2, Start: t0, GPU: &first, GPUs: []int{3, 0, 12, 1}}},
				},
			}
			if err := s.Apply(b); err != nil {
				t.Fatal(err)
			}
			rows, err := s.Load()
			if err != nil {
				t.Fatal(err)
			}
			at := rows[0].Attempts
			if at[0].GPUs != nil || *at[0].GPU != 2 {
				t.Errorf("one card: gpu %v, gpus %v; want 2, nil", *at[0].GPU, at[0].GPUs)
			}
			if !slices.Equal(at[1].GPUs, []int{3, 0, 12, 1}) || *at[1].GPU != 3 {
				t.Errorf("several: gpu %v, gpus %v; want 3, [3 0 12 1]", *at[1].GPU, at[1].GPUs)
			}
			b.Reset()
			b.Attempts = []AttemptWrite{{TaskID: "a", Attempt: task.Attempt{Number: 2, Start: t0, GPU: &first, GPUs: []int{3, 5}}}}
			if err := s.Apply(b); err != nil {
				t.Fatal(err)
			}
			if rows, _ := s.Load(); !slices.Equal(rows[0].Attempts[1].GPUs, []int{3, 5}) {
				t.Errorf("after a rewrite: gpus %v, want [3 5]", rows[0].Attempts[1].GPUs)
			}
		})
	}
}

func TestSplitInts(t *testing.T) {
	for _, s := range []string{"", "7", "3,0,12"} {
		v, err := splitInts(s)
		if err != nil || joinInts(v) != s {
			t.Errorf("splitInts(%q) = %v, %v; joined back %q", s, v, err, joinInts(v))
		}
	}
	if _, err := splitInts("1,,2"); err == nil {
		t.Error(`splitInts("1,,2") accepted`)
	}
}

// The summaries the daemon's queue reads of finished tasks, and the
// briefs it reads at start, carry every card of the last attempt.
func TestSummaryCards(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := OpenSQLite(path, filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Unix(1700000000, 0)
	first, one := 3, 2
	b := &Batch{
		Tasks: []TaskWrite{{ID: "pair", Seq: 1, Kind: "command", Spec: []byte(`{}`), State: task.Complete},
			{ID: "single", Seq: 2, Kind: "command", Spec: []byte(`{}`), State: task.Complete}},
		Attempts: []AttemptWrite{
			{TaskID: "pair", Attempt: task.Attempt{Number: 1, Start: t0, End: t0.Add(time.Second), GPU: &first, GPUs: []int{3, 1}}},
			{TaskID: "single", Attempt: task.Attempt{Number: 1, Start: t0, End: t0.Add(time.Second), GPU: &one}},
		},
	}
	if err := s.Apply(b); err != nil {
		t.Fatal(err)
	}
	sums, err := s.FinishedSummaries([]string{"pair", "single"})
	if err != nil {
		t.Fatal(err)
	}
	briefs, err := s.Briefs()
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range [][]Summary{sums, {briefs[0].Summary, briefs[1].Summary}} {
		cards := map[string][]int{}
		for _, sm := range got {
			if sm.Last == nil {
				t.Fatalf("%s: no last attempt", sm.ID)
			}
			cards[sm.ID] = sm.Last.Cards()
		}
		if !slices.Equal(cards["pair"], []int{3, 1}) || !slices.Equal(cards["single"], []int{2}) {
			t.Errorf("last attempts' cards %v; want pair on [3 1], single on [2]", cards)
		}
	}
}
