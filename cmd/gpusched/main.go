// Command gpusched runs many CPU and NVIDIA-GPU jobs on one machine as a
// dependency graph. See "gpusched --help".
package main

import (
	"os"

	"github.com/gpusched/gpusched/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
