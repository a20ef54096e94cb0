package filekind

import (
	"io/fs"
	"testing"
)

func TestOf(t *testing.T) {
	for m, want := range map[fs.FileMode]string{
		0o644: "a regular file", fs.ModeSymlink: "a symbolic link", fs.ModeDir: "a folder",
		fs.ModeNamedPipe: "a named pipe", fs.ModeSocket: "a socket",
		fs.ModeDevice | fs.ModeCharDevice: "a character device", fs.ModeDevice: "a block device",
		fs.ModeIrregular: "a special file",
	} {
		if got := Of(m); got != want {
			t.Errorf("Of(%v) = %q, want %q", m, got, want)
		}
	}
}
