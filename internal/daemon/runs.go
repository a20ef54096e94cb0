package daemon

import (
	"cmp"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver, as the state database's

	"github.com/gpusched/gpusched"
)

// RunsFile, in the state directory, holds the runs: who submitted what,
// when, from where. The tasks themselves are in the scheduler's state.db.
const RunsFile = "runs.db"

// A run is written to runs.db, and committed, before its tasks are
// submitted to the scheduler: a task never exists without its run (and
// so without its owner). A crash in between leaves a run whose tasks are
// not in the state database: the next daemon shows them failed, saying
// why (markUnqueued).

// run is one submission. Its fields are fixed once it is made, except
// tasks' command and dir, filled once (at submit, or from the state
// database at start).
type run struct {
	id      int64
	uid     int
	user    string
	kind    string // client.KindCommand or client.KindWorkflow
	name    string
	created time.Time
	dir     string
	key     string // the submitter's idempotency key, "" if none
	tasks   []taskMeta
}

// taskMeta is what the daemon keeps of a task of a run: what the queue
// shows of it besides its record.
type taskMeta struct {
	inner   string   // the task's id within its run
	command []string // the argv; for the owner's eyes only
	dir     string
	deps    []string // the scheduler's ids of what it waits for
	// on gives the conditions of deps other than success, by id; nil
	// when all are success.
	on map[string]gpusched.DependencyCondition
	// gpuAuto, hostAuto: its GPU, host memory budget is learned from
	// history; the queue says which it is (queuebudget.go).
	gpuAuto, hostAuto bool
}

// runs are the daemon's runs, in memory and in runs.db. Writes are
// committed by one goroutine, many at a time (group commit).
type runs struct {
	db     *sql.DB
	writes chan *runWrite

	sending sync.RWMutex // held to send on writes (read) and to close it (write)
	closed  bool         // guarded by sending

	mu    sync.Mutex // guards the fields below
	byID  map[int64]*run
	byKey map[string]*run // "uid:key"
	order []*run          // by id
	next  int64
}

type runWrite struct {
	r      *run
	delete bool
	reply  chan error
}

// openRuns opens (creating) the state directory's runs.db and loads it.
func openRuns(stateDir string) (*runs, error) {
	path := filepath.Join(stateDir, RunsFile)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, fmt.Errorf("open runs %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	rs := &runs{db: db, writes: make(chan *runWrite, 1024), byID: map[int64]*run{}, byKey: map[string]*run{}, next: 1}
	if err := rs.load(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open runs %s: %w", path, err)
	}
	go rs.writer()
	return rs, nil
}

const runsSchema = `CREATE TABLE IF NOT EXISTS runs (
	id INTEGER PRIMARY KEY,
	uid INTEGER NOT NULL,
	user TEXT NOT NULL,
	kind TEXT NOT NULL,
	name TEXT NOT NULL,
	created INTEGER NOT NULL,
	dir TEXT NOT NULL,
	key TEXT NOT NULL,
	tasks TEXT NOT NULL
)`

func (rs *runs) load() error {
	if _, err := rs.db.Exec(runsSchema); err != nil {
		return err
	}
	rows, err := rs.db.Query(`SELECT id, uid, user, kind, name, created, dir, key, tasks FROM runs ORDER BY id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		r := &run{}
		var created int64
		var tasks string
		if err := rows.Scan(&r.id, &r.uid, &r.user, &r.kind, &r.name, &created, &r.dir, &r.key, &tasks); err != nil {
			return err
		}
		r.created = time.Unix(0, created)
		var inner []string
		if err := json.Unmarshal([]byte(tasks), &inner); err != nil {
			return fmt.Errorf("run %d: tasks: %w", r.id, err)
		}
		r.tasks = make([]taskMeta, len(inner))
		for i, id := range inner {
			r.tasks[i].inner = id
		}
		rs.add(r)
		rs.next = max(rs.next, r.id+1)
	}
	return rows.Err()
}

// add indexes r. With mu held (or before the writer starts).
func (rs *runs) add(r *run) {
	rs.byID[r.id] = r
	if r.key != "" {
		rs.byKey[keyOf(r.uid, r.key)] = r
	}
	rs.order = append(rs.order, r)
}

func keyOf(uid int, key string) string { return strconv.Itoa(uid) + ":" + key }

// withKey returns the run uid made earlier with key, or nil.
func (rs *runs) withKey(uid int, key string) *run {
	if key == "" {
		return nil
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.byKey[keyOf(uid, key)]
}

// reserve returns the next run's number, never given again.
func (rs *runs) reserve() int64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	id := rs.next
	rs.next++
	return id
}

// save saves r, numbered by reserve and complete, and indexes it; or
// returns the run made meanwhile with the same uid and key (made false).
func (rs *runs) save(r *run) (got *run, made bool, err error) {
	if old := rs.withKey(r.uid, r.key); old != nil {
		return old, false, nil
	}
	if err := rs.write(&runWrite{r: r}); err != nil {
		return nil, false, fmt.Errorf("save run %d: %w", r.id, err)
	}
	rs.mu.Lock()
	if old := rs.byKey[keyOf(r.uid, r.key)]; r.key != "" && old != nil {
		rs.mu.Unlock()
		// The same key raced in: keep the first, forget this one.
		return old, false, rs.write(&runWrite{r: r, delete: true})
	}
	rs.add(r)
	rs.mu.Unlock()
	return r, true, nil
}

// remove forgets a run whose tasks could not be submitted.
func (rs *runs) remove(r *run) error {
	rs.mu.Lock()
	if rs.byID[r.id] == r {
		delete(rs.byID, r.id)
		if r.key != "" && rs.byKey[keyOf(r.uid, r.key)] == r {
			delete(rs.byKey, keyOf(r.uid, r.key))
		}
		for i, x := range rs.order {
			if x == r {
				rs.order = append(rs.order[:i:i], rs.order[i+1:]...)
				break
			}
		}
	}
	rs.mu.Unlock()
	return rs.write(&runWrite{r: r, delete: true})
}

// errRunsClosed: the daemon is stopping.
var errRunsClosed = errors.New("the daemon is stopping")

// write hands w to the writer and waits for its commit.
func (rs *runs) write(w *runWrite) error {
	w.reply = make(chan error, 1)
	rs.sending.RLock()
	if rs.closed {
		rs.sending.RUnlock()
		return errRunsClosed
	}
	rs.writes <- w
	rs.sending.RUnlock()
	return <-w.reply
}

// get returns run id, or nil.
func (rs *runs) get(id int64) *run {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.byID[id]
}

// all returns the runs, by id.
func (rs *runs) all() []*run {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]*run(nil), rs.order...)
}

// adopt indexes a run found in the state database without a record in
// runs.db (a crash of an older version, or a file removed): owned by
// uid, the daemon's.
func (rs *runs) adopt(id int64, uid int, user string) *run {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r := rs.byID[id]; r != nil {
		return r
	}
	r := &run{id: id, uid: uid, user: user, kind: "unknown", name: "(no record)"}
	rs.byID[id] = r
	rs.order = insertRun(rs.order, r)
	rs.next = max(rs.next, id+1)
	return r
}

// insertRun puts r into rs, which is sorted by id, in its place: at the
// end (no search) when its id is the largest, as runs found in the state
// database in id order are.
func insertRun(rs []*run, r *run) []*run {
	if len(rs) == 0 || rs[len(rs)-1].id < r.id {
		return append(rs, r)
	}
	i, _ := slices.BinarySearchFunc(rs, r.id, func(x *run, id int64) int { return cmp.Compare(x.id, id) })
	return slices.Insert(rs, i, r)
}

// writer commits the writes that are queued, all in one transaction.
func (rs *runs) writer() {
	for w := range rs.writes {
		batch := []*runWrite{w}
	drain:
		for len(batch) < 512 {
			select {
			case w, ok := <-rs.writes:
				if !ok {
					break drain
				}
				batch = append(batch, w)
			default:
				break drain
			}
		}
		err := rs.commit(batch)
		for _, w := range batch {
			w.reply <- err
		}
	}
}

func (rs *runs) commit(batch []*runWrite) error {
	tx, err := rs.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, w := range batch {
		r := w.r
		if w.delete {
			if _, err := tx.Exec(`DELETE FROM runs WHERE id = ?`, r.id); err != nil {
				return err
			}
			continue
		}
		inner := make([]string, len(r.tasks))
		for i, t := range r.tasks {
			inner[i] = t.inner
		}
		tasks, _ := json.Marshal(inner)
		if _, err := tx.Exec(`INSERT INTO runs (id, uid, user, kind, name, created, dir, key, tasks) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.id, r.uid, r.user, r.kind, r.name, r.created.UnixNano(), r.dir, r.key, string(tasks)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// close stops the writer and closes runs.db.
func (rs *runs) close() error {
	rs.sending.Lock()
	if !rs.closed {
		rs.closed = true
		close(rs.writes)
	}
	rs.sending.Unlock()
	return rs.db.Close()
}
