package cluster

import (
	"context"
	"fmt"
	"net"
	"sync"
)

// Faults injects network partitions between nodes of one process: every node
// dials through Faults.Dial(itself), and Cut makes the link between two Raft
// addresses fail both ways, closing the connections already open on it, until
// Heal. Tests and fault-injection tools use it; production nodes do not.
type Faults struct {
	mu    sync.Mutex
	cut   map[[2]string]bool
	conns map[*faultConn]struct{}
}

// NewFaults returns a network with every link up.
func NewFaults() *Faults {
	return &Faults{cut: make(map[[2]string]bool), conns: make(map[*faultConn]struct{})}
}

func pair(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

// Dial returns the DialFunc for the node whose Raft address is from. Because the
// address is only known once the node listens, from is a function.
func (f *Faults) Dial(from func() string) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		src := from()
		f.mu.Lock()
		blocked := f.cut[pair(src, addr)]
		f.mu.Unlock()
		if blocked {
			return nil, fmt.Errorf("dial %s from %s: link cut", addr, src)
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		fc := &faultConn{Conn: c, link: pair(src, addr), f: f}
		f.mu.Lock()
		if f.cut[fc.link] {
			f.mu.Unlock()
			c.Close()
			return nil, fmt.Errorf("dial %s from %s: link cut", addr, src)
		}
		f.conns[fc] = struct{}{}
		f.mu.Unlock()
		return fc, nil
	}
}

// Cut breaks the link between two Raft addresses.
func (f *Faults) Cut(a, b string) {
	f.mu.Lock()
	link := pair(a, b)
	f.cut[link] = true
	var doomed []*faultConn
	for c := range f.conns {
		if c.link == link {
			doomed = append(doomed, c)
		}
	}
	f.mu.Unlock()
	for _, c := range doomed {
		c.Close()
	}
}

// Isolate cuts every link between addr and others.
func (f *Faults) Isolate(addr string, others ...string) {
	for _, o := range others {
		if o != addr {
			f.Cut(addr, o)
		}
	}
}

// Heal restores every link.
func (f *Faults) Heal() {
	f.mu.Lock()
	f.cut = make(map[[2]string]bool)
	f.mu.Unlock()
}

type faultConn struct {
	net.Conn
	link [2]string
	f    *Faults
	once sync.Once
}

func (c *faultConn) Close() error {
	c.once.Do(func() {
		c.f.mu.Lock()
		delete(c.f.conns, c)
		c.f.mu.Unlock()
	})
	return c.Conn.Close()
}
