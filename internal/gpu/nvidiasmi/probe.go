package nvidiasmi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/gpusched/gpusched/internal/elide"
)

// The two questions the scheduler asks nvidia-smi. Both use --format=csv:
// a header (so columns are found by name) and values with units.
const (
	// GPUQuery lists the cards with their memory.
	GPUQuery = "--query-gpu=index,uuid,name,memory.total,memory.used,memory.free"
	// AppsQuery lists the compute processes and the memory they hold.
	AppsQuery = "--query-compute-apps=pid,gpu_uuid,used_memory"
	// Format is the output format both queries use.
	Format = "--format=csv"
)

// EnvBin names the environment variable that, when set and non-empty,
// gives the nvidia-smi binary to run instead of the one on PATH.
const EnvBin = "GPUSCHED_NVIDIA_SMI"

// DefaultTimeout bounds each nvidia-smi run when Probe.Timeout is zero.
const DefaultTimeout = 10 * time.Second

var (
	// ErrNotFound means there is no nvidia-smi to run: not on PATH, or
	// $GPUSCHED_NVIDIA_SMI names a file that is missing or not executable.
	ErrNotFound = errors.New("nvidia-smi not found")
	// ErrTimeout means nvidia-smi did not finish within the probe's
	// timeout and was killed; its answer is unknown.
	ErrTimeout = errors.New("nvidia-smi timed out")
	// ErrBadOutput means nvidia-smi printed no table the probe can read:
	// an error message alone, no header, or no card rows.
	ErrBadOutput = errors.New("nvidia-smi printed no usable table")
)

// Bin returns the nvidia-smi to run: $GPUSCHED_NVIDIA_SMI when it is set
// and non-empty, else nvidia-smi found on PATH. When neither gives an
// executable file the error wraps ErrNotFound and mentions
// GPUSCHED_NVIDIA_SMI.
func Bin() (string, error) {
	if v := os.Getenv(EnvBin); v != "" {
		p, err := exec.LookPath(v)
		if err != nil {
			return "", fmt.Errorf("%w: %s=%s: %w", ErrNotFound, EnvBin, elide.Quote(v), err)
		}
		return p, nil
	}
	p, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return "", fmt.Errorf("%w on PATH (set %s to its path)", ErrNotFound, EnvBin)
	}
	return p, nil
}

// RunFunc runs bin with args and returns what it printed. It must stop the
// command when ctx is done. A non-nil error means the command failed (for
// example a non-zero exit); the output is returned with it when there is
// any, so that the caller can quote it.
type RunFunc func(ctx context.Context, bin string, args ...string) (stdout []byte, err error)

// maxOutput bounds what ExecRun keeps of each stream.
const maxOutput = 4 << 20

// ExecRun is the RunFunc that runs a real command. It starts the command in
// its own process group and, when ctx is done, kills the whole group (a
// hung nvidia-smi may have children holding its pipes). It returns what the
// command wrote to stdout followed by what it wrote to stderr, so that error
// lines nvidia-smi prints on stderr (a lost card) reach the parser. A
// non-zero exit is returned as the *exec.ExitError.
func ExecRun(ctx context.Context, bin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	stdout := &capWriter{max: maxOutput}
	stderr := &capWriter{max: maxOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	ownGroup(cmd)
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	out := stdout.buf.Bytes()
	if stderr.buf.Len() > 0 {
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		out = append(out, stderr.buf.Bytes()...)
	}
	return out, err
}

// capWriter keeps the first max bytes written to it and drops the rest.
type capWriter struct {
	buf bytes.Buffer
	max int
}

func (w *capWriter) Write(p []byte) (int, error) {
	if room := w.max - w.buf.Len(); room > 0 {
		w.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// Snapshot is one reading of the machine's cards and of the compute
// processes on them.
type Snapshot struct {
	GPUs     []GPU     // every card row, usable or not, in output order
	Apps     []App     // every compute process, in output order
	Problems []Problem // lines that were not rows, from both queries
}

// Probe asks nvidia-smi about the machine's GPUs. The zero value is ready
// to use: it runs the nvidia-smi that Bin finds, with DefaultTimeout, via
// ExecRun.
type Probe struct {
	Bin     string        // nvidia-smi to run; "" means Bin()
	Timeout time.Duration // bound on each nvidia-smi run; 0 means DefaultTimeout
	Run     RunFunc       // how to run it; nil means ExecRun
}

// Query runs GPUQuery and AppsQuery and returns the cards and processes.
//
// It returns an error, never a snapshot, when nvidia-smi cannot be found,
// times out (the error wraps ErrTimeout and says after how long), exits
// non-zero, or prints no readable table (ErrBadOutput); the error quotes
// the first line nvidia-smi printed. The one exception is partial output:
// when a card is lost nvidia-smi prints an error line naming it and rows
// for the other cards, and may exit non-zero; Query then returns the rows
// it read, with problems naming the lost card and the exit status.
func (p *Probe) Query(ctx context.Context) (Snapshot, error) {
	bin, err := p.bin()
	if err != nil {
		return Snapshot{}, err
	}
	var snap Snapshot

	// The processes are read first, then the cards. A job that allocates in
	// between shows in the cards' free memory but not among the processes,
	// so it counts as foreign for one reading: too little room, never too
	// much. The other order would count it as ours while the card's free
	// memory does not show it yet, and promise its memory twice.
	at, appsErr := p.ask(ctx, bin, appsSpec, AppsQuery)
	if appsErr != nil && (ctx.Err() != nil || errors.Is(appsErr, ErrTimeout)) {
		// Stopped, or hung: a hung nvidia-smi hangs for the cards too, and
		// waiting out a second timeout would only delay the answer.
		return Snapshot{}, appsErr
	}
	// When both fail, the cards' error says more (a lost card, the driver).
	gt, err := p.ask(ctx, bin, gpuSpec, GPUQuery)
	if err != nil {
		return Snapshot{}, err
	}
	snap.GPUs = gt.gpus()
	snap.Problems = append(snap.Problems, gt.problems...)
	if len(snap.GPUs) == 0 {
		return Snapshot{}, fmt.Errorf("nvidia-smi %s: %w: no card rows: %s", gpuSpec.source, ErrBadOutput, firstProblem(gt))
	}
	if appsErr != nil {
		return Snapshot{}, appsErr
	}
	snap.Apps = at.apps()
	snap.Problems = append(snap.Problems, at.problems...)
	return snap, nil
}

// bin is the nvidia-smi the probe runs.
func (p *Probe) bin() (string, error) {
	if p.Bin != "" {
		return p.Bin, nil
	}
	return Bin()
}

// timeout is how long one call of nvidia-smi may take.
func (p *Probe) timeout() time.Duration {
	if p.Timeout <= 0 {
		return DefaultTimeout
	}
	return p.Timeout
}

// call runs bin with args under the probe's timeout; timedOut says that
// this timeout, not ctx, ended it.
func (p *Probe) call(ctx context.Context, bin string, args ...string) (out []byte, timedOut bool, err error) {
	run := p.Run
	if run == nil {
		run = ExecRun
	}
	qctx, cancel := context.WithTimeout(ctx, p.timeout())
	defer cancel()
	out, err = run(qctx, bin, args...)
	return out, err != nil && ctx.Err() == nil && errors.Is(qctx.Err(), context.DeadlineExceeded), err
}

// ask runs one query and parses its output into a table with a header.
func (p *Probe) ask(ctx context.Context, bin string, spec tableSpec, query string) (*table, error) {
	out, timedOut, err := p.call(ctx, bin, query, Format)
	t := parseTable(out, spec)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("nvidia-smi %s: %w", spec.source, ctx.Err())
		case timedOut:
			return nil, fmt.Errorf("%w after %s (%s query)", ErrTimeout, p.timeout(), spec.source)
		case t.headerLine > 0 && namesCard(t.problems):
			// A lost card: keep what the other cards said.
			t.problems = append(t.problems, Problem{Source: spec.source, GPUIndex: -1,
				Msg: "nvidia-smi reported a failure: " + err.Error()})
			return t, nil
		}
		return nil, fmt.Errorf("nvidia-smi %s: %w: %s", spec.source, err, firstLine(out))
	}
	if t.headerLine == 0 {
		return nil, fmt.Errorf("nvidia-smi %s: %w: %s", spec.source, ErrBadOutput, firstLine(out))
	}
	return t, nil
}

func namesCard(ps []Problem) bool {
	for _, p := range ps {
		if p.NamesCard() {
			return true
		}
	}
	return false
}

// firstLine returns the first non-blank line of out, quoted and cut as
// quoteText does (nvidia-smi may print anything: binary junk, a line of
// a megabyte), or a note that there was no output.
func firstLine(out []byte) string {
	for len(out) > 0 {
		line := out
		if i := bytes.IndexByte(out, '\n'); i >= 0 {
			line, out = out[:i], out[i+1:]
		} else {
			out = nil
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			return quoteText(string(line))
		}
	}
	return "(no output)"
}

// firstProblem describes why a table with a header gave no cards: the
// first line that was not a row, else "header only".
func firstProblem(t *table) string {
	for _, p := range t.problems {
		if p.Text != "" {
			return quoteText(p.Text)
		}
	}
	if len(t.problems) > 0 {
		return t.problems[0].Msg
	}
	return "header only"
}
