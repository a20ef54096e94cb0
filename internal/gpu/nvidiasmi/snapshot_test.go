package nvidiasmi

import (
	"os"
	"slices"
	"testing"
	"time"
)

func TestConvert(t *testing.T) {
	gpus := []byte("index, uuid, name, memory.total [MiB], memory.used [MiB], memory.free [MiB]\n" +
		"0, GPU-aaa, NVIDIA H100, 81559 MiB, 1200 MiB, 79800 MiB\n" +
		"2, GPU-ccc, NVIDIA H100, 81559 MiB, [N/A], [N/A]\n" +
		"Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error\n")
	apps, err := os.ReadFile("../../../testdata/nvidia-smi/rtx4080super-load-query-compute-apps-csv.txt")
	if err != nil {
		t.Fatal(err)
	}
	g, gp := ParseGPUs(gpus)
	a, ap := ParseApps(apps)
	lin := func(pid int) (int, []int) { return pid + 1, []int{pid + 2} }
	s := convert(Snapshot{GPUs: g, Apps: a, Problems: append(gp, ap...)}, time.Unix(5, 0), lin)
	if len(s.Cards) != 2 {
		t.Fatalf("cards = %+v", s.Cards)
	}
	if c := s.Cards[0]; c.Index != 0 || c.UUID != "GPU-aaa" || c.TotalMiB != 81559 || c.FreeMiB != 79800 || c.Problem != "" {
		t.Errorf("card 0 = %+v", c)
	}
	if c := s.Cards[1]; c.Index != 2 || c.Problem == "" {
		t.Errorf("card 2 = %+v, want a problem (memory unreadable)", c)
	}
	if len(s.Lost) != 1 || s.Lost[0].Index != 1 || s.Lost[0].BusID != "0000:34:00.0" {
		t.Errorf("lost = %+v", s.Lost)
	}
	var pids []int
	for _, p := range s.Procs {
		pids = append(pids, p.PID)
		if p.PGID != p.PID+1 || !slices.Equal(p.Ancestors, []int{p.PID + 2}) || p.UsedMiB <= 0 {
			t.Errorf("proc = %+v", p)
		}
	}
	if !slices.Equal(pids, []int{2165, 5022, 5021}) {
		t.Errorf("pids = %v", pids)
	}
}

func TestLineageOfThisProcess(t *testing.T) {
	pgid, anc := lineage(os.Getpid())
	if pgid <= 0 {
		t.Errorf("pgid = %d", pgid)
	}
	if len(anc) == 0 || anc[0] != os.Getppid() {
		t.Errorf("ancestors = %v, want the parent %d first", anc, os.Getppid())
	}
}
