// Package report turns a run's recorded state into one self-contained HTML
// page: a timeline of every attempt (one lane per card and per CPU slot),
// each card's memory over time, and a table of the tasks.
//
// The package is pure: Build computes a Model from plain Data (the rows,
// cards and memory samples the state database holds) and Write renders it;
// neither touches a database or the clock, so tests need neither. The page
// has no external references: its CSS, SVG and a few lines of JavaScript (to
// sort the table, optional) are inline, so it works offline and can be
// mailed or archived as a single file.
//
// Where things are:
//
//   - data.go: Data, what a report is made from;
//   - model.go: Model and Build, which puts the parts together;
//   - runs.go: where each run on the run directory began and ended;
//   - timeline.go: the timeline's lanes and bars;
//   - memory.go: the memory charts;
//   - table.go: the task table;
//   - axis.go: time axes and positions on them;
//   - format.go: durations, sizes and text for people;
//   - write.go and report.html.tmpl: the page.
package report
