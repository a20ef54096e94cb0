// Package store keeps a run's durable state: every task's definition, state
// and attempts. The engine writes each batch of transitions in one
// transaction (Apply) before it acts on them, and reads everything back when
// a run resumes (Load).
//
// SQLite (pure Go, WAL) is the real implementation: one writer, the
// scheduler, and any number of read-only readers such as `gpusched status`.
// Memory is an in-process implementation for tests, and Failing wraps
// another store to make writes fail on demand.
package store
