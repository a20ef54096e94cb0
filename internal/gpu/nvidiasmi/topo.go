package nvidiasmi

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gpusched/gpusched/internal/gpu"
)

// TopoArgs ask nvidia-smi how the cards are connected: a matrix with a row
// and a column per card (GPU0, GPU1, ... by nvidia-smi's index), then
// NICs, CPU and NUMA affinity, and a legend.
var TopoArgs = []string{"topo", "-m"}

var _ gpu.TopologyReader = (*Probe)(nil)

// gpuName matches a card's row or column name: "GPU" and its index.
var gpuName = regexp.MustCompile(`^GPU([0-9]+)$`)

// maxTopoCards bounds the card index ParseTopo accepts: a row named
// GPU99999 is junk, not a card.
const maxTopoCards = 1024

// ParseTopo reads the matrix that `nvidia-smi topo -m` prints into a
// Topology over its GPU rows and columns. Cells may be separated by tabs
// or spaces; the columns after the matrix (CPU Affinity, NUMA Affinity,
// GPU NUMA ID), NIC rows and columns and the legend are ignored. A pair
// whose two cells disagree is as far apart as the farther says; a pair
// with no cell (a missing row) is LinkSys apart. It fails, reading
// nothing, when there is no header, no GPU row, a row shorter than the
// header, or a cell that is not a link (see gpu.ParseLink).
func ParseTopo(out []byte) (*gpu.Topology, error) {
	out = bytes.TrimPrefix(out, []byte("\xef\xbb\xbf"))
	var cols []string // the matrix's column names, in order
	type cell struct {
		a, b int
		l    gpu.Link
	}
	var cells []cell
	n := 0
	for lineNo, raw := range strings.Split(string(out), "\n") {
		fields := strings.Fields(raw)
		if len(fields) == 0 {
			continue
		}
		if cols == nil {
			if gpuName.MatchString(fields[0]) {
				cols = matrixColumns(fields)
			}
			continue
		}
		m := gpuName.FindStringSubmatch(fields[0])
		if m == nil {
			continue // a NIC row, the legend
		}
		a, err := strconv.Atoi(m[1])
		if err != nil || a >= maxTopoCards {
			return nil, fmt.Errorf("%w: line %d: row %s", ErrBadOutput, lineNo+1, quoteText(fields[0]))
		}
		if len(fields)-1 < len(cols) {
			return nil, fmt.Errorf("%w: line %d: row %s has %d cells, the header names %d columns",
				ErrBadOutput, lineNo+1, fields[0], len(fields)-1, len(cols))
		}
		n = max(n, a+1)
		for j, name := range cols {
			cm := gpuName.FindStringSubmatch(name)
			if cm == nil {
				continue // a NIC's column
			}
			b, err := strconv.Atoi(cm[1])
			if err != nil || b >= maxTopoCards {
				return nil, fmt.Errorf("%w: column %s", ErrBadOutput, quoteText(name))
			}
			l, err := gpu.ParseLink(fields[1+j])
			if err != nil {
				return nil, fmt.Errorf("%w: line %d: %s to %s: %w", ErrBadOutput, lineNo+1, fields[0], name, err)
			}
			n = max(n, b+1)
			cells = append(cells, cell{a, b, l})
		}
	}
	switch {
	case cols == nil:
		return nil, fmt.Errorf("%w: no header naming GPU0: %s", ErrBadOutput, firstLine(out))
	case len(cells) == 0:
		return nil, fmt.Errorf("%w: a header but no GPU row", ErrBadOutput)
	}
	// Both cells of a pair, the farther winning.
	links := make(map[[2]int]gpu.Link, len(cells))
	for _, c := range cells {
		if c.a == c.b {
			continue
		}
		k := [2]int{min(c.a, c.b), max(c.a, c.b)}
		if l, ok := links[k]; !ok || c.l > l {
			links[k] = c.l
		}
	}
	t := gpu.NewTopology(n)
	for k, l := range links {
		t.Set(k[0], k[1], l)
	}
	return t, nil
}

// matrixColumns returns the header's column names up to the first of the
// columns after the matrix ("CPU Affinity", "NUMA Affinity", "GPU NUMA
// ID", whose names hold spaces).
func matrixColumns(header []string) []string {
	cols := []string{}
	for _, f := range header {
		if f == "CPU" || f == "NUMA" || f == "GPU" {
			break
		}
		cols = append(cols, f)
	}
	return cols
}

// Topology runs `nvidia-smi topo -m` and parses its matrix (ParseTopo).
// It fails when nvidia-smi cannot be found, times out, exits non-zero, or
// prints no matrix; the error quotes the first line it printed.
func (p *Probe) Topology(ctx context.Context) (*gpu.Topology, error) {
	bin, err := p.bin()
	if err != nil {
		return nil, err
	}
	out, timedOut, err := p.call(ctx, bin, TopoArgs...)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("nvidia-smi topo -m: %w", ctx.Err())
	case timedOut:
		return nil, fmt.Errorf("%w after %s (topo -m)", ErrTimeout, p.timeout())
	case err != nil:
		return nil, fmt.Errorf("nvidia-smi topo -m: %w: %s", err, firstLine(out))
	}
	t, err := ParseTopo(out)
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi topo -m: %w", err)
	}
	return t, nil
}
