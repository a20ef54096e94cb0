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
	full := false
	if n := len(e.forgets.IDs); n < maxForgets {
		e.forgets.IDs = append(e.forgets.IDs, token)
		e.forgets.PIDs = append(e.forgets.PIDs, pid)
		// Once a batch is full: not again for each end after it while
		// no supervisor is connected to take them.
		full = (n+1)%forgetBatch == 0
	}
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

// Sweep tells the supervisor which attempts the scheduler's state still
// shows running, all of them (their tokens): the records of every other
// attempt, written before, are no longer needed, their ends being
// committed (or never to be asked for), and may go when the results file
// is compacted. It catches the ends a scheduler committed without
// forgetting them (it exited without Close). Call it once the state is
// loaded and before any attempt starts, holding the run directory's
// lock, with every attempt of this run directory the state shows
// running: an attempt left out loses its record. It is sent at once when
// a supervisor runs, else before anything else once one is connected.
func (e *Executor) Sweep(running []string) {
	e.fmu.Lock()
	e.sweep = append(make([]string, 0, len(running)), running...)
	e.fmu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c == nil {
		c, err := e.connect(false)
		if err != nil {
			return // none runs: sent by register when one is connected
		}
		e.c = c
	}
	e.sendSweep(e.c)
}

// sendSweep sends the ids Sweep was given, if not sent yet, on c.
func (e *Executor) sendSweep(c *conn) {
	e.fmu.Lock()
	ids := e.sweep
	e.sweep = nil
	e.fmu.Unlock()
	if ids != nil {
		c.send(&message{Type: msgSweep, IDs: ids})
	}
}
