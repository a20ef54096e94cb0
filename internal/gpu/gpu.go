package gpu

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Snapshot is one reading of the machine's GPUs.
type Snapshot struct {
	Time  time.Time
	Cards []Card
	Procs []Proc
	// Lost lists cards nvidia-smi reported as lost or in error, with no row.
	Lost []Lost
}

// Card is one card's reading.
type Card struct {
	Index    int
	UUID     string
	Name     string
	TotalMiB int64
	UsedMiB  int64
	FreeMiB  int64
	// Problem, when set, says why the card's memory could not be read; such
	// a card is not used.
	Problem string
}

// Proc is a compute process on a card.
type Proc struct {
	PID     int
	GPUUUID string
	UsedMiB int64 // -1 when the driver does not say
	// PGID and Ancestors (parent, grandparent, ...) come from /proc; they
	// attribute the process to one of our tasks. Empty when unknown.
	PGID      int
	Ancestors []int
	// Token is the value of GPUSCHED_ATTEMPT_TOKEN (executor.TokenVar) in
	// the environment the process was started with, as
	// /proc/PID/environ shows it: set by gpusched for each attempt
	// (executor.Job.Token) and inherited by everything the attempt starts,
	// even processes that left its process group and were reparented, so
	// that their memory is the attempt's, not foreign. When the variable
	// appears more than once, the first entry counts (as getenv reads
	// it). "" when the process has no such variable or an empty one, or
	// its environment cannot be read: it is gone, it belongs to another
	// user (and gpusched is not root), its PID is not a host PID
	// gpusched can see, or it replaced its environment when it exec'd. A
	// process that only changes its environment in memory (setenv,
	// export) keeps the token it started with.
	Token string
}

// Lost is a card nvidia-smi named in an error instead of a row.
type Lost struct {
	Index  int // -1 when only the bus id is known
	BusID  string
	Reason string
}

// Probe reads the machine's GPUs. An error means the state is unknown (a
// broken or hanging nvidia-smi), never that the cards are free.
type Probe interface {
	Snapshot(ctx context.Context) (Snapshot, error)
}

// Placement chooses among the cards a task fits on.
type Placement uint8

// The placements.
const (
	// Spread puts a task on the card with the most memory left: tasks
	// spread over the cards and interfere least.
	Spread Placement = iota
	// Pack puts a task on the card with the least memory left that still
	// holds it, keeping other cards free for large tasks.
	Pack
)

func (p Placement) String() string {
	if p == Pack {
		return "pack"
	}
	return "spread"
}

// ParsePlacement reads "spread" or "pack".
func ParsePlacement(s string) (Placement, error) {
	switch s {
	case "", "spread":
		return Spread, nil
	case "pack":
		return Pack, nil
	}
	return 0, fmt.Errorf("must be %q or %q, not %q", "spread", "pack", s)
}

// Settings are the GPU admission settings.
type Settings struct {
	// SafetyMarginMiB is kept free on every card.
	SafetyMarginMiB int64
	// Cooldown: after a task leaves a card, nothing new starts there for
	// this long, so memory being released is not promised twice.
	Cooldown time.Duration
	// Placement chooses among cards a task fits on.
	Placement Placement
	// Visible restricts the cards used, by index or UUID; empty means all.
	Visible []string
	// QuarantineAfter failed attempts in a row on a card quarantine it
	// (0: never).
	QuarantineAfter int
	// QuarantineFor is how long a quarantine lasts.
	QuarantineFor time.Duration
}

// Defaults of Settings, documented in docs/gpu.md.
const (
	DefaultSafetyMarginMiB = 512
	DefaultCooldown        = 3 * time.Second
	DefaultQuarantineAfter = 3
	DefaultQuarantineFor   = 10 * time.Minute
)

// visible reports whether card c may be used under s.Visible.
func (s Settings) visible(c Card) bool {
	if len(s.Visible) == 0 {
		return true
	}
	return slices.ContainsFunc(s.Visible, func(v string) bool {
		return v == strconv.Itoa(c.Index) || (c.UUID != "" && strings.EqualFold(v, c.UUID))
	})
}

// Need is what a GPU task asks for: MiB on each of Count cards (0: one),
// each to itself when Exclusive, all at once.
type Need struct {
	MiB       int64
	Exclusive bool
	// Count is how many cards; 0 and 1 both mean one. (A byte, beside
	// Exclusive, so that a Need takes no more room than before: the
	// scheduler copies them by the thousand.)
	Count uint8
	// Avoid lists cards to use only if no other fits (where the task failed).
	Avoid []int
}

// Cards is how many cards need takes: Count, at least 1.
func (n Need) Cards() int { return max(int(n.Count), 1) }
