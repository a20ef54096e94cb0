// Package nvidiasmi reads the state of the machine's NVIDIA GPUs by running
// nvidia-smi and parsing its CSV output.
//
// The scheduler asks two questions (see GPUQuery and AppsQuery): which cards
// exist with how much memory, and which compute processes hold memory on
// them. ParseGPUs and ParseApps turn the answers into values without doing
// any I/O; Probe runs the commands with a timeout and returns a Snapshot or
// an error. Once per run the scheduler also asks how the cards are
// connected (`nvidia-smi topo -m`, TopoArgs): ParseTopo reads the matrix
// into a gpu.Topology, and Probe.Topology runs it.
//
// The package never guesses in the scheduler's favour. A cell it cannot read
// ([N/A], ERR!, an empty cell, a number it cannot parse) is unknown, never
// zero; a card whose total or free memory is unknown is kept but marked
// unusable with the reason; a line that is not a row (an error message such
// as "Unable to determine the device handle for GPU1: ...") becomes a
// Problem naming the card when the line names one; and a run that printed
// no table at all is an error, never an empty "all free" snapshot.
package nvidiasmi
