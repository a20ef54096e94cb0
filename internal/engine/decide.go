package engine

import (
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
)

// Candidate is a ready task as decide sees it.
type Candidate struct {
	ID       string
	Priority int
	Seq      int64 // submission order
	// GPU tasks: what the task needs, and since when it has been ready.
	GPU        bool
	Need       gpu.Need
	ReadySince time.Time
}

// Queue yields ready tasks best first: higher priority, then earlier
// submission. Ascend stops when fn returns false.
type Queue interface {
	Ascend(fn func(Candidate) bool)
}

// View is everything decide may look at: a snapshot, not live state.
type View struct {
	// Free is the number of attempts that may start now (parallel slots
	// left).
	Free int
	// Ready is the queue of tasks whose dependencies are all complete.
	Ready Queue
	// Now is the clock reading the decision is made at.
	Now time.Time

	// GPUKnown is false when the GPU state cannot be read: no GPU task
	// starts then.
	GPUKnown bool
	// Cards are the cards as admission sees them. decide books the tasks
	// it starts on them, so the caller passes a copy.
	Cards []gpu.CardView
	// Placement chooses among cards a task fits on.
	Placement gpu.Placement
	// ReserveAfter: a GPU task ready for this long that still does not
	// fit reserves a card, which then takes no other task until it fits.
	// Negative: never.
	ReserveAfter time.Duration
}

// Action is a decision to start a ready task, on a card for a GPU task.
type Action struct {
	TaskID string
	Card   int // index into View.Cards; -1 for a CPU task
}

// Plan is decide's answer.
type Plan struct {
	Starts []Action
	// Reserved maps a card's index (nvidia-smi's) to the starving task that
	// has it reserved.
	Reserved map[int]string
}

// decide returns the tasks to start now, best first, and the cards held
// for starving GPU tasks. It is a pure function of the view: no clock, no
// I/O, no engine state.
//
// Ready tasks are taken in queue order while parallel slots remain. A CPU
// task starts. A GPU task starts on the card Fit picks; one that fits
// nowhere is passed over, so smaller tasks behind it may start (backfill).
// But once it has been ready for ReserveAfter, the first such task in the
// queue reserves the card closest to holding it, and no task after it in
// the queue starts there; as tasks on that card finish, it fits. One card
// at most is reserved at a time: reserving a card for every waiting big
// task would stop backfilling everywhere (the simulation in sim_test.go
// measures this). A CPU-only queue is walked only as far as tasks start, so
// choosing costs nothing like the number of ready tasks.
func decide(v View) Plan {
	var p Plan
	if v.Free <= 0 || v.Ready == nil {
		return p
	}
	free := v.Free
	v.Ready.Ascend(func(c Candidate) bool {
		if !c.GPU {
			p.Starts = append(p.Starts, Action{TaskID: c.ID, Card: -1})
			free--
			return free > 0
		}
		if !v.GPUKnown {
			return true
		}
		if i := gpu.Fit(v.Cards, c.Need, v.Placement, c.ID); i >= 0 {
			card := &v.Cards[i]
			gpu.Charge(card, c.Need, c.ID)
			if card.ReservedFor == c.ID {
				card.ReservedFor = ""
				delete(p.Reserved, card.Index)
			}
			p.Starts = append(p.Starts, Action{TaskID: c.ID, Card: i})
			free--
			return free > 0
		}
		if p.Reserved == nil && v.ReserveAfter >= 0 && v.Now.Sub(c.ReadySince) >= v.ReserveAfter {
			if i := gpu.Reserve(v.Cards, c.Need); i >= 0 {
				v.Cards[i].ReservedFor = c.ID
				if p.Reserved == nil {
					p.Reserved = map[int]string{}
				}
				p.Reserved[v.Cards[i].Index] = c.ID
			}
		}
		return true
	})
	return p
}
