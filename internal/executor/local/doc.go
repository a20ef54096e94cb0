// Package local runs jobs as subprocesses of the scheduler. Each attempt is
// the leader of its own process group; stopping it signals the whole group,
// so grandchildren go too, even those that ignore SIGTERM.
//
// When the leader exits, whatever is left in its group is killed at once:
// an attempt ends with nothing of it running. A process that must outlive
// its task has to leave the group itself (setsid).
package local
