package nvidiasmi

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gpusched/gpusched/internal/elide"
)

// Mem is an amount of GPU memory in MiB that may be unknown. The zero value
// is unknown, so a value the parser could not read can never pass for 0 MiB.
type Mem struct {
	MiB   int64 // the amount; meaningful only when Known
	Known bool  // whether nvidia-smi printed a readable number
}

// MiB returns the known amount n MiB.
func MiB(n int64) Mem { return Mem{MiB: n, Known: true} }

// String returns "<n> MiB", or "unknown".
func (m Mem) String() string {
	if !m.Known {
		return "unknown"
	}
	return strconv.FormatInt(m.MiB, 10) + " MiB"
}

// GPU is one card as the --query-gpu output describes it.
type GPU struct {
	Index int    // nvidia-smi's index; -1 when unknown
	UUID  string // e.g. "GPU-ef1b2c9b-..."; "" when unknown
	Name  string // product name; "" when unknown or not queried
	BusID string // pci.bus_id when the query asked for it; "" otherwise

	// Total, Used and Free are memory.total, memory.used and memory.free.
	// Free is the number to trust: the driver reserves memory that Used
	// leaves out, so Total-Used overstates what a job can get. Use Free and
	// Unavailable, and treat Used as information for people.
	Total Mem
	Used  Mem
	Free  Mem
	// Reserved is memory.reserved when the query asked for it.
	Reserved Mem

	// Unusable says why no work may be placed on this card (unknown total
	// or free memory, unknown identity, free above total), with the reasons
	// joined by "; ". It is "" when the card is usable.
	Unusable string

	Line int // the output line the row came from, counting from 1
}

// Usable reports whether the card's identity and memory are known well
// enough to place work on it. A usable card has Total and Free known and
// 0 <= Free <= Total.
func (g GPU) Usable() bool { return g.Unusable == "" }

// Unavailable returns the memory nobody else can allocate on the card,
// Total-Free, which counts driver reservations that Used omits. It is
// unknown when Total or Free is.
func (g GPU) Unavailable() Mem {
	if !g.Total.Known || !g.Free.Known {
		return Mem{}
	}
	return MiB(max(g.Total.MiB-g.Free.MiB, 0))
}

// App is one compute process as the --query-compute-apps output describes it.
type App struct {
	PID     int    // host PID; 0 when unknown
	GPUUUID string // the card the process runs on; "" when unknown
	Name    string // process_name when the query asked for it; "" otherwise
	Used    Mem    // used_memory; unknown when the driver does not say ([N/A])
	Line    int    // the output line the row came from, counting from 1
}

// Problem is something in nvidia-smi's output that is not a readable row:
// an error message, a row with the wrong number of fields, a missing column
// or a missing header. Problems never stop the parser: the readable rows
// are still returned.
type Problem struct {
	Source string // "gpu" or "apps": which query's output the problem is in
	Line   int    // line number, counting from 1; 0 when not about one line
	// Text is the offending line, trimmed and, past maxText bytes, cut in
	// the middle; may be "". It holds whatever nvidia-smi printed, control
	// characters and invalid UTF-8 included: quote it to show it, as String
	// does.
	Text string
	Msg  string // what is wrong

	// GPUIndex is the nvidia-smi index of the card the line names, e.g. 1
	// for "Unable to determine the device handle for GPU1: ..."; -1 when
	// the line names no index.
	GPUIndex int
	// BusID is the PCI bus id the line names, e.g. "0000:34:00.0"; "" when
	// it names none.
	BusID string
}

// NamesCard reports whether the problem names a card, by index or by bus
// id, so that the caller can mark that card lost.
func (p Problem) NamesCard() bool { return p.GPUIndex >= 0 || p.BusID != "" }

// String returns the problem in one line for logs and status output.
func (p Problem) String() string {
	var b strings.Builder
	if p.Source != "" {
		b.WriteString(p.Source)
		b.WriteString(" ")
	}
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	b.WriteString(p.Msg)
	if p.Text != "" {
		b.WriteString(": ")
		b.WriteString(quoteText(p.Text))
	}
	switch {
	case p.GPUIndex >= 0 && p.BusID != "":
		fmt.Fprintf(&b, " (GPU %d, bus %s)", p.GPUIndex, p.BusID)
	case p.GPUIndex >= 0:
		fmt.Fprintf(&b, " (GPU %d)", p.GPUIndex)
	case p.BusID != "":
		fmt.Fprintf(&b, " (bus %s)", p.BusID)
	}
	return b.String()
}

// Column names, as nvidia-smi prints them in a header once units such as
// " [MiB]" are stripped and the case is folded.
const (
	colIndex       = "index"
	colUUID        = "uuid"
	colName        = "name"
	colBusID       = "pci.bus_id"
	colTotal       = "memory.total"
	colUsed        = "memory.used"
	colFree        = "memory.free"
	colReserved    = "memory.reserved"
	colPID         = "pid"
	colGPUUUID     = "gpu_uuid"
	colUsedMem     = "used_memory"
	colUsedGPUMem  = "used_gpu_memory"
	colProcessName = "process_name"
)

// tableSpec says which columns a query's header may hold, which are
// required, and which free-text column may contain commas.
type tableSpec struct {
	source   string
	known    []string   // a line naming any of these is the header
	required [][]string // each entry: alternatives, the first is the name
	absorb   []string   // free-text columns, first present wins
}

var gpuSpec = tableSpec{
	source:   "gpu",
	known:    []string{colIndex, colUUID, colName, colBusID, colTotal, colUsed, colFree, colReserved},
	required: [][]string{{colIndex}, {colUUID}, {colTotal}, {colFree}},
	absorb:   []string{colName},
}

var appsSpec = tableSpec{
	source:   "apps",
	known:    []string{colPID, colGPUUUID, colUsedMem, colUsedGPUMem, colProcessName},
	required: [][]string{{colPID}, {colGPUUUID}, {colUsedMem, colUsedGPUMem}},
	absorb:   []string{colProcessName, colName},
}

// table is a parsed CSV answer: the header, the rows split into cells
// aligned with it, and the problems found on the way.
type table struct {
	header     map[string]int // column name -> position
	headerLine int            // 0 when no header was found
	rows       []tableRow
	problems   []Problem
}

type tableRow struct {
	line  int
	cells []string
}

// has reports whether the header has any of the columns names.
func (t *table) has(names ...string) bool {
	for _, n := range names {
		if _, ok := t.header[n]; ok {
			return true
		}
	}
	return false
}

// cell returns the trimmed cell of the first present column among names,
// and whether any of them is a column.
func (t *table) cell(r tableRow, names ...string) (string, bool) {
	for _, n := range names {
		if i, ok := t.header[n]; ok {
			return r.cells[i], true
		}
	}
	return "", false
}

// maxText bounds Problem.Text, in bytes, so that a huge garbage line
// stays readable.
const maxText = 200

// quoteText quotes text nvidia-smi printed for a message: escaped, and cut
// in the middle past maxText bytes.
func quoteText(s string) string { return elide.QuoteMax(s, maxText) }

// shorten cuts a line longer than maxText bytes in the middle, at rune
// boundaries: its start and end are what tell one message from another.
func shorten(s string) string { return elide.Middle(s, maxText) }

func parseTable(out []byte, spec tableSpec) *table {
	t := &table{}
	out = bytes.TrimPrefix(out, []byte("\xef\xbb\xbf"))
	var absorb = -1
	n := 0
	for lineNo, raw := range strings.Split(string(out), "\n") {
		lineNo++
		line := strings.TrimSpace(strings.TrimRight(raw, "\r"))
		if line == "" {
			continue
		}
		if t.headerLine == 0 {
			if h := headerColumns(line, spec.known); h != nil {
				t.header, t.headerLine, n = h, lineNo, len(strings.Split(line, ","))
				for _, a := range spec.absorb {
					if i, ok := h[a]; ok {
						absorb = i
						break
					}
				}
				for _, alts := range spec.required {
					if !t.has(alts...) {
						t.problems = append(t.problems, Problem{Source: spec.source, Line: lineNo,
							Msg: "missing column " + alts[0], GPUIndex: -1})
					}
				}
				continue
			}
			if errorLine.MatchString(line) {
				t.problems = append(t.problems, errorProblem(spec.source, lineNo, line))
			} else {
				t.problems = append(t.problems, Problem{Source: spec.source, Line: lineNo, Text: shorten(line),
					Msg: "line before the csv header", GPUIndex: -1})
			}
			continue
		}
		if errorLine.MatchString(line) {
			t.problems = append(t.problems, errorProblem(spec.source, lineNo, line))
			continue
		}
		cells, got := splitRow(line, n, absorb)
		switch {
		case cells == nil && got == 1 && n > 1:
			// A lone message among rows is an error whatever its wording.
			t.problems = append(t.problems, errorProblem(spec.source, lineNo, line))
			continue
		case cells == nil:
			t.problems = append(t.problems, Problem{Source: spec.source, Line: lineNo, Text: shorten(line),
				Msg: fmt.Sprintf("row has %d fields, header has %d", got, n), GPUIndex: -1})
			continue
		}
		t.rows = append(t.rows, tableRow{line: lineNo, cells: cells})
	}
	if t.headerLine == 0 {
		t.problems = append(t.problems, Problem{Source: spec.source, GPUIndex: -1,
			Msg: "no csv header naming any of " + strings.Join(spec.known, ", ")})
	}
	return t
}

// headerColumns returns the column positions when line is a header, one
// that names at least one known column, and nil otherwise.
func headerColumns(line string, known []string) map[string]int {
	h := map[string]int{}
	hit := false
	for i, f := range strings.Split(line, ",") {
		name := normColumn(f)
		if _, dup := h[name]; !dup {
			h[name] = i
		}
		for _, k := range known {
			if name == k {
				hit = true
			}
		}
	}
	if !hit {
		return nil
	}
	return h
}

// normColumn turns " memory.total [MiB]" into "memory.total".
func normColumn(f string) string {
	f = strings.TrimSpace(f)
	if i := strings.IndexByte(f, '['); i > 0 && strings.HasSuffix(f, "]") {
		f = strings.TrimSpace(f[:i])
	}
	return strings.ToLower(f)
}

// splitRow splits a row into n trimmed cells. nvidia-smi does not quote
// cells, so a free-text cell (a process name) may hold commas; when the row
// has more fields than the header and absorb is a column, the cells left of
// it are taken from the left, those right of it from the right, and the
// rest is the free-text cell. It returns nil and the field count when the
// row cannot be aligned with the header.
func splitRow(line string, n, absorb int) ([]string, int) {
	parts := strings.Split(line, ",")
	got := len(parts)
	if got < n || (got > n && absorb < 0) {
		return nil, got
	}
	extra := got - n
	cells := make([]string, n)
	for i := range n {
		switch {
		case extra == 0 || i < absorb:
			cells[i] = strings.TrimSpace(parts[i])
		case i == absorb:
			cells[i] = strings.TrimSpace(strings.Join(parts[i:i+extra+1], ","))
		default:
			cells[i] = strings.TrimSpace(parts[i+extra])
		}
	}
	return cells, got
}

// errorLine matches messages nvidia-smi prints among or instead of rows.
var errorLine = regexp.MustCompile(`(?i)^(unable to determine|unable to|failed to|nvidia-smi has failed|no devices were found|gpu [0-9a-f]+:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]+: )|unknown error$|gpu is lost`)

var (
	busIDPattern = regexp.MustCompile(`[0-9A-Fa-f]{4}(?:[0-9A-Fa-f]{4})?:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]\b`)
	// GPU1, GPU 1, gpu #1 — once bus ids are cut out, so that the domain of
	// "GPU 00000000:34:00.0" is not read as an index.
	gpuIndexPattern = regexp.MustCompile(`(?i)\bGPU ?#?(\d{1,4})\b`)
)

// errorProblem builds the Problem for an error message, naming the card
// the message names when it names one. Only error messages are searched for
// a card: a table row or a banner that happens to hold a bus id names no
// lost card.
func errorProblem(source string, lineNo int, line string) Problem {
	p := Problem{Source: source, Line: lineNo, Text: shorten(line), Msg: "error line", GPUIndex: -1}
	p.BusID = busIDPattern.FindString(line)
	rest := busIDPattern.ReplaceAllString(line, " ")
	if m := gpuIndexPattern.FindStringSubmatch(rest); m != nil {
		if i, err := strconv.Atoi(m[1]); err == nil {
			p.GPUIndex = i
		}
	}
	return p
}

// unknownCell reports whether a cell is one of nvidia-smi's placeholders
// for a value it does not have: "", "N/A", "ERR!", or anything in
// brackets ("[N/A]", "[Not Supported]", "[Requested functionality has been
// deprecated]", "[Unknown Error]", ...).
func unknownCell(s string) bool {
	switch {
	case s == "", strings.EqualFold(s, "N/A"), s == "ERR!":
		return true
	case strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]"):
		return true
	}
	return false
}

// parseMem reads "143771 MiB", "143771MiB" or "143771". Anything else,
// including a negative number or another unit, is unknown.
func parseMem(s string) Mem {
	if len(s) >= 3 && strings.EqualFold(s[len(s)-3:], "MiB") {
		s = strings.TrimSpace(s[:len(s)-3])
	}
	if s == "" || s[0] < '0' || s[0] > '9' {
		return Mem{}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return Mem{}
	}
	return MiB(n)
}

// text returns a free-text cell, "" for a placeholder.
func text(s string) string {
	if unknownCell(s) {
		return ""
	}
	return s
}

// parseIndex reads a non-negative decimal, -1 otherwise.
func parseIndex(s string) int {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return -1
	}
	i, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return i
}

// ParseGPUs parses the CSV output of
// nvidia-smi --query-gpu=index,uuid,name,memory.total,memory.used,memory.free.
//
// Columns are found by header name (units stripped, case ignored), so extra
// and reordered columns are fine; values may carry " MiB" or be bare
// (nounits). Every row becomes a GPU, usable or not: a card with unknown
// index, uuid, total or free memory is returned with Unusable saying why.
// Lines that are not rows, and required columns the header lacks, are
// returned as problems. Output without a header (noheader, or an error
// message alone) yields no GPUs and a problem saying so.
func ParseGPUs(out []byte) ([]GPU, []Problem) {
	t := parseTable(out, gpuSpec)
	return t.gpus(), t.problems
}

func (t *table) gpus() []GPU {
	var gpus []GPU
	for _, r := range t.rows {
		g := GPU{Line: r.line, Index: -1}
		var why []string
		idx, ok := t.cell(r, colIndex)
		if g.Index = parseIndex(idx); g.Index < 0 {
			why = append(why, unknownWhy("index", idx, ok))
		}
		uuid, ok := t.cell(r, colUUID)
		if g.UUID = text(uuid); g.UUID == "" {
			why = append(why, unknownWhy("uuid", uuid, ok))
		}
		name, _ := t.cell(r, colName)
		g.Name = text(name)
		bus, _ := t.cell(r, colBusID)
		g.BusID = text(bus)
		total, ok := t.cell(r, colTotal)
		if g.Total = parseMem(total); !g.Total.Known {
			why = append(why, unknownWhy(colTotal, total, ok))
		}
		used, _ := t.cell(r, colUsed)
		g.Used = parseMem(used)
		free, ok := t.cell(r, colFree)
		if g.Free = parseMem(free); !g.Free.Known {
			why = append(why, unknownWhy(colFree, free, ok))
		}
		res, _ := t.cell(r, colReserved)
		g.Reserved = parseMem(res)
		if g.Total.Known && g.Free.Known && g.Free.MiB > g.Total.MiB {
			why = append(why, fmt.Sprintf("memory.free %d MiB exceeds memory.total %d MiB", g.Free.MiB, g.Total.MiB))
		}
		g.Unusable = strings.Join(why, "; ")
		gpus = append(gpus, g)
	}
	return gpus
}

func unknownWhy(col, cell string, present bool) string {
	if !present {
		return col + " unknown (no such column)"
	}
	return fmt.Sprintf("%s unknown (%s)", col, elide.Quote(cell))
}

// ParseApps parses the CSV output of
// nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory; the memory
// column may also be spelled used_gpu_memory. A header alone means no
// processes. Used memory printed as [N/A] is unknown and the process is
// kept. When the header has process_name, a name holding commas does not
// shift the other columns. Problems are reported as for ParseGPUs.
func ParseApps(out []byte) ([]App, []Problem) {
	t := parseTable(out, appsSpec)
	return t.apps(), t.problems
}

func (t *table) apps() []App {
	var apps []App
	for _, r := range t.rows {
		a := App{Line: r.line}
		pid, _ := t.cell(r, colPID)
		a.PID = max(parseIndex(pid), 0)
		uuid, _ := t.cell(r, colGPUUUID)
		a.GPUUUID = text(uuid)
		name, _ := t.cell(r, colProcessName, colName)
		a.Name = text(name)
		used, _ := t.cell(r, colUsedMem, colUsedGPUMem)
		a.Used = parseMem(used)
		apps = append(apps, a)
	}
	return apps
}
