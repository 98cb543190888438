package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestPendingLimit(t *testing.T) {
	l := newPendingLimit(4, 2, 3, 1)
	a, b, c := "10.0.0.1", "10.0.0.2", "10.0.0.3"
	var held []func()
	for _, host := range []string{a, a, b, b} {
		r, ok := l.take(host, fromMember)
		if !ok {
			t.Fatalf("member slot for %v refused", host)
		}
		held = append(held, r)
	}
	if _, ok := l.take(a, fromMember); ok {
		t.Fatal("a third slot for one address")
	}
	if _, ok := l.take(c, fromMember); ok {
		t.Fatal("a fifth slot in all")
	}
	// The strangers' pool is apart: one slot an address, three in all.
	for _, host := range []string{a, b, c} {
		if _, ok := l.take(host, fromStranger); !ok {
			t.Fatalf("stranger slot for %v refused while the members' pool is full", host)
		}
	}
	if _, ok := l.take("10.0.0.4", fromStranger); ok {
		t.Fatal("a fourth stranger slot")
	}
	held[0]()
	held[0]() // twice is once
	if _, ok := l.take(c, fromMember); !ok {
		t.Fatal("a freed slot was not given out")
	}
	if _, ok := l.take(c, fromMember); ok {
		t.Fatal("the freed slot was counted twice")
	}
	if l.pending(fromMember) != 4 || l.pending(fromStranger) != 3 {
		t.Fatalf("pending: %d members, %d strangers", l.pending(fromMember), l.pending(fromStranger))
	}
}

// TestPendingStrangersLeaveMembersSlots: strangers from eight addresses (the
// flood that used to fill the one pool of 128) fill only their own pool;
// every member's address still gets its share of the members' pool.
func TestPendingStrangersLeaveMembersSlots(t *testing.T) {
	l := newPendingLimit(maxPendingMembers, maxPendingPerMember, maxPendingStrangers, maxPendingPerStranger)
	taken := 0
	for i := 2; i <= 9; i++ {
		host := netip.AddrFrom4([4]byte{127, 0, 0, byte(i)}).String()
		for range 16 {
			if _, ok := l.take(host, fromStranger); ok {
				taken++
			}
		}
	}
	if taken != maxPendingStrangers {
		t.Fatalf("strangers took %d slots, want their pool's %d", taken, maxPendingStrangers)
	}
	members := maxPendingMembers / maxPendingPerMember
	for i := range members {
		host := netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}).String()
		for k := range maxPendingPerMember {
			if _, ok := l.take(host, fromMember); !ok {
				t.Fatalf("member %s refused its slot %d while strangers fill theirs", host, k+1)
			}
		}
	}
	if _, ok := l.take("127.0.0.10", fromStranger); ok {
		t.Fatal("a stranger got a slot past its pool")
	}
}

// testMux is a mux with peer TLS on 127.0.0.1 that takes 127.0.0.1 for a
// member's address; it tells of each RPC stream it routes.
func testMux(t *testing.T, ca *testCA) (*mux, chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	routed := make(chan string, 16)
	var d net.Dialer
	m := newMux(ln, ln.Addr(), muxConfig{
		dial: d.DialContext, tls: ca.peerTLS("n1"), auth: &peerAuth{}, log: testLogger(),
		serveRPC: func(c net.Conn, peer string) { routed <- peer; c.Close() },
		refused:  prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"}),
		pendingRefused: [2]prometheus.Counter{
			fromStranger: prometheus.NewCounter(prometheus.CounterOpts{Name: "stranger"}),
			fromMember:   prometheus.NewCounter(prometheus.CounterOpts{Name: "member"}),
		},
	})
	m.setMembers(hostSet{"127.0.0.1": {}})
	t.Cleanup(func() { m.close(); m.wg.Wait() })
	return m, routed
}

// dialFrom opens a TCP connection to addr from local address ip (any
// 127.0.0.0/8 address is this host on Linux; elsewhere the test is skipped).
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", addr)
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Skipf("cannot dial from %s here: %v", ip, err)
	}
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, ip, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestPendingStrangerDeadlineIsShort: on the real port, a half-open
// connection from a stranger's address is closed after strangerTimeout, one
// from a member's address is still open then (it has preambleTimeout); and
// while strangers from eight addresses hold every stranger's slot (the rest
// closed at once and counted), a member completes its handshake and is
// routed.
func TestPendingStrangerDeadlineIsShort(t *testing.T) {
	ca := newTestCA(t)
	m, routed := testMux(t, ca)
	addr := m.ln.Addr().String()

	stranger := dialFrom(t, "127.0.0.2", addr)
	member := dialFrom(t, "127.0.0.1", addr)
	start := time.Now()
	stranger.SetReadDeadline(start.Add(preambleTimeout + time.Second))
	if _, err := stranger.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("the stranger's half-open connection was not closed: %v", err)
	}
	took := time.Since(start)
	if took < strangerTimeout-200*time.Millisecond || took > preambleTimeout-500*time.Millisecond {
		t.Fatalf("a stranger's half-open connection closed after %v, want about %v", took, strangerTimeout)
	}
	member.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := member.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("a member's half-open connection closed with a stranger's deadline: %v", err)
	}
	t.Logf("a stranger's half-open connection closed after %v", took.Round(time.Millisecond))

	// The flood: every stranger's slot held, what is over closed at once.
	const perAddr = maxPendingPerStranger + 2
	var flood []net.Conn
	for i := 2; i <= 9; i++ {
		for range perAddr {
			flood = append(flood, dialFrom(t, netip.AddrFrom4([4]byte{127, 0, 0, byte(i)}).String(), addr))
		}
	}
	want := float64(8 * (perAddr - maxPendingPerStranger))
	eventually(t, time.Second, "the strangers over their pool to be refused", func() bool {
		return testutil.ToFloat64(m.pendingRefused[fromStranger]) >= want
	})
	if got := m.pending.pending(fromStranger); got != maxPendingStrangers {
		t.Fatalf("%d stranger slots held, want all %d", got, maxPendingStrangers)
	}
	// A member dials meanwhile: its slot is its own.
	c := dialFrom(t, "127.0.0.1", addr)
	tc := tls.Client(c, ca.peerTLS("n2").Client)
	tc.SetDeadline(time.Now().Add(2 * time.Second))
	if err := tc.HandshakeContext(context.Background()); err != nil {
		t.Fatalf("a member's handshake under the flood: %v", err)
	}
	if _, err := tc.Write([]byte{streamRPC}); err != nil {
		t.Fatal(err)
	}
	select {
	case peer := <-routed:
		if peer != "n2" {
			t.Fatalf("routed as %q", peer)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a member's connection was not routed under the flood")
	}
	if got := testutil.ToFloat64(m.pendingRefused[fromMember]); got != 0 {
		t.Fatalf("%v member connections refused", got)
	}
	for _, c := range flood {
		c.Close()
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// flood opens n connections to addr from local address from that send
// nothing, and closes them when the test ends. It returns how many the server
// closed within wait.
func flood(t *testing.T, from, addr string, n int, wait time.Duration) int {
	t.Helper()
	var conns []net.Conn
	for range n {
		conns = append(conns, dialFrom(t, from, addr))
	}
	time.Sleep(wait)
	closed := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err == io.EOF || isReset(err) {
			closed++
		}
	}
	return closed
}

func isReset(err error) bool {
	ne, ok := err.(*net.OpError)
	return ok && !ne.Timeout()
}

// TestHalfOpenFloodCostsNoElection: 300 connections to the Raft port (from a
// stranger's address) and to the gossip port (the test's process holds both
// ends of each, within the usual limit of open files) that never complete a
// handshake are closed at once beyond the cap, the rest when their deadline
// passes; leader and term stay, writes go on, and nothing is left open once
// the flood is over.
func TestHalfOpenFloodCostsNoElection(t *testing.T) {
	tc, _ := newTLSCluster(t, 3)
	_, l := tc.leader(30 * time.Second)
	mustSubmit(t, l, bfAdd("k", "before"))
	term := l.meta.raft.CurrentTerm()

	// Raft port: 4 from one stranger's address wait out its deadline, the
	// rest go at once.
	closedEarly := flood(t, "127.0.0.2", l.RaftAddr(), 300, strangerTimeout/2)
	if closedEarly < 300-maxPendingPerStranger {
		t.Fatalf("only %d of 300 half-open raft connections were closed at once", closedEarly)
	}
	// Gossip port: at most maxGossipStreams are handled at once.
	gossipClosed := flood(t, "127.0.0.1", tc.cfgs[0].GossipAddr, 300, gossipTimeout/2)
	if gossipClosed < 300-maxGossipStreams {
		t.Fatalf("only %d of 300 half-open gossip connections were closed at once", gossipClosed)
	}
	mustSubmit(t, l, bfAdd("k", "during"))
	if _, now := tc.leader(5 * time.Second); now != l || l.meta.raft.CurrentTerm() != term {
		t.Fatalf("the flood moved leadership: term %d, was %d", l.meta.raft.CurrentTerm(), term)
	}
	if testutil.ToFloat64(l.metrics.peerRefused) < 300-maxPendingPerStranger {
		t.Fatalf("refused raft connections counted: %v", testutil.ToFloat64(l.metrics.peerRefused))
	}
	if got := testutil.ToFloat64(l.metrics.pendingRefused.WithLabelValues("stranger")); got < 300-maxPendingPerStranger {
		t.Fatalf("refused strangers counted: %v", got)
	}
	if testutil.ToFloat64(tc.nodes[0].metrics.gossipRefused) < 300-maxGossipStreams {
		t.Fatalf("refused gossip connections counted: %v", testutil.ToFloat64(tc.nodes[0].metrics.gossipRefused))
	}
	for _, n := range tc.live() {
		if !exists(t, n, "k", "during") {
			t.Fatalf("%s lost a write", n.ID())
		}
	}
	// Every slot comes back once the deadline passes.
	eventually(t, 2*preambleTimeout, "the pending slots to be given back", func() bool {
		return l.mux.pending.pending(fromStranger) == 0 && l.mux.pending.pending(fromMember) == 0
	})
}

// TestPendingMemberHosts: members' addresses become the set the accept loop
// reads: IPs as hostOf writes them, a host name as what it resolves to
// (looked up only when asked, at most every resolveEvery, keeping its last
// answer when a lookup fails).
func TestPendingMemberHosts(t *testing.T) {
	h := newMemberHosts()
	lookups := 0
	answer := []netip.Addr{netip.MustParseAddr("10.0.0.7")}
	var fail error
	h.lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		lookups++
		return answer, fail
	}
	addrs := []string{"10.0.0.1:6481", "[::ffff:10.0.0.2]:6481", "[fe80::1%eth0]:6481", "rookery3:6481", "", "10.0.0.1"}
	now := time.Now()
	same := func(got hostSet, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("hosts %v, want %v", got, want)
		}
		for _, w := range want {
			if _, ok := got[w]; !ok {
				t.Fatalf("hosts %v, want %v", got, want)
			}
		}
	}
	same(h.hosts(addrs, false, now), "10.0.0.1", "10.0.0.2", "fe80::1")
	if lookups != 0 {
		t.Fatal("a name was looked up without resolve")
	}
	same(h.hosts(addrs, true, now), "10.0.0.1", "10.0.0.2", "fe80::1", "10.0.0.7")
	same(h.hosts(addrs, false, now), "10.0.0.1", "10.0.0.2", "fe80::1", "10.0.0.7")
	same(h.hosts(addrs, true, now.Add(resolveEvery/2)), "10.0.0.1", "10.0.0.2", "fe80::1", "10.0.0.7")
	if lookups != 1 {
		t.Fatalf("%d lookups within resolveEvery, want 1", lookups)
	}
	fail = errors.New("no such host")
	same(h.hosts(addrs, true, now.Add(resolveEvery)), "10.0.0.1", "10.0.0.2", "fe80::1", "10.0.0.7")
	fail, answer = nil, []netip.Addr{netip.MustParseAddr("10.0.0.8")}
	same(h.hosts(addrs, true, now.Add(2*resolveEvery)), "10.0.0.1", "10.0.0.2", "fe80::1", "10.0.0.8")
	if lookups != 3 {
		t.Fatalf("%d lookups, want 3", lookups)
	}
	if got := hostOf(&net.TCPAddr{IP: net.ParseIP("10.0.0.2")}); got != "10.0.0.2" {
		t.Fatalf("hostOf an IPv4 address: %q", got)
	}
}
