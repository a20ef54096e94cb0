package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

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
		if got := st.Meta(store.MetaSubmitKey + "k1"); got != idsDigest([]*task.Spec{spec("a"), spec("b")}) {
			t.Errorf("saved key k1 = %q", got)
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
	if len(k.digest) != MaxKeysInMemory {
		t.Errorf("%d keys in memory, want %d", len(k.digest), MaxKeysInMemory)
	}
	for _, tt := range []struct {
		key  string
		kept bool
	}{{"key0", false}, {"key9", false}, {"key10", true}, {fmt.Sprint("key", MaxKeysInMemory+9), true}} {
		if _, ok := k.digest[tt.key]; ok != tt.kept {
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
