package store

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/task"
)

// Memory is a Store held in memory, for tests. Safe for concurrent use, so a
// test may inspect it while an engine writes it.
type Memory struct {
	mu      sync.Mutex // guards the fields below
	rows    map[string]*Row
	cards   []gpu.CardView
	events  []EventWrite
	samples []Sample
	meta    map[string]string
	closed  bool
	// Applies counts successful Apply calls, i.e. transactions.
	applies int
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory { return &Memory{rows: map[string]*Row{}} }

// Load returns a deep copy of every row, in submission order.
func (m *Memory) Load() ([]Row, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]Row, 0, len(m.rows))
	_, stale := m.meta[MetaWaitingStale]
	for _, r := range m.rows {
		out = append(out, r.clone())
		if stale {
			out[len(out)-1].Waiting = task.WaitReason{}
		}
	}
	slices.SortFunc(out, func(a, b Row) int { return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.ID, b.ID)) })
	return out, nil
}

// LookupTask returns a deep copy of task id's row.
func (m *Memory) LookupTask(id string) (Row, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Row{}, false, ErrClosed
	}
	r := m.rows[id]
	if r == nil {
		return Row{}, false, nil
	}
	out := r.clone()
	if _, stale := m.meta[MetaWaitingStale]; stale {
		out.Waiting = task.WaitReason{} // an earlier scheduler's (MetaWaitingStale)
	}
	return out, true, nil
}

// clone copies a row and everything it points to that Apply changes.
func (r *Row) clone() Row {
	c := *r
	c.Attempts = slices.Clone(r.Attempts)
	c.Artifacts = slices.Clone(r.Artifacts)
	c.Inputs = slices.Clone(r.Inputs)
	if r.Handles != nil {
		c.Handles = make(map[int]executor.Handle, len(r.Handles))
		for n, h := range r.Handles {
			h.Data = slices.Clone(h.Data)
			c.Handles[n] = h
		}
	}
	c.Spec = slices.Clone(r.Spec)
	return c
}

// LookupMeta returns the value saved for key.
func (m *Memory) LookupMeta(key string) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return "", false, ErrClosed
	}
	v, ok := m.meta[key]
	return v, ok, nil
}

// LoadMeta returns the run-wide facts, as SQLite.LoadMeta does.
func (m *Memory) LoadMeta() (map[string]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	return maps.Clone(m.meta), nil
}

// Apply applies the batch under the lock, so readers see all of it or none.
func (m *Memory) Apply(b *Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if b.ClearWaiting {
		for _, r := range m.rows {
			r.Waiting = task.WaitReason{}
		}
	}
	for _, id := range b.ClearWaitingOf {
		if r := m.rows[id]; r != nil {
			r.Waiting = task.WaitReason{}
		}
	}
	for _, w := range b.Tasks {
		r := m.rows[w.ID]
		if r == nil {
			r = &Row{}
			m.rows[w.ID] = r
		}
		r.ID, r.Seq, r.Kind, r.State, r.ExitCode, r.Error, r.BlockedBy, r.GPURequestMiB = w.ID, w.Seq, w.Kind, w.State, w.ExitCode, w.Error, w.BlockedBy, w.GPURequestMiB
		r.Rerun, r.RetryAt, r.Paused, r.NotNeeded = w.Rerun, w.RetryAt, w.Paused, w.NotNeeded
		r.Waiting = stored(w.WaitKind, w.WaitDetail, w.RetryAt)
		if w.Fingerprint != "" {
			r.Fingerprint = w.Fingerprint
		}
		if w.ArtifactsSet {
			r.Artifacts = slices.Clone(w.Artifacts)
		}
		if !w.Submitted.IsZero() {
			r.Submitted = w.Submitted
		}
		if w.Spec != nil {
			r.Spec = slices.Clone(w.Spec)
		}
	}
	for _, w := range b.Attempts {
		r := m.rows[w.TaskID]
		if r == nil {
			return fmt.Errorf("write attempt %d: unknown task %q", w.Number, w.TaskID)
		}
		i := slices.IndexFunc(r.Attempts, func(a task.Attempt) bool { return a.Number == w.Number })
		if i < 0 {
			r.Attempts = append(r.Attempts, w.Attempt)
			slices.SortFunc(r.Attempts, func(a, b task.Attempt) int { return cmp.Compare(a.Number, b.Number) })
		} else {
			r.Attempts[i] = w.Attempt
		}
		switch {
		case !w.Handle.IsZero():
			if r.Handles == nil {
				r.Handles = map[int]executor.Handle{}
			}
			h := w.Handle
			h.Data = slices.Clone(h.Data)
			r.Handles[w.Number] = h
		case r.Handles != nil:
			delete(r.Handles, w.Number) // a whole-row write: no handle now
		}
	}
	if b.Cards != nil {
		m.cards = slices.Clone(b.Cards)
	}
	m.samples = append(m.samples, b.Samples...)
	for _, w := range b.Inputs {
		r := m.rows[w.TaskID]
		if r == nil {
			return fmt.Errorf("write inputs: unknown task %q", w.TaskID)
		}
		r.Inputs = slices.Clone(w.Inputs)
	}
	for _, ev := range b.Events {
		ev.Kind = cmp.Or(ev.Kind, EventComplete)
		ev.Payload = slices.Clone(ev.Payload)
		if i := slices.IndexFunc(m.events, func(e EventWrite) bool { return e.ID == ev.ID }); i >= 0 {
			m.events[i] = ev
		} else {
			m.events = append(m.events, ev)
		}
	}
	for k, v := range b.Meta {
		if m.meta == nil {
			m.meta = map[string]string{}
		}
		if v == "" {
			delete(m.meta, k)
		} else {
			m.meta[k] = v
		}
	}
	m.applies++
	return nil
}

// Cards returns the saved view of the GPUs.
func (m *Memory) Cards() []gpu.CardView {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.cards)
}

// PendingEvents returns the events not yet acknowledged, oldest first.
func (m *Memory) PendingEvents() ([]EventWrite, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []EventWrite
	var maxID int64
	for _, ev := range m.events {
		maxID = max(maxID, ev.ID)
		if ev.Acked.IsZero() {
			out = append(out, ev)
		}
	}
	slices.SortFunc(out, func(a, b EventWrite) int { return cmp.Compare(a.ID, b.ID) })
	return out, maxID, nil
}

// Events returns every event, oldest first.
func (m *Memory) Events() []EventWrite {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.events)
	slices.SortFunc(out, func(a, b EventWrite) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Samples returns the saved card samples.
func (m *Memory) Samples() []Sample {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.samples)
}

// Meta returns the value saved for key.
func (m *Memory) Meta(key string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.meta[key]
}

// Applies returns how many batches were applied.
func (m *Memory) Applies() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.applies
}

// Close marks the store closed.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// Failing wraps a Store and fails every Apply once Fail is set, leaving the
// inner store untouched, to test how the engine survives a broken disk.
type Failing struct {
	Store
	mu  sync.Mutex // guards err
	err error
}

// Fail makes every later Apply return err (nil heals the store).
func (f *Failing) Fail(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

// Apply fails if Fail was called, else applies to the inner store.
func (f *Failing) Apply(b *Batch) error {
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.Store.Apply(b)
}
