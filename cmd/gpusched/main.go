// Command gpusched runs many CPU and NVIDIA-GPU jobs on one machine as a
// dependency graph. See "gpusched --help".
package main

import (
	"os"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/cli"
)

func main() {
	gpusched.SupervisorMain() // the same binary serves as a run directory's supervisor
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
