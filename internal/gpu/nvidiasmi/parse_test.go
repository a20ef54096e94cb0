package nvidiasmi

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// captures is where the real nvidia-smi outputs live (see SOURCES.md there).
const captures = "../../../testdata/nvidia-smi"

func readCapture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(captures, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// prob is the part of a Problem the tests pin down.
type prob struct {
	Line     int
	Msg      string
	GPUIndex int
	BusID    string
}

func probs(ps []Problem) []prob {
	var out []prob
	for _, p := range ps {
		out = append(out, prob{p.Line, p.Msg, p.GPUIndex, p.BusID})
	}
	return out
}

const (
	zeroUUID     = "GPU-00000000-0000-0000-0000-000000000000"
	noHeaderGPU  = "no csv header naming any of index, uuid, name, pci.bus_id, memory.total, memory.used, memory.free, memory.reserved"
	noHeaderApps = "no csv header naming any of pid, gpu_uuid, used_memory, used_gpu_memory, process_name"
)

func TestParseGPUsCaptures(t *testing.T) {
	gtx := func(line, index int, uuid, name string) GPU {
		return GPU{Index: index, UUID: uuid, Name: name, Line: line,
			Unusable: "memory.total unknown (no such column); memory.free unknown (no such column)"}
	}
	tests := []struct {
		file     string
		want     []GPU
		problems []prob
	}{
		{
			file: "h200-load-query-gpu-allfields-csv.txt",
			want: []GPU{{Index: 0, UUID: zeroUUID, Name: "NVIDIA H200", BusID: "00000000:83:00.0",
				Total: MiB(143771), Used: MiB(32362), Free: MiB(110796), Reserved: MiB(614), Line: 2}},
		},
		{
			// nounits, no final newline, no index or memory.total column.
			file: "teslap100-query-gpu-csv-nounits.txt",
			want: []GPU{{Index: -1, UUID: "GPU-ef1b2c9b-38d8-2090-2bd1-f567a3eb42a6", Name: "Tesla P100-PCIE-16GB",
				Used: MiB(0), Free: MiB(16280), Reserved: MiB(103), Line: 2,
				Unusable: "index unknown (no such column); memory.total unknown (no such column)"}},
			problems: []prob{{1, "missing column index", -1, ""}, {1, "missing column memory.total", -1, ""}},
		},
		{
			file: "gtx1060x4-gtx1080ti-query-gpu-name-pcibus-index-uuid-csv.txt",
			want: []GPU{
				gtx(2, 0, "GPU-f3da2e71-6e43-729a-e3ae-f731ed96d50c", "GeForce GTX 1060 6GB"),
				gtx(3, 1, "GPU-15ea7bf9-1a0e-2d7f-9c62-c28e5ca1aaf1", "GeForce GTX 1080 Ti"),
				gtx(4, 2, "GPU-3dc4f2b0-6e1b-c088-c342-4367c334795a", "GeForce GTX 1060 6GB"),
				gtx(5, 3, "GPU-03ddeff3-19c4-6676-d02d-6942bd80630d", "GeForce GTX 1060 6GB"),
				gtx(6, 4, "GPU-ff3318a7-f0dd-dc57-1fb8-cc95ba35c56e", "GeForce GTX 1060 6GB"),
			},
			problems: []prob{{1, "missing column memory.total", -1, ""}, {1, "missing column memory.free", -1, ""}},
		},
		{
			// noheader: we cannot tell which column is which.
			file:     "geforce-2gb-query-gpu-memory-fan-noheader-nounits-na.txt",
			problems: []prob{{1, "line before the csv header", -1, ""}, {0, noHeaderGPU, -1, ""}},
		},
		{
			file:     "fail-driver-not-loaded-couldnt-communicate.txt",
			problems: []prob{{1, "error line", -1, ""}, {0, noHeaderGPU, -1, ""}},
		},
		{
			// An apps answer is not a gpu answer.
			file:     "h100-idle-query-compute-apps-empty-csv.txt",
			problems: []prob{{1, "line before the csv header", -1, ""}, {0, noHeaderGPU, -1, ""}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, problems := ParseGPUs(readCapture(t, tt.file))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("gpus:\n got %+v\nwant %+v", got, tt.want)
			}
			if !reflect.DeepEqual(probs(problems), tt.problems) {
				t.Errorf("problems:\n got %+v\nwant %+v", probs(problems), tt.problems)
			}
		})
	}
}

func TestParseGPUsH200Derived(t *testing.T) {
	gpus, _ := ParseGPUs(readCapture(t, "h200-load-query-gpu-allfields-csv.txt"))
	g := gpus[0]
	if !g.Usable() {
		t.Fatalf("H200 unusable: %s", g.Unusable)
	}
	// total-used would claim 111409 MiB; free says 110796: trust free.
	if got, want := g.Unavailable(), MiB(143771-110796); got != want {
		t.Errorf("Unavailable() = %v, want %v", got, want)
	}
}

func TestParseRTXProLostCard(t *testing.T) {
	// Plain "nvidia-smi 2>&1": the first line names the lost card, the
	// rest is the human table, which is no csv answer.
	out := readCapture(t, "fail-rtxpro6000x4-gpu1-unknown-error-then-table.txt")
	for name, parse := range map[string]func([]byte) []Problem{
		"gpus": func(b []byte) []Problem { g, p := ParseGPUs(b); assertNone(t, g); return p },
		"apps": func(b []byte) []Problem { a, p := ParseApps(b); assertNone(t, a); return p },
	} {
		t.Run(name, func(t *testing.T) {
			ps := parse(out)
			want := prob{1, "error line", 1, "0000:34:00.0"}
			if got := probs(ps)[0]; got != want {
				t.Errorf("first problem = %+v, want %+v", got, want)
			}
			for _, p := range ps[1:] {
				if p.NamesCard() {
					t.Errorf("problem %v names a card; only the error line should", p)
				}
			}
			if last := ps[len(ps)-1]; last.Line != 0 || !strings.HasPrefix(last.Msg, "no csv header") {
				t.Errorf("last problem = %v, want the missing header", last)
			}
		})
	}
}

func assertNone[T any](t *testing.T, got []T) {
	t.Helper()
	if len(got) != 0 {
		t.Errorf("got %d rows, want none: %+v", len(got), got)
	}
}

func TestParseAppsCaptures(t *testing.T) {
	tests := []struct {
		file     string
		want     []App
		problems []prob
	}{
		{
			file: "rtx4080super-load-query-compute-apps-csv.txt",
			want: []App{
				{PID: 2165, GPUUUID: zeroUUID, Name: "/usr/bin/kwin_wayland", Used: MiB(25), Line: 2},
				{PID: 5022, GPUUUID: zeroUUID, Name: "ffmpeg", Used: MiB(503), Line: 3},
				{PID: 5021, GPUUUID: zeroUUID, Name: "ffmpeg", Used: MiB(360), Line: 4},
			},
		},
		{file: "h100-idle-query-compute-apps-empty-csv.txt"},
		{
			file:     "fail-driver-not-loaded-couldnt-communicate.txt",
			problems: []prob{{1, "error line", -1, ""}, {0, noHeaderApps, -1, ""}},
		},
		{
			file: "teslap100-query-gpu-csv-nounits.txt",
			problems: []prob{{1, "line before the csv header", -1, ""}, {2, "line before the csv header", -1, ""},
				{0, noHeaderApps, -1, ""}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, problems := ParseApps(readCapture(t, tt.file))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("apps:\n got %+v\nwant %+v", got, tt.want)
			}
			if !reflect.DeepEqual(probs(problems), tt.problems) {
				t.Errorf("problems:\n got %+v\nwant %+v", probs(problems), tt.problems)
			}
		})
	}
}

const gpuHeader = "index, uuid, name, memory.total [MiB], memory.used [MiB], memory.free [MiB]\n"

func TestParseGPUs(t *testing.T) {
	tests := []struct {
		name     string
		out      string
		want     []GPU
		problems []prob
	}{
		{
			name: "units",
			out:  gpuHeader + "0, GPU-a, NVIDIA H200, 143771 MiB, 32362 MiB, 110796 MiB\n",
			want: []GPU{{Index: 0, UUID: "GPU-a", Name: "NVIDIA H200",
				Total: MiB(143771), Used: MiB(32362), Free: MiB(110796), Line: 2}},
		},
		{
			name: "nounits crlf no final newline upper case header",
			out:  "INDEX, UUID, Name, Memory.Total [MiB], Memory.Used [MiB], Memory.Free [MiB]\r\n1, GPU-b, X, 100, 10, 80",
			want: []GPU{{Index: 1, UUID: "GPU-b", Name: "X", Total: MiB(100), Used: MiB(10), Free: MiB(80), Line: 2}},
		},
		{
			name: "reordered and extra columns",
			out: "memory.free [MiB], temperature.gpu, uuid, memory.total [MiB], index, memory.used [MiB]\n" +
				"80 MiB, 40, GPU-c, 100 MiB, 3, 20 MiB\n",
			want: []GPU{{Index: 3, UUID: "GPU-c", Total: MiB(100), Used: MiB(20), Free: MiB(80), Line: 2}},
		},
		{
			name: "unit glued to the number",
			out:  gpuHeader + "0, GPU-a, X, 100MiB, 20MiB, 80MiB\n",
			want: []GPU{{Index: 0, UUID: "GPU-a", Name: "X", Total: MiB(100), Used: MiB(20), Free: MiB(80), Line: 2}},
		},
		{
			name: "placeholders are unknown, never zero",
			out: gpuHeader +
				"0, GPU-a, X, [N/A], 0 MiB, 100 MiB\n" +
				"1, GPU-b, X, 100 MiB, [Not Supported], N/A\n" +
				"2, GPU-c, X, ERR!, ERR!, \n" +
				"3, GPU-d, X, [Requested functionality has been deprecated], 1, 2\n" +
				"4, GPU-e, X, 100 GiB, -5 MiB, 12abc\n" +
				"[N/A], [N/A], [N/A], 100, 0, 100\n",
			want: []GPU{
				{Index: 0, UUID: "GPU-a", Name: "X", Used: MiB(0), Free: MiB(100), Line: 2,
					Unusable: `memory.total unknown ("[N/A]")`},
				{Index: 1, UUID: "GPU-b", Name: "X", Total: MiB(100), Line: 3,
					Unusable: `memory.free unknown ("N/A")`},
				{Index: 2, UUID: "GPU-c", Name: "X", Line: 4,
					Unusable: `memory.total unknown ("ERR!"); memory.free unknown ("")`},
				{Index: 3, UUID: "GPU-d", Name: "X", Used: MiB(1), Free: MiB(2), Line: 5,
					Unusable: `memory.total unknown ("[Requested functionality has been deprecated]")`},
				{Index: 4, UUID: "GPU-e", Name: "X", Line: 6,
					Unusable: `memory.total unknown ("100 GiB"); memory.free unknown ("12abc")`},
				{Index: -1, Total: MiB(100), Used: MiB(0), Free: MiB(100), Line: 7,
					Unusable: `index unknown ("[N/A]"); uuid unknown ("[N/A]")`},
			},
		},
		{
			name: "free above total",
			out:  gpuHeader + "0, GPU-a, X, 100 MiB, 0 MiB, 200 MiB\n",
			want: []GPU{{Index: 0, UUID: "GPU-a", Name: "X", Total: MiB(100), Used: MiB(0), Free: MiB(200), Line: 2,
				Unusable: "memory.free 200 MiB exceeds memory.total 100 MiB"}},
		},
		{
			name: "error lines among rows do not hide other cards",
			out: "Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error\n" +
				gpuHeader +
				"0, GPU-a, X, 100 MiB, 0 MiB, 100 MiB\n" +
				"Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error\n" +
				"GPU 00000000:3B:00.0: GPU is lost.  Reboot the system to recover this GPU\n" +
				"Unable to determine the device handle for GPU0000:20:00.0: Unknown Error\n" +
				"something odd happened\n" +
				"2, GPU-c, X, 100 MiB, 0 MiB, 100 MiB\n" +
				"3, GPU-d, X, 100 MiB\n",
			want: []GPU{
				{Index: 0, UUID: "GPU-a", Name: "X", Total: MiB(100), Used: MiB(0), Free: MiB(100), Line: 3},
				{Index: 2, UUID: "GPU-c", Name: "X", Total: MiB(100), Used: MiB(0), Free: MiB(100), Line: 8},
			},
			problems: []prob{
				{1, "error line", 1, "0000:34:00.0"},
				{4, "error line", -1, "0000:0B:00.0"},
				{5, "error line", -1, "00000000:3B:00.0"},
				{6, "error line", -1, "0000:20:00.0"},
				{7, "error line", -1, ""},
				{9, "row has 4 fields, header has 6", -1, ""},
			},
		},
		{
			name: "name with commas",
			out:  gpuHeader + "0, GPU-a, Odd, Card, Name, 100 MiB, 10 MiB, 90 MiB\n",
			want: []GPU{{Index: 0, UUID: "GPU-a", Name: "Odd, Card, Name", Total: MiB(100), Used: MiB(10), Free: MiB(90), Line: 2}},
		},
		{
			name:     "too many fields without a free-text column",
			out:      "index, uuid, memory.total [MiB], memory.free [MiB]\n0, GPU-a, 1, 2, 3\n",
			problems: []prob{{2, "row has 5 fields, header has 4", -1, ""}},
		},
		{
			name: "header only",
			out:  gpuHeader,
		},
		{
			name:     "empty",
			out:      "",
			problems: []prob{{0, noHeaderGPU, -1, ""}},
		},
		{
			name:     "blank lines and spaces",
			out:      "\n  \n" + gpuHeader + "\n   0 ,GPU-a,X,  100 MiB ,0 MiB,100 MiB   \n\n",
			want:     []GPU{{Index: 0, UUID: "GPU-a", Name: "X", Total: MiB(100), Used: MiB(0), Free: MiB(100), Line: 5}},
			problems: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problems := ParseGPUs([]byte(tt.out))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("gpus:\n got %+v\nwant %+v", got, tt.want)
			}
			if !reflect.DeepEqual(probs(problems), tt.problems) {
				t.Errorf("problems:\n got %+v\nwant %+v", probs(problems), tt.problems)
			}
		})
	}
}

func TestParseApps(t *testing.T) {
	tests := []struct {
		name     string
		out      string
		want     []App
		problems []prob
	}{
		{
			name: "our query",
			out:  "pid, gpu_uuid, used_memory [MiB]\n123, GPU-a, 1000 MiB\n456, GPU-b, [N/A]\n",
			want: []App{
				{PID: 123, GPUUUID: "GPU-a", Used: MiB(1000), Line: 2},
				{PID: 456, GPUUUID: "GPU-b", Line: 3},
			},
		},
		{
			name: "used_gpu_memory spelling, nounits, crlf",
			out:  "pid, gpu_uuid, used_gpu_memory [MiB]\r\n7, GPU-a, 5\r\n",
			want: []App{{PID: 7, GPUUUID: "GPU-a", Used: MiB(5), Line: 2}},
		},
		{
			name: "process names with commas and spaces",
			out: "pid, process_name, gpu_uuid, used_gpu_memory [MiB]\n" +
				"1, python train.py --lr=0.1,0.2, GPU-a, 10 MiB\n" +
				"2, a, b, c, GPU-b, 20 MiB\n" +
				"3, , GPU-c, 30 MiB\n",
			want: []App{
				{PID: 1, GPUUUID: "GPU-a", Name: "python train.py --lr=0.1,0.2", Used: MiB(10), Line: 2},
				{PID: 2, GPUUUID: "GPU-b", Name: "a, b, c", Used: MiB(20), Line: 3},
				{PID: 3, GPUUUID: "GPU-c", Used: MiB(30), Line: 4},
			},
		},
		{
			name: "header only is no processes and no problem",
			out:  "pid, gpu_uuid, used_memory [MiB]\n",
		},
		{
			name: "missing column and short row",
			out:  "pid, used_memory [MiB]\n1, 10 MiB\n2, 3, 4\n2\n",
			want: []App{{PID: 1, Used: MiB(10), Line: 2}},
			problems: []prob{{1, "missing column gpu_uuid", -1, ""}, {3, "row has 3 fields, header has 2", -1, ""},
				{4, "error line", -1, ""}},
		},
		{
			name: "lost card",
			out: "pid, gpu_uuid, used_memory [MiB]\n" +
				"Unable to determine the device handle for GPU3: 0000:CA:00.0: Unknown Error\n" +
				"1, GPU-a, 10 MiB\n",
			want:     []App{{PID: 1, GPUUUID: "GPU-a", Used: MiB(10), Line: 3}},
			problems: []prob{{2, "error line", 3, "0000:CA:00.0"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problems := ParseApps([]byte(tt.out))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("apps:\n got %+v\nwant %+v", got, tt.want)
			}
			if !reflect.DeepEqual(probs(problems), tt.problems) {
				t.Errorf("problems:\n got %+v\nwant %+v", probs(problems), tt.problems)
			}
		})
	}
}

func TestProblemString(t *testing.T) {
	p := Problem{Source: "gpu", Line: 1, Text: "Unable to ...", Msg: "error line", GPUIndex: 1, BusID: "0000:34:00.0"}
	want := `gpu line 1: error line: "Unable to ..." (GPU 1, bus 0000:34:00.0)`
	if got := p.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestMem(t *testing.T) {
	tests := []struct {
		g    GPU
		want Mem
	}{
		{GPU{Total: MiB(100), Free: MiB(30)}, MiB(70)},
		{GPU{Total: MiB(100)}, Mem{}},
		{GPU{Free: MiB(100)}, Mem{}},
	}
	for _, tt := range tests {
		if got := tt.g.Unavailable(); got != tt.want {
			t.Errorf("%+v.Unavailable() = %v, want %v", tt.g, got, tt.want)
		}
	}
	if s := (Mem{}).String(); s != "unknown" {
		t.Errorf("unknown Mem prints %q", s)
	}
}
