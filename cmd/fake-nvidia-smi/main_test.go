package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gpusched/gpusched/internal/gpu"
	"github.com/gpusched/gpusched/internal/gpu/fakegpu"
	"github.com/gpusched/gpusched/internal/gpu/nvidiasmi"
)

func writeState(t *testing.T, s fakegpu.State) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.json")
	if err := fakegpu.Save(path, s); err != nil {
		t.Fatal(err)
	}
	return path
}

const gpuQuery = "--query-gpu=index,uuid,name,memory.total,memory.used,memory.free"

func TestRun(t *testing.T) {
	me := os.Getpid()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	machine := fakegpu.State{
		Cards: []fakegpu.Card{
			{Index: 0, UUID: "GPU-a", Name: "NVIDIA H200", TotalMiB: 143771, ForeignMiB: 1000, ReservedMiB: 614},
			{Index: 1, UUID: "GPU-b", TotalMiB: 24576, BusID: "00000000:34:00.0"},
		},
		Processes: []fakegpu.Process{
			{PID: me, GPUUUID: "GPU-a", UsedMiB: 2000, Name: "python train.py, fold 1"},
			{PID: gone.Process.Pid, GPUUUID: "GPU-a", UsedMiB: 5000}, // dead: not reported
			{PID: me, GPUUUID: "GPU-b", UsedMiB: 10},
		},
	}
	lost, na := machine, machine
	lost.Mode, lost.Cards = fakegpu.ModeLostCard, []fakegpu.Card{machine.Cards[0], machine.Cards[1]}
	lost.Cards[1].Lost = true
	na.Mode, na.Cards = fakegpu.ModeNA, []fakegpu.Card{machine.Cards[0], machine.Cards[1]}
	na.Cards[0].NA = true
	pid := strconv.Itoa(me)

	tests := []struct {
		name       string
		args       []string
		state      string // "" means unset
		wantOut    string
		wantErr    string
		wantStatus int
	}{
		{
			name:  "gpus csv",
			args:  []string{gpuQuery, "--format=csv"},
			state: writeState(t, machine),
			wantOut: "index, uuid, name, memory.total [MiB], memory.used [MiB], memory.free [MiB]\n" +
				"0, GPU-a, NVIDIA H200, 143771 MiB, 3000 MiB, 140157 MiB\n" +
				"1, GPU-b, NVIDIA Fake GPU, 24576 MiB, 10 MiB, 24566 MiB\n",
		},
		{
			name:  "gpus nounits, reordered, extra fields, separate flag value",
			args:  []string{"--query-gpu", "memory.free,pci.bus_id,memory.reserved,index", "--format", "csv,nounits"},
			state: writeState(t, machine),
			wantOut: "memory.free [MiB], pci.bus_id, memory.reserved [MiB], index\n" +
				"140157, 00000000:01:00.0, 614, 0\n" +
				"24566, 00000000:34:00.0, 0, 1\n",
		},
		{
			name:    "gpus noheader nounits",
			args:    []string{"--query-gpu=index,memory.free", "--format=csv,noheader,nounits"},
			state:   writeState(t, machine),
			wantOut: "0, 140157\n1, 24566\n",
		},
		{
			name:  "apps csv",
			args:  []string{"--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv"},
			state: writeState(t, machine),
			wantOut: "pid, gpu_uuid, used_memory [MiB]\n" +
				pid + ", GPU-a, 2000 MiB\n" +
				pid + ", GPU-b, 10 MiB\n",
		},
		{
			name:  "apps with names and the other spelling",
			args:  []string{"--query-compute-apps=pid,process_name,used_gpu_memory", "--format=csv,noheader"},
			state: writeState(t, machine),
			wantOut: pid + ", python train.py, fold 1, 2000 MiB\n" +
				pid + ", [N/A], 10 MiB\n",
		},
		{
			name:       "lost card",
			args:       []string{gpuQuery, "--format=csv,noheader"},
			state:      writeState(t, lost),
			wantOut:    "0, GPU-a, NVIDIA H200, 143771 MiB, 3000 MiB, 140157 MiB\n",
			wantErr:    "Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error\n",
			wantStatus: 15,
		},
		{
			name:       "lost card hides its processes",
			args:       []string{"--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader"},
			state:      writeState(t, lost),
			wantOut:    pid + ", GPU-a, 2000 MiB\n",
			wantErr:    "Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error\n",
			wantStatus: 15,
		},
		{
			name:  "na card",
			args:  []string{gpuQuery, "--format=csv,noheader,nounits"},
			state: writeState(t, na),
			wantOut: "0, GPU-a, NVIDIA H200, [N/A], [N/A], [N/A]\n" +
				"1, GPU-b, NVIDIA Fake GPU, 24576, 10, 24566\n",
		},
		{
			name:    "na card apps",
			args:    []string{"--query-compute-apps=pid,used_memory", "--format=csv,noheader"},
			state:   writeState(t, na),
			wantOut: pid + ", [N/A]\n" + pid + ", 10 MiB\n",
		},
		{
			name:       "driver failure mode",
			args:       []string{gpuQuery, "--format=csv"},
			state:      writeState(t, fakegpu.State{Mode: fakegpu.ModeDriverFailure}),
			wantOut:    fakegpu.DriverFailureMessage + "\n",
			wantStatus: 9,
		},
		{
			name:       "no state variable",
			args:       []string{gpuQuery, "--format=csv"},
			wantOut:    fakegpu.DriverFailureMessage + "\n",
			wantStatus: 9,
		},
		{
			name:       "missing state file",
			args:       []string{gpuQuery, "--format=csv"},
			state:      filepath.Join(t.TempDir(), "none.json"),
			wantOut:    fakegpu.DriverFailureMessage + "\n",
			wantStatus: 9,
		},
		{
			name:       "unknown field",
			args:       []string{"--query-gpu=index,fan.speed", "--format=csv"},
			state:      writeState(t, machine),
			wantErr:    "fake-nvidia-smi: field \"fan.speed\" is not a valid field to query\n",
			wantStatus: 2,
		},
		{
			name:       "no format",
			args:       []string{gpuQuery},
			state:      writeState(t, machine),
			wantErr:    "fake-nvidia-smi: bad --format \"\": want csv[,noheader][,nounits]\n",
			wantStatus: 2,
		},
		{
			name:       "no query",
			args:       []string{"--format=csv"},
			wantErr:    "fake-nvidia-smi: only --query-gpu=... and --query-compute-apps=... are faked\n",
			wantStatus: 2,
		},
		{
			name:       "both queries",
			args:       []string{gpuQuery, "--query-compute-apps=pid", "--format=csv"},
			wantErr:    "fake-nvidia-smi: give one of --query-gpu and --query-compute-apps\n",
			wantStatus: 2,
		},
		{
			name:       "topo -m of a state that gives one, as it is",
			args:       []string{"topo", "-m"},
			state:      writeState(t, fakegpu.State{Cards: machine.Cards, Topology: "\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\t X \n"}),
			wantOut:    "\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\t X \n",
			wantStatus: 0,
		},
		{
			name:       "topo -m in driver failure mode",
			args:       []string{"topo", "-m"},
			state:      writeState(t, fakegpu.State{Mode: fakegpu.ModeDriverFailure}),
			wantOut:    fakegpu.DriverFailureMessage + "\n",
			wantStatus: 9,
		},
		{
			name:       "topo without -m",
			args:       []string{"topo", "-p2p", "r"},
			wantErr:    "fake-nvidia-smi: only topo -m is faked, not \"topo -p2p r\"\n",
			wantStatus: 2,
		},
		{
			name:       "positional argument",
			args:       []string{gpuQuery, "--format=csv", "extra"},
			wantStatus: 2,
			wantErr:    "fake-nvidia-smi: unexpected argument \"extra\"\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			status := run(tt.args, tt.state, &out, &errb)
			if status != tt.wantStatus || out.String() != tt.wantOut || errb.String() != tt.wantErr {
				t.Errorf("status %d\nstdout %q\nstderr %q\nwant %d\n%q\n%q",
					status, out.String(), errb.String(), tt.wantStatus, tt.wantOut, tt.wantErr)
			}
		})
	}
}

func TestRunUnknownFlag(t *testing.T) {
	var out, errb bytes.Buffer
	if status := run([]string{"--query-gpu=index", "--format=csv", "--loop=1"}, "", &out, &errb); status != 2 ||
		errb.String() != "fake-nvidia-smi: flag provided but not defined: -loop\n" {
		t.Errorf("status %d, stderr %q", status, errb.String())
	}
}

func TestRunCorruptState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if status := run([]string{gpuQuery, "--format=csv"}, path, &out, &errb); status != 1 || out.Len() != 0 {
		t.Errorf("status %d, stdout %q, stderr %q", status, out.String(), errb.String())
	}
}

// Without a topology in the state, topo -m prints a matrix of the cards,
// every pair PHB apart, that the real probe's parser reads.
func TestTopoDefaultParses(t *testing.T) {
	var out, errb bytes.Buffer
	state := writeState(t, fakegpu.State{Cards: []fakegpu.Card{{Index: 0, UUID: "GPU-a"}, {Index: 1, UUID: "GPU-b"}, {Index: 2, UUID: "GPU-c"}}})
	if status := run([]string{"topo", "-m"}, state, &out, &errb); status != 0 {
		t.Fatalf("status %d, stderr %q", status, errb.String())
	}
	topo, err := nvidiasmi.ParseTopo(out.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if topo.Cards() != 3 || topo.Link(0, 2) != gpu.LinkPHB || topo.Link(1, 1) != gpu.LinkSelf {
		t.Errorf("topology:\n%s", topo)
	}
}
