package gpu

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Link is how close two cards are, by the path between them that
// `nvidia-smi topo -m` names; a smaller Link is closer. From closest to
// farthest: the card itself, NVLink (more bonded links closer), a single
// PCIe bridge (PIX), several PCIe bridges (PXB), a PCIe host bridge
// (PHB), host bridges within a NUMA node (NODE), and the interconnect
// between NUMA nodes (SYS).
type Link uint16

// The links, by distance.
const (
	LinkSelf Link = 0
	// NVLink(n) lies between LinkSelf and LinkPIX.
	LinkPIX  Link = 200
	LinkPXB  Link = 300
	LinkPHB  Link = 400
	LinkNode Link = 500
	LinkSys  Link = 600
)

// maxNVLinks bounds the bonded links NVLink tells apart; more count as
// this many.
const maxNVLinks = 98

// NVLink is the link of a bonded set of n NVLinks (nvidia-smi's "NV<n>"):
// closer than any PCIe path, and closer with more links.
func NVLink(n int) Link { return Link(100 - min(max(n, 1), maxNVLinks)) }

// NVLinks returns how many bonded NVLinks l is, or 0 when l is not NVLink.
func (l Link) NVLinks() int {
	if l > LinkSelf && l < LinkPIX {
		return 100 - int(l)
	}
	return 0
}

func (l Link) String() string {
	switch l {
	case LinkSelf:
		return "X"
	case LinkPIX:
		return "PIX"
	case LinkPXB:
		return "PXB"
	case LinkPHB:
		return "PHB"
	case LinkNode:
		return "NODE"
	case LinkSys:
		return "SYS"
	}
	if n := l.NVLinks(); n > 0 {
		return "NV" + strconv.Itoa(n)
	}
	return fmt.Sprintf("link(%d)", uint16(l))
}

// ParseLink reads a cell of `nvidia-smi topo -m`'s matrix: X, NV<n>, PIX,
// PXB, PHB, NODE, SYS, or SOC (what drivers before NODE existed printed
// for SYS).
func ParseLink(s string) (Link, error) {
	switch s {
	case "X":
		return LinkSelf, nil
	case "PIX":
		return LinkPIX, nil
	case "PXB":
		return LinkPXB, nil
	case "PHB":
		return LinkPHB, nil
	case "NODE":
		return LinkNode, nil
	case "SYS", "SOC":
		return LinkSys, nil
	}
	if n, ok := strings.CutPrefix(s, "NV"); ok {
		if v, err := strconv.Atoi(n); err == nil && v > 0 {
			return NVLink(v), nil
		}
	}
	return 0, fmt.Errorf("unknown link %q (want X, NV<n>, PIX, PXB, PHB, NODE or SYS)", s)
}

// Topology is how close each pair of the machine's cards is, by
// nvidia-smi index. A nil Topology knows nothing: every pair of cards is
// as far apart as any other, so it prefers no set of cards to another.
type Topology struct {
	n     int
	links []Link // n x n, row by row
}

// NewTopology returns the topology of n cards, numbered 0 to n-1, every
// pair LinkSys apart until Set says otherwise.
func NewTopology(n int) *Topology {
	t := &Topology{n: n, links: make([]Link, n*n)}
	for a := range n {
		for b := range n {
			if a != b {
				t.links[a*n+b] = LinkSys
			}
		}
	}
	return t
}

// Set records that cards a and b are l apart, both ways.
func (t *Topology) Set(a, b int, l Link) {
	if a < 0 || b < 0 || a >= t.n || b >= t.n || a == b {
		return
	}
	t.links[a*t.n+b], t.links[b*t.n+a] = l, l
}

// Cards is how many cards t knows, numbered 0 to Cards()-1.
func (t *Topology) Cards() int {
	if t == nil {
		return 0
	}
	return t.n
}

// Link is how far apart cards a and b are: LinkSelf for a card and
// itself, LinkSys for a pair t does not know (t nil, or a card it has no
// row for).
func (t *Topology) Link(a, b int) Link {
	switch {
	case a == b:
		return LinkSelf
	case t == nil || a < 0 || b < 0 || a >= t.n || b >= t.n:
		return LinkSys
	}
	return t.links[a*t.n+b]
}

// String writes t as a matrix, one row per card: "GPU0 X NV12 ...".
func (t *Topology) String() string {
	if t == nil {
		return "<no topology>"
	}
	var b strings.Builder
	for a := range t.n {
		fmt.Fprintf(&b, "GPU%d", a)
		for c := range t.n {
			b.WriteString(" " + t.Link(a, c).String())
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// TopologyReader is what a Probe that can read the cards' topology also
// implements (nvidiasmi.Probe does, with `nvidia-smi topo -m`). The
// scheduler reads it once, when it first reads the cards; an error means
// that it prefers no set of cards to another.
type TopologyReader interface {
	Topology(ctx context.Context) (*Topology, error)
}
