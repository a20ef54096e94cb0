package fakegpu

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// The kinds of Event a fake job records.
const (
	EventStart = "start" // the job got its memory
	EventGrow  = "grow"  // the job took more memory
	EventOOM   = "oom"   // an allocation was refused
	EventEnd   = "end"   // the job gave its memory back and is exiting
)

// Event is one line of a fake job's --record file. Jobs append events
// while they hold the state lock, so the order of lines is the order in
// which the state changed, across all jobs sharing a record file.
type Event struct {
	Time  time.Time `json:"time"`
	Kind  string    `json:"event"` // EventStart, EventGrow, EventOOM or EventEnd
	PID   int       `json:"pid"`
	GPU   string    `json:"gpu,omitempty"` // card uuid; "" for a job without a GPU
	Index int       `json:"index"`         // card index; -1 for a job without a GPU

	// MemMiB is what the job holds after a start or grow, what it asked
	// for on oom, and what it gave back on end.
	MemMiB int64 `json:"mem_mib"`
	// FreeMiB is the card's free memory just before the event, as the
	// job saw it under the lock.
	FreeMiB  int64 `json:"free_mib"`
	TotalMiB int64 `json:"total_mib"`

	Exit   int    `json:"exit"`             // exit status, on end
	Signal string `json:"signal,omitempty"` // e.g. "terminated", on an end caused by a signal
}

// AppendEvent appends e to path as one JSON line, creating the file.
func AppendEvent(path string, e Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("record event: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("record event: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("record event: %w", err)
	}
	return nil
}

// ReadEvents returns the events recorded in path, in order.
func ReadEvents(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	defer f.Close()
	var events []Event
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("read events: %s line %d: %w", path, line, err)
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	return events, nil
}
