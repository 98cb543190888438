package cluster

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestPendingLimit(t *testing.T) {
	l := newPendingLimit(4, 2)
	a := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 1}
	b := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 2), Port: 1}
	c := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 3), Port: 1}
	var held []func()
	for _, addr := range []net.Addr{a, a, b, b} {
		r, ok := l.take(addr)
		if !ok {
			t.Fatalf("slot for %v refused", addr)
		}
		held = append(held, r)
	}
	if _, ok := l.take(a); ok {
		t.Fatal("a third slot for one address")
	}
	if _, ok := l.take(c); ok {
		t.Fatal("a fifth slot in all")
	}
	held[0]()
	held[0]() // twice is once
	if _, ok := l.take(c); !ok {
		t.Fatal("a freed slot was not given out")
	}
	if _, ok := l.take(c); ok {
		t.Fatal("the freed slot was counted twice")
	}
}

// flood opens n connections to addr that send nothing, and closes them when
// the test ends. It returns how many the server closed within wait.
func flood(t *testing.T, addr string, n int, wait time.Duration) int {
	t.Helper()
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range n {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		conns = append(conns, c)
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

// TestHalfOpenFloodCostsNoElection: 300 connections to the Raft port and to
// the gossip port (the test's process holds both ends of each, within the
// usual limit of open files) that never complete a handshake are closed at once
// beyond the cap, the rest when their deadline passes; leader and term stay,
// writes go on, and nothing is left open once the flood is over.
func TestHalfOpenFloodCostsNoElection(t *testing.T) {
	tc, _ := newTLSCluster(t, 3)
	_, l := tc.leader(30 * time.Second)
	mustSubmit(t, l, bfAdd("k", "before"))
	term := l.meta.raft.CurrentTerm()

	// Raft port: 16 from one address wait out the 3 s preamble, the rest go at once.
	closedEarly := flood(t, l.RaftAddr(), 300, preambleTimeout/2)
	if closedEarly < 300-maxPendingPerIP {
		t.Fatalf("only %d of 300 half-open raft connections were closed at once", closedEarly)
	}
	// Gossip port: at most maxGossipStreams are handled at once.
	gossipClosed := flood(t, tc.cfgs[0].GossipAddr, 300, gossipTimeout/2)
	if gossipClosed < 300-maxGossipStreams {
		t.Fatalf("only %d of 300 half-open gossip connections were closed at once", gossipClosed)
	}
	mustSubmit(t, l, bfAdd("k", "during"))
	if _, now := tc.leader(5 * time.Second); now != l || l.meta.raft.CurrentTerm() != term {
		t.Fatalf("the flood moved leadership: term %d, was %d", l.meta.raft.CurrentTerm(), term)
	}
	if testutil.ToFloat64(l.metrics.peerRefused) < 300-maxPendingPerIP {
		t.Fatalf("refused raft connections counted: %v", testutil.ToFloat64(l.metrics.peerRefused))
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
		l.mux.pending.mu.Lock()
		defer l.mux.pending.mu.Unlock()
		return l.mux.pending.total == 0
	})
}
