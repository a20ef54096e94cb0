// Package cli is the gpusched command: its subcommands, their flags and
// output, and the one place where errors become exit codes (0 every task
// completed, 1 something failed or could not be done, 2 invalid input:
// nothing ran).
package cli
