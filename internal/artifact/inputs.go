package artifact

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/gpusched/gpusched/internal/task"
)

// The inputs of a task are the files its Inputs name, found afresh each
// time they are read:
//
//   - a path names that file, or every file under that folder (walked to
//     the bottom, hidden files too);
//   - a glob (a path with *, ? or [...], matched as path.Match does, one
//     path element per *) names every file and folder it matches, a
//     folder standing for every file under it;
//   - a path or glob that names nothing adds nothing: a file that is not
//     there is not an error (an upstream task may make it, and the task
//     itself says whether it needs it), but a file that appears or goes
//     away is a change;
//   - a symbolic link counts as what it points to: a file, a folder (walked,
//     each folder once, so a link loop ends), or nothing when it points
//     nowhere;
//   - anything else (a named pipe, a device, a socket) is an error, and it
//     is not opened: reading one could block forever. So is a folder that
//     cannot be read.
//
// Each file is named by its path under the task's dir (a relative input)
// or by its absolute path (an absolute input), cleaned; two patterns
// that find the same file name it once.

// Inputs returns the files t's inputs name now, sorted by path, with
// their size and modification time, and their SHA-256 when t hashes its
// inputs. A file that prev (what was recorded before) has with the same
// size, modification time and a hash is not read again: its hash is
// taken from prev. Hashing and walking stop when ctx is done, with an
// error wrapping context.Cause(ctx).
func Inputs(ctx context.Context, t *task.Spec, prev []task.Input) ([]task.Input, error) {
	if len(t.Inputs) == 0 {
		return nil, nil
	}
	f := finder{ctx: ctx, t: t, seen: map[string]bool{}, walked: map[fileID]bool{}}
	for _, in := range t.Inputs {
		if err := f.pattern(in); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(f.found, func(a, b found) int { return strings.Compare(a.in.Path, b.in.Path) })
	out := make([]task.Input, len(f.found))
	for i := range f.found {
		out[i] = f.found[i].in
	}
	if !t.HashInputs {
		return out, nil
	}
	before := make(map[string]task.Input, len(prev))
	for _, p := range prev {
		before[p.Path] = p
	}
	buf := make([]byte, 64<<10) // one for every file: inputs may be thousands of small ones
	for i := range out {
		if p, ok := before[out[i].Path]; ok && p.SHA256 != "" && p.Size == out[i].Size && p.ModTime.Equal(out[i].ModTime) {
			out[i].SHA256 = p.SHA256
			continue
		}
		sum, err := hashWith(ctx, f.found[i].full, buf)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, fmt.Errorf("hash input %s: %w", out[i].Path, context.Cause(ctx))
		case errors.Is(err, fs.ErrNotExist):
			// Gone since it was found: what the task will find too.
			out[i].SHA256 = ""
			out[i].Size = -1
		case err != nil:
			return nil, fmt.Errorf("input %s: %w", out[i].Path, err)
		default:
			out[i].SHA256 = sum
		}
	}
	return slices.DeleteFunc(out, func(in task.Input) bool { return in.Size < 0 }), nil
}

// found is an input file and the path to open it by.
type found struct {
	in   task.Input
	full string
}

// fileID names a folder on this machine, so that a walk enters each once.
type fileID struct{ dev, ino uint64 }

// finder collects the files of one task's inputs.
type finder struct {
	ctx    context.Context
	t      *task.Spec
	found  []found
	seen   map[string]bool // found, by path
	walked map[fileID]bool // folders walked
}

// hasMeta reports whether p is a glob rather than a plain path.
func hasMeta(p string) bool { return strings.ContainsAny(p, `*?[\`) }

// pattern adds the files pattern in names.
func (f *finder) pattern(in string) error {
	full := f.t.ArtifactPath(in)
	if !hasMeta(in) {
		return f.add(filepath.Clean(full), filepath.Clean(in))
	}
	matches, err := filepath.Glob(full)
	if err != nil {
		return fmt.Errorf("input %s: %w", in, err) // Validate refuses such globs
	}
	for _, m := range matches {
		if err := f.add(m, f.name(in, m)); err != nil {
			return err
		}
	}
	return nil
}

// name is how the input file at full, found by pattern in, is named:
// relative to the task's dir when in is relative.
func (f *finder) name(in, full string) string {
	if filepath.IsAbs(in) || f.t.Dir == "" {
		return full
	}
	if rel, err := filepath.Rel(f.t.Dir, full); err == nil {
		return rel
	}
	return full
}

// add adds the file, or the files under the folder, at full, named name.
func (f *finder) add(full, name string) error {
	if err := f.ctx.Err(); err != nil {
		return fmt.Errorf("read inputs: %w", context.Cause(f.ctx))
	}
	fi, err := os.Stat(full) // a link counts as what it points to
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // nothing there (or a link to nothing): no file
	case err != nil:
		return fmt.Errorf("input %s: %w", name, err)
	case fi.IsDir():
		return f.walk(full, name, fi)
	}
	if err := regular(fi.Mode()); err != nil {
		return fmt.Errorf("input %s: %w", name, err)
	}
	if f.seen[name] {
		return nil
	}
	f.seen[name] = true
	f.found = append(f.found, found{task.Input{Path: name, Size: fi.Size(), ModTime: fi.ModTime()}, full})
	return nil
}

// walk adds every file under the folder at full (fi), named name.
func (f *finder) walk(full, name string, fi fs.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id := fileID{uint64(st.Dev), st.Ino}
		if f.walked[id] {
			return nil
		}
		f.walked[id] = true
	}
	entries, err := os.ReadDir(full)
	if err != nil {
		return fmt.Errorf("input %s: %w", name, err)
	}
	for _, e := range entries {
		if err := f.add(filepath.Join(full, e.Name()), filepath.Join(name, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// InputsChanged compares the inputs recorded when a task completed (old)
// with those it has now (now), both sorted by path as Inputs returns
// them. It returns "" when they are the same, else why not, for a person:
// "input changed: params.json", "input added: data/c.csv" or "input
// removed: data/b.csv", about the first that differs by path, and ", and
// 2 more" when others do too. With hash, two files with a hash are the
// same when their hashes are; otherwise when their size and
// modification time are.
func InputsChanged(old, now []task.Input, hash bool) string {
	first, more := "", 0
	note := func(why string) {
		if first == "" {
			first = why
		} else {
			more++
		}
	}
	i, j := 0, 0
	for i < len(old) || j < len(now) {
		switch {
		case j == len(now) || i < len(old) && old[i].Path < now[j].Path:
			note("input removed: " + old[i].Path)
			i++
		case i == len(old) || now[j].Path < old[i].Path:
			note("input added: " + now[j].Path)
			j++
		default:
			if sameInput(old[i], now[j], hash) {
				i, j = i+1, j+1
				continue
			}
			note("input changed: " + now[j].Path)
			i, j = i+1, j+1
		}
	}
	if more > 0 {
		return fmt.Sprintf("%s, and %d more", first, more)
	}
	return first
}

// sameInput reports whether a and b, two records of one path, are the
// same file content as far as the task's comparison tells.
func sameInput(a, b task.Input, hash bool) bool {
	if hash && a.SHA256 != "" && b.SHA256 != "" {
		return a.SHA256 == b.SHA256
	}
	return a.Size == b.Size && a.ModTime.Equal(b.ModTime)
}
