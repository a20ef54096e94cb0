package report

import (
	"time"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/store"
)

// Data is what a report is made from, as plain values: the CLI reads it
// from the state database, tests write it by hand.
type Data struct {
	// RunDir names the run in the header.
	RunDir string
	// Rows are the run's tasks with their attempts, in submission order.
	Rows []store.Row
	// Cards is the last saved view of the GPUs (names, sizes); may be empty.
	Cards []gpu.CardView
	// Samples are the cards' memory over time, oldest first.
	Samples []store.Sample
	// GPUUnknown says why the GPU state could not be read, while it could not.
	GPUUnknown string
	// Live is set when a scheduler is using the run directory: attempts
	// without an end are running, and are drawn up to Now. Otherwise such
	// attempts were interrupted (the scheduler died), and are drawn up to
	// the last moment the run recorded anything.
	Live bool
	// Now is when the data was read.
	Now time.Time
	// Location is the time zone of clock times; nil means time.Local.
	Location *time.Location
}

// spec is the part of a task's stored definition the report uses.
type spec struct {
	Resources struct {
		Device    string `json:"device"`
		MemoryMiB int64  `json:"memory_mib"`
	} `json:"resources"`
}
