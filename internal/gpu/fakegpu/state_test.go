package fakegpu

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// deadPID returns the PID of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// zombiePID returns the PID of a process that has exited but is not reaped
// yet; the test reaps it at cleanup.
func zombiePID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Wait() })
	waitExitNoReap(t, cmd.Process.Pid)
	return cmd.Process.Pid
}

// waitExitNoReap blocks until child pid has exited, leaving it a zombie.
func waitExitNoReap(t *testing.T, pid int) {
	t.Helper()
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			if err != nil {
				t.Fatalf("waitid %d: %v", pid, err)
			}
			return
		}
	}
}

func TestAlive(t *testing.T) {
	tests := []struct {
		name string
		pid  int
		want bool
	}{
		{"self", os.Getpid(), true},
		{"init", 1, true},
		{"reaped", deadPID(t), false},
		{"zombie", zombiePID(t), false},
		{"zero", 0, false},
		{"negative", -1, false},
	}
	for _, tt := range tests {
		if got := Alive(tt.pid); got != tt.want {
			t.Errorf("%s: Alive(%d) = %v, want %v", tt.name, tt.pid, got, tt.want)
		}
	}
}

func twoCards() State {
	return State{Cards: []Card{
		{Index: 0, UUID: "GPU-aaaa", TotalMiB: 1000, ForeignMiB: 200, ReservedMiB: 100},
		{Index: 1, UUID: "GPU-bbbb", TotalMiB: 2000},
	}}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*State)
		errHas string
	}{
		{"ok", func(*State) {}, ""},
		{"mode", func(s *State) { s.Mode = "on-fire" }, `unknown mode "on-fire"`},
		{"no uuid", func(s *State) { s.Cards[1].UUID = "" }, "card 1 has no uuid"},
		{"dup index", func(s *State) { s.Cards[1].Index = 0 }, "two cards have index 0"},
		{"dup uuid", func(s *State) { s.Cards[1].UUID = "GPU-aaaa" }, "two cards have uuid GPU-aaaa"},
		{"negative", func(s *State) { s.Cards[0].ReservedMiB = -1 }, "negative amount"},
		{"unknown card", func(s *State) { s.Processes = []Process{{PID: 1, GPUUUID: "GPU-x"}} }, "unknown card"},
	}
	for _, tt := range tests {
		s := twoCards()
		tt.change(&s)
		err := s.Validate()
		if (err == nil) != (tt.errHas == "") || (err != nil && !strings.Contains(err.Error(), tt.errHas)) {
			t.Errorf("%s: Validate() = %v, want %q", tt.name, err, tt.errHas)
		}
	}
}

func TestAllocate(t *testing.T) {
	me, dead := os.Getpid(), deadPID(t)
	tests := []struct {
		name      string
		procs     []Process
		uuid      string
		mib       int64
		wantGrant Grant
		wantErr   error
		errMsg    string
		wantProcs []Process
	}{
		{
			name: "fits", uuid: "GPU-aaaa", mib: 700,
			wantGrant: Grant{FreeBefore: 700, HeldMiB: 700},
			wantProcs: []Process{{PID: me, GPUUUID: "GPU-aaaa", UsedMiB: 700, Name: "job"}},
		},
		{
			name: "one MiB too many", uuid: "GPU-aaaa", mib: 701,
			errMsg: "CUDA out of memory. Tried to allocate 701 MiB (GPU 0; 1000 MiB total capacity; 700 MiB free)",
		},
		{
			name: "adds to what pid holds", uuid: "GPU-aaaa", mib: 100,
			procs:     []Process{{PID: me, GPUUUID: "GPU-aaaa", UsedMiB: 300, Name: "job"}},
			wantGrant: Grant{FreeBefore: 400, HeldMiB: 400},
			wantProcs: []Process{{PID: me, GPUUUID: "GPU-aaaa", UsedMiB: 400, Name: "job"}},
		},
		{
			name: "dead processes hold nothing", uuid: "GPU-aaaa", mib: 700,
			procs:     []Process{{PID: dead, GPUUUID: "GPU-aaaa", UsedMiB: 700}},
			wantGrant: Grant{FreeBefore: 700, HeldMiB: 700},
			wantProcs: []Process{{PID: me, GPUUUID: "GPU-aaaa", UsedMiB: 700, Name: "job"}},
		},
		{name: "unknown card", uuid: "GPU-zzzz", mib: 1, wantErr: ErrNoDevice},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := twoCards()
			s.Processes = tt.procs
			g, err := s.Allocate(me, tt.uuid, "job", tt.mib)
			switch {
			case tt.errMsg != "":
				var oom *OOMError
				if !errors.As(err, &oom) || err.Error() != tt.errMsg {
					t.Fatalf("err = %v, want OOM %q", err, tt.errMsg)
				}
				return
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			tt.wantGrant.Card = s.Cards[0]
			if g != tt.wantGrant || !reflect.DeepEqual(s.Processes, tt.wantProcs) {
				t.Errorf("grant %+v, procs %+v; want %+v, %+v", g, s.Processes, tt.wantGrant, tt.wantProcs)
			}
		})
	}

	s := twoCards()
	s.Cards[1].Lost = true
	if _, err := s.Allocate(me, "GPU-bbbb", "job", 1); !errors.Is(err, ErrCardLost) {
		t.Errorf("allocate on a lost card: %v, want ErrCardLost", err)
	}
}

func TestRelease(t *testing.T) {
	s := twoCards()
	s.Processes = []Process{{PID: 5, GPUUUID: "GPU-aaaa", UsedMiB: 10}, {PID: 6, GPUUUID: "GPU-aaaa", UsedMiB: 20},
		{PID: 5, GPUUUID: "GPU-bbbb", UsedMiB: 30}}
	if got := s.Release(5); got != 40 {
		t.Errorf("Release(5) = %d, want 40", got)
	}
	if want := []Process{{PID: 6, GPUUUID: "GPU-aaaa", UsedMiB: 20}}; !reflect.DeepEqual(s.Processes, want) {
		t.Errorf("left %+v, want %+v", s.Processes, want)
	}
	if got, want := s.UsedMiB(s.Cards[0]), int64(220); got != want {
		t.Errorf("used = %d, want %d", got, want)
	}
	if got, want := s.FreeMiB(s.Cards[0]), int64(680); got != want {
		t.Errorf("free = %d, want %d", got, want)
	}
}

// Every entry of CUDA_VISIBLE_DEVICES is a device, in its order, up to the
// first that names no card (or one named already), as CUDA reads it;
// Device is the first.
func TestDevices(t *testing.T) {
	// Like the GTX 1060 / 1080 Ti capture: the biggest card is not index 0.
	s := State{Cards: []Card{
		{Index: 0, UUID: "GPU-f3da2e71", TotalMiB: 6144},
		{Index: 1, UUID: "GPU-15ea7bf9", TotalMiB: 11264},
		{Index: 2, UUID: "GPU-15eb0000", TotalMiB: 6144},
	}}
	tests := []struct {
		visible, order string
		want           []int // card indices; nil: ErrNoDevice
	}{
		{"GPU-15ea7bf9", "", []int{1}},
		{"GPU-f3", "", []int{0}},
		{"GPU-15e", "", nil}, // ambiguous prefix
		{"GPU-15ea7bf9,GPU-f3da2e71", "", []int{1, 0}},
		{"GPU-15eb,GPU-f3", "", []int{2, 0}},
		{"0", "PCI_BUS_ID", []int{0}},
		{"2", "PCI_BUS_ID", []int{2}},
		{"0", "", []int{1}}, // fastest (here: biggest) first
		{"1", "", []int{0}},
		{"0,1", "", []int{1, 0}},
		{"2", "FASTEST_FIRST", []int{2}},
		{"2,1", "PCI_BUS_ID", []int{2, 1}},
		{"0, 1,2", "PCI_BUS_ID", []int{0, 1, 2}},
		{"1,7,0", "PCI_BUS_ID", []int{1}}, // no card 7: CUDA stops there
		{"1,1,0", "PCI_BUS_ID", []int{1}},
		{"2,", "PCI_BUS_ID", []int{2}},
		{"7,1", "PCI_BUS_ID", nil},
		{"3", "PCI_BUS_ID", nil},
		{"3", "", nil},
		{"", "", nil},
		{" ", "", nil},
		{"-1", "", nil},
		{"MIG-1234", "", nil},
		{"cuda:0", "", nil},
	}
	for _, tt := range tests {
		cards, err := s.Devices(tt.visible, tt.order)
		var got []int
		for _, c := range cards {
			got = append(got, c.Index)
		}
		first, firstErr := s.Device(tt.visible, tt.order)
		switch {
		case tt.want == nil && (!errors.Is(err, ErrNoDevice) || !errors.Is(firstErr, ErrNoDevice)):
			t.Errorf("Devices(%q, %q) = %v, %v; Device: %v; want ErrNoDevice", tt.visible, tt.order, got, err, firstErr)
		case tt.want != nil && (err != nil || !slices.Equal(got, tt.want)):
			t.Errorf("Devices(%q, %q) = %v, %v; want cards %v", tt.visible, tt.order, got, err, tt.want)
		case tt.want != nil && (firstErr != nil || first.Index != tt.want[0]):
			t.Errorf("Device(%q, %q) = %+v, %v; want card %d", tt.visible, tt.order, first, firstErr, tt.want[0])
		}
	}
}

func TestLoadSaveUpdate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if _, err := Load(path); !errors.Is(err, ErrNoState) {
		t.Fatalf("Load(missing) = %v, want ErrNoState", err)
	}
	if err := Update(path, func(*State) error { return nil }); !errors.Is(err, ErrNoState) {
		t.Fatalf("Update(missing) = %v, want ErrNoState", err)
	}
	want := twoCards()
	if err := Save(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Load = %+v, %v; want %+v", got, err, want)
	}
	boom := errors.New("boom")
	if err := Update(path, func(s *State) error { s.Cards = nil; return boom }); !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want boom", err)
	}
	if got, _ := Load(path); !reflect.DeepEqual(got, want) {
		t.Errorf("a failed update changed the file: %+v", got)
	}
	if err := Update(path, func(s *State) error { s.Mode = "bogus"; return nil }); err == nil {
		t.Error("Update wrote an invalid state")
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !reflect.DeepEqual(names, []string{"state.json", "state.json.lock"}) {
		t.Errorf("files left: %v", names)
	}
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || errors.Is(err, ErrNoState) {
		t.Errorf("Load(corrupt) = %v, want a parse error", err)
	}
}

func TestStatePath(t *testing.T) {
	t.Setenv(EnvState, "")
	if _, err := StatePath(); !errors.Is(err, ErrNoState) {
		t.Errorf("StatePath() with %s unset = %v", EnvState, err)
	}
	t.Setenv(EnvState, "/x/state.json")
	if p, err := StatePath(); p != "/x/state.json" || err != nil {
		t.Errorf("StatePath() = %q, %v", p, err)
	}
}

// TestUpdateConcurrent runs many updates at once; each opens the lock
// file itself, as separate processes do, so flock serialises them.
func TestUpdateConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if err := Save(path, twoCards()); err != nil {
		t.Fatal(err)
	}
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- Update(path, func(s *State) error {
				s.Processes = append(s.Processes, Process{PID: 1000 + i, GPUUUID: "GPU-bbbb", UsedMiB: 1})
				return nil
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Processes) != n {
		t.Errorf("%d processes after %d concurrent updates", len(s.Processes), n)
	}
}

func TestEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	want := []Event{
		{Kind: EventStart, PID: 1, GPU: "GPU-a", MemMiB: 10, FreeMiB: 100, TotalMiB: 100},
		{Kind: EventEnd, PID: 1, GPU: "GPU-a", MemMiB: 10, Exit: 143, Signal: "terminated"},
	}
	for _, e := range want {
		if err := AppendEvent(path, e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadEvents(path)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ReadEvents = %+v, %v; want %+v", got, err, want)
	}
	if err := os.WriteFile(path, []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadEvents(path); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("ReadEvents(garbage) = %v", err)
	}
}

func TestCardDefaults(t *testing.T) {
	c := Card{Index: 0x33}
	if got, want := fmt.Sprint(c.Bus(), " ", c.DisplayName()), "00000000:34:00.0 "+DefaultName; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
