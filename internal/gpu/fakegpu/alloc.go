package fakegpu

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

var (
	// ErrNoDevice means CUDA would see no usable device: CUDA_VISIBLE_DEVICES
	// is empty, unset or names no card, or there is no driver.
	ErrNoDevice = errors.New("no CUDA-capable device is detected")
	// ErrCardLost means the card the process was given has fallen off the
	// bus (Card.Lost).
	ErrCardLost = errors.New("unknown error")
)

// OOMError is a refused allocation: the card has less free memory than
// asked for. Its message is the one PyTorch prints, minus "RuntimeError: ".
type OOMError struct {
	Card    Card
	WantMiB int64 // what was asked for
	FreeMiB int64 // what the card had free
}

// Error returns "CUDA out of memory. Tried to allocate N MiB (GPU i; X MiB
// total capacity; Y MiB free)".
func (e *OOMError) Error() string {
	return fmt.Sprintf("CUDA out of memory. Tried to allocate %d MiB (GPU %d; %d MiB total capacity; %d MiB free)",
		e.WantMiB, e.Card.Index, e.Card.TotalMiB, e.FreeMiB)
}

// Grant describes a successful Allocate.
type Grant struct {
	Card       Card
	FreeBefore int64 // free memory on the card just before the allocation
	HeldMiB    int64 // what pid holds on the card afterwards
}

// Allocate gives pid mib more MiB on the card with the given uuid, as one
// step that either fits or fails: it first drops dead processes, then
// checks that the card has at least mib free. It returns an *OOMError when
// it has not, ErrCardLost for a lost card, and ErrNoDevice for an unknown
// uuid. Memory granted to the same pid on the same card adds up in one
// Process entry named name.
func (s *State) Allocate(pid int, uuid, name string, mib int64) (Grant, error) {
	if mib < 0 {
		return Grant{}, fmt.Errorf("allocate %d MiB: negative amount", mib)
	}
	c, ok := s.CardByUUID(uuid)
	if !ok {
		return Grant{}, fmt.Errorf("card %q: %w", uuid, ErrNoDevice)
	}
	if c.Lost {
		return Grant{}, fmt.Errorf("card %d: %w", c.Index, ErrCardLost)
	}
	s.DropDead()
	free := s.FreeMiB(c)
	if mib > free {
		return Grant{}, &OOMError{Card: c, WantMiB: mib, FreeMiB: free}
	}
	g := Grant{Card: c, FreeBefore: free}
	for i, p := range s.Processes {
		if p.PID == pid && p.GPUUUID == uuid {
			s.Processes[i].UsedMiB += mib
			g.HeldMiB = s.Processes[i].UsedMiB
			return g, nil
		}
	}
	s.Processes = append(s.Processes, Process{PID: pid, GPUUUID: uuid, UsedMiB: mib, Name: name})
	g.HeldMiB = mib
	return g, nil
}

// Release removes every Process entry of pid and returns the memory they
// held.
func (s *State) Release(pid int) int64 {
	var freed int64
	s.Processes = slices.DeleteFunc(s.Processes, func(p Process) bool {
		if p.PID == pid {
			freed += p.UsedMiB
			return true
		}
		return false
	})
	return freed
}

// Device returns the card CUDA would use as device 0 for a process whose
// environment holds CUDA_VISIBLE_DEVICES=visible and
// CUDA_DEVICE_ORDER=order: the first of Devices.
func (s State) Device(visible, order string) (Card, error) {
	cards, err := s.Devices(visible, order)
	if err != nil {
		return Card{}, err
	}
	return cards[0], nil
}

// Devices returns the cards CUDA would number 0, 1, ... for a process
// whose environment holds CUDA_VISIBLE_DEVICES=visible and
// CUDA_DEVICE_ORDER=order, one per entry of visible, in its order. An
// entry starting with "GPU-" is a uuid, or a prefix matching exactly one
// card. A number is an index: with order "PCI_BUS_ID" it is nvidia-smi's
// index; otherwise it counts cards in CUDA's default FASTEST_FIRST order,
// for which the fake takes the cards by total memory, largest first (ties
// by nvidia-smi index), so that forgetting PCI_BUS_ID shows on mixed
// machines. As CUDA does, the list ends before the first entry that names
// no card (anything else, or a card named already); when that is the
// first entry, or visible is empty, it returns ErrNoDevice.
func (s State) Devices(visible, order string) ([]Card, error) {
	var cards []Card
	for entry := range strings.SplitSeq(visible, ",") {
		c, err := s.device(strings.TrimSpace(entry), order)
		if err == nil && slices.ContainsFunc(cards, func(d Card) bool { return d.UUID == c.UUID }) {
			err = fmt.Errorf("CUDA_VISIBLE_DEVICES=%s names card %d twice: %w", visible, c.Index, ErrNoDevice)
		}
		if err != nil {
			if len(cards) == 0 {
				return nil, err
			}
			break
		}
		cards = append(cards, c)
	}
	return cards, nil
}

// device is the card one entry of CUDA_VISIBLE_DEVICES names (see
// Devices).
func (s State) device(entry, order string) (Card, error) {
	if entry == "" {
		return Card{}, fmt.Errorf("CUDA_VISIBLE_DEVICES is empty: %w", ErrNoDevice)
	}
	if strings.HasPrefix(entry, "GPU-") {
		var found []Card
		for _, c := range s.Cards {
			if strings.HasPrefix(c.UUID, entry) {
				found = append(found, c)
			}
		}
		if len(found) != 1 {
			return Card{}, fmt.Errorf("CUDA_VISIBLE_DEVICES=%s matches %d cards: %w", entry, len(found), ErrNoDevice)
		}
		return found[0], nil
	}
	i, err := strconv.Atoi(entry)
	if err != nil || i < 0 {
		return Card{}, fmt.Errorf("CUDA_VISIBLE_DEVICES=%s: %w", entry, ErrNoDevice)
	}
	if order == "PCI_BUS_ID" {
		for _, c := range s.Cards {
			if c.Index == i {
				return c, nil
			}
		}
		return Card{}, fmt.Errorf("CUDA_VISIBLE_DEVICES=%s: no card %d: %w", entry, i, ErrNoDevice)
	}
	cards := slices.Clone(s.Cards)
	slices.SortFunc(cards, func(a, b Card) int {
		return cmp.Or(cmp.Compare(b.TotalMiB, a.TotalMiB), cmp.Compare(a.Index, b.Index))
	})
	if i >= len(cards) {
		return Card{}, fmt.Errorf("CUDA_VISIBLE_DEVICES=%s: only %d cards: %w", entry, len(cards), ErrNoDevice)
	}
	return cards[i], nil
}
