// Package executortest is the conformance suite of executor.Executor, in
// two parts.
//
// # Run: what every executor passes
//
// Run holds an executor to the contract of package executor, observed
// only through its interface and the files its jobs write: exit codes
// and signals as end reasons, the environment and working directory
// exactly as given, logs (stdout and stderr, appended, never written
// through a planted link), start failures and whose fault they are, the
// two hooks, stopping a job (cancel with its grace, kill now, the job's
// timeout counted from when it runs) and, after the scheduler is
// restarted, Recover: adopting what still runs, reporting what ended, and
// stopping what cannot be known. A Harness says how to make the executor,
// what a restart means for it and whether its attempts outlive one.
//
// # RunLocal: what only a local executor passes
//
// RunLocal looks at this machine's processes: a job's process group,
// processes that left it (found by the attempt's token in /proc), a
// cgroup of the attempt's own where the executor makes one, and that a
// job's processes, wherever they went, are gone after its end and after
// Recover.
//
// Both need the cmd/sleeper helper binary (Harness.Sleeper). A test in
// another package wires them in a few lines:
//
//	func TestConformance(t *testing.T) {
//		h := executortest.Harness{
//			New:     func(*testing.T) executor.Executor { return &local.Executor{} },
//			Sleeper: sleeper, // testbin.MustBuild("cmd/sleeper") in TestMain
//		}
//		executortest.Run(t, h)
//		executortest.RunLocal(t, h)
//	}
package executortest
