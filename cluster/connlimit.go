package cluster

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Connections that have not proven themselves are capped. On the Raft port a
// connection holds a pending slot from its accept until it has completed the
// TLS handshake and named its stream, at most preambleTimeout; on the gossip
// port a stream holds one for as long as memberlist handles it (gossipTimeout
// at most). Over the cap, or over the share of one address, a new connection
// is closed at once and counted, so a flood of half-open connections costs a
// bounded number of goroutines and buffers, and the peers' own connections
// (long-lived, set up once) go on: no election is lost to it.
const (
	maxPending       = 128 // connections in their handshake, all sources together
	maxPendingPerIP  = 16  // of them from one address
	maxGossipStreams = 64  // gossip streams being handled at once
	// gossipTimeout bounds a gossip stream (memberlist's TCPTimeout, 10 s on
	// a LAN by default): a push and pull of a few members takes milliseconds.
	gossipTimeout = 4 * time.Second
)

// pendingLimit counts connections in their handshake, in all and by address.
type pendingLimit struct {
	mu     sync.Mutex
	total  int
	byAddr map[string]int
	max    int
	perIP  int
}

func newPendingLimit(max, perIP int) *pendingLimit {
	return &pendingLimit{byAddr: map[string]int{}, max: max, perIP: perIP}
}

// take holds a slot for a connection from remote, or reports that none is free.
func (l *pendingLimit) take(remote net.Addr) (release func(), ok bool) {
	host := remote.String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total >= l.max || l.byAddr[host] >= l.perIP {
		return nil, false
	}
	l.total++
	l.byAddr[host]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.total--
			if l.byAddr[host]--; l.byAddr[host] == 0 {
				delete(l.byAddr, host)
			}
			l.mu.Unlock()
		})
	}, true
}

// cappedTransport is memberlist's TCP and UDP transport with a cap on the
// streams it hands memberlist at once: over it, a new stream is closed.
type cappedTransport struct {
	*memberlist.NetTransport
	streams chan net.Conn
	slots   chan struct{}
	done    chan struct{}
	refused func()
	stopped atomic.Bool
}

func newCappedTransport(nt *memberlist.NetTransport, refused func()) *cappedTransport {
	t := &cappedTransport{NetTransport: nt, streams: make(chan net.Conn), slots: make(chan struct{}, maxGossipStreams),
		done: make(chan struct{}), refused: refused}
	go t.loop()
	return t
}

func (t *cappedTransport) loop() {
	for {
		var c net.Conn
		select {
		case c = <-t.NetTransport.StreamCh():
		case <-t.done:
			return
		}
		select {
		case t.slots <- struct{}{}:
		default:
			c.Close()
			if t.refused != nil {
				t.refused()
			}
			continue
		}
		select {
		case t.streams <- &slotConn{Conn: c, release: func() { <-t.slots }}:
		case <-t.done:
			c.Close()
			return
		}
	}
}

// StreamCh hands memberlist the streams within the cap.
func (t *cappedTransport) StreamCh() <-chan net.Conn { return t.streams }

// Shutdown stops handing out streams and shuts the transport down.
func (t *cappedTransport) Shutdown() error {
	if t.stopped.CompareAndSwap(false, true) {
		close(t.done)
	}
	return t.NetTransport.Shutdown()
}

// slotConn gives its slot back when it is closed.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// gossipTransport gives memberlist a transport whose streams are capped
// (cappedTransport) and short (gossipTimeout). memberlist offers no cap on
// what its TCP listener accepts: the transport takes every connection and
// closes, at once, those over the cap. UDP packets are memberlist's own and
// cost no connection.
func (n *Node) gossipTransport(mc *memberlist.Config) error {
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{mc.BindAddr}, BindPort: mc.BindPort, Logger: mc.Logger})
	if err != nil {
		return err
	}
	if mc.BindPort == 0 {
		mc.BindPort = nt.GetAutoBindPort()
		if mc.AdvertisePort == 0 {
			mc.AdvertisePort = mc.BindPort
		}
	}
	mc.TCPTimeout = gossipTimeout
	mc.Transport = newCappedTransport(nt, func() {
		if n.metrics.gossipRefused != nil {
			n.metrics.gossipRefused.Inc()
		}
		n.warnEvery("gossip-streams", "refused a gossip connection: too many being handled at once", "max", maxGossipStreams)
	})
	return nil
}
