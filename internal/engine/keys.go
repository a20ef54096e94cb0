package engine

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// Submit keys: a batch submitted with a key (Submission.Key) is recorded
// by the key, a digest of its task ids and when it was committed, in the
// same transaction as its tasks (store.MetaSubmitKey + key), so the same
// batch submitted again, by this engine or one opened later on the same
// store, adds nothing. The last MaxKeysInMemory keys are kept in memory
// too; an older one is read from the store.
//
// A key is honoured for KeyWindow after its batch was committed; after
// that it is as if it had never been used (the batch again is submitted
// anew, the key may name another batch). Keys past their window are
// deleted from the store, at most once every keyPruneEvery, in the commit
// of a new key: so the store keeps the keys of KeyWindow's submissions,
// however long the engine lives. A key saved before keys had a time (a
// bare digest) gets the time of the first pruning that finds it, and its
// window from then.

// ErrKeyReused: a batch's key was used before for a batch of other tasks.
var ErrKeyReused = errors.New("the key was used before for a batch of other tasks (a key names one batch: the same task ids in the same order)")

const (
	// MaxKeyLength is the longest Submission.Key, in bytes.
	MaxKeyLength = 256
	// MaxKeysInMemory is how many submit keys the engine keeps in memory.
	MaxKeysInMemory = 10_000
	// KeyWindow is how long a submit key is honoured after its batch was
	// committed.
	KeyWindow = 7 * 24 * time.Hour
	// keyPruneEvery is how often, at most, saving a key also deletes the
	// keys past their window.
	keyPruneEvery = time.Hour
)

// keyValue is what is saved of a key: the digest of its batch's ids and
// when it was committed, "digest@unix-seconds".
func keyValue(digest string, at time.Time) string {
	return digest + "@" + strconv.FormatInt(at.Unix(), 10)
}

// parseKeyValue reads a saved key. timed is false for a key saved
// without its time (a bare digest, by an earlier version).
func parseKeyValue(v string) (digest string, at time.Time, timed bool) {
	d, sec, ok := strings.Cut(v, "@")
	if !ok {
		return v, time.Time{}, false
	}
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return d, time.Time{}, false
	}
	return d, time.Unix(n, 0), true
}

// expired reports whether a key saved as v is past its window at now.
func expired(v string, now time.Time) bool {
	_, at, timed := parseKeyValue(v)
	return timed && now.Sub(at) >= KeyWindow
}

// submitKeys remembers the latest keys, oldest evicted first. Owned by the
// loop.
type submitKeys struct {
	saved  map[string]string // key -> its saved value (keyValue)
	order  []string          // a ring of the keys in saved, oldest at next
	next   int
	pruned time.Time // when the keys past their window were last deleted
}

func (k *submitKeys) init() {
	k.saved = map[string]string{}
}

func (k *submitKeys) add(key, value string) {
	if _, ok := k.saved[key]; ok {
		k.saved[key] = value // saved again, its window over
		return
	}
	if len(k.order) < MaxKeysInMemory {
		k.order = append(k.order, key)
	} else {
		delete(k.saved, k.order[k.next])
		k.order[k.next] = key
		k.next = (k.next + 1) % MaxKeysInMemory
	}
	k.saved[key] = value
}

// idsDigest is a short digest of a batch's task ids, in order.
func idsDigest(specs []*task.Spec) string {
	h := sha256.New()
	for _, s := range specs {
		h.Write([]byte(s.ID))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%d:%x", len(specs), h.Sum(nil)[:12])
}

// checkKey looks up a submission's key. It returns the digest of the
// batch's ids; done is true when the submission is answered already: the
// same batch was submitted before (nil, once that is committed), the key
// names another batch, or the key cannot be read.
func (e *Engine) checkKey(sub Submission, reply chan error) (digest string, done bool) {
	if len(sub.Key) > MaxKeyLength {
		reply <- fmt.Errorf("submit batch: key is %d bytes long, the most is %d", len(sub.Key), MaxKeyLength)
		return "", true
	}
	digest = idsDigest(sub.Specs)
	saved, ok := e.svc.keys.saved[sub.Key]
	if !ok {
		var err error
		saved, ok, err = e.cfg.Store.LookupMeta(store.MetaSubmitKey + sub.Key)
		if err != nil {
			reply <- fmt.Errorf("submit batch with key %q: read the key: %w", sub.Key, err)
			return "", true
		}
		if ok {
			e.svc.keys.add(sub.Key, saved)
		}
	}
	if ok && expired(saved, e.cfg.Now()) {
		ok = false // as if never used; saving it again starts a new window
	}
	known, _, _ := parseKeyValue(saved)
	switch {
	case !ok:
		return digest, false
	case known == digest:
		// Submitted before; maybe in this very turn: answer after the commit.
		e.effects = append(e.effects, func(err error) { reply <- err })
	default:
		reply <- fmt.Errorf("submit batch with key %q: %w", sub.Key, ErrKeyReused)
	}
	return "", true
}

// rememberKey keeps a key, whose batch's ids have digest, in memory, and
// saves it with the batch when save is set (then, once every
// keyPruneEvery, the keys past their window go in the same commit).
func (e *Engine) rememberKey(key, digest string, save bool) {
	now := e.cfg.Now()
	v := keyValue(digest, now)
	if save {
		if now.Sub(e.svc.keys.pruned) >= keyPruneEvery {
			e.svc.keys.pruned = now
			e.pruneKeys(now)
		}
		if e.batch.Meta == nil {
			e.batch.Meta = map[string]string{}
		}
		e.batch.Meta[store.MetaSubmitKey+key] = v
	}
	e.svc.keys.add(key, v)
}

// metaLister is a store that lists its run-wide facts (store.SQLite,
// store.Memory): the keys past their window are found there.
type metaLister interface {
	LoadMeta() (map[string]string, error)
}

// pruneKeys deletes, in the batch being built, the saved keys past their
// window at now, and gives those saved without a time this one. A store
// that cannot list its keys keeps them all; one that fails to is tried
// again keyPruneEvery later.
func (e *Engine) pruneKeys(now time.Time) {
	l, ok := e.cfg.Store.(metaLister)
	if !ok {
		return
	}
	meta, err := l.LoadMeta()
	if err != nil {
		return
	}
	for k, v := range meta {
		key, ok := strings.CutPrefix(k, store.MetaSubmitKey)
		if !ok {
			continue
		}
		if _, pending := e.batch.Meta[k]; pending {
			continue // written in this very commit
		}
		digest, _, timed := parseKeyValue(v)
		switch {
		case !timed:
			v = keyValue(digest, now)
		case expired(v, now):
			v = ""
			delete(e.svc.keys.saved, key)
		default:
			continue
		}
		if e.batch.Meta == nil {
			e.batch.Meta = map[string]string{}
		}
		e.batch.Meta[k] = v
		if v != "" {
			if _, in := e.svc.keys.saved[key]; in {
				e.svc.keys.saved[key] = v
			}
		}
	}
}
