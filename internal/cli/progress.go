package cli

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/store"
)

// The live display of "gpusched run" on a terminal: an overall bar and one
// line per running task, redrawn in place by Bubble Tea, with the lines
// that matter (failures, retries, cancellations, quarantined cards, failed
// completion events) printed above it so that they stay in the scrollback.
//
// The scheduler's observer only updates progressState under a mutex. The
// display's own goroutine takes a snapshot every frameInterval and hands it
// to the Bubble Tea program, whose renderer writes only what changed: a
// thousand events a second cost the terminal at most ten frames.

const (
	frameInterval  = 100 * time.Millisecond // snapshots taken at most this often
	displayFPS     = 20                     // Bubble Tea's cap on redraws
	maxLinesAbove  = 200                    // per frame; more are counted, not printed
	chargeInterval = time.Second            // how often GPU charges are read back
)

// progressState is what the live display knows of the run.
type progressState struct {
	total    int
	state    map[string]gpusched.State
	counts   [gpusched.StateCancelled + 1]int // by state
	kept     int                              // complete from an earlier run
	ended    int                              // attempts that ended a task (complete or failed) in this run
	running  map[string]runningTask
	lines    []string // to print above the display
	dropped  int      // lines not printed (more than maxLinesAbove in a frame)
	stopping bool
}

type runningTask struct {
	id      string
	attempt int
	start   time.Time
	card    *int
	reqMiB  int64
}

func newProgressState(total int) progressState {
	return progressState{total: total, state: map[string]gpusched.State{}, running: map[string]runningTask{}}
}

func (s *progressState) set(id string, st gpusched.State) {
	if old, ok := s.state[id]; ok {
		s.counts[old]--
	}
	s.state[id] = st
	s.counts[st]++
}

// reset sets every task's state from the records, as they are before the
// run starts.
func (s *progressState) reset(records []gpusched.Record) {
	s.total = len(records)
	s.state = make(map[string]gpusched.State, len(records))
	s.counts = [len(s.counts)]int{}
	for _, r := range records {
		s.set(r.ID, r.State)
	}
	s.kept = s.counts[gpusched.StateComplete]
}

func (s *progressState) apply(ev gpusched.Event) {
	a := ev.Attempt
	switch ev.Kind {
	case gpusched.EventStarted:
		s.set(ev.TaskID, gpusched.StateRunning)
		s.running[ev.TaskID] = runningTask{id: ev.TaskID, attempt: a.Number, start: a.Start, card: a.GPU, reqMiB: a.MemRequestedMiB}
	case gpusched.EventRetrying:
		s.set(ev.TaskID, gpusched.StatePending)
		delete(s.running, ev.TaskID)
	case gpusched.EventComplete:
		s.set(ev.TaskID, gpusched.StateComplete)
		delete(s.running, ev.TaskID)
		s.ended++
	case gpusched.EventFailed:
		s.set(ev.TaskID, gpusched.StateFailed)
		delete(s.running, ev.TaskID)
		s.ended++
	case gpusched.EventBlocked:
		s.set(ev.TaskID, gpusched.StateBlocked)
	case gpusched.EventCancelled:
		s.set(ev.TaskID, gpusched.StateCancelled)
		delete(s.running, ev.TaskID)
	}
	switch ev.Kind {
	case gpusched.EventRetrying, gpusched.EventFailed, gpusched.EventCancelled,
		gpusched.EventDeliveryFailed, gpusched.EventCardQuarantined:
		s.addLine(eventLine(ev))
	}
}

func (s *progressState) addLine(line string) {
	if len(s.lines) >= maxLinesAbove {
		s.dropped++
		return
	}
	s.lines = append(s.lines, printable(strings.ReplaceAll(line, "\n", " ")))
}

// takeLines returns the lines to print above the display and forgets them.
func (s *progressState) takeLines() []string {
	lines := s.lines
	if s.dropped > 0 {
		lines = append(lines, fmt.Sprintf("(%d more lines not shown here; the summary and gpusched status have every task)", s.dropped))
	}
	s.lines, s.dropped = nil, 0
	return lines
}

// progressFrame is a snapshot of progressState, drawn by progressModel.
type progressFrame struct {
	now, start time.Time
	total      int
	counts     [gpusched.StateCancelled + 1]int
	kept       int
	ended      int
	running    []runningTask    // oldest first
	charged    map[string]int64 // GPU memory charged per running task, when known
	stopping   bool
}

func (s *progressState) frame(now, start time.Time) progressFrame {
	f := progressFrame{now: now, start: start, total: s.total, counts: s.counts, kept: s.kept, ended: s.ended, stopping: s.stopping}
	f.running = make([]runningTask, 0, len(s.running))
	for _, t := range s.running {
		f.running = append(f.running, t)
	}
	slices.SortFunc(f.running, func(a, b runningTask) int {
		return cmp.Or(a.start.Compare(b.start), cmp.Compare(a.id, b.id))
	})
	return f
}

func (f progressFrame) gpuRunning() bool {
	return slices.ContainsFunc(f.running, func(t runningTask) bool { return t.card != nil })
}

// render draws the frame for a terminal of the given size (0: unknown).
func (f progressFrame) render(width, height int) string {
	var b strings.Builder
	c := f.counts
	done := c[gpusched.StateComplete] + c[gpusched.StateFailed] + c[gpusched.StateBlocked] + c[gpusched.StateCancelled]
	barWidth := 30
	if width > 0 && width < 90 {
		barWidth = max(10, width-60)
	}
	filled := 0
	if f.total > 0 {
		filled = barWidth * done / f.total
	}
	b.WriteString(strings.Repeat("█", filled) + strings.Repeat("░", barWidth-filled))
	elapsed := f.now.Sub(f.start)
	fmt.Fprintf(&b, " %d/%d tasks  elapsed %s", done, f.total, clock(elapsed))
	if left := f.total - done; left > 0 && !f.stopping {
		if f.ended == 0 || elapsed <= 0 {
			b.WriteString("  left ?")
		} else {
			eta := time.Duration(float64(elapsed) * float64(left) / float64(f.ended))
			fmt.Fprintf(&b, "  left ~%s", clock(max(eta, time.Second)))
		}
	}
	b.WriteString("\n")

	complete := fmt.Sprintf("complete %d", c[gpusched.StateComplete])
	if f.kept > 0 {
		complete += fmt.Sprintf(" (%d kept)", f.kept)
	}
	parts := []string{complete, fmt.Sprintf("failed %d", c[gpusched.StateFailed])}
	if n := c[gpusched.StateBlocked]; n > 0 {
		parts = append(parts, fmt.Sprintf("blocked %d", n))
	}
	if n := c[gpusched.StateCancelled]; n > 0 {
		parts = append(parts, fmt.Sprintf("cancelled %d", n))
	}
	parts = append(parts, fmt.Sprintf("running %d", c[gpusched.StateRunning]), fmt.Sprintf("waiting %d", c[gpusched.StatePending]))
	b.WriteString(strings.Join(parts, " · "))
	if f.stopping && c[gpusched.StateRunning] > 0 {
		b.WriteString(" · stopping: waiting for the running tasks to end")
	}
	b.WriteString("\n")

	// One line per running task, as many as the terminal holds.
	room := 20
	if height > 0 {
		room = min(40, height-3)
	}
	shown := f.running
	more := 0
	if len(shown) > room {
		n := max(0, room-1)
		shown, more = shown[:n], len(shown)-n
	}
	idWidth := 0
	for _, t := range shown {
		idWidth = max(idWidth, len(t.id))
	}
	idWidth = min(idWidth, 40)
	for _, t := range shown {
		id := t.id
		if len(id) > idWidth {
			id = id[:idWidth-1] + "…"
		}
		where := "cpu"
		if t.card != nil {
			where = fmt.Sprintf("card %d", *t.card)
		}
		fmt.Fprintf(&b, "  %-*s  %-7s %7s", idWidth, id, where, clock(f.now.Sub(t.start)))
		if t.card != nil {
			charged, ok := f.charged[t.id]
			if !ok {
				charged = t.reqMiB
			}
			fmt.Fprintf(&b, "  %d/%d MiB", charged, t.reqMiB)
		}
		if t.attempt > 1 {
			fmt.Fprintf(&b, "  attempt %d", t.attempt)
		}
		b.WriteString("\n")
	}
	if more > 0 {
		fmt.Fprintf(&b, "  … and %d more running\n", more)
	}
	return b.String()
}

// clock formats a duration in whole seconds, compactly: 7s, 4m05s, 2h03m.
func clock(d time.Duration) string {
	d = max(0, d.Truncate(time.Second))
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// progressModel is the Bubble Tea model: the last frame and the terminal's
// size. It never reads the shared state; frames come as messages.
type progressModel struct {
	frame         progressFrame
	width, height int
}

type frameMsg progressFrame

func (m progressModel) Init() tea.Cmd { return nil }

func (m progressModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case frameMsg:
		m.frame = progressFrame(msg)
	}
	return m, nil
}

func (m progressModel) View() tea.View {
	v := tea.NewView(m.frame.render(m.width, m.height))
	v.DisableBracketedPasteMode = true // no input is read
	return v
}

// liveDisplay runs the Bubble Tea program of the live display.
type liveDisplay struct {
	out    io.Writer
	runDir string
	extra  []tea.ProgramOption // tests: a window size for a writer that is not a terminal

	mu    sync.Mutex // guards st and start
	st    progressState
	start time.Time

	prog    *tea.Program
	stopReq chan struct{}
	done    chan struct{} // closed when the terminal is restored
	began   bool
	once    sync.Once
}

func newLiveDisplay(out io.Writer, runDir string, total int, extra ...tea.ProgramOption) *liveDisplay {
	return &liveDisplay{out: out, runDir: runDir, extra: extra, st: newProgressState(total),
		start: time.Now(), stopReq: make(chan struct{}), done: make(chan struct{})}
}

func (d *liveDisplay) observe(ev gpusched.Event) {
	d.mu.Lock()
	d.st.apply(ev)
	d.mu.Unlock()
}

func (d *liveDisplay) interrupted(msg string) {
	d.mu.Lock()
	d.st.addLine(msg)
	d.st.stopping = true
	d.mu.Unlock()
}

// begin starts the display: the terminal is taken from here to stop.
func (d *liveDisplay) begin(records []gpusched.Record) {
	d.mu.Lock()
	d.st.reset(records)
	d.start = time.Now()
	first := d.st.frame(d.start, d.start)
	d.mu.Unlock()
	opts := append([]tea.ProgramOption{
		tea.WithOutput(d.out),
		tea.WithInput(nil),         // Ctrl-C stays a signal, handled by the run
		tea.WithoutSignalHandler(), // idem
		tea.WithFPS(displayFPS),
	}, d.extra...)
	d.prog = tea.NewProgram(progressModel{frame: first}, opts...)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		_, _ = d.prog.Run() // restores the terminal however it ends
	}()
	d.began = true
	go d.drive(ran)
}

// drive sends the program a frame every frameInterval until stop.
func (d *liveDisplay) drive(ran <-chan struct{}) {
	defer close(d.done)
	charges := &chargeReader{runDir: d.runDir}
	defer charges.close()
	tick := time.NewTicker(frameInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			d.frame(charges)
		case <-d.stopReq:
			d.frame(charges)
			d.prog.Quit() // draws the last frame, shows the cursor
			<-ran
			return
		case <-ran:
			// The program could not run on this output; keep the lines
			// that matter coming, plainly.
			for {
				select {
				case <-tick.C:
					d.writePlain()
				case <-d.stopReq:
					d.writePlain()
					return
				}
			}
		}
	}
}

func (d *liveDisplay) frame(charges *chargeReader) {
	now := time.Now()
	d.mu.Lock()
	f := d.st.frame(now, d.start)
	lines := d.st.takeLines()
	d.mu.Unlock()
	if f.gpuRunning() {
		f.charged = charges.read(now)
	}
	if len(lines) > 0 {
		d.prog.Send(tea.Println(strings.Join(lines, "\n"))())
	}
	d.prog.Send(frameMsg(f))
}

func (d *liveDisplay) writePlain() {
	d.mu.Lock()
	lines := d.st.takeLines()
	d.mu.Unlock()
	for _, l := range lines {
		fmt.Fprintln(d.out, l)
	}
}

// stop draws the final frame and gives the terminal back.
func (d *liveDisplay) stop() {
	d.once.Do(func() {
		if !d.began {
			close(d.done)
			return
		}
		close(d.stopReq)
	})
	<-d.done
}

// chargeReader reads back, at most every chargeInterval, the GPU memory
// charged to each running task: the scheduler saves its view of the cards
// in the state database, where "gpusched gpus" reads it too.
type chargeReader struct {
	runDir string
	st     *store.SQLite
	next   time.Time
	last   map[string]int64
}

func (c *chargeReader) read(now time.Time) map[string]int64 {
	if now.Before(c.next) {
		return c.last
	}
	c.next = now.Add(chargeInterval)
	if c.st == nil {
		st, err := store.OpenSQLiteReadOnly(filepath.Join(c.runDir, gpusched.StateFile), c.runDir)
		if err != nil {
			return c.last
		}
		c.st = st
	}
	cards, _, err := c.st.LoadCards()
	if err != nil {
		return c.last
	}
	m := map[string]int64{}
	for _, card := range cards {
		for _, h := range card.Holders {
			m[h.Task] = h.ChargedMiB()
		}
	}
	c.last = m
	return m
}

func (c *chargeReader) close() {
	if c.st != nil {
		c.st.Close()
	}
}
