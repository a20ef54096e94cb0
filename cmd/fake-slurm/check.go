package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// What "gpusched slurm check" asks besides the executor's calls:
// scontrol ping and sinfo (one format); sacct is in main.go. Their
// answers copy the captures in internal/executor/slurm/testdata
// (scontrol-ping-*.txt, sinfo-node.txt, sinfo-down.stderr,
// sacct-disabled.stderr).

// sinfoFormat is the only format the fake's sinfo knows.
const sinfoFormat = "%R|%P|%a|%l|%N|%c|%m|%G|%t|%f"

// defaultNodes is the fake's cluster when $FAKE_SLURM_DIR/nodes does
// not say otherwise: one node with two untyped GPUs in the default
// partition, debug, as the local test cluster has.
const defaultNodes = "debug|debug*|up|infinite|fake1|2|21694|gpu:2|idle|(null)\n"

// nodeLines are the cluster's nodes, one line per node and partition in
// sinfoFormat: the file nodes, or defaultNodes.
func nodeLines() []string {
	b, err := os.ReadFile(filepath.Join(dir, "nodes"))
	if err != nil {
		b = []byte(defaultNodes)
	}
	var lines []string
	for l := range strings.Lines(string(b)) {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// knownPartition reports whether sbatch takes partition p: one of the
// nodes' partitions.
func knownPartition(p string) bool {
	for _, l := range nodeLines() {
		if name, _, _ := strings.Cut(l, "|"); name == p {
			return true
		}
	}
	return false
}

// whenDown answers the calls that real Slurm answers without a
// controller, as it does; it reports whether it answered.
func whenDown(name string, args []string) bool {
	switch {
	case name == "scontrol" && len(args) == 1 && args[0] == "ping":
		// stdout, and exit 1 (scontrol-ping-down.txt)
		fmt.Print("Slurmctld(primary) at fake1 is DOWN\n*****************************************\n" +
			"** RESTORE SLURMCTLD DAEMON TO SERVICE **\n*****************************************\n")
		os.Exit(1)
	case name == "sinfo":
		fmt.Fprintln(os.Stderr, "slurm_load_partitions: Unable to contact slurm controller (connect failure)")
		os.Exit(1)
	}
	return false
}

func ping() {
	fmt.Println("Slurmctld(primary) at fake1 is UP")
}

func sinfo(args []string) {
	o, _ := opts(args)
	if _, ok := o["Node"]; !ok || o["format"] != sinfoFormat {
		fail("sinfo", "fake-slurm knows --Node --format="+sinfoFormat+" only")
	}
	var want []string
	if p := o["partition"]; p != "" {
		want = strings.Split(p, ",")
	}
	if _, ok := o["noheader"]; !ok {
		fmt.Println("PARTITION|PARTITION|AVAIL|TIMELIMIT|NODELIST|CPUS|MEMORY|GRES|STATE|AVAIL_FEATURES")
	}
	for _, l := range nodeLines() {
		if name, _, _ := strings.Cut(l, "|"); want == nil || slices.Contains(want, name) {
			fmt.Println(l)
		}
	}
}

// controlFile is the content of the control file name, trimmed; "" when
// there is none.
func controlFile(name string) string {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
