package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// peer is who is on the other end of a connection, as the kernel says
// (SO_PEERCRED): never what a request claims.
type peer struct {
	uid, gid, pid int
	err           error // why the peer is unknown; its requests are refused
}

type peerKey struct{}

// peerCred reads the credentials of a unix socket's peer.
func peerCred(c net.Conn) peer {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return peer{err: fmt.Errorf("a %s connection, not a unix socket", c.RemoteAddr().Network())}
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return peer{err: fmt.Errorf("peer credentials: %w", err)}
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		cerr = err
	}
	if cerr != nil {
		return peer{err: fmt.Errorf("peer credentials: %w", cerr)}
	}
	return peer{uid: int(cred.Uid), gid: int(cred.Gid), pid: int(cred.Pid)}
}

// withPeer is the server's ConnContext: each connection's context carries
// its peer, read once.
func (d *Daemon) withPeer(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, peerKey{}, d.peerOf(c))
}

// peerFrom returns the peer of a request's connection.
func peerFrom(ctx context.Context) peer {
	if p, ok := ctx.Value(peerKey{}).(peer); ok {
		return p
	}
	return peer{err: errors.New("no peer credentials")}
}
