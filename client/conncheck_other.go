//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package client

import "net"

// alive cannot peek at a socket on this platform: an idle connection is taken
// as open, and one a node closed meanwhile fails at its next request, which
// is then reported as possibly applied.
func alive(net.Conn) bool { return true }
