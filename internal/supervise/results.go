package supervise

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/gpusched/gpusched/internal/executor"
	"github.com/gpusched/gpusched/internal/executor/local"
)

// resultsName is the supervisor's record of how attempts ended, in the run
// directory: one JSON object (resultRecord) per line, appended as each
// attempt ends, before anyone is told.
//
// One file for all attempts rather than one per attempt: a file per
// attempt costs an inode per attempt, and creating one cost 10 to 250 µs
// on the development VM (ext4 without a journal scans the inode bitmap
// past every inode freed in the last minutes), which was two thirds of
// the supervisor's cost per attempt; an append costs a few µs. It grows
// by some 250 bytes per attempt, far less than the attempts' logs.
//
// It is never fsynced. The record matters when the scheduler dies and the
// machine does not: then the page cache holds it for whoever reads it
// next. When the machine crashes, the attempt dies with it and its
// outcome is unknown anyway; a record lost with the cache tells nothing
// the crash did not, and an fsync per attempt would cost more than all
// the rest of the supervisor's work.
const resultsName = "supervisor.results"

// maxRecord bounds one line of the results file.
const maxRecord = 1 << 20

// openResults opens dir's results file for appending, creating it, never
// through a symbolic link, as local.OpenLog does for logs.
func openResults(dir string) (*os.File, error) {
	return local.OpenLog(dir, filepath.Join(dir, resultsName))
}

// appendResult records rec in the results file f, in one write: lines of
// concurrent writers never mix, and a reader sees a record whole or not
// at all (a line cut short by a crash is skipped when read).
func appendResult(f *os.File, rec *resultRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("record result of %s: %w", rec.ID, err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("record result of %s: %w", rec.ID, err)
	}
	return nil
}

// ReadResult returns how the attempt o ended, as the supervisor of runDir
// recorded it. ok is false when no record is o's: none has its token, or
// the one that has is of another process than o's handle names (a token
// used again by a later run). err says why the record cannot be read.
// The file is not read through a symbolic link.
func ReadResult(runDir string, o executor.Orphan) (r executor.Result, ok bool, err error) {
	p, _ := local.DecodeHandle(o.Handle)
	recs, err := readResults(runDir, []wanted{{id: o.Job.Token, proc: p}})
	if rec := recs[o.Job.Token]; rec != nil {
		return rec.result(), true, err
	}
	return r, false, err
}

// wanted is an attempt whose record is looked for: by its id, and by its
// process when known.
type wanted struct {
	id   string
	proc executor.Process
}

// readResults returns the last record of each attempt in want, by id,
// from dir's results file: one read of the file for all of them.
func readResults(dir string, want []wanted) (map[string]*resultRecord, error) {
	out := map[string]*resultRecord{}
	ws := make(map[string]executor.Process, len(want))
	for _, w := range want {
		if w.id != "" {
			ws[w.id] = w.proc
		}
	}
	if len(ws) == 0 || dir == "" {
		return out, nil
	}
	path := filepath.Join(dir, resultsName)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case err == unix.ENOENT:
		return out, nil
	case err == unix.ELOOP:
		return out, fmt.Errorf("results file %s is a symbolic link; gpusched follows none in its run directory", path)
	case err != nil:
		return out, fmt.Errorf("open results %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return out, fmt.Errorf("results file %s is not a regular file", path)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), maxRecord)
	for sc.Scan() {
		line := sc.Bytes()
		id, quick := recordID(line)
		if quick {
			if _, ok := ws[id]; !ok {
				continue
			}
		}
		var rec resultRecord
		if json.Unmarshal(line, &rec) != nil || rec.Version != resultVersion {
			continue // cut short by a crash, or not ours to read
		}
		p, ok := ws[rec.ID]
		if !ok || p.PID != 0 && rec.PID != 0 && (p.PID != rec.PID || p.StartTicks != rec.StartTicks) {
			continue
		}
		out[rec.ID] = &rec
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read results %s: %w", path, err)
	}
	return out, nil
}

// recordPrefix is how appendResult's lines start, up to the id.
var recordPrefix = []byte(`{"version":` + strconv.Itoa(resultVersion) + `,"id":"`)

// recordID reads the id of a record line without decoding it, when the
// line starts as appendResult writes it and the id needs no unquoting.
func recordID(line []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(line, recordPrefix)
	if !ok {
		return "", false
	}
	i := bytes.IndexByte(rest, '"')
	if i < 0 || bytes.IndexByte(rest[:i], '\\') >= 0 {
		return "", false
	}
	return string(rest[:i]), true
}

// ResultsPath is the path of runDir's results file, for people and tools
// that read it.
func ResultsPath(runDir string) string { return filepath.Join(runDir, resultsName) }
