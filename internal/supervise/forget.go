package supervise

// forgetBatch is how many forgotten ends Executor.Forget gathers before it
// sends them: one message, and one line in the results file, per batch
// rather than per attempt.
const forgetBatch = 64

// maxForgets bounds the ends kept while no supervisor is connected; more
// are dropped, which only keeps their records longer.
const maxForgets = 1 << 16

// Forget tells the supervisor that the end of the attempt named by token,
// whose leading process was pid (0: unknown, or it never ran), is
// committed to the scheduler's state, so that its record in the results
// file may go when the file is compacted (see compact.go). Call it only
// once the end is durable: a record forgotten too early is an end lost
// if the scheduler dies. The pid keeps a later attempt with the same
// token from losing its record to an earlier one's forget. Ends are sent
// in batches, the last ones by Close; Forget never blocks on the
// supervisor and never starts one.
func (e *Executor) Forget(token string, pid int) {
	if token == "" {
		return
	}
	e.fmu.Lock()
	if len(e.forgets.IDs) < maxForgets {
		e.forgets.IDs = append(e.forgets.IDs, token)
		e.forgets.PIDs = append(e.forgets.PIDs, pid)
	}
	full := len(e.forgets.IDs) >= forgetBatch
	e.fmu.Unlock()
	if full {
		go e.flushForgets()
	}
}

// forgotten is a batch of ends that Forget gathered: the ids, and the
// PID of each.
type forgotten struct {
	IDs  []string
	PIDs []int
}

// flushForgets sends the ends gathered by Forget, when a supervisor is
// connected; otherwise they wait for the next connection.
func (e *Executor) flushForgets() {
	e.mu.Lock()
	c := e.c
	e.mu.Unlock()
	if c == nil {
		return
	}
	e.fmu.Lock()
	f := e.forgets
	e.forgets = forgotten{}
	e.fmu.Unlock()
	if len(f.IDs) > 0 {
		c.send(&message{Type: msgForget, IDs: f.IDs, PIDs: f.PIDs})
	}
}
