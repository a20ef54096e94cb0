package store

// schema creates, in one step, the schema that migrations build one
// version at a time: a new state database runs it instead of every
// migration (parsing and running 14 migrations, each ALTER TABLE reloading
// the schema, was some 4 ms of a run's start-up). Its text is what SQLite
// keeps in sqlite_master after the last migration, byte for byte (the
// columns that ALTER TABLE added appended where SQLite appends them, the
// table that migration 10 rebuilt under its quoted name), so a database
// created new and one migrated from the first version cannot be told
// apart: TestSchemaIsMigrated compares them. A new migration changes it
// too; that test prints what it must become.
const schema = `
CREATE TABLE tasks (
		id         TEXT PRIMARY KEY,
		seq        INTEGER NOT NULL,
		kind       TEXT NOT NULL,
		spec       TEXT NOT NULL,
		state      TEXT NOT NULL,
		exit_code  INTEGER,
		error      TEXT NOT NULL DEFAULT '',
		blocked_by TEXT NOT NULL DEFAULT '',
		updated_at INTEGER NOT NULL
	, gpu_request INTEGER, submitted_at INTEGER, fingerprint TEXT NOT NULL DEFAULT '', rerun TEXT NOT NULL DEFAULT '', retry_at INTEGER, waiting_kind TEXT NOT NULL DEFAULT '', waiting TEXT NOT NULL DEFAULT '', paused INTEGER NOT NULL DEFAULT 0, not_needed INTEGER NOT NULL DEFAULT 0);
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
		gpu         INTEGER, gpu_uuid TEXT NOT NULL DEFAULT '', mem_requested INTEGER, mem_peak INTEGER, ready_at INTEGER, not_charged INTEGER NOT NULL DEFAULT 0, handle_executor TEXT NOT NULL DEFAULT '', handle_version INTEGER NOT NULL DEFAULT 0, handle BLOB, adopted INTEGER NOT NULL DEFAULT 0, end_reason TEXT NOT NULL DEFAULT '', job TEXT NOT NULL DEFAULT '', gpus TEXT NOT NULL DEFAULT '', host_mem_requested INTEGER, rss_peak INTEGER,
		PRIMARY KEY (task_id, number)
	) WITHOUT ROWID;
CREATE TABLE gpus (
		idx        INTEGER PRIMARY KEY,
		view       TEXT NOT NULL,
		updated_at INTEGER NOT NULL
	);
CREATE TABLE meta (
		key   TEXT PRIMARY KEY,
		value TEXT NOT NULL
	);
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
	) WITHOUT ROWID;
CREATE TABLE artifacts (
		task_id TEXT NOT NULL REFERENCES tasks(id),
		path    TEXT NOT NULL,
		size    INTEGER NOT NULL,
		mtime   INTEGER NOT NULL,
		sha256  TEXT NOT NULL DEFAULT '',
		PRIMARY KEY (task_id, path)
	) WITHOUT ROWID;
CREATE TABLE "events" (
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
CREATE INDEX events_pending ON events (id) WHERE acked_at IS NULL;
CREATE TABLE inputs (
		task_id TEXT NOT NULL REFERENCES tasks(id),
		path    TEXT NOT NULL,
		size    INTEGER NOT NULL,
		mtime   INTEGER NOT NULL,
		sha256  TEXT NOT NULL DEFAULT '',
		PRIMARY KEY (task_id, path)
	) WITHOUT ROWID;
`
