package nvidiasmi

import (
	"os"
	"path/filepath"
	"testing"
)

func seedCaptures(f *testing.F) {
	f.Helper()
	files, err := filepath.Glob(filepath.Join(captures, "*.txt"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no captures in %s: %v", captures, err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(gpuHeader + "0, GPU-a, X, 100 MiB, 10 MiB, 90 MiB\r\n1, GPU-b, Y, [N/A], 0, ERR!"))
	f.Add([]byte("pid, process_name, gpu_uuid, used_memory [MiB]\n1, a, b, GPU-a, [N/A]\n"))
}

func FuzzParseGPUs(f *testing.F) {
	seedCaptures(f)
	f.Fuzz(func(t *testing.T, out []byte) {
		gpus, problems := ParseGPUs(out)
		for _, g := range gpus {
			if !g.Usable() {
				continue
			}
			if !g.Total.Known || !g.Free.Known {
				t.Fatalf("usable card with unknown memory: %+v", g)
			}
			if g.Free.MiB < 0 || g.Free.MiB > g.Total.MiB {
				t.Fatalf("usable card with free outside [0, total]: %+v", g)
			}
			if g.Index < 0 || g.UUID == "" {
				t.Fatalf("usable card with unknown identity: %+v", g)
			}
			if u := g.Unavailable(); !u.Known || u.MiB != g.Total.MiB-g.Free.MiB {
				t.Fatalf("Unavailable() = %v for %+v", u, g)
			}
		}
		for _, p := range problems {
			if p.NamesCard() && p.Line == 0 {
				t.Fatalf("problem names a card without a line: %+v", p)
			}
		}
	})
}

func FuzzParseApps(f *testing.F) {
	seedCaptures(f)
	f.Fuzz(func(t *testing.T, out []byte) {
		apps, _ := ParseApps(out)
		for _, a := range apps {
			if a.Used.Known && a.Used.MiB < 0 {
				t.Fatalf("negative memory: %+v", a)
			}
			if a.PID < 0 {
				t.Fatalf("negative pid: %+v", a)
			}
		}
	})
}
