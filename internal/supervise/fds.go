package supervise

import (
	"errors"
	"io"
	"net"

	"golang.org/x/sys/unix"
)

// maxFDs bounds the descriptors one message may bring (a scheduler's:
// stdio, the status pipe and a few more).
const maxFDs = 16

// fdReader reads a client's connection as a byte stream, as the messages'
// scanner wants it, and keeps the descriptors that come with the bytes
// (SCM_RIGHTS) for the message that needs them. Only the goroutine that
// reads the connection uses it.
type fdReader struct {
	nc  *net.UnixConn
	oob []byte
	fds []int // received, not yet taken
}

func newFDReader(nc *net.UnixConn) *fdReader {
	return &fdReader{nc: nc, oob: make([]byte, unix.CmsgSpace(maxFDs*4))}
}

// Read reads bytes, keeping any descriptors that come with them (at most
// maxFDs waiting: more are closed).
func (r *fdReader) Read(b []byte) (int, error) {
	n, oobn, _, _, err := r.nc.ReadMsgUnix(b, r.oob)
	if oobn > 0 {
		msgs, _ := unix.ParseSocketControlMessage(r.oob[:oobn])
		for i := range msgs {
			fds, _ := unix.ParseUnixRights(&msgs[i])
			for _, fd := range fds {
				if len(r.fds) < maxFDs {
					r.fds = append(r.fds, fd)
				} else {
					unix.Close(fd)
				}
			}
		}
	}
	if errors.Is(err, io.EOF) {
		err = io.EOF // as the scanner wants it
	}
	return n, err
}

// take returns the descriptors received so far; the caller owns them.
func (r *fdReader) take() []int {
	fds := r.fds
	r.fds = nil
	return fds
}

// close closes the descriptors no message took.
func (r *fdReader) close() {
	for _, fd := range r.take() {
		unix.Close(fd)
	}
}
