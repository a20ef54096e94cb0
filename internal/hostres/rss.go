package hostres

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// GroupRSS returns the resident memory of the process groups pgids, in
// MiB: the sum of the RSS of the processes in each (/proc/PID/stat), so a
// page that several of them share counts once for each. A group with no
// process left is absent. It reads the stat file of every process of the
// machine once, whatever the number of groups asked about.
func (m Machine) GroupRSS(pgids []int) (map[int]int64, error) {
	if len(pgids) == 0 {
		return nil, nil
	}
	want := make(map[int]int64, len(pgids)) // pgid -> pages
	for _, g := range pgids {
		want[g] = -1 // none seen yet
	}
	dir, err := os.Open(m.path("proc"))
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	names, err := dir.Readdirnames(-1)
	dir.Close()
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	buf := make([]byte, 0, 1024)
	path := make([]byte, 0, 64)
	path = append(path, m.path("proc")...)
	path = append(path, '/')
	base := len(path)
	for _, name := range names {
		if name[0] < '1' || name[0] > '9' {
			continue
		}
		path = append(append(path[:base], name...), "/stat"...)
		if buf, err = readInto(string(path), buf[:0]); err != nil {
			continue // gone since the listing, or not ours to read
		}
		pgid, pages, ok := parseStat(buf)
		if !ok {
			continue
		}
		if have, asked := want[pgid]; asked {
			want[pgid] = max(have, 0) + pages
		}
	}
	page := int64(os.Getpagesize())
	out := make(map[int]int64, len(want))
	for g, pages := range want {
		if pages >= 0 {
			out[g] = pages * page >> 20
		}
	}
	return out, nil
}

// readInto reads the file at path into buf, which it returns grown.
func readInto(path string, buf []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return buf, err
	}
	defer f.Close()
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil || n == 0 {
			return buf, nil // io.EOF, or what was read of a file that went away
		}
	}
}

// parseStat reads the process group (field 5) and the resident pages
// (field 24) of a /proc/PID/stat line: "pid (comm) S ppid pgrp ...", comm
// holding anything, spaces and parentheses included.
func parseStat(b []byte) (pgid int, pages int64, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	b = b[i+1:]
	// After ")": state is field 3; pgrp is the 3rd from there, rss the 22nd.
	field := 0
	for len(b) > 0 {
		for len(b) > 0 && b[0] == ' ' {
			b = b[1:]
		}
		j := bytes.IndexByte(b, ' ')
		if j < 0 {
			j = len(b)
		}
		field++
		switch field {
		case 3:
			g, err := strconv.Atoi(string(b[:j]))
			if err != nil {
				return 0, 0, false
			}
			pgid = g
		case 22:
			p, err := strconv.ParseInt(string(bytes.TrimSpace(b[:j])), 10, 64)
			if err != nil {
				return 0, 0, false
			}
			return pgid, max(p, 0), true
		}
		b = b[j:]
	}
	return 0, 0, false
}
