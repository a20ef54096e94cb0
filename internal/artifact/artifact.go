// Package artifact checks the files tasks produce: that they exist when a
// task completes, what they were like then (size, modification time, and a
// SHA-256 of the content when asked), and whether they are still so when a
// run resumes.
package artifact

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

// Stat returns artifact path of task t as it is now, hashing its content
// when t asks for it. A missing file is an error wrapping fs.ErrNotExist.
func Stat(t *task.Spec, path string) (task.Artifact, error) {
	full := t.ArtifactPath(path)
	fi, err := os.Stat(full)
	if err != nil {
		return task.Artifact{}, err
	}
	a := task.Artifact{Path: path, Size: fi.Size(), ModTime: fi.ModTime()}
	if fi.IsDir() {
		return a, nil // a folder: its presence is what counts
	}
	if t.HashArtifacts {
		f, err := os.Open(full)
		if err != nil {
			return a, err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return a, fmt.Errorf("hash %s: %w", path, err)
		}
		a.SHA256 = hex.EncodeToString(h.Sum(nil))
	}
	return a, nil
}

// Collect stats every artifact of t after an attempt exited 0. The first
// missing one is reported as "artifact missing: PATH".
func Collect(t *task.Spec) ([]task.Artifact, error) {
	out := make([]task.Artifact, 0, len(t.Artifacts))
	for _, p := range t.Artifacts {
		a, err := Stat(t, p)
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
// (size 10 -> 12)".
func Intact(t *task.Spec, old []task.Artifact) string {
	byPath := make(map[string]task.Artifact, len(old))
	for _, a := range old {
		byPath[a.Path] = a
	}
	for _, p := range t.Artifacts {
		before, ok := byPath[p]
		if !ok {
			return fmt.Sprintf("artifact %s was not recorded when the task completed", p)
		}
		now, err := Stat(t, p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "artifact missing: " + p
		case err != nil:
			return fmt.Sprintf("artifact %s: %v", p, err)
		}
		if why := changed(before, now, t.HashArtifacts); why != "" {
			return fmt.Sprintf("artifact changed: %s (%s)", p, why)
		}
	}
	return ""
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
