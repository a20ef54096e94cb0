package fakegpu

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// EnvState names the environment variable holding the state file's path.
const EnvState = "FAKE_GPU_STATE"

// ErrNoState means there is no state to read: $FAKE_GPU_STATE is unset or
// the file is missing. The fakes then behave like a machine without a
// working driver.
var ErrNoState = errors.New("no fake gpu state")

// Mode is a whole-machine failure the fake nvidia-smi acts out.
type Mode string

// The modes. Per-card failures are the Card.Lost and Card.NA flags, which
// are honoured in every mode; ModeLostCard and ModeNA exist so that a state
// file can say what it is about, and behave like ModeNormal.
const (
	ModeNormal        Mode = ""               // answer queries
	ModeDriverFailure Mode = "driver-failure" // print DriverFailureMessage, exit 9
	ModeHang          Mode = "hang"           // never answer
	ModeLostCard      Mode = "lost-card"      // cards with Lost set print an error line instead of a row
	ModeNA            Mode = "na"             // cards with NA set print [N/A] memory cells
)

// DriverFailureMessage is what nvidia-smi prints, with exit status 9, when
// it cannot reach the driver.
const DriverFailureMessage = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. " +
	"Make sure that the latest NVIDIA driver is installed and running."

// Card is one fake GPU.
type Card struct {
	Index int    `json:"index"`            // nvidia-smi index, unique
	UUID  string `json:"uuid"`             // e.g. "GPU-0000...", unique, non-empty
	Name  string `json:"name,omitempty"`   // product name; DefaultName when empty
	BusID string `json:"bus_id,omitempty"` // e.g. "00000000:34:00.0"; derived from Index when empty

	TotalMiB int64 `json:"total_mib"` // memory.total
	// ForeignMiB is memory held by processes that are not the scheduler's
	// and do not appear among Processes; it counts in memory.used.
	ForeignMiB int64 `json:"foreign_mib,omitempty"`
	// ReservedMiB is memory the driver keeps; memory.used leaves it out,
	// memory.free does not have it.
	ReservedMiB int64 `json:"reserved_mib,omitempty"`

	Lost bool `json:"lost,omitempty"` // nvidia-smi prints an error line instead of the card
	NA   bool `json:"na,omitempty"`   // nvidia-smi prints [N/A] for the card's memory
}

// DefaultName is the product name of a card whose Name is empty.
const DefaultName = "NVIDIA Fake GPU"

// DisplayName returns Name, or DefaultName when Name is empty.
func (c Card) DisplayName() string {
	if c.Name == "" {
		return DefaultName
	}
	return c.Name
}

// Bus returns BusID, or "00000000:XX:00.0" with XX = Index+1 in hex when
// BusID is empty.
func (c Card) Bus() string {
	if c.BusID != "" {
		return c.BusID
	}
	return fmt.Sprintf("00000000:%02X:00.0", c.Index+1)
}

// Process is a process holding memory on a card.
type Process struct {
	PID     int    `json:"pid"`
	GPUUUID string `json:"gpu_uuid"`
	UsedMiB int64  `json:"used_mib"`
	Name    string `json:"name,omitempty"`
}

// State is the whole fake machine.
type State struct {
	Mode      Mode      `json:"mode,omitempty"`
	Cards     []Card    `json:"cards"`
	Processes []Process `json:"processes,omitempty"`
	// Topology is what `nvidia-smi topo -m` prints, as it is (a real
	// capture from testdata, say); empty: a matrix of the cards in which
	// every pair is PHB apart (see TopologyText).
	Topology string `json:"topology,omitempty"`
}

// TopologyText returns what the fake `nvidia-smi topo -m` prints for s:
// s.Topology when set; else, in nvidia-smi's layout (tabs, " X " on the
// diagonal, affinity columns, a legend), a matrix of the cards by index
// in which every pair is PHB apart, so that no set of cards is closer than
// another.
func (s State) TopologyText() string {
	if s.Topology != "" {
		return s.Topology
	}
	var b strings.Builder
	for _, c := range s.Cards {
		fmt.Fprintf(&b, "\tGPU%d", c.Index)
	}
	b.WriteString("\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n")
	for _, row := range s.Cards {
		fmt.Fprintf(&b, "GPU%d", row.Index)
		for _, col := range s.Cards {
			if col.Index == row.Index {
				b.WriteString("\t X ")
			} else {
				b.WriteString("\tPHB")
			}
		}
		b.WriteString("\t0-1\t0\t\tN/A\n")
	}
	b.WriteString("\nLegend:\n\n  X    = Self\n  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n")
	return b.String()
}

// Validate reports the first thing wrong with s: an unknown mode, a card
// without a uuid, a duplicate index or uuid, a negative amount, a process
// on a card that does not exist.
func (s State) Validate() error {
	switch s.Mode {
	case ModeNormal, ModeDriverFailure, ModeHang, ModeLostCard, ModeNA:
	default:
		return fmt.Errorf("unknown mode %q", s.Mode)
	}
	seenIdx, seenUUID := map[int]bool{}, map[string]bool{}
	for _, c := range s.Cards {
		switch {
		case c.UUID == "":
			return fmt.Errorf("card %d has no uuid", c.Index)
		case c.Index < 0:
			return fmt.Errorf("card %s has negative index %d", c.UUID, c.Index)
		case seenIdx[c.Index]:
			return fmt.Errorf("two cards have index %d", c.Index)
		case seenUUID[c.UUID]:
			return fmt.Errorf("two cards have uuid %s", c.UUID)
		case c.TotalMiB < 0 || c.ForeignMiB < 0 || c.ReservedMiB < 0:
			return fmt.Errorf("card %d has a negative amount of memory", c.Index)
		}
		seenIdx[c.Index], seenUUID[c.UUID] = true, true
	}
	for _, p := range s.Processes {
		if !seenUUID[p.GPUUUID] {
			return fmt.Errorf("process %d is on unknown card %q", p.PID, p.GPUUUID)
		}
		if p.UsedMiB < 0 {
			return fmt.Errorf("process %d uses negative memory", p.PID)
		}
	}
	return nil
}

// CardByUUID returns the card with the given uuid.
func (s State) CardByUUID(uuid string) (Card, bool) {
	for _, c := range s.Cards {
		if c.UUID == uuid {
			return c, true
		}
	}
	return Card{}, false
}

// UsedMiB returns what nvidia-smi reports as memory.used for c: its
// foreign memory plus what the listed processes on it hold. Drop dead
// processes first to get what the driver would say.
func (s State) UsedMiB(c Card) int64 {
	used := c.ForeignMiB
	for _, p := range s.Processes {
		if p.GPUUUID == c.UUID {
			used += p.UsedMiB
		}
	}
	return used
}

// FreeMiB returns memory.free for c: total - used - reserved, never below 0.
func (s State) FreeMiB(c Card) int64 {
	return max(c.TotalMiB-s.UsedMiB(c)-c.ReservedMiB, 0)
}

// DropDead removes the processes whose PID is not alive (see Alive) and
// returns them.
func (s *State) DropDead() []Process {
	var dead []Process
	live := s.Processes[:0]
	for _, p := range s.Processes {
		if Alive(p.PID) {
			live = append(live, p)
		} else {
			dead = append(dead, p)
		}
	}
	clear(s.Processes[len(live):])
	s.Processes = live
	return dead
}

// StatePath returns $FAKE_GPU_STATE, or an error wrapping ErrNoState when
// it is unset or empty.
func StatePath() (string, error) {
	p := os.Getenv(EnvState)
	if p == "" {
		return "", fmt.Errorf("%w: %s is not set", ErrNoState, EnvState)
	}
	return p, nil
}

// Load reads and validates the state file without taking the lock: files
// are replaced whole, so a reader sees one complete version. A missing file
// gives an error wrapping ErrNoState.
func Load(path string) (State, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, fmt.Errorf("%w: %w", ErrNoState, err)
	}
	if err != nil {
		return State{}, fmt.Errorf("read fake gpu state: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return State{}, fmt.Errorf("parse fake gpu state %s: %w", path, err)
	}
	if err := s.Validate(); err != nil {
		return State{}, fmt.Errorf("fake gpu state %s: %w", path, err)
	}
	return s, nil
}

// Save replaces the state file with s, under the lock.
func Save(path string, s State) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("save fake gpu state: %w", err)
	}
	unlock, err := lock(path)
	if err != nil {
		return err
	}
	defer unlock()
	return write(path, s)
}

// Update reads the state, lets fn change it and writes it back, all under
// the lock, so that concurrent updates from several processes never lose
// each other. When fn returns an error nothing is written and Update
// returns that error. The file must exist (see Save).
func Update(path string, fn func(*State) error) error {
	unlock, err := lock(path)
	if err != nil {
		return err
	}
	defer unlock()
	s, err := Load(path)
	if err != nil {
		return err
	}
	if err := fn(&s); err != nil {
		return err
	}
	if err := s.Validate(); err != nil {
		return fmt.Errorf("update fake gpu state: %w", err)
	}
	return write(path, s)
}

// lock takes an exclusive flock on path + ".lock" and returns its release.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock fake gpu state: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock fake gpu state: %w", err)
	}
	return func() { f.Close() }, nil // closing the file releases the lock
}

// write replaces path with s atomically: a temp file in the same folder,
// then a rename over path.
func write(path string, s State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode fake gpu state: %w", err)
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write fake gpu state: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename this fails harmlessly
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write fake gpu state: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write fake gpu state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write fake gpu state: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write fake gpu state: %w", err)
	}
	return nil
}

// Alive reports whether pid names a running process: kill(pid, 0) finds it
// and /proc, when there is one, does not show it as a zombie. A process
// that exited but was not yet reaped holds no GPU memory.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist) || !procMounted()
	}
	// "pid (comm) S ...": comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return true
	}
	return s[i+2] != 'Z' && s[i+2] != 'X'
}

// procMounted reports whether /proc shows this process, i.e. whether /proc
// can be trusted to list processes.
func procMounted() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}
