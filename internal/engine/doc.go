// Package engine is gpusched's scheduling loop. One goroutine, the loop,
// owns every task's state, the ready queue and the count of running
// attempts. Everything else reaches it through events on one channel: API
// calls (submit, cancel, records, run) carry a reply channel; workers report
// that an attempt started and that it ended.
//
// Each turn of the loop applies a batch of events, asks decide (a pure
// function of a View) which ready tasks to start, writes every resulting
// transition to the store in one transaction, and only then acts: launches
// workers, answers callers, notifies the observer. A crash therefore never
// leaves an action without its record.
//
// Task life cycle (see docs/states.md):
//
//	pending ──start──▶ running ──exit 0──▶ complete
//	   ▲                  │
//	   └──retry left──────┤ failed / timed out
//	                      ├──no retry left──▶ failed ──▶ dependents blocked
//	                      └──cancelled──────▶ cancelled ──▶ dependents blocked
package engine
