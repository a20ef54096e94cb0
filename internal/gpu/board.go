package gpu

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// CardState is whether a card takes new work, and if not, why.
type CardState uint8

// The card states, most restrictive first when several apply.
const (
	CardOK          CardState = iota // takes new work
	CardCooling                      // a task left it; nothing new until the cooldown ends
	CardQuarantined                  // failed too often or was lost; nothing new until the quarantine ends
	CardUnknown                      // its memory cannot be read
	CardHidden                       // not in visible_gpus
)

var cardStateNames = [...]string{"ok", "cooling down", "quarantined", "unknown", "hidden"}

func (s CardState) String() string {
	if int(s) < len(cardStateNames) {
		return cardStateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// MarshalText writes the state's name.
func (s CardState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a state's name.
func (s *CardState) UnmarshalText(b []byte) error {
	v, err := ParseCardState(string(b))
	*s = v
	return err
}

// ParseCardState reads a name written by String.
func ParseCardState(s string) (CardState, error) {
	if i := slices.Index(cardStateNames[:], s); i >= 0 {
		return CardState(i), nil
	}
	return 0, fmt.Errorf("unknown card state %q", s)
}

// Holding is the memory one of our running tasks holds on a card.
type Holding struct {
	Task        string `json:"task"`
	PID         int    `json:"pid,omitempty"` // the attempt's leader, once started
	RequestMiB  int64  `json:"request_mib"`
	ObservedMiB int64  `json:"observed_mib"` // in the latest snapshot
	PeakMiB     int64  `json:"peak_mib"`     // the most seen during the attempt
	Exclusive   bool   `json:"exclusive,omitempty"`
	// Since is when the attempt started (zero: not known, counted as just
	// started). Admission reads it to tell which card a starving task
	// should wait for (see Drain). Not saved: the views in the state
	// database leave it out.
	Since time.Time `json:"-"`
}

// ChargedMiB is what the task counts for on its card: the larger of its
// request and what it was last seen to use.
func (h Holding) ChargedMiB() int64 { return max(h.RequestMiB, h.ObservedMiB) }

// CardView is a card as admission sees it at one moment. Plain data: the
// engine hands copies to decide, and the state database keeps one per card
// for `gpusched status` and `gpusched gpus`.
type CardView struct {
	Index        int       `json:"index"`
	UUID         string    `json:"uuid"`
	Name         string    `json:"name"`
	TotalMiB     int64     `json:"total_mib"`
	UsedMiB      int64     `json:"used_mib"`
	FreeMiB      int64     `json:"free_mib"`
	CapacityMiB  int64     `json:"capacity_mib"`  // total less the safety margin
	ForeignMiB   int64     `json:"foreign_mib"`   // held by processes that are not ours (and the driver)
	ForeignProcs int       `json:"foreign_procs"` // compute processes that are not ours
	ChargedMiB   int64     `json:"charged_mib"`   // what our running tasks are charged
	AvailableMiB int64     `json:"available_mib"` // capacity - foreign - charged; may be negative
	Holders      []Holding `json:"tasks"`
	Exclusive    bool      `json:"exclusive"` // a task holds it exclusively
	State        CardState `json:"state"`
	Reason       string    `json:"reason,omitempty"` // why it is not ok
	Until        time.Time `json:"until,omitzero"`   // end of a cooldown or quarantine
	ReservedFor  string    `json:"reserved_for,omitempty"`
	// ReservedMiB is what the reservation holds on the card, when
	// ReservedFor is set: a task behind it may still start there if it
	// leaves ReservedMiB available. 0: it holds the whole card (an
	// exclusive need), and nothing else starts there. Not saved: the
	// views in the state database name the task only.
	ReservedMiB int64 `json:"-"`
}

// Takes reports whether the card can take new work at all.
func (c *CardView) Takes() bool { return c.State == CardOK }

// Board is the admission ledger: every card's latest reading and what our
// tasks hold on it. It is not safe for concurrent use; the engine's loop
// owns it.
type Board struct {
	s        Settings
	cards    []*card // by index
	known    bool    // the latest probe succeeded
	err      string  // the latest probe error, while unknown
	errSince time.Time
	read     time.Time // time of the latest good snapshot
	notices  []Quarantine
	// tokens maps the token of each running attempt to its task, so that
	// its processes are recognised even when they left its process group
	// and its leader's descendants (see Proc.Token).
	tokens map[string]string
}

// Quarantine is a card that went into quarantine.
type Quarantine struct {
	Index  int
	Reason string
	Until  time.Time
}

// quarantine starts or extends card c's quarantine, noting a new one.
func (b *Board) quarantine(c *card, now, until time.Time, why string) {
	if !now.Before(c.quarUntil) {
		b.notices = append(b.notices, Quarantine{Index: c.Index, Reason: why, Until: until})
	}
	if until.After(c.quarUntil) {
		c.quarUntil, c.quarWhy = until, why
	}
}

// TakeQuarantines returns the quarantines that started since the last call.
func (b *Board) TakeQuarantines() []Quarantine {
	q := b.notices
	b.notices = nil
	return q
}

type card struct {
	Card
	seen         bool   // a row was read for it
	lost         string // why the latest snapshot has no usable reading
	foreign      int64
	foreignProcs int
	holders      []*Holding
	coolUntil    time.Time
	quarUntil    time.Time
	quarWhy      string
	failures     int // failed attempts in a row
}

// NotReadYet is why the state is unknown before the first reading.
const NotReadYet = "nvidia-smi has not answered yet"

// NewBoard returns an empty board: state unknown until the first Apply.
func NewBoard(s Settings) *Board {
	return &Board{s: s, err: NotReadYet}
}

// Settings returns the board's settings.
func (b *Board) Settings() Settings { return b.s }

// Known reports whether the latest probe succeeded. When it did not, no GPU
// task may start: the cards are not known to be free.
func (b *Board) Known() bool { return b.known }

// Err returns why the state is unknown, and since when ("" when known).
func (b *Board) Err() (string, time.Time) {
	if b.known {
		return "", time.Time{}
	}
	return b.err, b.errSince
}

// Fail records a failed probe: the state is unknown from now on.
func (b *Board) Fail(err error, now time.Time) {
	if b.known || b.errSince.IsZero() {
		b.errSince = now
	}
	b.known, b.err = false, err.Error()
}

func (b *Board) card(index int) *card {
	i, found := slices.BinarySearchFunc(b.cards, index, func(c *card, i int) int { return cmp.Compare(c.Index, i) })
	if !found {
		b.cards = slices.Insert(b.cards, i, &card{Card: Card{Index: index}})
	}
	return b.cards[i]
}

// Apply takes a new snapshot: readings, lost cards, and the memory our
// tasks' processes use (attributed by PID, process group or ancestry).
func (b *Board) Apply(snap Snapshot, now time.Time) {
	unknownSince := b.errSince
	if b.known {
		unknownSince = time.Time{}
	}
	b.known, b.err, b.errSince, b.read = true, "", time.Time{}, snap.Time
	defer b.checkUsable(unknownSince, now)
	present := map[int]bool{}
	for _, r := range snap.Cards {
		c := b.card(r.Index)
		c.Card, c.seen, c.lost = r, true, r.Problem
		present[r.Index] = true
	}
	for _, l := range snap.Lost {
		if l.Index < 0 {
			continue // a bus id alone names no card we can match
		}
		c := b.card(l.Index)
		c.lost = "nvidia-smi reports it lost: " + l.Reason
		present[l.Index] = true
		b.quarantine(c, now, now.Add(b.s.QuarantineFor), "nvidia-smi reported it lost or in error")
	}
	for _, c := range b.cards {
		if !present[c.Index] {
			c.lost = "missing from nvidia-smi's output"
		}
	}

	// Attribute processes to our tasks on the same card. A task on
	// several cards has a holding on each: a process counts for the
	// holding on the card it uses.
	type onCard struct {
		c   *card
		pid int
	}
	byPID := map[onCard]*Holding{}
	for _, c := range b.cards {
		for _, h := range c.holders {
			h.ObservedMiB = 0
			if h.PID > 0 {
				byPID[onCard{c, h.PID}] = h
			}
		}
	}
	owner := func(c *card, p Proc) *Holding {
		if task := b.tokens[p.Token]; p.Token != "" && task != "" {
			for _, h := range c.holders {
				if h.Task == task {
					return h
				}
			}
		}
		for _, id := range append([]int{p.PID, p.PGID}, p.Ancestors...) {
			if h := byPID[onCard{c, id}]; h != nil && id > 0 {
				return h
			}
		}
		return nil
	}
	ours := map[*card]int64{}
	for _, c := range b.cards {
		c.foreignProcs = 0
	}
	for _, p := range snap.Procs {
		c := b.cardByUUID(p.GPUUUID)
		if c == nil {
			continue
		}
		h := owner(c, p)
		if h == nil {
			c.foreignProcs++
			continue
		}
		if p.UsedMiB > 0 {
			h.ObservedMiB += p.UsedMiB
			ours[c] += p.UsedMiB
		}
	}
	for _, c := range b.cards {
		for _, h := range c.holders {
			h.PeakMiB = max(h.PeakMiB, h.ObservedMiB)
		}
		if c.seen && c.lost == "" {
			c.foreign = max(0, c.TotalMiB-c.FreeMiB-ours[c])
		}
	}
}

// checkUsable makes the state unknown, as a failed probe does, when
// nvidia-smi answered but no visible card has a usable reading (every
// memory cell [N/A], say): no GPU task can start then, and waiting tasks
// must time out as they do when nvidia-smi fails. since is when the state
// became unknown before this reading, zero if it was known.
func (b *Board) checkUsable(since time.Time, now time.Time) {
	var bad []string
	for _, c := range b.cards {
		if !b.s.visible(c.Card) {
			continue
		}
		if c.seen && c.lost == "" {
			return
		}
		why := c.lost
		if why == "" {
			why = "no reading"
		}
		bad = append(bad, fmt.Sprintf("card %d: %s", c.Index, why))
	}
	if len(bad) == 0 {
		return // no visible card at all: NeverFits says so
	}
	if len(bad) > 3 {
		bad = append(bad[:3], fmt.Sprintf("and %d more", len(bad)-3))
	}
	b.known = false
	b.err = "nvidia-smi answered, but no visible card has a usable memory reading (" + strings.Join(bad, "; ") + ")"
	b.errSince = since
	if since.IsZero() {
		b.errSince = now
	}
}

func (b *Board) cardByUUID(uuid string) *card {
	for _, c := range b.cards {
		if c.UUID != "" && c.UUID == uuid {
			return c
		}
	}
	return nil
}

// Hold charges a task's request to a card from now on.
func (b *Board) Hold(task string, index int, need Need) { b.HoldSince(task, index, need, time.Time{}) }

// HoldSince is Hold for an attempt that started at since (Holding.Since).
func (b *Board) HoldSince(task string, index int, need Need, since time.Time) {
	c := b.card(index)
	c.holders = append(c.holders, &Holding{Task: task, RequestMiB: need.MiB, Exclusive: need.Exclusive, Since: since})
}

func (b *Board) holding(task string, index int) (*card, int) {
	c := b.card(index)
	return c, slices.IndexFunc(c.holders, func(h *Holding) bool { return h.Task == task })
}

// SetPID records the leader PID of a task's attempt, so its processes are
// recognised in later snapshots.
func (b *Board) SetPID(task string, index, pid int) {
	if c, i := b.holding(task, index); i >= 0 {
		c.holders[i].PID = pid
	}
}

// SetToken records the token of a task's running attempt (the value of
// GPUSCHED_ATTEMPT_TOKEN in its processes' environment), so that its
// processes are recognised in later snapshots wherever they are in the
// process tree. Release forgets it.
func (b *Board) SetToken(task, token string) {
	if b.tokens == nil {
		b.tokens = map[string]string{}
	}
	b.tokens[token] = task
}

// Holding returns what task holds on card index.
func (b *Board) Holding(task string, index int) (Holding, bool) {
	if c, i := b.holding(task, index); i >= 0 {
		return *c.holders[i], true
	}
	return Holding{}, false
}

// Release ends a task's charge on a card and starts the card's cooldown. A
// failed attempt counts towards the card's quarantine; a successful one
// clears the count. It returns the holding as it was.
func (b *Board) Release(task string, index int, failed bool, now time.Time) Holding {
	c, i := b.holding(task, index)
	if i < 0 {
		return Holding{}
	}
	h := *c.holders[i]
	c.holders = slices.Delete(c.holders, i, i+1)
	for token, t := range b.tokens {
		if t == task {
			delete(b.tokens, token)
		}
	}
	if until := now.Add(b.s.Cooldown); until.After(c.coolUntil) {
		c.coolUntil = until
	}
	switch {
	case !failed:
		c.failures = 0
	case b.s.QuarantineAfter > 0:
		c.failures++
		if c.failures >= b.s.QuarantineAfter {
			c.failures = 0
			b.quarantine(c, now, now.Add(b.s.QuarantineFor), fmt.Sprintf("%d failed attempts in a row", b.s.QuarantineAfter))
		}
	}
	return h
}

// MaxCapacity returns the largest capacity among visible cards with a
// reading; ok is false when no visible card has one.
func (b *Board) MaxCapacity() (mib int64, ok bool) {
	for _, c := range b.cards {
		if c.seen && c.lost == "" && b.s.visible(c.Card) {
			mib, ok = max(mib, c.TotalMiB-b.s.SafetyMarginMiB), true
		}
	}
	return mib, ok
}

// Views returns every card as admission sees it at now. The result is the
// caller's to change.
func (b *Board) Views(now time.Time) []CardView {
	out := make([]CardView, 0, len(b.cards))
	for _, c := range b.cards {
		v := CardView{
			Index: c.Index, UUID: c.UUID, Name: c.Name,
			TotalMiB: c.TotalMiB, UsedMiB: c.UsedMiB, FreeMiB: c.FreeMiB,
			CapacityMiB:  c.TotalMiB - b.s.SafetyMarginMiB,
			ForeignMiB:   c.foreign,
			ForeignProcs: c.foreignProcs,
			Holders:      []Holding{},
		}
		for _, h := range c.holders {
			v.Holders = append(v.Holders, *h)
			v.ChargedMiB += h.ChargedMiB()
			v.Exclusive = v.Exclusive || h.Exclusive
		}
		v.AvailableMiB = v.CapacityMiB - v.ForeignMiB - v.ChargedMiB
		switch {
		case !b.s.visible(c.Card):
			v.State, v.Reason = CardHidden, "not in visible_gpus"
		case !c.seen || c.lost != "":
			v.State, v.Reason = CardUnknown, c.lost
			if v.Reason == "" {
				v.Reason = "no reading"
			}
		case !b.known:
			v.State, v.Reason = CardUnknown, "GPU state unknown: "+b.err
		case now.Before(c.quarUntil):
			v.State, v.Reason, v.Until = CardQuarantined, c.quarWhy, c.quarUntil
		case now.Before(c.coolUntil):
			v.State, v.Reason, v.Until = CardCooling, "a task just left it", c.coolUntil
		}
		out = append(out, v)
	}
	return out
}

// NextChange returns the earliest end of a cooldown or quarantine after
// now, or the zero time: when waiting tasks should be looked at again.
func (b *Board) NextChange(now time.Time) time.Time {
	var next time.Time
	for _, c := range b.cards {
		for _, t := range []time.Time{c.coolUntil, c.quarUntil} {
			if t.After(now) && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
	}
	return next
}
