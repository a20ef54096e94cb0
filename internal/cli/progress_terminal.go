package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/gpusched/gpusched"
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
	frameInterval = 100 * time.Millisecond // snapshots taken at most this often
	displayFPS    = 20                     // Bubble Tea's cap on redraws
)

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

	// ticks, when set (tests), says when to take a frame instead of a
	// ticker of frameInterval.
	ticks <-chan time.Time
	// charges and waits, when set before begin (a run through the daemon),
	// read the GPU charges and the waiting reasons in place of the run
	// directory's state database. Used by drive's goroutine only.
	charges chargeSource
	waits   waitSource

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
	charges, waits := d.charges, d.waits
	if charges == nil {
		charges = &chargeReader{runDir: d.runDir}
	}
	defer charges.close()
	if waits == nil {
		waits = &waitReader{runDir: d.runDir}
	}
	defer waits.close()
	ticks := d.ticks
	if ticks == nil {
		tick := time.NewTicker(frameInterval)
		defer tick.Stop()
		ticks = tick.C
	}
	for {
		select {
		case <-ticks:
			d.frame(charges, waits)
		case <-d.stopReq:
			d.frame(charges, waits)
			d.prog.Quit() // draws the last frame, shows the cursor
			<-ran
			return
		case <-ran:
			// The program could not run on this output; keep the lines
			// that matter coming, plainly.
			for {
				select {
				case <-ticks:
					d.writePlain()
				case <-d.stopReq:
					d.writePlain()
					return
				}
			}
		}
	}
}

func (d *liveDisplay) frame(charges chargeSource, waits waitSource) {
	now := time.Now()
	d.mu.Lock()
	f := d.st.frame(now, d.start)
	lines := d.st.takeLines()
	d.mu.Unlock()
	if f.gpuRunning() {
		f.charged = charges.read(now)
	}
	if f.counts[gpusched.StatePending] > 0 {
		f.waits = waits.read(now)
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
