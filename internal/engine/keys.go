package engine

import (
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// Submit keys: a batch submitted with a key (Submission.Key) is recorded
// by the key and a digest of its task ids, in the same transaction as its
// tasks (store.MetaSubmitKey + key), so the same batch submitted again, by
// this engine or one opened later on the same store, adds nothing. The
// last MaxKeysInMemory keys are kept in memory too; an older one is read
// from the store.

// ErrKeyReused: a batch's key was used before for a batch of other tasks.
var ErrKeyReused = errors.New("the key was used before for a batch of other tasks (a key names one batch: the same task ids in the same order)")

const (
	// MaxKeyLength is the longest Submission.Key, in bytes.
	MaxKeyLength = 256
	// MaxKeysInMemory is how many submit keys the engine keeps in memory.
	MaxKeysInMemory = 10_000
)

// submitKeys remembers the latest keys, oldest evicted first. Owned by the
// loop.
type submitKeys struct {
	digest map[string]string // key -> digest of its batch's ids
	order  []string          // a ring of the keys in digest, oldest at next
	next   int
}

func (k *submitKeys) init() {
	k.digest = map[string]string{}
}

func (k *submitKeys) add(key, digest string) {
	if _, ok := k.digest[key]; ok {
		return
	}
	if len(k.order) < MaxKeysInMemory {
		k.order = append(k.order, key)
	} else {
		delete(k.digest, k.order[k.next])
		k.order[k.next] = key
		k.next = (k.next + 1) % MaxKeysInMemory
	}
	k.digest[key] = digest
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
	known, ok := e.svc.keys.digest[sub.Key]
	if !ok {
		var err error
		known, ok, err = e.cfg.Store.LookupMeta(store.MetaSubmitKey + sub.Key)
		if err != nil {
			reply <- fmt.Errorf("submit batch with key %q: read the key: %w", sub.Key, err)
			return "", true
		}
		if ok {
			e.rememberKey(sub.Key, known, false)
		}
	}
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

// rememberKey keeps a key in memory, and saves it with the batch when save
// is set.
func (e *Engine) rememberKey(key, digest string, save bool) {
	e.svc.keys.add(key, digest)
	if save {
		if e.batch.Meta == nil {
			e.batch.Meta = map[string]string{}
		}
		e.batch.Meta[store.MetaSubmitKey+key] = digest
	}
}
