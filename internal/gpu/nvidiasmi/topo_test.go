package nvidiasmi

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/internal/gpu"
)

// The real captures of `nvidia-smi topo -m` (testdata/nvidia-smi/SOURCES.md)
// read into the links their matrices show.
func TestParseTopoCaptures(t *testing.T) {
	nv := func(n int) gpu.Link { return gpu.NVLink(n) }
	tests := []struct {
		file  string
		cards int
		// links: a few pairs and what they must be.
		links map[[2]int]gpu.Link
	}{
		{"topo-h100x8-nv18.txt", 8, map[[2]int]gpu.Link{{0, 1}: nv(18), {3, 4}: nv(18), {7, 0}: nv(18), {5, 5}: gpu.LinkSelf}},
		{"topo-rtx4090x8-pcie-sys-nics.txt", 8, map[[2]int]gpu.Link{{0, 1}: gpu.LinkSys, {6, 7}: gpu.LinkSys, {2, 5}: gpu.LinkSys}},
		{"topo-5gpu-pcie-sys-node-phb.txt", 5, map[[2]int]gpu.Link{
			{0, 1}: gpu.LinkSys, {1, 2}: gpu.LinkPHB, {3, 4}: gpu.LinkPHB, {1, 3}: gpu.LinkNode, {2, 4}: gpu.LinkNode, {4, 0}: gpu.LinkSys}},
		{"topo-h100x4-nv6-nics.txt", 4, map[[2]int]gpu.Link{{0, 3}: nv(6), {2, 1}: nv(6)}},
		{"topo-rtx5090x2-phb-tabs.txt", 2, map[[2]int]gpu.Link{{0, 1}: gpu.LinkPHB}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			topo, err := ParseTopo(readCapture(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if topo.Cards() != tt.cards {
				t.Errorf("%d cards, want %d:\n%s", topo.Cards(), tt.cards, topo)
			}
			for pair, want := range tt.links {
				if got := topo.Link(pair[0], pair[1]); got != want {
					t.Errorf("GPU%d to GPU%d: %v, want %v", pair[0], pair[1], got, want)
				}
			}
		})
	}
}

// On the captured PCIe machine, two cards go to a pair behind one host
// bridge, three stay on one socket; on the NVSwitch machine every set is
// as close, so the cards with the most memory win.
func TestCapturedTopologiesChooseCards(t *testing.T) {
	cards := func(avail ...int64) []gpu.CardView {
		out := make([]gpu.CardView, len(avail))
		for i, a := range avail {
			out[i] = gpu.CardView{Index: i, CapacityMiB: 24000, AvailableMiB: a}
		}
		return out
	}
	pcie, err := ParseTopo(readCapture(t, "topo-5gpu-pcie-sys-node-phb.txt"))
	if err != nil {
		t.Fatal(err)
	}
	nvswitch, err := ParseTopo(readCapture(t, "topo-h100x8-nv18.txt"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		cards []gpu.CardView
		need  gpu.Need
		topo  *gpu.Topology
		want  []int
	}{
		// Card 0 has the most room but sits on the other socket; 2 beats 1
		// on room, and 2-1 share a host bridge.
		{"pcie pair", cards(24000, 20000, 22000, 21000, 20500), gpu.Need{MiB: 10000, Count: 2}, pcie, []int{2, 1}},
		// 1 has no room: the other bridge's pair.
		{"pcie pair, one busy", cards(24000, 100, 22000, 21000, 20500), gpu.Need{MiB: 10000, Count: 2}, pcie, []int{3, 4}},
		{"pcie three on one socket", cards(24000, 20000, 22000, 21000, 20500), gpu.Need{MiB: 10000, Count: 3}, pcie, []int{2, 3, 4}},
		{"nvswitch: the most room", cards(1000, 9000, 24000, 3000, 20000, 22000, 5000, 8000), gpu.Need{MiB: 2000, Count: 4}, nvswitch, []int{2, 5, 4, 1}},
	}
	for _, tt := range tests {
		got := gpu.FitSet(tt.cards, tt.need, gpu.Spread, tt.topo, "t", nil)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: FitSet = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestParseTopoRefusesJunk(t *testing.T) {
	for _, tt := range []struct {
		name, out, want string
	}{
		{"empty", "", "no header"},
		{"an error message", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", "no header"},
		{"header only", "\tGPU0\tGPU1\tCPU Affinity\n", "no GPU row"},
		{"short row", "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tPHB\t0-7\nGPU1\tPHB\n", "has 1 cells"},
		{"unknown link", "\tGPU0\tGPU1\nGPU0\t X \tFAST\nGPU1\tFAST\t X \n", `unknown link "FAST"`},
		{"absurd index", "\tGPU0\tGPU1\nGPU99999\tX\tPHB\n", "row"},
	} {
		_, err := ParseTopo([]byte(tt.out))
		if !errors.Is(err, ErrBadOutput) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want ErrBadOutput saying %q", tt.name, err, tt.want)
		}
	}
}

// The farther of two cells that disagree counts; a GPU without a row is
// known from the other rows.
func TestParseTopoAsymmetric(t *testing.T) {
	topo, err := ParseTopo([]byte("\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV4\tPIX\nGPU1\tPHB\t X \tSYS\n"))
	if err != nil {
		t.Fatal(err)
	}
	if topo.Cards() != 3 || topo.Link(0, 1) != gpu.LinkPHB || topo.Link(2, 0) != gpu.LinkPIX || topo.Link(2, 1) != gpu.LinkSys {
		t.Errorf("topology:\n%s", topo)
	}
}

func TestProbeTopology(t *testing.T) {
	capture := string(readCapture(t, "topo-5gpu-pcie-sys-node-phb.txt"))
	tests := []struct {
		name string
		a    answer
		want string // "" for success, else part of the error
	}{
		{"ok", answer{out: capture}, ""},
		{"exit status", answer{out: "No devices were found\n", err: errExit}, `exit status 9: "No devices were found"`},
		{"no matrix", answer{out: "Invalid combination of input arguments.\n"}, "no header"},
	}
	for _, tt := range tests {
		f := &fakeRunner{answers: map[string]answer{"topo": tt.a}}
		p := &Probe{Bin: "nvidia-smi", Run: f.run}
		topo, err := p.Topology(context.Background())
		switch {
		case tt.want == "" && (err != nil || topo.Cards() != 5):
			t.Errorf("%s: Topology() = %v, %v", tt.name, topo, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want one saying %q", tt.name, err, tt.want)
		}
		if len(f.calls) != 1 || !slices.Equal(f.calls[0][1:], TopoArgs) {
			t.Errorf("%s: calls %q, want one with %q", tt.name, f.calls, TopoArgs)
		}
	}
}

func FuzzParseTopo(f *testing.F) {
	seedCaptures(f)
	f.Add([]byte("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\t X \n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		topo, err := ParseTopo(out)
		if err != nil {
			if !errors.Is(err, ErrBadOutput) {
				t.Fatalf("error %v is not ErrBadOutput", err)
			}
			return
		}
		n := topo.Cards()
		if n <= 0 || n > maxTopoCards {
			t.Fatalf("%d cards", n)
		}
		for a := range n {
			if topo.Link(a, a) != gpu.LinkSelf {
				t.Fatalf("card %d is not itself", a)
			}
			for b := range n {
				if topo.Link(a, b) != topo.Link(b, a) {
					t.Fatalf("GPU%d-GPU%d differs both ways", a, b)
				}
			}
		}
	})
}
