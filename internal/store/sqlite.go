package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/task"

	_ "modernc.org/sqlite" // registers the "sqlite" driver: pure Go, so CGO_ENABLED=0 builds work
	sqlite3 "modernc.org/sqlite/lib"
)

// ApplicationID marks a SQLite file as a gpusched state database ("GPUS").
const ApplicationID = 0x47505553

// ErrNotState is returned when a file exists but is not a gpusched state
// database: not SQLite at all, or SQLite written by another program.
var ErrNotState = errors.New("not a gpusched state database")

// ErrEmpty is returned by OpenSQLiteReadOnly for a database with nothing
// in it yet: a scheduler is creating it.
var ErrEmpty = errors.New("no state yet (a run is starting)")

// ErrTooNew is returned when the database was written by a newer gpusched
// whose schema this one does not know. Nothing is changed.
var ErrTooNew = errors.New("state database is newer than this gpusched")

// SQLite is the store backed by a SQLite database in WAL mode.
type SQLite struct {
	db       *sql.DB
	path     string
	runDir   string // log paths are stored relative to it
	readOnly bool
	id       fileID // the file opened for writing, to tell when it is gone

	// mu guards lite and its statements: the connection is opened
	// without SQLite's own mutex, and a caller other than the engine's
	// loop (a daemon's handler) must not meet the loop inside it.
	mu sync.Mutex
	// lite is the raw connection that reads (Load, LookupTask) and writes
	// (Apply) without database/sql; nil before the store is checked, and
	// once closed. The *sql.DB writes only while migrating, before lite
	// is opened: there is one writer.
	lite *lite
}

var _ Store = (*SQLite)(nil)

// OpenSQLite opens or creates the state database at path for writing,
// migrating its schema to the current version. It refuses, without writing
// anything, a path that is a symbolic link or a special file (as are its
// -wal and -shm companions; ErrUnsafeFile), a file that is not a gpusched
// database (ErrNotState), one newer than this version (ErrTooNew), and a
// damaged one (ErrCorrupt: SQLite's quick_check, which reads every page,
// fails). Log paths are stored relative to runDir.
//
// Apply then fails with ErrGone once the path no longer names the file
// opened here.
func OpenSQLite(path, runDir string) (*SQLite, error) {
	return openSQLite(path, runDir, true)
}

// OpenSQLiteChecked is OpenSQLite without the integrity check, for a
// caller that has just made it with LoadForOpen while holding the run
// directory's lock, so that no other scheduler wrote the file since.
func OpenSQLiteChecked(path, runDir string) (*SQLite, error) {
	return openSQLite(path, runDir, false)
}

// LoadForOpen makes, without writing anything, the checks OpenSQLite
// makes of an existing database before it writes, then reads every task
// with its attempts (Load), with log paths under runDir. It refuses the
// same files with the same errors (ErrUnsafeFile, ErrNotState, ErrTooNew,
// and ErrCorrupt when SQLite's quick_check fails). current is false, and
// nothing is checked or read (rows nil), when the database is not there,
// empty, or of an older schema: OpenSQLite would create or upgrade it,
// which only a caller that may write can do.
//
// It is for a scheduler that holds the run directory's lock and has other
// work to finish before it may change anything (reading its workflow,
// which may turn out invalid): it opens the file for writing only then,
// with OpenSQLiteChecked, and hands the rows to the engine in place of
// reading them again. It reads through a read-only connection, which
// never writes the file, not even the checkpoint of a WAL left by a
// crash, which a writer's close would make.
func LoadForOpen(path, runDir string) (rows []Row, current bool, err error) {
	if err := checkFiles(path); err != nil {
		return nil, false, err
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		return nil, false, nil
	}
	s, err := openReadOnly(path, runDir)
	if err != nil {
		return nil, false, err
	}
	defer s.Close()
	if err := s.checkOwner(); err != nil {
		return nil, false, err
	}
	var v int
	if err := s.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		return nil, false, s.corrupt(fmt.Errorf("read state db %s: %w", path, err))
	}
	if v != len(migrations) { // checkOwner refused a newer one
		return nil, false, nil
	}
	if err := s.quickCheck(); err != nil {
		return nil, false, err
	}
	if s.lite, err = openLite(path, true); err != nil {
		return nil, false, s.corrupt(err)
	}
	if rows, err = s.Load(); err != nil {
		return nil, false, err
	}
	return rows, true, nil
}

// openSQLite is OpenSQLite, with its integrity check when check is set.
func openSQLite(path, runDir string, check bool) (*SQLite, error) {
	if err := checkFiles(path); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path); check && err == nil && fi.Size() > 0 {
		if err := verify(path); err != nil {
			return nil, err
		}
	}
	// busy_timeout and synchronous write nothing to the file, so they can be
	// set before the file is known to be ours. synchronous=NORMAL in WAL mode
	// survives a crash of the process at any moment; an OS crash may lose the
	// last transactions, never consistency.
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_pragma=temp_store(MEMORY)&_pragma=cache_size(-" + strconv.Itoa(cacheKiB) + ")"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open state db %s: %w", path, err)
	}
	// One connection, never closed while the store is open: the scheduler's
	// loop is the only writer, a single connection keeps per-connection
	// pragmas for good, and a connection opened again would create a fresh
	// file where the opened one was deleted.
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	db.SetConnMaxLifetime(0)
	s := &SQLite{db: db, path: path, runDir: runDir}
	if err := s.checkOwner(); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.migrate(); err != nil {
		db.Close()
		return nil, s.corrupt(err)
	}
	if s.lite, err = openLite(path, false); err != nil {
		s.Close()
		return nil, err
	}
	// The writes of every turn, prepared once (preparing a statement
	// costs about as much as running it). Not the 256-row chunk of
	// attempts, which only a turn with as many attempts uses (a rare
	// resume): stmt prepares it at its first use, and its 7,000
	// parameters cost a third of a new file's open to parse.
	for _, q := range []string{upsertTask1, upsertTaskChunk, upsertAttempt1, setMetaSQL, deleteMetaSQL} {
		if _, err := s.lite.stmt(q); err != nil {
			s.Close()
			return nil, fmt.Errorf("prepare state db %s: %w", path, err)
		}
	}
	if s.id, err = identify(path); err != nil {
		s.Close()
		return nil, fmt.Errorf("open state db: %w", err)
	}
	return s, nil
}

// CheckSQLite reports, without writing anything, whether OpenSQLite
// would refuse the state database at path as unsafe (ErrUnsafeFile), not
// gpusched's (ErrNotState) or too new (ErrTooNew), with the same error;
// nil when it is not there yet. It does not run quick_check: a damaged
// database is found only by OpenSQLite. For a command that hands the
// database to another process and wants to refuse before it starts it.
func CheckSQLite(path string) error {
	if err := checkFiles(path); err != nil {
		return err
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		return nil
	}
	s, err := openReadOnly(path, "")
	if err != nil {
		return err
	}
	defer s.Close()
	return s.checkOwner()
}

// verify checks an existing database before it is opened for writing: it
// is ours, not too new, and not damaged. It reads through a read-only
// connection, which never writes the file (a writer's last close would
// checkpoint a leftover WAL into it).
func verify(path string) error {
	s, err := openReadOnly(path, "")
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.checkOwner(); err != nil {
		return err
	}
	return s.quickCheck()
}

// OpenSQLiteReadOnly opens an existing state database for reading, for
// example while a scheduler in another process writes it. It refuses the
// same files as OpenSQLite, except that it does not run quick_check (a
// reader may open the database many times a second); a damaged page met at
// open or by a read gives the same ErrCorrupt error.
func OpenSQLiteReadOnly(path, runDir string) (*SQLite, error) {
	if err := checkFiles(path); err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("open state db: %w", err)
	}
	s, err := openReadOnly(path, runDir)
	if err != nil {
		return nil, err
	}
	if err := s.checkOwner(); err != nil {
		s.Close()
		return nil, err
	}
	var v int
	if err := s.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		s.Close()
		return nil, s.corrupt(fmt.Errorf("read state db %s: %w", path, err))
	}
	switch {
	case v == 0:
		s.Close()
		return nil, fmt.Errorf("read state db %s: %w", path, ErrEmpty)
	case v < len(migrations):
		s.Close()
		return nil, fmt.Errorf("read state db %s: schema version %d is older than this gpusched's %d; run the workflow once to upgrade it", path, v, len(migrations))
	}
	if s.lite, err = openLite(path, true); err != nil {
		s.Close()
		return nil, s.corrupt(err)
	}
	return s, nil
}

func openReadOnly(path, runDir string) (*SQLite, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, fmt.Errorf("open state db %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	return &SQLite{db: db, path: path, runDir: runDir, readOnly: true}, nil
}

// checkOwner refuses files that are not ours before anything is written.
func (s *SQLite) checkOwner() error {
	var appID, version int
	err := s.db.QueryRow("PRAGMA application_id").Scan(&appID)
	if err == nil {
		err = s.db.QueryRow("PRAGMA user_version").Scan(&version)
	}
	if err != nil {
		if sqliteCode(err) == sqlite3.SQLITE_NOTADB {
			return fmt.Errorf("open state db %s: %w (the file is not SQLite; move it away or choose another run directory)", s.path, ErrNotState)
		}
		return s.corrupt(fmt.Errorf("open state db %s: %w", s.path, err))
	}
	switch {
	case appID == ApplicationID && version > len(migrations):
		return fmt.Errorf("open state db %s: %w (schema version %d; this gpusched knows up to %d): upgrade gpusched", s.path, ErrTooNew, version, len(migrations))
	case appID == ApplicationID:
		return nil
	case appID != 0:
		return fmt.Errorf("open state db %s: %w (SQLite application id %#x)", s.path, ErrNotState, appID)
	}
	var tables int
	if err := s.db.QueryRow("SELECT count(*) FROM sqlite_master").Scan(&tables); err != nil {
		return s.corrupt(fmt.Errorf("open state db %s: %w", s.path, err))
	}
	if tables > 0 {
		return fmt.Errorf("open state db %s: %w (a SQLite database of another program)", s.path, ErrNotState)
	}
	return nil
}

// migrations[i] takes the schema from version i to version i+1. Append only.
var migrations = []string{
	`CREATE TABLE tasks (
		id         TEXT PRIMARY KEY,
		seq        INTEGER NOT NULL,
		kind       TEXT NOT NULL,
		spec       TEXT NOT NULL,
		state      TEXT NOT NULL,
		exit_code  INTEGER,
		error      TEXT NOT NULL DEFAULT '',
		blocked_by TEXT NOT NULL DEFAULT '',
		updated_at INTEGER NOT NULL
	);
	CREATE TABLE attempts (
		task_id     TEXT NOT NULL REFERENCES tasks(id),
		number      INTEGER NOT NULL,
		started_at  INTEGER NOT NULL,
		ended_at    INTEGER,
		exit_code   INTEGER,
		signal      TEXT NOT NULL DEFAULT '',
		timed_out   INTEGER NOT NULL DEFAULT 0,
		cancelled   INTEGER NOT NULL DEFAULT 0,
		interrupted INTEGER NOT NULL DEFAULT 0,
		error       TEXT NOT NULL DEFAULT '',
		log_path    TEXT NOT NULL DEFAULT '',
		pid         INTEGER,
		pgid        INTEGER,
		proc_start  INTEGER,
		gpu         INTEGER,
		PRIMARY KEY (task_id, number)
	) WITHOUT ROWID;`,
	// 2: GPU admission: per-attempt card and memory, the request a task
	// grew to after running out of memory, the cards' view, run facts.
	`ALTER TABLE attempts ADD COLUMN gpu_uuid TEXT NOT NULL DEFAULT '';
	ALTER TABLE attempts ADD COLUMN mem_requested INTEGER;
	ALTER TABLE attempts ADD COLUMN mem_peak INTEGER;
	ALTER TABLE tasks ADD COLUMN gpu_request INTEGER;
	CREATE TABLE gpus (
		idx        INTEGER PRIMARY KEY,
		view       TEXT NOT NULL,
		updated_at INTEGER NOT NULL
	);
	CREATE TABLE meta (
		key   TEXT PRIMARY KEY,
		value TEXT NOT NULL
	);`,
	// 3: for reports: when tasks were submitted and attempts became ready,
	// and the cards' memory over time.
	`ALTER TABLE tasks ADD COLUMN submitted_at INTEGER;
	ALTER TABLE attempts ADD COLUMN ready_at INTEGER;
	CREATE TABLE gpu_samples (
		at           INTEGER NOT NULL,
		idx          INTEGER NOT NULL,
		total_mib    INTEGER NOT NULL,
		used_mib     INTEGER NOT NULL,
		foreign_mib  INTEGER NOT NULL,
		observed_mib INTEGER NOT NULL,
		charged_mib  INTEGER NOT NULL,
		capacity_mib INTEGER NOT NULL,
		PRIMARY KEY (at, idx)
	) WITHOUT ROWID;`,
	// 4: resume and recovery: definition fingerprints, artifacts as they
	// were at completion, why a task reruns, and the completion outbox.
	`ALTER TABLE tasks ADD COLUMN fingerprint TEXT NOT NULL DEFAULT '';
	ALTER TABLE tasks ADD COLUMN rerun TEXT NOT NULL DEFAULT '';
	CREATE TABLE artifacts (
		task_id TEXT NOT NULL REFERENCES tasks(id),
		path    TEXT NOT NULL,
		size    INTEGER NOT NULL,
		mtime   INTEGER NOT NULL,
		sha256  TEXT NOT NULL DEFAULT '',
		PRIMARY KEY (task_id, path)
	) WITHOUT ROWID;
	CREATE TABLE events (
		id         INTEGER PRIMARY KEY,
		task_id    TEXT NOT NULL REFERENCES tasks(id),
		attempt    INTEGER NOT NULL,
		created_at INTEGER NOT NULL,
		acked_at   INTEGER,
		tries      INTEGER NOT NULL DEFAULT 0,
		last_error TEXT NOT NULL DEFAULT '',
		next_try   INTEGER
	);
	CREATE INDEX events_pending ON events (id) WHERE acked_at IS NULL;`,
	// 5: retries that wait (retry delay, back-off after a fault of the
	// environment), and attempts whose failure was not the task's own.
	`ALTER TABLE tasks ADD COLUMN retry_at INTEGER;
	ALTER TABLE attempts ADD COLUMN not_charged INTEGER NOT NULL DEFAULT 0;`,
	// 6: each executor's own versioned handle of an attempt, kept as data
	// instead of local-process columns: the pid, pgid and start time that
	// were written become local handles of version 1 (the JSON the local
	// executor writes); pid stays, for people. And attempts adopted by a
	// later scheduler, and how each ended as its executor tells.
	`ALTER TABLE attempts ADD COLUMN handle_executor TEXT NOT NULL DEFAULT '';
	ALTER TABLE attempts ADD COLUMN handle_version INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE attempts ADD COLUMN handle BLOB;
	ALTER TABLE attempts ADD COLUMN adopted INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE attempts ADD COLUMN end_reason TEXT NOT NULL DEFAULT '';
	UPDATE attempts SET handle_executor = 'local', handle_version = 1,
		handle = CAST(json_object('pid', pid, 'pgid', coalesce(pgid, 0), 'start_ticks', coalesce(proc_start, 0)) AS BLOB)
		WHERE pid IS NOT NULL;
	ALTER TABLE attempts DROP COLUMN pgid;
	ALTER TABLE attempts DROP COLUMN proc_start;`,
	// 7: why each pending task waits, as the scheduler's loop decided
	// (its kind's name and a detail for people); empty in rows written
	// before, which no scheduler has decided about since.
	`ALTER TABLE tasks ADD COLUMN waiting_kind TEXT NOT NULL DEFAULT '';
	ALTER TABLE tasks ADD COLUMN waiting TEXT NOT NULL DEFAULT '';`,
	// 8: a task paused (a daemon's pause): not started until resumed,
	// also by a scheduler opened after a crash. 0 in rows written before.
	`ALTER TABLE tasks ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;`,
	// 9: an attempt's job in a batch system (Slurm), as that system last
	// said of it: JSON of task.RemoteJob; '' for attempts run here and in
	// rows written before.
	`ALTER TABLE attempts ADD COLUMN job TEXT NOT NULL DEFAULT '';`,
	// 10: the outbox carries notifications besides completion events:
	// each event has a kind (what delivers it; 'complete' for the rows
	// written before) and a payload, an event about the run or the cards
	// belongs to no task (task_id NULL), and a delivery given up is
	// marked so. SQLite cannot drop a NOT NULL constraint: the table is
	// rebuilt, its rows copied as they are.
	`CREATE TABLE events_v10 (
		id         INTEGER PRIMARY KEY,
		kind       TEXT NOT NULL DEFAULT 'complete',
		task_id    TEXT REFERENCES tasks(id),
		attempt    INTEGER NOT NULL DEFAULT 0,
		created_at INTEGER NOT NULL,
		acked_at   INTEGER,
		tries      INTEGER NOT NULL DEFAULT 0,
		last_error TEXT NOT NULL DEFAULT '',
		next_try   INTEGER,
		payload    TEXT NOT NULL DEFAULT '',
		gave_up    INTEGER NOT NULL DEFAULT 0
	);
	INSERT INTO events_v10 (id, task_id, attempt, created_at, acked_at, tries, last_error, next_try)
		SELECT id, task_id, attempt, created_at, acked_at, tries, last_error, next_try FROM events;
	DROP TABLE events;
	ALTER TABLE events_v10 RENAME TO events;
	CREATE INDEX events_pending ON events (id) WHERE acked_at IS NULL;`,
	// 11: the files a task read (its inputs), as they were when the
	// attempt that completed it started; none for the rows written
	// before, whose tasks had no inputs.
	`CREATE TABLE inputs (
		task_id TEXT NOT NULL REFERENCES tasks(id),
		path    TEXT NOT NULL,
		size    INTEGER NOT NULL,
		mtime   INTEGER NOT NULL,
		sha256  TEXT NOT NULL DEFAULT '',
		PRIMARY KEY (task_id, path)
	) WITHOUT ROWID;`,
	// 12: a blocked task that was not needed (a dependency condition it
	// cannot meet, with no failure behind it: task.Record.NotNeeded). 0
	// in rows written before, which no condition could block so.
	`ALTER TABLE tasks ADD COLUMN not_needed INTEGER NOT NULL DEFAULT 0;`,
	// 13: every card of an attempt on several (resources.gpus), their
	// indices comma-separated in the order chosen; '' for an attempt on
	// one card (gpu says which) or none, and in rows written before.
	`ALTER TABLE attempts ADD COLUMN gpus TEXT NOT NULL DEFAULT '';`,
	// 14: an attempt's host memory budget (resources.memory_mib_host) and
	// the peak resident memory seen of its processes; NULL when none.
	`ALTER TABLE attempts ADD COLUMN host_mem_requested INTEGER;
	ALTER TABLE attempts ADD COLUMN rss_peak INTEGER;`,
}

// SchemaVersion is the schema version this build writes.
func SchemaVersion() int { return len(migrations) }

func (s *SQLite) migrate() error {
	if _, err := s.db.Exec("PRAGMA journal_mode=WAL"); err != nil {
		return fmt.Errorf("set WAL mode on state db %s: %w", s.path, err)
	}
	var version int
	if err := s.db.QueryRow("PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("migrate state db %s: %w", s.path, err)
	}
	if version == len(migrations) {
		return nil
	}
	// The write lock at BEGIN, under the busy timeout. A deferred
	// transaction would read user_version, then ask for the lock, and
	// SQLite answers BUSY at once to a transaction that read before it
	// writes while another connection holds the lock, which a reader does
	// for a moment: the first to open a new WAL database rebuilds its
	// shared-memory index under it (gpusched status polling a run that is
	// starting).
	ctx := context.Background()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate state db %s: %w", s.path, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("migrate state db %s: %w", s.path, err)
	}
	committed := false
	defer func() {
		if !committed {
			conn.ExecContext(ctx, "ROLLBACK")
		}
	}()
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("migrate state db %s: %w", s.path, err)
	}
	switch {
	case version == len(migrations): // another got there first
		return nil
	case version == 0:
		// A new file (checkOwner let through no other at version 0): the
		// current schema in one step, the same as every migration's.
		if _, err := conn.ExecContext(ctx, schema); err != nil {
			return fmt.Errorf("create schema of state db %s: %w", s.path, err)
		}
	default:
		for v := version; v < len(migrations); v++ {
			if _, err := conn.ExecContext(ctx, migrations[v]); err != nil {
				return fmt.Errorf("migrate state db %s to version %d: %w", s.path, v+1, err)
			}
		}
	}
	// PRAGMA takes no bound parameters; both values are our own integers.
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id=%d; PRAGMA user_version=%d", ApplicationID, len(migrations))); err != nil {
		return fmt.Errorf("migrate state db %s: %w", s.path, err)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("migrate state db %s: %w", s.path, err)
	}
	committed = true
	return nil
}

// Rows are written by multi-row upserts of up to chunk rows: one statement
// per row costs more in the driver than in SQLite, and a run submits up to
// 100,000 tasks at once.
const chunk = 256

const taskColumns = 18

func upsertTaskSQL(rows int) string {
	return `INSERT INTO tasks (id, seq, kind, spec, state, exit_code, error, blocked_by, updated_at, gpu_request, submitted_at,
	fingerprint, rerun, retry_at, waiting_kind, waiting, paused, not_needed) VALUES ` +
		placeholders(rows, taskColumns) + `
ON CONFLICT (id) DO UPDATE SET
	seq = excluded.seq, kind = excluded.kind,
	spec = CASE WHEN length(excluded.spec) = 0 THEN tasks.spec ELSE excluded.spec END,
	state = excluded.state, exit_code = excluded.exit_code,
	error = excluded.error, blocked_by = excluded.blocked_by,
	updated_at = excluded.updated_at, gpu_request = excluded.gpu_request,
	submitted_at = coalesce(excluded.submitted_at, tasks.submitted_at),
	fingerprint = CASE WHEN excluded.fingerprint = '' THEN tasks.fingerprint ELSE excluded.fingerprint END,
	rerun = excluded.rerun, retry_at = excluded.retry_at,
	waiting_kind = excluded.waiting_kind, waiting = excluded.waiting, paused = excluded.paused,
	not_needed = excluded.not_needed`
}

const attemptColumns = 27

func upsertAttemptSQL(rows int) string {
	return `INSERT INTO attempts (task_id, number, started_at, ended_at, exit_code, signal,
	timed_out, cancelled, interrupted, error, log_path, pid, handle_executor, handle_version, handle, gpu,
	gpu_uuid, mem_requested, mem_peak, ready_at, not_charged, adopted, end_reason, job, gpus, host_mem_requested, rss_peak) VALUES ` +
		placeholders(rows, attemptColumns) + `
ON CONFLICT (task_id, number) DO UPDATE SET
	started_at = excluded.started_at, ended_at = excluded.ended_at,
	exit_code = excluded.exit_code, signal = excluded.signal,
	timed_out = excluded.timed_out, cancelled = excluded.cancelled,
	interrupted = excluded.interrupted, error = excluded.error,
	log_path = excluded.log_path, pid = excluded.pid, handle_executor = excluded.handle_executor,
	handle_version = excluded.handle_version, handle = excluded.handle, gpu = excluded.gpu,
	gpu_uuid = excluded.gpu_uuid, mem_requested = excluded.mem_requested, mem_peak = excluded.mem_peak,
	ready_at = excluded.ready_at, not_charged = excluded.not_charged, adopted = excluded.adopted,
	end_reason = excluded.end_reason, job = excluded.job, gpus = excluded.gpus,
	host_mem_requested = excluded.host_mem_requested, rss_peak = excluded.rss_peak`
}

// The statements that set and delete a meta key: prepared once, as a turn
// that ends an attempt saves the owners' usage (engine's fair share), and
// preparing the statement cost as much as running it.
const (
	setMetaSQL    = "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
	deleteMetaSQL = "DELETE FROM meta WHERE key = ?"
)

// joinInts writes the cards of an attempt on several as "3,1"; "" for
// none.
func joinInts(v []int) string { return task.CardList(v) }

// splitInts reads what joinInts wrote; nil for "".
func splitInts(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(part)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// placeholders returns "(?,?),(?,?)" for rows rows of cols columns.
func placeholders(rows, cols int) string {
	one := "(" + strings.TrimSuffix(strings.Repeat("?,", cols), ",") + ")"
	return strings.TrimSuffix(strings.Repeat(one+",", rows), ",")
}

// LoadCards returns the saved view of the GPUs, by index, and when it was
// saved.
func (s *SQLite) LoadCards() ([]gpu.CardView, time.Time, error) {
	cards, at, err := s.loadCards()
	return cards, at, s.corrupt(err)
}

func (s *SQLite) loadCards() ([]gpu.CardView, time.Time, error) {
	rows, err := s.db.Query("SELECT view, updated_at FROM gpus ORDER BY idx")
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read gpus from state db %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []gpu.CardView
	var at int64
	for rows.Next() {
		var view []byte
		if err := rows.Scan(&view, &at); err != nil {
			return nil, time.Time{}, fmt.Errorf("read gpus from state db %s: %w", s.path, err)
		}
		var c gpu.CardView
		if err := json.Unmarshal(view, &c); err != nil {
			return nil, time.Time{}, fmt.Errorf("read gpus from state db %s: %w", s.path, err)
		}
		out = append(out, c)
	}
	if at == 0 {
		return out, time.Time{}, rows.Err()
	}
	return out, time.Unix(0, at), rows.Err()
}

// LoadSamples returns the cards' memory over time, oldest first.
func (s *SQLite) LoadSamples() ([]Sample, error) {
	out, err := s.loadSamples()
	return out, s.corrupt(err)
}

func (s *SQLite) loadSamples() ([]Sample, error) {
	rows, err := s.db.Query(`SELECT at, idx, total_mib, used_mib, foreign_mib, observed_mib, charged_mib, capacity_mib
		FROM gpu_samples ORDER BY at, idx`)
	if err != nil {
		return nil, fmt.Errorf("read gpu samples from state db %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []Sample
	for rows.Next() {
		var sm Sample
		var at int64
		if err := rows.Scan(&at, &sm.Index, &sm.TotalMiB, &sm.UsedMiB, &sm.ForeignMiB, &sm.ObservedMiB, &sm.ChargedMiB, &sm.CapacityMiB); err != nil {
			return nil, fmt.Errorf("read gpu samples from state db %s: %w", s.path, err)
		}
		sm.At = time.Unix(0, at)
		out = append(out, sm)
	}
	return out, rows.Err()
}

// CountWaiting returns how many pending tasks wait for each kind of
// reason (NotWaiting: those no scheduler has decided about). It reads
// every task's row: a live display calls it at most every second or so.
func (s *SQLite) CountWaiting() (map[task.WaitKind]int, error) {
	out, err := s.countWaiting()
	return out, s.corrupt(err)
}

func (s *SQLite) countWaiting() (map[task.WaitKind]int, error) {
	// While the saved reasons are an earlier scheduler's
	// (MetaWaitingStale), every pending task counts as not decided about.
	rows, err := s.db.Query(`SELECT CASE WHEN EXISTS (SELECT 1 FROM meta WHERE key = ?) THEN '' ELSE waiting_kind END AS k, count(*)
		FROM tasks WHERE state = ? GROUP BY k`, MetaWaitingStale, task.Pending.String())
	if err != nil {
		return nil, fmt.Errorf("read waiting tasks from state db %s: %w", s.path, err)
	}
	defer rows.Close()
	out := map[task.WaitKind]int{}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			return nil, fmt.Errorf("read waiting tasks from state db %s: %w", s.path, err)
		}
		k, err := task.ParseWaitKind(name)
		if err != nil {
			return nil, fmt.Errorf("read waiting tasks from state db %s: %w", s.path, err)
		}
		out[k] = n
	}
	return out, rows.Err()
}

// LoadMeta returns the run-wide facts.
func (s *SQLite) LoadMeta() (map[string]string, error) {
	out, err := s.loadMeta()
	return out, s.corrupt(err)
}

func (s *SQLite) loadMeta() (map[string]string, error) {
	rows, err := s.db.Query("SELECT key, value FROM meta")
	if err != nil {
		return nil, fmt.Errorf("read meta from state db %s: %w", s.path, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("read meta from state db %s: %w", s.path, err)
		}
		out[k] = v
	}
	return out, rows.Err()
}

// LookupMeta reads the value saved for key.
func (s *SQLite) LookupMeta(key string) (string, bool, error) {
	var v string
	switch err := s.db.QueryRow("SELECT value FROM meta WHERE key = ?", key).Scan(&v); {
	case errors.Is(err, sql.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, s.corrupt(fmt.Errorf("read meta %q from state db %s: %w", key, s.path, err))
	}
	return v, true, nil
}

// PendingEvents returns the events not yet acknowledged, oldest first,
// and the largest event id used.
func (s *SQLite) PendingEvents() ([]EventWrite, int64, error) {
	var maxID sql.NullInt64
	if err := s.db.QueryRow("SELECT max(id) FROM events").Scan(&maxID); err != nil {
		return nil, 0, s.corrupt(fmt.Errorf("read events from state db %s: %w", s.path, err))
	}
	pending, err := s.events("WHERE acked_at IS NULL")
	return pending, maxID.Int64, s.corrupt(err)
}

// Events returns every outbox event, oldest first.
func (s *SQLite) Events() ([]EventWrite, error) {
	out, err := s.events("")
	return out, s.corrupt(err)
}

func (s *SQLite) events(where string) ([]EventWrite, error) {
	rows, err := s.db.Query("SELECT id, kind, task_id, attempt, created_at, acked_at, tries, last_error, next_try, payload, gave_up FROM events " + where + " ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("read events from state db %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []EventWrite
	for rows.Next() {
		var ev EventWrite
		var created int64
		var acked, next sql.NullInt64
		var taskID sql.NullString
		var payload string
		if err := rows.Scan(&ev.ID, &ev.Kind, &taskID, &ev.Attempt, &created, &acked, &ev.Tries, &ev.LastError, &next, &payload, &ev.GaveUp); err != nil {
			return nil, fmt.Errorf("read events from state db %s: %w", s.path, err)
		}
		ev.TaskID = taskID.String
		if payload != "" {
			ev.Payload = []byte(payload)
		}
		ev.Created = time.Unix(0, created)
		if acked.Valid {
			ev.Acked = time.Unix(0, acked.Int64)
		}
		if next.Valid {
			ev.NextTry = time.Unix(0, next.Int64)
		}
		out = append(out, ev)
	}
	return out, rows.Err()
}

// Close closes the database; the WAL is checkpointed by SQLite.
func (s *SQLite) Close() error {
	var err error
	s.mu.Lock()
	if s.lite != nil {
		err = s.lite.close()
		s.lite = nil
	}
	s.mu.Unlock()
	return errors.Join(err, s.db.Close())
}

func (s *SQLite) relLog(p string) string {
	if p == "" || s.runDir == "" {
		return p
	}
	if rel, err := filepath.Rel(s.runDir, p); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return p
}

func (s *SQLite) absLog(p string) string {
	if p == "" || filepath.IsAbs(p) || s.runDir == "" {
		return p
	}
	return filepath.Join(s.runDir, p)
}

func nullInt(n sql.NullInt64) *int {
	if !n.Valid {
		return nil
	}
	v := int(n.Int64)
	return &v
}
