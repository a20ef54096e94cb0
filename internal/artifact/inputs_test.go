package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/task"
)

func inputSpec(dir string, hash bool, inputs ...string) *task.Spec {
	return &task.Spec{ID: "t", Dir: dir, Inputs: inputs, HashInputs: hash}
}

func paths(ins []task.Input) []string {
	out := make([]string, len(ins))
	for i, in := range ins {
		out[i] = in.Path
	}
	return out
}

// A path, a glob and a folder (walked to the bottom, hidden files too)
// name their files by their path under the task's dir, sorted, each once
// however many patterns find it; a path or glob that names nothing adds
// nothing.
func TestInputsFindPathsGlobsAndFolders(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "params.json"), "{}")
	write(t, filepath.Join(dir, "data", "a.csv"), "1")
	write(t, filepath.Join(dir, "data", "b.csv"), "22")
	write(t, filepath.Join(dir, "data", "notes.txt"), "x")
	write(t, filepath.Join(dir, "src", "pkg", "m.py"), "x")
	write(t, filepath.Join(dir, "src", ".hidden"), "x")
	if err := os.Mkdir(filepath.Join(dir, "src", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	sp := inputSpec(dir, false, "params.json", "data/*.csv", "src/", "data/a.csv", "missing.json", "none/*.x")
	got, err := Inputs(context.Background(), sp, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"data/a.csv", "data/b.csv", "params.json", "src/.hidden", "src/pkg/m.py"}
	if !slices.Equal(paths(got), want) {
		t.Fatalf("Inputs = %v, want %v", paths(got), want)
	}
	if got[1].Size != 2 || got[1].ModTime.IsZero() || got[1].SHA256 != "" {
		t.Errorf("data/b.csv = %+v; want size 2, a time and no hash (the task does not hash)", got[1])
	}
}

// An absolute input is named by its absolute path, a glob's matches too;
// a task without a dir names relative inputs as they are written.
func TestInputsNames(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "x", "a.txt"), "a")
	got, err := Inputs(context.Background(), inputSpec("/elsewhere", false, filepath.Join(dir, "x", "*.txt"), filepath.Join(dir, "x")+"/"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(dir, "x", "a.txt")}; !slices.Equal(paths(got), want) {
		t.Errorf("Inputs = %v, want %v", paths(got), want)
	}
	t.Chdir(dir)
	got, err = Inputs(context.Background(), inputSpec("", false, "./x/a.txt", "x/*"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"x/a.txt"}; !slices.Equal(paths(got), want) {
		t.Errorf("Inputs = %v, want %v", paths(got), want)
	}
}

// A link counts as what it points to: a file, a folder (walked once, so
// a loop ends), or nothing.
func TestInputsFollowLinks(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "real", "f.txt"), "f")
	for _, l := range []struct{ target, link string }{
		{filepath.Join(dir, "real", "f.txt"), "in/file-link"},
		{filepath.Join(dir, "real"), "in/dir-link"},
		{filepath.Join(dir, "in"), "in/loop"},
		{filepath.Join(dir, "gone"), "in/dangling"},
	} {
		if err := os.MkdirAll(filepath.Join(dir, "in"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(l.target, filepath.Join(dir, l.link)); err != nil {
			t.Fatal(err)
		}
	}
	got := within(t, func() []string {
		ins, err := Inputs(context.Background(), inputSpec(dir, false, "in"), nil)
		if err != nil {
			t.Error(err)
		}
		return paths(ins)
	})
	want := []string{"in/dir-link/f.txt", "in/file-link"}
	if !slices.Equal(got, want) {
		t.Errorf("Inputs = %v, want %v", got, want)
	}
}

// A named pipe among the inputs, named or found in a folder, is an error
// that says what it is, and it is never opened (nothing waits for a
// writer), hashing or not.
func TestInputsRefuseSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "d", "p"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"d/p", "d", "d/*"} {
		for _, hash := range []bool{false, true} {
			err := within(t, func() error {
				_, err := Inputs(context.Background(), inputSpec(dir, hash, in), nil)
				return err
			})
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "input d/p: not a regular file (a named pipe)") {
				t.Errorf("Inputs(%s, hash %v) = %v; want the named pipe refused", in, hash, err)
			}
		}
	}
}

// A folder that cannot be read is an error, not a silently empty input.
func TestInputsUnreadableFolder(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads any folder")
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "d", "x"), "x")
	if err := os.Chmod(filepath.Join(dir, "d"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "d"), 0o755) })
	if _, err := Inputs(context.Background(), inputSpec(dir, false, "d"), nil); !errors.Is(err, os.ErrPermission) {
		t.Errorf("Inputs = %v; want a permission error", err)
	}
}

// With hashing, each file gets its SHA-256, but one whose size and time
// are as prev recorded them keeps prev's hash without being read.
func TestInputsHashReusesUnchangedFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a"), "hello")
	write(t, filepath.Join(dir, "b"), "world")
	sp := inputSpec(dir, true, "a", "b")
	first, err := Inputs(context.Background(), sp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first[0].SHA256 != sha("hello") || first[1].SHA256 != sha("world") {
		t.Fatalf("hashes = %s %s", first[0].SHA256, first[1].SHA256)
	}
	prev := slices.Clone(first)
	prev[0].SHA256 = "recorded" // what a reader of "a" would not find
	again, err := Inputs(context.Background(), sp, prev)
	if err != nil {
		t.Fatal(err)
	}
	if again[0].SHA256 != "recorded" {
		t.Errorf("a was hashed again (%s) though its size and time are unchanged", again[0].SHA256)
	}
	later := first[1].ModTime.Add(time.Second)
	if err := os.Chtimes(filepath.Join(dir, "b"), later, later); err != nil {
		t.Fatal(err)
	}
	prev[1].SHA256 = "stale"
	again, err = Inputs(context.Background(), sp, prev)
	if err != nil {
		t.Fatal(err)
	}
	if again[1].SHA256 != sha("world") {
		t.Errorf("b, touched, kept the hash %s; want it read again", again[1].SHA256)
	}
}

// Reading stops when the context is done, with its cause.
func TestInputsStopWithTheContext(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "d", "x"), "x")
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("stop now")
	cancel(stop)
	if _, err := Inputs(ctx, inputSpec(dir, true, "d"), nil); !errors.Is(err, stop) {
		t.Errorf("Inputs = %v; want the context's cause", err)
	}
}

// InputsChanged names the first file that differs, by path, how it does,
// and how many more do; with hashing, a touched file with the same
// content is the same input.
func TestInputsChanged(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	in := func(p string, size int64, sec int, sum string) task.Input {
		return task.Input{Path: p, Size: size, ModTime: t0.Add(time.Duration(sec) * time.Second), SHA256: sum}
	}
	old := []task.Input{in("a", 1, 0, "h1"), in("b", 2, 0, "h2"), in("c", 3, 0, "h3")}
	tests := []struct {
		name string
		now  []task.Input
		hash bool
		want string
	}{
		{"same", slices.Clone(old), false, ""},
		{"size", []task.Input{in("a", 1, 0, "h1"), in("b", 5, 0, "h2"), in("c", 3, 0, "h3")}, false, "input changed: b"},
		{"time", []task.Input{in("a", 1, 9, "h1"), in("b", 2, 0, "h2"), in("c", 3, 0, "h3")}, false, "input changed: a"},
		{"touched, hashed", []task.Input{in("a", 1, 9, "h1"), in("b", 2, 0, "h2"), in("c", 3, 0, "h3")}, true, ""},
		{"content, hashed", []task.Input{in("a", 1, 0, "h1"), in("b", 2, 0, "hX"), in("c", 3, 0, "h3")}, true, "input changed: b"},
		{"added", []task.Input{in("a", 1, 0, "h1"), in("ab", 1, 0, ""), in("b", 2, 0, "h2"), in("c", 3, 0, "h3")}, false, "input added: ab"},
		{"removed", []task.Input{in("a", 1, 0, "h1"), in("c", 3, 0, "h3")}, false, "input removed: b"},
		{"removed last", []task.Input{in("a", 1, 0, "h1"), in("b", 2, 0, "h2")}, false, "input removed: c"},
		{"several", []task.Input{in("a", 7, 0, "h1"), in("c", 3, 0, "h3"), in("d", 1, 0, "")}, false, "input changed: a, and 2 more"},
		{"none now", nil, false, "input removed: a, and 2 more"},
	}
	for _, tt := range tests {
		if got := InputsChanged(old, tt.now, tt.hash); got != tt.want {
			t.Errorf("%s: InputsChanged = %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := InputsChanged(nil, old[:1], false); got != "input added: a" {
		t.Errorf("nothing recorded: InputsChanged = %q, want an added input", got)
	}
}

// Check lists the regular files among the artifacts that were changed
// since they were recorded, and only those: not a missing one, not a
// folder, not one the task would rewrite alike.
func TestCheckListsEditedArtifacts(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "out", "model.pt"), "weights")
	write(t, filepath.Join(dir, "out", "log.txt"), "log")
	write(t, filepath.Join(dir, "out", "gone.bin"), "x")
	write(t, filepath.Join(dir, "folder", "f"), "f")
	sp := spec(dir, false, "out/model.pt", "out/log.txt", "out/gone.bin", "folder")
	old, err := Collect(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "out", "model.pt"), "hand-tuned weights")
	if err := os.Remove(filepath.Join(dir, "out", "gone.bin")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "folder", "new"), "n") // the folder's time changes
	later := old[3].ModTime.Add(time.Second)
	if err := os.Chtimes(filepath.Join(dir, "folder"), later, later); err != nil {
		t.Fatal(err)
	}
	why, edited, err := Check(context.Background(), sp, old)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(why, "artifact changed: out/model.pt (size 7 -> 18)") {
		t.Errorf("why = %q; want the first problem, the edited model", why)
	}
	if want := []string{"out/model.pt"}; !slices.Equal(edited, want) {
		t.Errorf("edited = %v, want %v", edited, want)
	}
	// Intact says the same first reason.
	if w, err := Intact(context.Background(), sp, old); err != nil || w != why {
		t.Errorf("Intact = %q, %v; want %q", w, err, why)
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
