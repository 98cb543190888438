package cluster

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Connections that have not proven themselves are capped. On the Raft port a
// connection holds a pending slot from its accept until it has completed the
// TLS handshake and named its stream; on the gossip port a stream holds one
// for as long as memberlist handles it (gossipTimeout at most). Over the cap,
// or over the share of one address, a new connection is closed at once and
// counted, so a flood of half-open connections costs a bounded number of
// goroutines and buffers, and the peers' own connections (long-lived, set up
// once) go on: no election is lost to it.
//
// The Raft port keeps two pools of pending slots (cluster/DESIGN.md,
// "Half-open connections"). A connection from an address of a known member
// (memberHosts: a host of a server of any group this node holds, of its
// members file, or of a member gossip knows) takes a member's slot and has
// preambleTimeout to prove itself; one from any other address takes a
// stranger's slot, from a smaller pool, and has strangerTimeout. A flood from
// other addresses fills the strangers' pool only: a member restarting under
// it is reached by its peers as if there were none.
const (
	maxPendingMembers     = 96 // connections in their handshake from members' addresses, together
	maxPendingPerMember   = 32 // of them from one address
	maxPendingStrangers   = 32 // connections in their handshake from any other address, together
	maxPendingPerStranger = 4  // of them from one address
	// strangerTimeout bounds the handshake of a connection from a stranger's
	// address: a TLS handshake and the stream byte take a few round trips,
	// milliseconds on a LAN, so a stranger that has not named its stream by
	// then gives its slot to the next.
	strangerTimeout  = 1500 * time.Millisecond
	maxGossipStreams = 64 // gossip streams being handled at once
	// gossipTimeout bounds a gossip stream (memberlist's TCPTimeout, 10 s on
	// a LAN by default): a push and pull of a few members takes milliseconds.
	gossipTimeout = 4 * time.Second
)

// peerKind is what the Raft port takes a connection's source address for.
type peerKind int

const (
	fromStranger peerKind = iota // any address but a known member's
	fromMember                   // an address of a known member
)

func (k peerKind) String() string {
	if k == fromMember {
		return "member"
	}
	return "stranger"
}

// handshakeTimeout is how long a connection of kind k may take to complete
// its handshake and name its stream.
func (k peerKind) handshakeTimeout() time.Duration {
	if k == fromMember {
		return preambleTimeout
	}
	return strangerTimeout
}

// pendingPool counts one kind's connections in their handshake, in all and
// by address.
type pendingPool struct {
	total, max, perAddr int
	byAddr              map[string]int
}

// pendingLimit is the Raft port's two pools of pending slots, by peerKind.
type pendingLimit struct {
	mu    sync.Mutex
	pools [2]pendingPool
}

func newPendingLimit(members, perMember, strangers, perStranger int) *pendingLimit {
	l := &pendingLimit{}
	l.pools[fromMember] = pendingPool{max: members, perAddr: perMember, byAddr: map[string]int{}}
	l.pools[fromStranger] = pendingPool{max: strangers, perAddr: perStranger, byAddr: map[string]int{}}
	return l
}

// take holds a slot of kind's pool for a connection from host, or reports
// that none is free. A full pool never borrows from the other.
func (l *pendingLimit) take(host string, kind peerKind) (release func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := &l.pools[kind]
	if p.total >= p.max || p.byAddr[host] >= p.perAddr {
		return nil, false
	}
	p.total++
	p.byAddr[host]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			p.total--
			if p.byAddr[host]--; p.byAddr[host] == 0 {
				delete(p.byAddr, host)
			}
			l.mu.Unlock()
		})
	}, true
}

// pending is how many slots of kind's pool are held.
func (l *pendingLimit) pending(kind peerKind) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pools[kind].total
}

// hostOf is the address a connection comes from, as memberHosts keeps
// addresses: an IP in its canonical text, an IPv4 address mapped into IPv6
// as IPv4.
func hostOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(ta.IP); ok {
			return ip.Unmap().String()
		}
	}
	h := a.String()
	if x, _, err := net.SplitHostPort(h); err == nil {
		h = x
	}
	return canonicalHost(h)
}

// canonicalHost is h in hostOf's form if it is an IP address, else h.
func canonicalHost(h string) string {
	if ip, err := netip.ParseAddr(h); err == nil {
		return canonicalIP(ip)
	}
	return h
}

// canonicalIP is ip as the connection limits compare addresses: IPv4 mapped
// into IPv6 as IPv4, without a zone.
func canonicalIP(ip netip.Addr) string { return ip.Unmap().WithZone("").String() }

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
