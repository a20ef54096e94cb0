package cli

import (
	"path/filepath"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
)

// chargeInterval is how often the live display reads GPU charges back.
const chargeInterval = time.Second

// chargeSource gives the live display the GPU memory charged to each
// running task, by task id (on the card charged the most, for a task on
// several); read returns the last reading between two.
type chargeSource interface {
	read(now time.Time) map[string]int64
	close()
}

// chargeReader reads back, at most every chargeInterval, the GPU memory
// charged to each running task: the scheduler saves its view of the cards
// in the state database, where "gpusched gpus" reads it too.
type chargeReader struct {
	runDir string
	st     *store.SQLite
	next   time.Time
	last   map[string]int64
}

func (c *chargeReader) read(now time.Time) map[string]int64 {
	if now.Before(c.next) {
		return c.last
	}
	c.next = now.Add(chargeInterval)
	if c.st == nil {
		st, err := store.OpenSQLiteReadOnly(filepath.Join(c.runDir, gpusched.StateFile), c.runDir)
		if err != nil {
			return c.last
		}
		c.st = st
	}
	cards, _, err := c.st.LoadCards()
	if err != nil {
		return c.last
	}
	c.last = chargedByTask(cards)
	return c.last
}

// chargedByTask is the GPU memory charged to each task holding the cards:
// for a task on several, the most one of them holds (the display shows it
// beside its budget on each).
func chargedByTask(cards []gpu.CardView) map[string]int64 {
	m := map[string]int64{}
	for _, card := range cards {
		for _, h := range card.Holders {
			m[h.Task] = max(m[h.Task], h.ChargedMiB())
		}
	}
	return m
}

func (c *chargeReader) close() {
	if c.st != nil {
		c.st.Close()
	}
}
