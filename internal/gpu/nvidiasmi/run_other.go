//go:build !unix

package nvidiasmi

import "os/exec"

// ownGroup leaves cmd as it is: without process groups, cancellation kills
// the process alone.
func ownGroup(*exec.Cmd) {}
