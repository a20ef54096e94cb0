package slurm

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Slurm's accounting (sacct) remembers jobs after the controller has
// forgotten them (MinJobAge after their end), but only where it is
// enabled: with AccountingStorageType=accounting_storage/none, sacct
// refuses every query. So the tracker asks it only at need, about jobs
// that squeue and scontrol no longer know and that wrote no result file,
// and the first of those queries is the check: an answer turns
// accounting on, sacct's "accounting storage is disabled" (or no sacct
// at all) turns it off for good, and any other failure (slurmdbd down)
// leaves it undecided, to be asked again later.

// sacctFormat is the fixed sacct output the tracker asks for, with
// --parsable2: job id, state, exit code, node list, separated by "|".
const sacctFormat = "JobID,State,ExitCode,NodeList"

// Accounting states, as accounting.state holds them.
const (
	acctUnknown int32 = iota // not asked yet, or it did not answer
	acctOn                   // sacct answers
	acctOff                  // disabled: never asked again
)

// accounting asks sacct about jobs the controller forgot. Its methods
// are called from the tracker's goroutine only; state may be read from
// any goroutine.
type accounting struct {
	cmds  Commands
	retry time.Duration // how long an undecided accounting is left alone
	state atomic.Int32  // acctUnknown, acctOn or acctOff

	// Owned by the tracker's goroutine.
	next  time.Time           // while undecided: no query before
	final map[string]jobState // jobs sacct said had ended: that does not change
}

func newAccounting(cmds Commands, retry time.Duration) *accounting {
	return &accounting{cmds: cmds, retry: retry, final: map[string]jobState{}}
}

// ended returns how the jobs ids ended, for those sacct says have (in
// one call for all that it was not asked about before): none when
// accounting is off, or does not answer. A job sacct lists as still
// pending or running (its record lags, or its controller died without
// saving it) is left out: it is the lost grace's to judge.
func (a *accounting) ended(ids []string, now time.Time) map[string]jobState {
	out := map[string]jobState{}
	var ask []string
	for _, id := range ids {
		if s, ok := a.final[id]; ok {
			out[id] = s
		} else {
			ask = append(ask, id)
		}
	}
	slices.Sort(ask)
	if len(ask) == 0 || a.state.Load() == acctOff || a.state.Load() == acctUnknown && now.Before(a.next) {
		return out
	}
	res, err := a.cmds.Run(context.Background(), "sacct", "-X", "--noheader", "--parsable2",
		"--jobs="+strings.Join(ask, ","), "--format="+sacctFormat)
	switch {
	case err == nil:
		a.state.Store(acctOn)
	case accountingDisabled(err):
		a.state.Store(acctOff)
		return out
	default:
		if a.state.Load() == acctUnknown {
			a.next = now.Add(a.retry)
		}
		return out
	}
	jobs, err := parseSacct(res)
	if err != nil {
		return out
	}
	for _, s := range jobs {
		if terminal(s.State) {
			a.final[s.ID] = s
			out[s.ID] = s
		}
	}
	return out
}

// known returns the final state sacct gave earlier for job id.
func (a *accounting) known(id string) (jobState, bool) {
	s, ok := a.final[id]
	return s, ok
}

// prune forgets the final states of jobs no longer followed.
func (a *accounting) prune(followed map[*watch]struct{}) {
	if len(a.final) == 0 {
		return
	}
	keep := make(map[string]bool, len(followed))
	for w := range followed {
		keep[w.id] = true
	}
	for id := range a.final {
		if !keep[id] {
			delete(a.final, id)
		}
	}
}

// accountingDisabled reports whether err is sacct saying accounting is
// off on this cluster, or sacct is not there at all: no use asking again.
func accountingDisabled(err error) bool {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return true
	}
	var ce *CommandError
	return errors.As(err, &ce) && strings.Contains(strings.ToLower(ce.Stderr), "accounting storage is disabled")
}

// parseSacct reads sacct's --parsable2 output in sacctFormat, one job a
// line.
func parseSacct(out []byte) ([]jobState, error) {
	var jobs []jobState
	err := eachRow(out, func(line string, f []string) error {
		if len(f) != 4 {
			return fmt.Errorf("read sacct output: %q has %d fields, want 4", truncate(line, 120), len(f))
		}
		s := jobState{ID: f[0], State: baseState(f[1]), Exit: f[2], Node: f[3]}
		if s.ID == "" || s.State == "" {
			return fmt.Errorf("read sacct output: no job id or state in %q", truncate(line, 120))
		}
		if s.Node == "None assigned" {
			s.Node = ""
		}
		jobs = append(jobs, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return jobs, nil
}

// forgotten tells the watchers of jobs the controller no longer knows
// (squeue and scontrol said "Invalid job id") how they ended, where
// accounting says; the others are told gone. It reports whether any of
// them changed since the last round.
func (t *tracker) forgotten(ws []*watch) bool {
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.id
	}
	ended := t.acct.ended(ids, time.Now())
	changed := false
	for _, w := range ws {
		s, ok := ended[w.id]
		key := "gone"
		if ok {
			key = s.State + "/accounting"
		}
		if t.last[w.id] != key {
			t.last[w.id] = key
			changed = true
		}
		if ok {
			t.tell(w, sighting{state: s, started: w.started})
		} else {
			t.tell(w, sighting{gone: true, started: w.started})
		}
	}
	return changed
}
