// Package budget chooses the memory budget of a task that asks for it to
// be learned from history (memory_mib: auto), and proposes budgets for
// tasks that set their own (gpusched suggest).
//
// # The rule
//
// The budget is the largest peak the task reached in its last Window
// attempts of the same definition (ended, not cancelled, with a peak
// seen), plus a margin of MarginPercent of that peak and at least
// MinMarginMiB, rounded up to a multiple of StepMiB. It is capped by
// memory_mib_max when the task sets one, and by the largest card's
// capacity when the cards are known. With no such attempt, the budget is
// memory_mib_max, else DefaultMiB (capped by the cards). When an earlier
// attempt ran out of memory and its budget grew above all that, the grown
// budget stands (the scheduler's ordinary out-of-memory growth).
//
// "The same definition" is the task's definition without its budget
// (Identity): switching a task from a fixed budget to auto, or changing
// its memory_mib_max, keeps what was learned; changing its command, env,
// dir or artifacts starts over.
//
// # Resources
//
// The helpers take the Resource whose peaks they read: GPUMemory
// (memory_mib: auto, from the attempts' GPU memory peaks) and HostMemory
// (memory_mib_host: auto, from their peak RSS, sampled while they run).
// Both follow the same rule; host memory's maximum is
// memory_mib_host_max, its machine limit the host memory the scheduler
// gives tasks in all, and its first budget DefaultHostMiB.
package budget
