// Package artifact checks the files tasks produce: that they exist when a
// task completes, what they were like then (size, modification time, and a
// SHA-256 of the content when asked), and whether they are still so when a
// run resumes.
//
// An artifact is a regular file, or a folder (its presence is what counts);
// a link to one counts as what it points to. Anything else (a named pipe, a
// device, a socket) is refused without being opened: reading one could
// block forever. Hashing stops when its context is done.
package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/gpusched/gpusched/internal/filekind"
	"github.com/gpusched/gpusched/internal/task"
)

// ErrNotRegular is wrapped by the error for an artifact that is neither a
// regular file nor a folder.
var ErrNotRegular = errors.New("not a regular file")

// chunk is how much is hashed between two looks at the context.
const chunk = 1 << 20

// Stat returns artifact path of task t as it is now, hashing its content
// when t asks for it. A missing file is an error wrapping fs.ErrNotExist;
// anything but a regular file or a folder, one wrapping ErrNotRegular ("not
// a regular file (a named pipe)"), and it is not opened. Hashing stops when
// ctx is done, with an error wrapping context.Cause(ctx).
func Stat(ctx context.Context, t *task.Spec, path string) (task.Artifact, error) {
	full := t.ArtifactPath(path)
	fi, err := os.Stat(full)
	if err != nil {
		return task.Artifact{}, err
	}
	if err := regular(fi.Mode()); err != nil {
		return task.Artifact{}, err
	}
	a := task.Artifact{Path: path, Size: fi.Size(), ModTime: fi.ModTime()}
	if fi.IsDir() || !t.HashArtifacts {
		return a, nil // a folder: its presence is what counts
	}
	sum, err := hash(ctx, full)
	if err != nil {
		return task.Artifact{}, err
	}
	a.SHA256 = sum
	return a, nil
}

// hash returns the SHA-256 of the regular file at full. The file is opened
// without blocking and checked again once open, in case something else was
// put at the path after it was looked at.
func hash(ctx context.Context, full string) (string, error) {
	return hashWith(ctx, full, make([]byte, 64<<10))
}

// hashWith is hash, reading through buf: a caller hashing many files
// reuses one.
func hashWith(ctx context.Context, full string, buf []byte) (string, error) {
	f, err := os.OpenFile(full, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if err := regular(fi.Mode()); err != nil {
		return "", err
	}
	h := sha256.New()
	for {
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("hash: %w", context.Cause(ctx))
		}
		n, err := io.CopyBuffer(h, io.LimitReader(f, chunk), buf)
		if err != nil {
			return "", fmt.Errorf("hash: %w", err)
		}
		if n < chunk {
			return hex.EncodeToString(h.Sum(nil)), nil
		}
	}
}

// regular accepts a regular file or a folder and refuses anything else,
// saying what it is.
func regular(m fs.FileMode) error {
	if m.IsRegular() || m.IsDir() {
		return nil
	}
	return fmt.Errorf("%w (%s)", ErrNotRegular, filekind.Of(m))
}

// Collect stats every artifact of t after an attempt exited 0. The first
// missing one is reported as "artifact missing: PATH", one that is not a
// regular file or folder as "artifact PATH: not a regular file (a named
// pipe)". It stops when ctx is done, with an error wrapping its cause.
func Collect(ctx context.Context, t *task.Spec) ([]task.Artifact, error) {
	out := make([]task.Artifact, 0, len(t.Artifacts))
	for _, p := range t.Artifacts {
		a, err := Stat(ctx, t, p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("artifact missing: %s", p)
		}
		if err != nil {
			return nil, fmt.Errorf("artifact %s: %w", p, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// Intact compares the artifacts t produced when it completed (old) with
// the files now. It returns "" when they are all intact, else why not, for
// a person: "artifact missing: out/x.bin", "artifact changed: out/x.bin
// (size 10 -> 12)", "artifact out/x: not a regular file (a named pipe)".
// The error is not nil only when ctx was done before the answer was known;
// it wraps ctx's cause, and the reason is then "".
func Intact(ctx context.Context, t *task.Spec, old []task.Artifact) (string, error) {
	why, _, err := Check(ctx, t, old)
	return why, err
}

// Check is Intact, and it also lists the artifacts edited since t
// completed: the regular files among them that are still there but
// differ from old (their content, when t hashes its artifacts; else their
// size or modification time), in t's order. Running t again would
// overwrite them. A folder is never said to be edited; a missing
// artifact is not either: nothing is left to overwrite. Unlike Intact,
// which could stop at the first problem, it looks at every artifact.
func Check(ctx context.Context, t *task.Spec, old []task.Artifact) (why string, edited []string, err error) {
	byPath := make(map[string]task.Artifact, len(old))
	for _, a := range old {
		byPath[a.Path] = a
	}
	note := func(w string) {
		if why == "" {
			why = w
		}
	}
	for _, p := range t.Artifacts {
		before, ok := byPath[p]
		if !ok {
			note(fmt.Sprintf("artifact %s was not recorded when the task completed", p))
			continue
		}
		now, err := Stat(ctx, t, p)
		switch {
		case err != nil && ctx.Err() != nil:
			return "", nil, fmt.Errorf("check artifact %s: %w", p, context.Cause(ctx))
		case errors.Is(err, fs.ErrNotExist):
			note("artifact missing: " + p)
			continue
		case err != nil:
			note(fmt.Sprintf("artifact %s: %v", p, err))
			continue
		}
		if how := changed(before, now, t.HashArtifacts); how != "" {
			note(fmt.Sprintf("artifact changed: %s (%s)", p, how))
			if fi, err := os.Stat(t.ArtifactPath(p)); err == nil && fi.Mode().IsRegular() {
				edited = append(edited, p)
			}
		}
	}
	return why, edited, nil
}

// changed says how an artifact differs, or "" if it does not. With hashing,
// the content decides (a touched file is intact); without, the size and
// modification time do.
func changed(before, now task.Artifact, hash bool) string {
	switch {
	case hash && before.SHA256 != "" && now.SHA256 != "":
		if before.SHA256 != now.SHA256 {
			return "content changed"
		}
		return ""
	case before.Size != now.Size:
		return fmt.Sprintf("size %d -> %d", before.Size, now.Size)
	case !before.ModTime.Equal(now.ModTime):
		return fmt.Sprintf("modified %s -> %s", stamp(before.ModTime), stamp(now.ModTime))
	}
	return ""
}

func stamp(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05.000") }
