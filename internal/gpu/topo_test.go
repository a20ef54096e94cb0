package gpu

import (
	"testing"
)

func TestLinkOrder(t *testing.T) {
	// From closest to farthest, as nvidia-smi's legend orders them.
	order := []string{"X", "NV18", "NV12", "NV4", "NV1", "PIX", "PXB", "PHB", "NODE", "SYS"}
	var last Link
	for i, s := range order {
		l, err := ParseLink(s)
		if err != nil {
			t.Fatal(err)
		}
		if l.String() != s {
			t.Errorf("ParseLink(%q).String() = %q", s, l)
		}
		if i > 0 && l <= last {
			t.Errorf("%s is not farther than %s", s, order[i-1])
		}
		last = l
	}
	if l, _ := ParseLink("SOC"); l != LinkSys {
		t.Errorf("SOC (older drivers' SYS) = %v", l)
	}
	for _, bad := range []string{"", "NV", "NV0", "NVx", "nv4", "PCI", "N/A"} {
		if _, err := ParseLink(bad); err == nil {
			t.Errorf("ParseLink(%q) accepted", bad)
		}
	}
	if n := NVLink(12).NVLinks(); n != 12 {
		t.Errorf("NVLink(12).NVLinks() = %d", n)
	}
	if LinkPIX.NVLinks() != 0 || LinkSelf.NVLinks() != 0 {
		t.Error("a PCIe link or the card itself counts NVLinks")
	}
}

func TestTopologyLink(t *testing.T) {
	topo := NewTopology(3)
	topo.Set(0, 1, NVLink(4))
	topo.Set(5, 1, LinkPIX) // no card 5: ignored
	for _, tt := range []struct {
		a, b int
		want Link
	}{
		{0, 1, NVLink(4)}, {1, 0, NVLink(4)}, {0, 2, LinkSys}, {2, 2, LinkSelf}, {0, 7, LinkSys}, {-1, 0, LinkSys},
	} {
		if got := topo.Link(tt.a, tt.b); got != tt.want {
			t.Errorf("Link(%d, %d) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
	var none *Topology
	if none.Link(0, 1) != none.Link(2, 5) || none.Cards() != 0 {
		t.Error("a nil topology tells pairs apart")
	}
}

// A task on two cards: each card's processes count for its holding there,
// by PID and by token; a process of the task on a card it does not hold
// is foreign.
func TestBoardAttributesEachCardOfATask(t *testing.T) {
	b := NewBoard(settings())
	snap := Snapshot{Time: t0, Cards: []Card{
		{Index: 0, UUID: "GPU-a", TotalMiB: 40500, FreeMiB: 40500},
		{Index: 1, UUID: "GPU-b", TotalMiB: 40500, FreeMiB: 40500},
		{Index: 2, UUID: "GPU-c", TotalMiB: 40500, FreeMiB: 40500},
	}}
	b.Apply(snap, t0)
	for _, i := range []int{0, 1} {
		b.Hold("pair", i, Need{MiB: 1000, Count: 2})
		b.SetPID("pair", i, 100)
	}
	b.SetToken("pair", "tok")
	snap.Cards[0].FreeMiB, snap.Cards[1].FreeMiB, snap.Cards[2].FreeMiB = 35500, 37500, 39500
	snap.Procs = []Proc{
		{PID: 100, GPUUUID: "GPU-a", UsedMiB: 5000},                        // the leader, on card 0
		{PID: 101, GPUUUID: "GPU-b", UsedMiB: 3000, Token: "tok"},          // a worker that left the group, on card 1
		{PID: 102, GPUUUID: "GPU-c", UsedMiB: 1000, Ancestors: []int{100}}, // on a card it does not hold
	}
	b.Apply(snap, t0)
	v := b.Views(t0)
	if h := v[0].Holders[0]; h.ObservedMiB != 5000 || v[0].ForeignMiB != 0 {
		t.Errorf("card 0: holding %+v, foreign %d; want 5000 observed, 0 foreign", h, v[0].ForeignMiB)
	}
	if h := v[1].Holders[0]; h.ObservedMiB != 3000 || v[1].ForeignMiB != 0 {
		t.Errorf("card 1: holding %+v, foreign %d; want 3000 observed, 0 foreign", h, v[1].ForeignMiB)
	}
	if v[2].ForeignMiB != 1000 || v[2].ForeignProcs != 1 {
		t.Errorf("card 2: foreign %d MiB, %d procs; want 1000, 1", v[2].ForeignMiB, v[2].ForeignProcs)
	}
}
