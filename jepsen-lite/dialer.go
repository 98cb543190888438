package main

import (
	"context"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// cutter breaks the clients' connections to the nodes on the nemesis's
// command: while it is on, a request that goes out has its connection closed
// a moment later, before or after the node has taken it, so the client sees
// a broken connection and must retry a write whose outcome it cannot know.
// Raft links are untouched: this is the network between clients and nodes.
type cutter struct {
	on   atomic.Bool
	mu   sync.Mutex
	rng  *rand.Rand
	cuts atomic.Int64
}

func newCutter(seed uint64) *cutter { return &cutter{rng: rand.New(rand.NewPCG(seed, 0xc0ffee))} }

// dial is a client dialer whose connections the cutter can break.
func (c *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 2 * time.Second, KeepAlive: 5 * time.Minute}
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &cutConn{Conn: conn, c: c}, nil
}

// decide says whether to cut after this write, and after how long.
func (c *cutter) decide() (bool, time.Duration) {
	if !c.on.Load() {
		return false, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rng.IntN(3) != 0 {
		return false, 0
	}
	return true, time.Duration(c.rng.IntN(3000)) * time.Microsecond
}

type cutConn struct {
	net.Conn
	c    *cutter
	once sync.Once
}

func (cc *cutConn) Write(p []byte) (int, error) {
	n, err := cc.Conn.Write(p)
	if cut, after := cc.c.decide(); cut {
		cc.once.Do(func() {
			cc.c.cuts.Add(1)
			time.AfterFunc(after, func() { cc.Conn.Close() })
		})
	}
	return n, err
}
