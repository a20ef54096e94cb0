// Package filekind names kinds of files for people: "a named pipe", "a
// symbolic link". The run directory's safeguards (the state database, the
// artifacts) say in their errors what they found instead of a plain file.
package filekind

import "io/fs"

// Of names the kind of a file of mode m, e.g. "a named pipe".
func Of(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a folder"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "a special file"
}
