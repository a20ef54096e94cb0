package gpu

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func settings() Settings {
	return Settings{SafetyMarginMiB: 500, Cooldown: 3 * time.Second, QuarantineAfter: 2, QuarantineFor: time.Minute}
}

func twoCards() Snapshot {
	return Snapshot{Time: t0, Cards: []Card{
		{Index: 0, UUID: "GPU-a", Name: "A", TotalMiB: 40500, UsedMiB: 10000, FreeMiB: 30000}, // 500 reserved by the driver
		{Index: 1, UUID: "GPU-b", Name: "B", TotalMiB: 20500, UsedMiB: 0, FreeMiB: 20500},
	}}
}

func TestBoardStartsUnknown(t *testing.T) {
	b := NewBoard(settings())
	if b.Known() {
		t.Fatal("a board without a reading claims to know the cards")
	}
	if _, ok := b.MaxCapacity(); ok {
		t.Error("MaxCapacity known without a reading")
	}
}

func TestBoardForeignPrefersFree(t *testing.T) {
	b := NewBoard(settings())
	b.Apply(twoCards(), t0)
	v := b.Views(t0)
	// total - free = 10500: the 500 the driver reserves counts, although
	// memory.used leaves it out.
	if v[0].ForeignMiB != 10500 || v[0].CapacityMiB != 40000 || v[0].AvailableMiB != 29500 || v[0].State != CardOK {
		t.Errorf("card 0 = %+v", v[0])
	}
	if v[1].ForeignMiB != 0 || v[1].AvailableMiB != 20000 {
		t.Errorf("card 1 = %+v", v[1])
	}
	if c, ok := b.MaxCapacity(); !ok || c != 40000 {
		t.Errorf("MaxCapacity = %d, %v", c, ok)
	}
}

func TestBoardChargesTheLargerOfRequestAndUse(t *testing.T) {
	b := NewBoard(settings())
	b.Apply(twoCards(), t0)
	b.Hold("small-ask", 1, Need{MiB: 1000})
	b.Hold("honest", 1, Need{MiB: 5000})
	b.SetPID("small-ask", 1, 100)
	b.SetPID("honest", 1, 200)
	snap := twoCards()
	snap.Cards[1].UsedMiB, snap.Cards[1].FreeMiB = 9000, 11500
	snap.Procs = []Proc{
		{PID: 100, GPUUUID: "GPU-b", UsedMiB: 6000},                                   // the leader itself
		{PID: 555, GPUUUID: "GPU-b", UsedMiB: 1000, PGID: 999, Ancestors: []int{200}}, // a child of honest's leader
		{PID: 777, GPUUUID: "GPU-b", UsedMiB: 2000, PGID: 777},                        // somebody else's
	}
	b.Apply(snap, t0.Add(time.Second))
	v := b.Views(t0.Add(time.Second))[1]
	byTask := map[string]Holding{}
	for _, h := range v.Holders {
		byTask[h.Task] = h
	}
	if h := byTask["small-ask"]; h.ObservedMiB != 6000 || h.ChargedMiB() != 6000 || h.PeakMiB != 6000 {
		t.Errorf("small-ask = %+v, want charged its 6000 MiB use", h)
	}
	if h := byTask["honest"]; h.ObservedMiB != 1000 || h.ChargedMiB() != 5000 {
		t.Errorf("honest = %+v, want charged its 5000 MiB request", h)
	}
	if v.ForeignMiB != 2000 || v.ForeignProcs != 1 || v.ChargedMiB != 11000 || v.AvailableMiB != 20000-2000-11000 {
		t.Errorf("card 1 = %+v", v)
	}
}

func TestBoardCooldownAndQuarantine(t *testing.T) {
	b := NewBoard(settings())
	b.Apply(twoCards(), t0)
	b.Hold("a", 0, Need{MiB: 100})
	h := b.Release("a", 0, true, t0)
	if h.Task != "a" {
		t.Fatalf("Release returned %+v", h)
	}
	if v := b.Views(t0.Add(time.Second))[0]; v.State != CardCooling || !v.Until.Equal(t0.Add(3*time.Second)) {
		t.Errorf("after a release: %+v", v)
	}
	if v := b.Views(t0.Add(3 * time.Second))[0]; v.State != CardOK {
		t.Errorf("after the cooldown: %s", v.State)
	}
	if got := b.NextChange(t0); !got.Equal(t0.Add(3 * time.Second)) {
		t.Errorf("NextChange = %v", got)
	}
	// A success between failures resets the count.
	b.Hold("b", 0, Need{MiB: 100})
	b.Release("b", 0, false, t0)
	b.Hold("c", 0, Need{MiB: 100})
	b.Release("c", 0, true, t0)
	if v := b.Views(t0.Add(5 * time.Second))[0]; v.State != CardOK {
		t.Fatalf("quarantined after failures that were not in a row: %+v", v)
	}
	b.Hold("d", 0, Need{MiB: 100})
	b.Release("d", 0, true, t0.Add(10*time.Second))
	v := b.Views(t0.Add(20 * time.Second))[0]
	if v.State != CardQuarantined || !strings.Contains(v.Reason, "2 failed attempts in a row") {
		t.Errorf("after 2 failures in a row: %+v", v)
	}
	if v := b.Views(t0.Add(71 * time.Second))[0]; v.State != CardOK {
		t.Errorf("after the quarantine: %+v", v)
	}
}

func TestBoardLostAndUnreadableCards(t *testing.T) {
	b := NewBoard(settings())
	b.Apply(twoCards(), t0)
	snap := twoCards()
	snap.Cards = snap.Cards[1:] // card 0 disappears
	snap.Lost = []Lost{{Index: 0, BusID: "0000:34:00.0", Reason: "Unknown Error"}}
	b.Apply(snap, t0)
	v := b.Views(t0)
	if v[0].State != CardUnknown || !strings.Contains(v[0].Reason, "lost") {
		t.Errorf("lost card = %+v", v[0])
	}
	// Back in the next reading, it stays quarantined for a while.
	b.Apply(twoCards(), t0.Add(time.Second))
	if v := b.Views(t0.Add(time.Second))[0]; v.State != CardQuarantined {
		t.Errorf("a card that was lost is %s, want quarantined", v.State)
	}
	// A row whose memory cannot be read.
	snap = twoCards()
	snap.Cards[1].Problem = "memory.free is [N/A]"
	b.Apply(snap, t0)
	if v := b.Views(t0)[1]; v.State != CardUnknown || v.Reason != "memory.free is [N/A]" {
		t.Errorf("unreadable card = %+v", v)
	}
	// A failed probe makes every card unknown.
	b.Fail(errors.New("nvidia-smi timed out"), t0)
	for _, v := range b.Views(t0) {
		if v.State != CardUnknown && v.State != CardHidden {
			t.Errorf("card %d is %s while the probe fails", v.Index, v.State)
		}
	}
	if err, since := b.Err(); err != "nvidia-smi timed out" || !since.Equal(t0) {
		t.Errorf("Err = %q, %v", err, since)
	}
	b.Fail(errors.New("again"), t0.Add(time.Minute))
	if _, since := b.Err(); !since.Equal(t0) {
		t.Errorf("unknown since %v, want the first failure's time", since)
	}
}

func TestVisible(t *testing.T) {
	s := settings()
	s.Visible = []string{"1", "gpu-A"}
	b := NewBoard(s)
	snap := twoCards()
	snap.Cards = append(snap.Cards, Card{Index: 2, UUID: "GPU-c", TotalMiB: 90000, FreeMiB: 90000})
	b.Apply(snap, t0)
	v := b.Views(t0)
	if v[0].State != CardOK || v[1].State != CardOK || v[2].State != CardHidden {
		t.Errorf("states = %s %s %s, want ok ok hidden (by UUID, case-insensitive, and by index)", v[0].State, v[1].State, v[2].State)
	}
	if c, _ := b.MaxCapacity(); c != 40000 {
		t.Errorf("MaxCapacity counts a hidden card: %d", c)
	}
}

func TestDetectOOM(t *testing.T) {
	tests := []struct {
		log   string
		oom   bool
		tried int64
	}{
		{"RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity)", true, 20},
		{"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has a total capacity", true, 2560},
		{"RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported", true, 0},
		{"2024 W external/xla: RESOURCE_EXHAUSTED: Out of memory while trying to allocate", true, 0},
		{"Traceback: ValueError: bad shape", false, 0},
		{"Tried to allocate 20.00 MiB", false, 0}, // no out-of-memory mark
	}
	for _, tt := range tests {
		oom, tried := DetectOOM([]byte(tt.log))
		if oom != tt.oom || tried != tt.tried {
			t.Errorf("DetectOOM(%q) = %v, %d; want %v, %d", tt.log, oom, tried, tt.oom, tt.tried)
		}
	}
	if got := GrowAfterOOM(4096, 6000, 2000, 512); got != 8512 {
		t.Errorf("GrowAfterOOM = %d, want peak+tried+margin = 8512", got)
	}
	if got := GrowAfterOOM(10000, 3000, 0, 512); got != 10512 {
		t.Errorf("GrowAfterOOM = %d: a retry must always ask for more", got)
	}
	// No reading caught its memory (peak 0): what it held is its request.
	if got := GrowAfterOOM(8000, 0, 18000, 512); got != 26512 {
		t.Errorf("GrowAfterOOM = %d, want request+tried+margin = 26512", got)
	}
}

// A reading in which no visible card has usable memory numbers (every cell
// [N/A]) leaves the state unknown, as a failed probe does, and the time it
// became unknown carries over from reading to reading and from a failure
// before it, so that gpu_unknown_timeout counts from the first.
func TestBoardUnknownWhenNoCardIsUsable(t *testing.T) {
	na := func() Snapshot {
		s := twoCards()
		for i := range s.Cards {
			s.Cards[i].Problem = "memory.total is [N/A]"
		}
		return s
	}
	b := NewBoard(settings())
	b.Fail(errors.New("nvidia-smi timed out"), t0)
	b.Apply(na(), t0.Add(time.Minute))
	err, since := b.Err()
	if b.Known() || !strings.Contains(err, "no visible card has a usable memory reading") || !strings.Contains(err, "card 1: memory.total is [N/A]") {
		t.Fatalf("after an all-[N/A] reading: known %v, err %q", b.Known(), err)
	}
	if !since.Equal(t0) {
		t.Errorf("unknown since %v, want %v (the failure before)", since, t0)
	}
	b.Apply(na(), t0.Add(2*time.Minute))
	if _, since := b.Err(); !since.Equal(t0) {
		t.Errorf("a second [N/A] reading moved the start of the unknown state to %v", since)
	}
	// One usable card is enough.
	s := na()
	s.Cards[1].Problem = ""
	b.Apply(s, t0.Add(3*time.Minute))
	if !b.Known() {
		err, _ := b.Err()
		t.Fatalf("one usable card: still unknown: %s", err)
	}
	// From known, an all-[N/A] reading starts the clock now.
	b.Apply(na(), t0.Add(4*time.Minute))
	if _, since := b.Err(); !since.Equal(t0.Add(4 * time.Minute)) {
		t.Errorf("unknown since %v, want the reading's time", since)
	}
	// Cards hidden by visible_gpus do not count as usable.
	hidden := NewBoard(Settings{Visible: []string{"1"}})
	s = twoCards()
	s.Cards[1].Problem = "memory.used is [N/A]"
	hidden.Apply(s, t0)
	if hidden.Known() {
		t.Error("the only visible card is [N/A], the hidden one readable: the state should be unknown")
	}
}

// A process that left its task's process group and is no descendant of its
// leader (a daemon started with setsid, say) counts as the task's by its
// attempt token, not as foreign; after the task is released, the token
// means nothing.
func TestBoardAttributesByToken(t *testing.T) {
	b := NewBoard(settings())
	b.Apply(twoCards(), t0)
	b.Hold("train", 1, Need{MiB: 1000})
	b.SetPID("train", 1, 100)
	b.SetToken("train", "tag.train.1")
	snap := twoCards()
	snap.Cards[1].UsedMiB, snap.Cards[1].FreeMiB = 6000, 14500
	snap.Procs = []Proc{{PID: 555, PGID: 555, GPUUUID: "GPU-b", UsedMiB: 6000, Token: "tag.train.1"}}
	b.Apply(snap, t0)
	v := b.Views(t0)[1]
	if v.ForeignMiB != 0 || v.ForeignProcs != 0 || v.Holders[0].ObservedMiB != 6000 || v.ChargedMiB != 6000 {
		t.Errorf("card 1 = %+v: the escaped process must count as train's", v)
	}
	b.Release("train", 1, false, t0)
	b.Apply(snap, t0)
	if v := b.Views(t0)[1]; v.ForeignMiB != 6000 || v.ForeignProcs != 1 {
		t.Errorf("after train ended, its leftover process on card 1: %+v; want foreign", v)
	}
}
