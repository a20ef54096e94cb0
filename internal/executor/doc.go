// Package executor defines how an attempt of a task is carried out: the
// Executor interface, the Job it runs and the Result it reports. Package
// local runs jobs as process groups on this machine; other backends (Slurm)
// implement the same interface and pass the same conformance suite,
// executortest.Run.
package executor
