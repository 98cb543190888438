package cluster

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// One TCP port carries both Raft's own traffic and node-to-node requests
// (forwarded writes, read indexes, status). With peer TLS the connection first
// completes a mutual TLS handshake; then the dialer writes one byte naming the
// stream, and the acceptor reads it and hands the connection on.
const (
	streamRaft  byte = 'R' // Raft traffic of group 0
	streamRPC   byte = 'P'
	streamGroup byte = 'G' // then a uvarint group id > 0: Raft traffic of that group
)

// preambleTimeout bounds how long an accepted connection from a member's
// address may take to complete its handshake and name itself (a few round
// trips); meanwhile it holds one of a capped number of pending slots. One from
// any other address has strangerTimeout (connlimit.go).
const preambleTimeout = 3 * time.Second

// refusedLogEvery spaces the log lines about refused connections, so a flood of
// strangers costs a line a second, not a line each.
const refusedLogEvery = time.Second

// mux accepts on one listener and splits connections between Raft and the RPC
// server.
type mux struct {
	muxConfig
	ln        net.Listener
	advertise net.Addr
	raftConns chan net.Conn // group 0's

	groupsMu sync.Mutex
	groups   map[int]chan net.Conn // Raft connections of groups > 0, by group
	pending  *pendingLimit
	members  atomic.Pointer[hostSet] // members' addresses (memberhosts.go); nil: none known yet

	lastRefusedLog atomic.Int64 // unix nanoseconds
	suppressed     atomic.Int64 // refusals not logged since

	closeOnce sync.Once
	closed    chan struct{}
	wg        sync.WaitGroup
}

// muxConfig is what the node gives its mux.
type muxConfig struct {
	dial     DialFunc
	tls      *PeerTLS                      // nil: plain TCP
	auth     *peerAuth                     // who a TLS peer may be (peerauth.go)
	serveRPC func(c net.Conn, peer string) // peer: the node id its certificate names ("" without TLS)
	// fenced says, for a group, which senders a recovery of it cut off
	// (nil: none); set before the mux accepts (fence.go).
	fenced func(gid int) func(id string) bool
	log    *slog.Logger
	// refused counts every connection refused; pendingRefused, by
	// peerKind, those closed for want of a pending slot.
	refused        prometheus.Counter
	pendingRefused [2]prometheus.Counter
	// misdialed hears of a connection this node dialled and closed after
	// the handshake: the peer's certificate names node got, not want
	// (stream "raft" or "rpc"; err says why when got is no node at all).
	misdialed func(stream, addr, want, got string, err error)
}

func newMux(ln net.Listener, advertise net.Addr, cfg muxConfig) *mux {
	m := &mux{
		muxConfig: cfg,
		ln:        ln,
		advertise: advertise,
		raftConns: make(chan net.Conn),
		groups:    make(map[int]chan net.Conn),
		pending:   newPendingLimit(maxPendingMembers, maxPendingPerMember, maxPendingStrangers, maxPendingPerStranger),
		closed:    make(chan struct{}),
	}
	m.wg.Add(1)
	go m.acceptLoop()
	return m
}

// setMembers sets the addresses whose connections take members' pending
// slots.
func (m *mux) setMembers(hosts hostSet) { m.members.Store(&hosts) }

// kindOf is what a connection from host is taken for.
func (m *mux) kindOf(host string) peerKind {
	if hs := m.members.Load(); hs != nil {
		if _, ok := (*hs)[host]; ok {
			return fromMember
		}
	}
	return fromStranger
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
		host := hostOf(c.RemoteAddr())
		kind := m.kindOf(host)
		release, ok := m.pending.take(host, kind)
		if !ok {
			if r := m.pendingRefused[kind]; r != nil {
				r.Inc()
			}
			m.refuse(c, "too many connections in their handshake from "+kind.String()+"s' addresses", nil)
			continue
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.route(c, release, kind.handshakeTimeout())
		}()
	}
}

// route authenticates a connection (with peer TLS), reads the byte that names
// its stream and hands it on. Nothing else is read from a connection whose
// handshake failed or whose certificate names no node (peerauth.go); a Raft
// connection is read through a guard that lets the peer speak only as the node
// its certificate names (raftguard.go). It has until timeout to name its
// stream.
func (m *mux) route(c net.Conn, release func(), timeout time.Duration) {
	defer release()
	_ = c.SetDeadline(time.Now().Add(timeout))
	var peer string
	if m.tls != nil {
		tc := tls.Server(c, m.tls.Server)
		if err := tc.Handshake(); err != nil {
			m.refuse(c, "tls handshake", err)
			return
		}
		id, err := m.auth.identify(tc.ConnectionState())
		if err != nil {
			m.refuse(tc, "certificate", err)
			return
		}
		c, peer = tc, id
	}
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		m.refuse(c, "read stream", err)
		return
	}
	gid := 0
	if b[0] == streamGroup {
		// Read under the preamble's deadline, as the stream byte is.
		id, err := readGroupID(c)
		if err != nil {
			m.refuse(c, "group id", err)
			return
		}
		gid = id
	}
	_ = c.SetDeadline(time.Time{})
	release() // it has proven itself: its slot goes to the next
	if b[0] == streamRaft || b[0] == streamGroup {
		// Every group's Raft traffic is guarded alike: a shard's as group 0's.
		var fenced func(string) bool
		if m.fenced != nil {
			fenced = m.fenced(gid)
		}
		if peer != "" && fenced != nil && fenced(peer) {
			m.refuse(c, "raft of a shard a recovery cut this node off", nil)
			return
		}
		if peer != "" || fenced != nil {
			tc := c
			c = newSenderGuard(tc, senderIs(peer, fenced), func(err error) { m.refuse(tc, "raft request", err) })
		}
	}
	switch b[0] {
	case streamRaft:
		select {
		case m.raftConns <- c:
		case <-m.closed:
			c.Close()
		}
	case streamRPC:
		m.serveRPC(c, peer)
	case streamGroup:
		ch := m.groupConns(gid)
		if ch == nil {
			// Not (or no longer) a group of this node: the peer's map is
			// ahead of or behind this node's; it dials again.
			c.Close()
			return
		}
		select {
		case ch <- c:
		case <-m.closed:
			c.Close()
		}
	default:
		m.refuse(c, "unknown stream", nil)
	}
}

// refuse closes a connection that did not prove itself, counting it and
// logging at most one line a second.
func (m *mux) refuse(c net.Conn, why string, err error) {
	remote := c.RemoteAddr().String()
	c.Close()
	if m.refused != nil {
		m.refused.Inc()
	}
	now := time.Now().UnixNano()
	last := m.lastRefusedLog.Load()
	if now-last < int64(refusedLogEvery) || !m.lastRefusedLog.CompareAndSwap(last, now) {
		m.suppressed.Add(1)
		return
	}
	m.log.Warn("refused a connection on the raft port", "remote", remote, "why", why, "err", err,
		"refused_since_last_line", m.suppressed.Swap(0))
}

// readGroupID reads the uvarint group id of a group stream, a byte at a
// time, so that nothing after it is read.
func readGroupID(c net.Conn) (int, error) {
	var id uint64
	var b [1]byte
	for shift := uint(0); shift < 35; shift += 7 {
		if _, err := io.ReadFull(c, b[:]); err != nil {
			return 0, err
		}
		id |= uint64(b[0]&0x7f) << shift
		if b[0] < 0x80 {
			if id == 0 || id > maxGroupID {
				return 0, fmt.Errorf("group id %d out of range", id)
			}
			return int(id), nil
		}
	}
	return 0, errors.New("group id too long")
}

// maxGroupID bounds a group id: there are at most as many shards as slots.
const maxGroupID = 16384

// groupConns is the channel of group id's Raft connections, nil if the node
// has no such group open.
func (m *mux) groupConns(id int) chan net.Conn {
	m.groupsMu.Lock()
	defer m.groupsMu.Unlock()
	return m.groups[id]
}

// openGroup makes the mux take Raft connections for group id (group 0's
// come on streamRaft, the others' on streamGroup).
func (m *mux) openGroup(id int) raftLayer {
	l := raftLayer{m: m, group: id, done: make(chan struct{}), once: new(sync.Once), live: newConnSet()}
	if id == 0 {
		return l
	}
	m.groupsMu.Lock()
	defer m.groupsMu.Unlock()
	ch, ok := m.groups[id]
	if !ok {
		ch = make(chan net.Conn)
		m.groups[id] = ch
	}
	l.conns = ch
	return l
}

// closeGroup stops taking group id's connections.
func (m *mux) closeGroup(id int) {
	m.groupsMu.Lock()
	delete(m.groups, id)
	m.groupsMu.Unlock()
}

// dialStream opens a connection to node id at addr, completes the TLS
// handshake (with peer TLS) and names its stream.
func (m *mux) dialStream(ctx context.Context, id, addr string, kind byte) (net.Conn, error) {
	return m.dialGroupStream(ctx, id, addr, kind, 0)
}

// dialGroupStream is dialStream for a stream of a group: group 0's Raft
// traffic is streamRaft, as before groups, another group's streamGroup and
// its id. With peer TLS the node that answers must hold the certificate of
// id, by the rules the accepting side applies (peerAuth.dialled); else the
// connection is closed before a byte of the stream is written.
func (m *mux) dialGroupStream(ctx context.Context, id, addr string, kind byte, group int) (net.Conn, error) {
	c, err := m.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if m.tls != nil {
		tc := tls.Client(c, m.tls.Client)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		if got, err := m.auth.dialled(tc.ConnectionState(), id); err != nil {
			tc.Close()
			if m.misdialed != nil {
				stream := "raft"
				if kind == streamRPC {
					stream = "rpc"
				}
				m.misdialed(stream, addr, id, got, err)
			}
			return nil, fmt.Errorf("the node at %s: %w", addr, err)
		}
		c = tc
	}
	pre := []byte{kind}
	if kind == streamRaft && group > 0 {
		pre = binary.AppendUvarint([]byte{streamGroup}, uint64(group))
	}
	if _, err := c.Write(pre); err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
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

// raftLayer is the raft.StreamLayer view of the mux, for one group. It keeps
// the connections it hands raft, dialled and accepted, so that closing the
// group can cut them (group.close).
type raftLayer struct {
	m     *mux
	group int
	conns chan net.Conn // nil: group 0's, m.raftConns
	done  chan struct{} // closed by Close of a group > 0
	once  *sync.Once    // closes done once
	live  *connSet
}

var _ raft.StreamLayer = raftLayer{}

func (l raftLayer) Accept() (net.Conn, error) {
	conns, done := l.m.raftConns, (<-chan struct{})(nil)
	if l.group > 0 {
		conns, done = l.conns, l.done
	}
	select {
	case c := <-conns:
		return l.live.add(c), nil
	case <-l.m.closed:
		return nil, net.ErrClosed
	case <-done:
		return nil, net.ErrClosed
	}
}

// Close ends the layer: group 0's closes the mux (the node is stopping);
// another group's only stops taking its connections.
func (l raftLayer) Close() error {
	if l.group == 0 {
		return l.m.close()
	}
	l.m.closeGroup(l.group)
	l.once.Do(func() { close(l.done) })
	return nil
}

// closeConns closes every connection the layer handed raft that is still
// open, and every one it hands out from now on.
func (l raftLayer) closeConns() {
	if l.live != nil {
		l.live.closeAll()
	}
}

func (l raftLayer) Addr() net.Addr { return l.m.advertise }

// Dial connects to the server target names: its id and address, as
// namedTransport hands them on (dialname.go).
func (l raftLayer) Dial(target raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	id, addr := splitDialTarget(target)
	c, err := l.m.dialGroupStream(ctx, id, addr, streamRaft, l.group)
	if err != nil {
		return nil, err
	}
	return l.live.add(c), nil
}

// connSet is a set of open connections that can all be closed at once.
type connSet struct {
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

func newConnSet() *connSet { return &connSet{conns: map[*trackedConn]struct{}{}} }

// add tracks c until it is closed; once the set is closed, c is closed at once.
func (s *connSet) add(c net.Conn) net.Conn {
	tc := &trackedConn{Conn: c, set: s}
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.conns[tc] = struct{}{}
	}
	s.mu.Unlock()
	if closed {
		c.Close()
	}
	return tc
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = map[*trackedConn]struct{}{}
	s.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
}

type trackedConn struct {
	net.Conn
	set  *connSet
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.set.mu.Lock()
		delete(c.set.conns, c)
		c.set.mu.Unlock()
	})
	return c.Conn.Close()
}
