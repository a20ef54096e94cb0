// Package task holds gpusched's data model: what a task is (Spec), the states
// it moves through (State), and what happened to it (Record, Attempt). The
// public package re-exports these types under the names users know
// (gpusched.TaskSpec, gpusched.Record, ...); the engine, the store and the
// executors share them so that no layer converts between copies.
//
// The package also owns the checks that need nothing but a single spec, and
// the sentinel and typed errors that validation reports.
package task
