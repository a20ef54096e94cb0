// Package fakegpu is a pretend GPU machine for tests on hosts without an
// NVIDIA GPU. Its state (cards, the processes holding memory on them, and
// a failure mode) lives in a JSON file named by $FAKE_GPU_STATE; the
// fake-nvidia-smi binary reports that state the way nvidia-smi would, and
// fake-gpu-job processes allocate and free memory in it.
//
// Every change is a read-modify-write under an exclusive flock on a sibling
// lock file (path + ".lock"), and the file is replaced atomically (temp file
// and rename), so concurrent jobs never lose each other's updates and a
// reader never sees half a file. Processes that have died are ignored when
// the state is reported or checked for room, as the real driver frees a
// process's memory when it exits.
package fakegpu
