package cli

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/procfs"
	"github.com/gpusched/gpusched/internal/store"
	"github.com/gpusched/gpusched/internal/task"
)

// What the read-only commands (status, gpus, logs, report) read of a run:
// its state database through a read-only connection, and whether a
// scheduler holds the run directory.

// runView is what status and gpus show: a run's tasks, cards and facts,
// read through a read-only connection.
type runView struct {
	dir      string
	now      time.Time // when it was read
	pid      int       // the running scheduler, 0 if none
	rows     []store.Row
	specs    []specView // of rows[i], at i
	cards    []gpu.CardView
	cardsAt  time.Time
	unknown  string                        // why the GPU state cannot be read
	topology string                        // why the cards' topology could not be read, if it could not
	gpuTasks bool                          // the run has GPU tasks
	pending  map[string][]store.EventWrite // completion events not yet delivered, by task
	// fates, while no scheduler runs: what the next run would do with each
	// task recorded running (adopt it, record its end, run it again).
	fates map[string]gpusched.RunningFate
}

// specView is what status shows of a task's definition: its fields of
// gpusched.TaskSpec, under the same names (TestSpecViewKeepsTaskSpecNames).
// Decoding these alone from 100,000 stored definitions costs about half
// of decoding them whole with encoding/json, and specDecoder a tenth of
// that again (BenchmarkDecodeSpecView).
type specView struct {
	Dependencies []string                                `json:"dependencies,omitempty"`
	DependencyOn map[string]gpusched.DependencyCondition `json:"dependency_on,omitempty"`
	Priority     int                                     `json:"priority,omitempty"`
	Resources    gpusched.ResourceRequest                `json:"resources,omitzero"`
}

// withState opens a run's state database read-only and calls fn with it.
// A database a run is still creating holds nothing yet: fn is not called.
// Errors come back classified for exit codes.
func withState(dir string, fn func(st *store.SQLite) error) error {
	path, err := statePath(dir)
	if err != nil {
		return err
	}
	st, err := store.OpenSQLiteReadOnly(path, dir)
	if errors.Is(err, store.ErrEmpty) {
		return nil
	}
	if err != nil {
		return err
	}
	defer st.Close()
	if err := fn(st); err != nil {
		return err
	}
	return nil
}

// loadRows reads a run's tasks.
func loadRows(dir string) (rows []store.Row, err error) {
	err = withState(dir, func(st *store.SQLite) error {
		rows, err = st.Load()
		return err
	})
	return rows, err
}

// loadRun reads everything status shows of a run.
func loadRun(dir string) (*runView, error) {
	v := &runView{dir: dir, now: time.Now(), pid: schedulerPID(dir), pending: map[string][]store.EventWrite{}}
	if err := withState(dir, v.read); err != nil {
		return nil, err
	}
	if v.pid == 0 && slices.ContainsFunc(v.rows, func(r store.Row) bool { return r.State == task.Running }) {
		v.fates, _ = gpusched.RunningFates(dir) // a note for people: without it, none
	}
	return v, nil
}

func (v *runView) read(st *store.SQLite) (err error) {
	if v.rows, err = st.Load(); err != nil {
		return err
	}
	if v.cards, v.cardsAt, v.unknown, v.topology, err = loadCards(st); err != nil {
		return err
	}
	events, err := st.Events()
	if err != nil {
		return err
	}
	for _, ev := range events {
		if ev.Acked.IsZero() {
			v.pending[ev.TaskID] = append(v.pending[ev.TaskID], ev)
		}
	}
	v.specs = make([]specView, len(v.rows))
	var dec specDecoder
	for i := range v.rows {
		sp := &v.specs[i]
		dec.decode(v.rows[i].Spec, sp)
		v.gpuTasks = v.gpuTasks || sp.Resources.GPU()
	}
	return nil
}

// loadCards reads the saved view of the cards, when it was saved, why
// the GPU state is unknown, if it is, and why the cards' topology could
// not be read, if it could not.
func loadCards(st *store.SQLite) (cards []gpu.CardView, at time.Time, unknown, topology string, err error) {
	if cards, at, err = st.LoadCards(); err != nil {
		return nil, at, "", "", err
	}
	meta, err := st.LoadMeta()
	return cards, at, meta[store.MetaGPUUnknown], meta[store.MetaGPUTopology], err
}

// pendingEvents counts the completion events not delivered yet.
func pendingEvents(dir string) (n int, err error) {
	err = withState(dir, func(st *store.SQLite) error {
		pending, _, err := st.PendingEvents()
		n = len(pending)
		return err
	})
	return n, err
}

// schedulerPID returns the PID of the scheduler using the run directory, or
// 0 if none is running: the PID the lock file names, if that process lives.
func schedulerPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, gpusched.LockFile))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	if !procfs.Alive(pid) {
		return 0
	}
	return pid
}
