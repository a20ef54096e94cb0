// Package gpu decides where GPU tasks may run. It reads the machine through
// a Probe (package nvidiasmi is the real one), keeps a Board: per card, the
// memory each of our running tasks is charged, what processes that are not
// ours hold, cooldowns, failures and quarantines; and it answers, as pure
// functions over CardView values, whether a task fits on a card (Fit), on
// which cards a task that takes several fits (FitSet: all at once, the
// closest set by the Topology that `nvidia-smi topo -m` describes), which
// cards a starving task reserves (Reserve, ReserveSet), and why a task
// does not fit (Explain).
//
// The charge of a running task is the larger of what it asked for and what
// its processes are seen to use. Memory on a card that no task of ours
// accounts for is foreign and is respected. A card's capacity is its total
// memory less a safety margin; a task fits when its request is at most
// capacity - foreign - charges. Nothing here runs concurrently: the engine's
// loop owns the Board.
package gpu
