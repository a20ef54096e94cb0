package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// keyed builds a submission with a key.
func keyed(t *testing.T, key string, specs ...*task.Spec) Submission {
	t.Helper()
	sub := Submission{Key: key}
	for _, s := range specs {
		s.Normalize()
		blob, _ := json.Marshal(s)
		sub.Specs, sub.JSON = append(sub.Specs, s), append(sub.JSON, blob)
	}
	return sub
}

func TestSubmitKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		h := newHarness(t, Config{}, st)
		defer h.Close()
		if err := h.Submit(keyed(t, "k1", spec("a"), spec("b", "a"))); err != nil {
			t.Fatal(err)
		}
		if err := h.Submit(keyed(t, "k1", spec("a"), spec("b", "a"))); err != nil {
			t.Errorf("the same batch again = %v, want nil", err)
		}
		err := h.Submit(keyed(t, "k1", spec("b"), spec("a")))
		if !errors.Is(err, ErrKeyReused) || !strings.Contains(err.Error(), `"k1"`) {
			t.Errorf("the key with the ids in another order = %v, want ErrKeyReused naming k1", err)
		}
		if err := h.Submit(keyed(t, "k1", spec("c"))); !errors.Is(err, ErrKeyReused) {
			t.Errorf("the key with other ids = %v, want ErrKeyReused", err)
		}
		// A batch that is refused does not take its key.
		if err := h.Submit(keyed(t, "k2", spec("a"))); !errors.Is(err, task.ErrDuplicateTask) {
			t.Errorf("duplicate under a new key = %v", err)
		}
		if err := h.Submit(keyed(t, "k2", spec("c"))); err != nil {
			t.Errorf("k2 for a valid batch after a refused one = %v", err)
		}
		if err := h.Submit(keyed(t, strings.Repeat("k", MaxKeyLength+1), spec("d"))); err == nil {
			t.Error("an over-long key was taken")
		}
		recs := h.run(t)
		if len(recs) != 3 || len(h.runner.startOrder()) != 3 {
			t.Errorf("records %v, starts %v; want a, b, c once each", recs, h.runner.startOrder())
		}
		if got, at, timed := parseKeyValue(st.Meta(store.MetaSubmitKey + "k1")); got != idsDigest([]*task.Spec{spec("a"), spec("b")}) || !timed || at.IsZero() {
			t.Errorf("saved key k1 = %q at %v (timed %v), want the digest of a, b and when", got, at, timed)
		}
		// Keys pushed out of memory are read from the store.
		onLoop(t, h.Engine, func(e *Engine) { e.svc.keys.init() })
		if err := h.Submit(keyed(t, "k1", spec("a"), spec("b", "a"))); err != nil {
			t.Errorf("k1 again, not in memory = %v", err)
		}
		if err := h.Submit(keyed(t, "k2", spec("x"))); !errors.Is(err, ErrKeyReused) {
			t.Errorf("k2 with other ids, not in memory = %v", err)
		}
	})
}

func TestSubmitKeysInMemoryAreBounded(t *testing.T) {
	var k submitKeys
	k.init()
	for i := range MaxKeysInMemory + 10 {
		k.add(fmt.Sprint("key", i), "d")
	}
	if len(k.saved) != MaxKeysInMemory {
		t.Errorf("%d keys in memory, want %d", len(k.saved), MaxKeysInMemory)
	}
	for _, tt := range []struct {
		key  string
		kept bool
	}{{"key0", false}, {"key9", false}, {"key10", true}, {fmt.Sprint("key", MaxKeysInMemory+9), true}} {
		if _, ok := k.saved[tt.key]; ok != tt.kept {
			t.Errorf("%s in memory: %v, want %v", tt.key, ok, tt.kept)
		}
	}
}

// A restarted engine on the same state database knows the keys of the
// batches submitted before.
func TestSubmitKeySurvivesReopening(t *testing.T) {
	dir := t.TempDir()
	open := func() *Engine {
		t.Helper()
		st, err := store.OpenSQLite(filepath.Join(dir, "state.db"), dir)
		if err != nil {
			t.Fatal(err)
		}
		e, err := Open(Config{MaxParallel: 1, Store: st, Runner: &fakeRunner{script: map[string][]step{}}, LogDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := open()
	if err := e.Submit(keyed(t, "batch-1", spec("a"), spec("b"))); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = open()
	defer e.Close()
	if err := e.Submit(keyed(t, "batch-1", spec("a"), spec("b"))); err != nil {
		t.Errorf("the same batch after reopening = %v, want nil", err)
	}
	if recs := e.Records(); len(recs) != 0 {
		t.Errorf("the batch submitted again was added: %v", recs)
	}
	if err := e.Submit(keyed(t, "batch-1", spec("a"))); !errors.Is(err, ErrKeyReused) {
		t.Errorf("the key with other ids after reopening = %v, want ErrKeyReused", err)
	}
	if err := e.Submit(keyed(t, "batch-2", spec("a"), spec("b"))); err != nil {
		t.Errorf("the tasks under a new key = %v (resumed from the earlier run)", err)
	}
}

// The key is saved with its batch even when the same commit saves the
// cards' view (a GPU task waiting for the first reading).
func TestSubmitKeySavedBesideTheCards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newGPUHarness(t, newFakeProbe(8000), Config{})
		defer h.Close()
		if err := h.Submit(keyed(t, "gpu-batch", gspec("g", 1000))); err != nil {
			t.Fatal(err)
		}
		if got := h.store.Meta(store.MetaSubmitKey + "gpu-batch"); got == "" {
			t.Error("the key was not saved")
		}
		if got := h.store.Meta(store.MetaGPUUnknown); got == "" {
			t.Error("why GPU tasks wait was not saved")
		}
	})
}

// A key is honoured for KeyWindow after its batch was committed: the same
// batch again adds nothing, the key with other ids is refused. After the
// window it is as if never used, and a later key's commit deletes it from
// the store; a key saved without a time (an earlier version's) gets one
// at that pruning and its window from then.
func TestSubmitKeyWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		legacy := idsDigest([]*task.Spec{spec("old")})
		if err := st.Apply(&store.Batch{Meta: map[string]string{store.MetaSubmitKey + "legacy": legacy}}); err != nil {
			t.Fatal(err)
		}
		h := newHarness(t, Config{}, st)
		defer h.Close()
		submit := func(key string, ids ...string) error {
			t.Helper()
			specs := make([]*task.Spec, len(ids))
			for i, id := range ids {
				specs[i] = spec(id)
			}
			return h.Submit(keyed(t, key, specs...))
		}
		saved := func(key string) bool {
			_, ok, err := st.LookupMeta(store.MetaSubmitKey + key)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if err := submit("k1", "a"); err != nil { // prunes first: stamps legacy now
			t.Fatal(err)
		}
		if _, _, timed := parseKeyValue(st.Meta(store.MetaSubmitKey + "legacy")); !timed {
			t.Errorf("the legacy key was not given a time by the first pruning: %q", st.Meta(store.MetaSubmitKey+"legacy"))
		}

		time.Sleep(KeyWindow - time.Minute)
		if err := submit("k1", "a"); err != nil {
			t.Errorf("the same batch just within the window = %v, want nil", err)
		}
		if err := submit("k1", "b"); !errors.Is(err, ErrKeyReused) {
			t.Errorf("the key with other ids within the window = %v, want ErrKeyReused", err)
		}
		if err := submit("legacy", "x"); !errors.Is(err, ErrKeyReused) {
			t.Errorf("the legacy key with other ids within its window = %v, want ErrKeyReused", err)
		}

		time.Sleep(time.Minute)
		// k1's window is over: the key is free for another batch, in
		// memory or not.
		if err := submit("k1", "b"); err != nil {
			t.Errorf("the key with other ids after its window = %v, want it taken", err)
		}
		onLoop(t, h.Engine, func(e *Engine) { e.svc.keys.init() })
		if err := submit("legacy", "y"); err != nil {
			t.Errorf("the legacy key after its window, read from the store = %v, want it taken", err)
		}

		// An hour on, a new key's commit deletes those past their window.
		if err := submit("k2", "c"); err != nil {
			t.Fatal(err)
		}
		if !saved("k1") || !saved("legacy") {
			t.Error("a key saved again lost its row")
		}
		time.Sleep(KeyWindow)
		if err := submit("k3", "d"); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"k1", "legacy", "k2"} {
			if saved(k) {
				t.Errorf("key %s is still saved a window after its batch", k)
			}
		}
		if !saved("k3") {
			t.Error("key k3 was not saved")
		}
		recs := h.run(t)
		if len(recs) != 5 {
			t.Errorf("%d tasks, want a, b, y, c, d: %v", len(recs), recs)
		}
	})
}

// LoadMeta lets the engine prune keys through the harness's store, as it
// does through the SQLite one.
func (k keepOpen) LoadMeta() (map[string]string, error) {
	if l, ok := k.Store.(metaLister); ok {
		return l.LoadMeta()
	}
	return nil, errors.New("the store lists no meta")
}

// Keys past their window go from the SQLite store too, in the commit of
// a later key.
func TestSubmitKeyPrunedFromSQLite(t *testing.T) {
	dir := t.TempDir()
	st, err := store.OpenSQLite(filepath.Join(dir, "state.db"), dir)
	if err != nil {
		t.Fatal(err)
	}
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	e, err := Open(Config{MaxParallel: 1, Store: st, Runner: &fakeRunner{script: map[string][]step{}}, LogDir: dir,
		Now: func() time.Time { return time.Unix(0, now.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Submit(keyed(t, "old", spec("a"))); err != nil {
		t.Fatal(err)
	}
	now.Add(int64(KeyWindow))
	if err := e.Submit(keyed(t, "new", spec("b"))); err != nil {
		t.Fatal(err)
	}
	meta, err := st.LoadMeta()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := meta[store.MetaSubmitKey+"old"]; ok {
		t.Error("the key past its window is still in state.db")
	}
	if _, ok := meta[store.MetaSubmitKey+"new"]; !ok {
		t.Error("the new key is not in state.db")
	}
}
