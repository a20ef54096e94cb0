package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// "gpusched status --watch": the status table, again every interval, until
// Ctrl-C or until the run is over (no scheduler holds the run directory),
// when the final state is printed once.
//
// On a terminal the table is redrawn in place, full screen (the alternate
// screen, as watch(1) and top do), and the final state is printed on the
// normal screen when it ends. Elsewhere (a pipe, a file) a new full table
// is printed every interval, after a blank line, without escape codes.

func watchStatus(ctx context.Context, w, errw io.Writer, dir string, every time.Duration) error {
	v, err := loadRun(dir)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if isTerminal(w) {
		return watchTerminal(ctx, w, dir, every, v)
	}
	writeStatusTable(w, v, time.Now(), 0)
	for v.pid != 0 {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
		nv, err := loadRun(dir)
		if err != nil {
			fmt.Fprintln(errw, "gpusched: "+oneLine(err.Error()))
			continue
		}
		v = nv
		fmt.Fprintln(w)
		writeStatusTable(w, v, time.Now(), 0)
	}
	return nil
}

func watchTerminal(ctx context.Context, w io.Writer, dir string, every time.Duration, v *runView) error {
	frame := func(v *runView, problem string) watchMsg {
		return watchMsg{at: time.Now(), every: every, view: v, problem: problem}
	}
	prog := tea.NewProgram(watchModel{msg: frame(v, "")},
		tea.WithOutput(w),
		tea.WithInput(nil),         // Ctrl-C stays a signal
		tea.WithoutSignalHandler(), // handled here
		tea.WithFPS(displayFPS))
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		_, _ = prog.Run() // restores the terminal however it ends
	}()
loop:
	for v.pid != 0 {
		select {
		case <-ctx.Done():
			break loop
		case <-ran:
			break loop
		case <-time.After(every):
		}
		nv, err := loadRun(dir)
		if err != nil {
			prog.Send(frame(v, oneLine(err.Error())))
			continue
		}
		v = nv
		prog.Send(frame(v, ""))
	}
	prog.Quit()
	<-ran
	// Back on the normal screen: the last state, once, in full.
	writeStatusTable(w, v, time.Now(), 0)
	return nil
}

// watchModel shows the last status table, cut to the terminal's height.
type watchModel struct {
	msg           watchMsg
	width, height int
}

// watchMsg is a reading of the run for the watch screen. The view is not
// changed after it is sent; the model draws it for the terminal's width.
type watchMsg struct {
	at      time.Time
	every   time.Duration
	view    *runView
	problem string // why the state could not be read this time
}

func (m watchModel) Init() tea.Cmd { return nil }

func (m watchModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case watchMsg:
		m.msg = msg
	}
	return m, nil
}

func (m watchModel) View() tea.View {
	head := fmt.Sprintf("gpusched status, every %s: %s (Ctrl-C to stop)", m.msg.every, m.msg.at.Format(time.TimeOnly))
	if m.msg.problem != "" {
		head += "\ncannot read the state now, showing the last: " + printable(m.msg.problem)
	}
	var table bytes.Buffer
	if m.msg.view != nil {
		writeStatusTable(&table, m.msg.view, m.msg.at, m.width)
	}
	lines := append(strings.Split(head, "\n"), "")
	lines = append(lines, strings.Split(strings.TrimRight(table.String(), "\n"), "\n")...)
	if m.height > 0 && len(lines) > m.height {
		cut := len(lines) - (m.height - 1)
		lines = append(lines[:m.height-1], fmt.Sprintf("… %d more lines: enlarge the terminal, or see gpusched status", cut))
	}
	if m.width > 0 {
		// What still does not fit (the cards' table) is cut where it
		// shows, rather than wherever the terminal cuts it.
		for i, l := range lines {
			lines[i] = ansi.Truncate(strings.TrimRight(printable(l), " "), m.width, "…")
		}
	}
	v := tea.NewView(strings.Join(lines, "\n"))
	v.AltScreen = true
	v.DisableBracketedPasteMode = true // no input is read
	return v
}
