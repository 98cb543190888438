//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package client

import (
	"errors"
	"net"
	"syscall"
)

// alive reports whether an idle connection is still open and has nothing
// unread: it peeks at the socket without blocking. A node that died or
// restarted while the connection sat idle closed it, and the peek sees the
// end of stream. Connections from a custom Dialer that expose no socket are
// taken as alive.
func alive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	healthy := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK)
		// Nothing to read is the healthy case; end of stream, unexpected
		// bytes (a reply nobody asked for) or an error all retire it.
		healthy = n <= 0 && (errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK))
		return true
	})
	return err == nil && healthy
}
