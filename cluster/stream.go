package cluster

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// One TCP port carries both Raft's own traffic and node-to-node requests
// (forwarded writes, read indexes, status). The dialer writes one byte naming the
// stream first; the acceptor reads it and hands the connection on.
const (
	streamRaft byte = 'R'
	streamRPC  byte = 'P'
)

// preambleTimeout bounds how long an accepted connection may take to name itself.
const preambleTimeout = 5 * time.Second

// mux accepts on one listener and splits connections between Raft and the RPC
// server.
type mux struct {
	ln        net.Listener
	advertise net.Addr
	dial      DialFunc
	raftConns chan net.Conn
	serveRPC  func(net.Conn)

	closeOnce sync.Once
	closed    chan struct{}
	wg        sync.WaitGroup
}

func newMux(ln net.Listener, advertise net.Addr, dial DialFunc, serveRPC func(net.Conn)) *mux {
	m := &mux{
		ln:        ln,
		advertise: advertise,
		dial:      dial,
		raftConns: make(chan net.Conn),
		serveRPC:  serveRPC,
		closed:    make(chan struct{}),
	}
	m.wg.Add(1)
	go m.acceptLoop()
	return m
}

func (m *mux) acceptLoop() {
	defer m.wg.Done()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.route(c)
		}()
	}
}

func (m *mux) route(c net.Conn) {
	var b [1]byte
	_ = c.SetReadDeadline(time.Now().Add(preambleTimeout))
	if _, err := c.Read(b[:]); err != nil {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	switch b[0] {
	case streamRaft:
		select {
		case m.raftConns <- c:
		case <-m.closed:
			c.Close()
		}
	case streamRPC:
		m.serveRPC(c)
	default:
		c.Close()
	}
}

// dialStream opens a connection to addr and names its stream.
func (m *mux) dialStream(ctx context.Context, addr string, kind byte) (net.Conn, error) {
	c, err := m.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetWriteDeadline(dl)
	}
	if _, err := c.Write([]byte{kind}); err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetWriteDeadline(time.Time{})
	return c, nil
}

// close stops accepting; it does not wait for connections already routed.
func (m *mux) close() error {
	var err error
	m.closeOnce.Do(func() {
		close(m.closed)
		err = m.ln.Close()
	})
	return err
}

// raftLayer is the raft.StreamLayer view of the mux.
type raftLayer struct{ m *mux }

var _ raft.StreamLayer = raftLayer{}

func (l raftLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.m.raftConns:
		return c, nil
	case <-l.m.closed:
		return nil, net.ErrClosed
	}
}

func (l raftLayer) Close() error   { return l.m.close() }
func (l raftLayer) Addr() net.Addr { return l.m.advertise }

func (l raftLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return l.m.dialStream(ctx, string(addr), streamRaft)
}
