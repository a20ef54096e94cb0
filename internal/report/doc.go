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
package report
