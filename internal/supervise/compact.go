package supervise

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Keeping the results file bounded.
//
// A record in the results file is needed only until the scheduler that
// hears of the attempt's end has committed it to its state: after that,
// no scheduler asks for it (Recover looks up only the attempts the state
// still shows running). So a client tells the supervisor which records it
// no longer needs (forget, sent by Executor.Forget once the ends are
// committed), the supervisor appends that to the results file as a
// forget line, and once the file has grown past compactAt it is
// rewritten without the forgotten records:
//
//  1. appends stop (resMu), and the file is read whole;
//  2. every record not forgotten by a later forget line is written, in
//     order, to supervisor.results.compact, which is fsynced;
//  3. that file is renamed over supervisor.results, and the directory
//     fsynced;
//  4. appends go on, to the new file (opened for appending in step 2).
//
// A scheduler that exits without Close never sends the forgets it had
// gathered. So the next one, once it has loaded its state and before it
// starts anything, sends a sweep (Executor.Sweep): the tokens of every
// attempt its state still shows running; every record before the sweep
// line of another attempt is no longer needed (its end is committed, or
// nobody will ask for it: only one scheduler at a time holds the run
// directory).
//
// A crash (kill -9, the machine) at any point leaves either the old file
// or the new one under the name, and each holds every record not
// forgotten: nothing whose end is not committed is lost. A forget that
// never arrives (the scheduler died first) only keeps a record longer.
// A reader that opened the old file before the rename reads what it held;
// a record appended after the rename is in the new one, which a reader
// that looks again (Recover does, for the attempts the supervisor no
// longer runs) finds.

// compactName is where the compacted results file is written before it
// replaces the results file; one left by a crash is overwritten.
const compactName = "supervisor.results.compact"

// compactAt is the size of the results file past which a forget compacts
// it. After a compaction, the next one waits until the file has grown to
// twice what was kept, so that records nobody forgets (those of a
// scheduler that died and never came back) are not rewritten over and
// over. A variable for tests.
var compactAt int64 = 1 << 20

// compactHook, when set (tests), is called at each step of a compaction
// with the step's name: "written" (the new file is complete, not yet
// renamed) and "renamed" (it replaced the results file).
var compactHook func(step string)

// forgetLine is a line of the results file that says the records before
// it of the ids in Forget are no longer needed: those of the process
// PIDs[i] for Forget[i], or all of the id's when that PID is 0.
type forgetLine struct {
	Version int      `json:"version"`
	Forget  []string `json:"forget"`
	PIDs    []int    `json:"pids,omitempty"`
}

// sweepLine is a line of the results file that says the records before
// it of every id not in Sweep are no longer needed (Executor.Sweep).
type sweepLine struct {
	Version int      `json:"version"`
	Sweep   []string `json:"sweep"` // never null: [] when nothing runs
}

// appendResult records rec in the results file, unless a compaction is
// replacing it (then once it is done).
func (s *server) appendResult(rec *resultRecord) error {
	s.resMu.RLock()
	defer s.resMu.RUnlock()
	return appendResult(s.results, rec)
}

// forget notes that the records of ids (of the processes pids) are no
// longer needed, and compacts the results file when it has grown past its
// bound.
func (s *server) forget(ids []string, pids []int) {
	if len(ids) == 0 {
		return
	}
	if len(pids) != len(ids) {
		pids = nil
	}
	s.note(forgetLine{Version: resultVersion, Forget: ids, PIDs: pids}, "forgotten result(s)", len(ids))
}

// sweep notes that the records of every attempt but those of running
// are no longer needed, and compacts the results file when it has grown
// past its bound.
func (s *server) sweep(running []string) {
	if running == nil {
		running = []string{}
	}
	s.note(sweepLine{Version: resultVersion, Sweep: running}, "running attempt(s) of a sweep", len(running))
}

// note appends line to the results file, then compacts it when it has
// grown past its bound; what and n say what it notes, for the log.
func (s *server) note(line any, what string, n int) {
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	s.resMu.RLock()
	_, err = s.results.Write(append(b, '\n'))
	size := int64(-1)
	if fi, serr := s.results.Stat(); serr == nil {
		size = fi.Size()
	}
	s.resMu.RUnlock()
	if err != nil {
		s.log.Printf("note %d %s: %v", n, what, err)
		return
	}
	s.resMu.Lock()
	defer s.resMu.Unlock()
	if size < max(compactAt, s.compactNext) {
		return
	}
	kept, err := s.compact()
	if err != nil {
		s.log.Printf("compact results: %v", err)
		s.compactNext = 2 * size // not again at once
		return
	}
	s.compactNext = 2 * kept
}

// compact rewrites the results file without its forgotten records (see
// above) and returns its new size. s.resMu is held for writing.
func (s *server) compact() (int64, error) {
	path := filepath.Join(s.dir, resultsName)
	lines, err := keptResults(path)
	if err != nil {
		return 0, err
	}
	tmp := filepath.Join(s.dir, compactName)
	// Opened for appending: once renamed, it is the file appended to,
	// with nothing left to open (and to fail) after the rename.
	fd, err := unix.Open(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", tmp, err)
	}
	f := os.NewFile(uintptr(fd), path)
	var size int64
	w := bufio.NewWriterSize(f, 64<<10)
	for _, l := range lines {
		w.Write(l)
		w.WriteByte('\n')
		size += int64(len(l)) + 1
	}
	err = w.Flush()
	if err == nil {
		// The old file's records were written back long ago; the new
		// file's must be on disk before it takes the name.
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return 0, fmt.Errorf("write %s: %w", tmp, err)
	}
	if compactHook != nil {
		compactHook("written")
	}
	if err := os.Rename(tmp, path); err != nil {
		f.Close()
		os.Remove(tmp)
		return 0, fmt.Errorf("replace %s: %w", path, err)
	}
	syncDir(s.dir)
	if compactHook != nil {
		compactHook("renamed")
	}
	s.results.Close()
	s.results = f
	s.log.Printf("compacted %s: %d record(s) kept, %d bytes", resultsName, len(lines), size)
	return size, nil
}

// syncDir makes a rename in dir durable, as far as it can.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// keptResults returns the lines of the results file at path that a
// compaction keeps, in order: the records no later forget line names and
// every later sweep line lists, and lines of another layout (not ours to
// judge). Lines cut short by a crash, forget and sweep lines go.
func keptResults(path string) ([][]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open results %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var lines [][]byte
	type kept struct{ line, pid int }
	byID := map[string][]kept{} // the records of each id not yet forgotten
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), maxRecord)
	for sc.Scan() {
		line := sc.Bytes()
		var head struct {
			Version int       `json:"version"`
			ID      string    `json:"id"`
			PID     int       `json:"pid"`
			Forget  []string  `json:"forget"`
			PIDs    []int     `json:"pids"`
			Sweep   *[]string `json:"sweep"`
		}
		if json.Unmarshal(line, &head) != nil {
			continue // cut short by a crash
		}
		switch {
		case head.Version != resultVersion:
			lines = append(lines, bytes.Clone(line))
		case head.Sweep != nil:
			running := make(map[string]bool, len(*head.Sweep))
			for _, id := range *head.Sweep {
				running[id] = true
			}
			for id, recs := range byID {
				if !running[id] {
					for _, r := range recs {
						lines[r.line] = nil
					}
					delete(byID, id)
				}
			}
		case head.Forget != nil:
			for k, id := range head.Forget {
				pid := 0
				if len(head.PIDs) == len(head.Forget) {
					pid = head.PIDs[k]
				}
				left := byID[id][:0]
				for _, r := range byID[id] {
					if pid == 0 || r.pid == pid {
						lines[r.line] = nil
					} else {
						left = append(left, r)
					}
				}
				byID[id] = left
			}
		case head.ID != "":
			byID[head.ID] = append(byID[head.ID], kept{len(lines), head.PID})
			lines = append(lines, bytes.Clone(line))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read results %s: %w", path, err)
	}
	out := lines[:0]
	for _, l := range lines {
		if l != nil {
			out = append(out, l)
		}
	}
	return out, nil
}
