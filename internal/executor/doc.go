// Package executor defines how an attempt of a task is carried out: the
// Executor interface, the Job it runs and the Result it reports. Package
// local runs jobs as process groups on this machine; package slurm runs each
// as a Slurm batch job. Every backend passes the same conformance suite,
// executortest.Run.
package executor
