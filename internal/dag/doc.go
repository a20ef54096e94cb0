// Package dag checks task dependency graphs: duplicate ids, dependencies on
// tasks that do not exist, and cycles, reported with the typed errors of
// package task. Graphs grow by batches: a batch may depend on itself and on
// tasks already accepted, while accepted tasks never gain dependencies, so a
// new cycle can only lie inside the batch.
//
// CheckBatch stops at the first problem, for submitting; Check finds them
// all, for telling a person everything wrong with a file in one go.
package dag
