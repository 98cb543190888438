package cluster

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rookerydb/rookery/internal/certs"
)

// testCA is a cluster CA for tests; peerTLS makes a member's mutual TLS from it.
type testCA struct {
	t  *testing.T
	ca certs.Pair
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	ca, err := certs.NewCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{t: t, ca: ca}
}

func (c *testCA) source(name string) *certs.Source {
	c.t.Helper()
	p, err := certs.Issue(c.ca, name, nil, time.Hour)
	if err != nil {
		c.t.Fatal(err)
	}
	s, err := certs.New(c.ca.CertPEM, p)
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}

func (c *testCA) peerTLS(name string) *PeerTLS {
	s := c.source(name)
	return &PeerTLS{Server: s.PeerServerConfig(), Client: s.PeerClientConfig()}
}

// newTLSCluster starts n nodes with mutual TLS from one CA and a gossip key.
func newTLSCluster(t *testing.T, n int) (*testCluster, *testCA) {
	ca := newTestCA(t)
	tc := newTestCluster(t, n, func(c *Config) {
		c.PeerTLS = ca.peerTLS(c.ID)
		c.GossipKey = []byte("0123456789abcdef")
	})
	return tc, ca
}

// attackLayer is a raft.StreamLayer for a stranger: plain TCP or TLS with
// whatever configuration it has, then optionally our stream byte.
type attackLayer struct {
	ln   net.Listener
	tls  *tls.Config // nil: plain TCP
	kind byte        // 0: write no stream byte
}

func (l *attackLayer) Accept() (net.Conn, error) { return l.ln.Accept() }
func (l *attackLayer) Close() error              { return l.ln.Close() }
func (l *attackLayer) Addr() net.Addr            { return l.ln.Addr() }
func (l *attackLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(timeout))
	if l.tls != nil {
		tc := tls.Client(c, l.tls)
		if err := tc.Handshake(); err != nil {
			c.Close()
			return nil, err
		}
		c = tc
	}
	if l.kind != 0 {
		if _, err := c.Write([]byte{l.kind}); err != nil {
			c.Close()
			return nil, err
		}
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

func newAttacker(t *testing.T, cfg *tls.Config, kind byte) *raft.NetworkTransport {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  &attackLayer{ln: ln, tls: cfg, kind: kind},
		MaxPool: 1,
		Timeout: 2 * time.Second,
		Logger:  nil,
	})
	t.Cleanup(func() { tr.Close() })
	return tr
}

// attack sends a vote request with a much higher term and an append of a
// garbage entry; it returns the first error (nil if the node answered).
func attack(tr *raft.NetworkTransport, target *Node) error {
	addr := raft.ServerAddress(target.RaftAddr())
	id := raft.ServerID(target.ID())
	last := target.meta.raft.LastIndex()
	var vresp raft.RequestVoteResponse
	verr := tr.RequestVote(id, addr, &raft.RequestVoteRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("evil"), Addr: []byte(tr.LocalAddr())},
		Term:      target.meta.raft.CurrentTerm() + 1000, LastLogIndex: last + 1000, LastLogTerm: target.meta.raft.CurrentTerm() + 999,
	}, &vresp)
	var aresp raft.AppendEntriesResponse
	aerr := tr.AppendEntries(id, addr, &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("evil"), Addr: []byte(tr.LocalAddr())},
		Term:      target.meta.raft.CurrentTerm() + 2000, PrevLogEntry: last, PrevLogTerm: target.meta.raft.CurrentTerm(),
		Entries:           []*raft.Log{{Index: last + 1, Term: target.meta.raft.CurrentTerm() + 2000, Type: raft.LogCommand, Data: []byte("\xffgarbage")}},
		LeaderCommitIndex: last + 1,
	}, &aresp)
	if verr != nil {
		return verr
	}
	return aerr
}

// rpcAttack speaks our node-to-node frames: a status request and a removal of
// n3. It returns what came back, if anything.
func rpcAttack(t *testing.T, c net.Conn) []byte {
	t.Helper()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	w := bufio.NewWriter(c)
	writeFrame(w, 1, opStatus, nil)
	writeFrame(w, 2, opRemove, []byte("n3"))
	w.Flush()
	b, _ := io.ReadAll(c)
	return b
}

// Strangers on the Raft port get nothing: no Raft answer, no RPC answer, and
// the cluster's leader, term and log stay as they were.
func TestRaftPortRefusesStrangers(t *testing.T) {
	tc, ca := newTLSCluster(t, 3)
	// The first election of three TLS nodes can take long on a loaded
	// machine; what this test checks comes after it.
	li, l := tc.leader(30 * time.Second)
	mustSubmit(t, l, bfAdd("k", "before"))
	eventually(t, 10*time.Second, "every node to apply", func() bool {
		for _, n := range tc.live() {
			if n.meta.fsm.AppliedIndex() < l.meta.fsm.AppliedIndex() {
				return false
			}
		}
		return true
	})
	term := l.meta.raft.CurrentTerm()
	lastIndex := make([]uint64, len(tc.nodes))
	for i, n := range tc.nodes {
		lastIndex[i] = n.meta.raft.LastIndex()
	}

	other := newTestCA(t)
	strangers := map[string]*raft.NetworkTransport{
		"plain raft transport":             newAttacker(t, nil, 0),
		"plain transport, raft stream":     newAttacker(t, nil, streamRaft),
		"tls without a certificate":        newAttacker(t, &tls.Config{InsecureSkipVerify: true}, streamRaft),
		"certificate from another CA":      newAttacker(t, other.peerTLS("n1").Client, streamRaft),
		"another CA, claiming the raft id": newAttacker(t, other.peerTLS(tc.cfgs[li].ID).Client, streamRaft),
	}
	for name, tr := range strangers {
		for _, n := range tc.live() {
			if err := attack(tr, n); err == nil {
				t.Fatalf("%s: %s answered", name, n.ID())
			}
		}
	}

	// Raw TCP: garbage, and our own RPC frames without TLS. At most a TLS alert
	// comes back, never a frame.
	for _, n := range tc.live() {
		c, err := net.Dial("tcp", n.RaftAddr())
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte{streamRPC})
		got := rpcAttack(t, c)
		c.Close()
		if len(got) > 0 && got[0] != 0x15 { // 0x15: a TLS alert record
			t.Fatalf("%s answered plain RPC frames: %q", n.ID(), got)
		}
	}
	// TLS with another CA's certificate, then RPC frames.
	c, err := tls.Dial("tcp", l.RaftAddr(), other.peerTLS("n1").Client)
	if err == nil {
		c.Write([]byte{streamRPC})
		if got := rpcAttack(t, c); len(got) > 0 {
			t.Fatalf("the leader answered RPC frames from another CA: %q", got)
		}
		c.Close()
	}

	// The same attacks with a valid certificate do reach Raft, so the refusals
	// above are the handshake's doing and not a malformed attack.
	insider := newAttacker(t, ca.peerTLS("insider").Client, streamRaft)
	var vresp raft.RequestVoteResponse
	if err := insider.RequestVote(raft.ServerID(l.ID()), raft.ServerAddress(l.RaftAddr()), &raft.RequestVoteRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("insider"), Addr: []byte(insider.LocalAddr())}, Term: 0,
	}, &vresp); err != nil {
		t.Fatalf("a member's certificate did not reach raft: %v", err)
	}

	if _, now := tc.leader(5 * time.Second); now != l || l.meta.raft.CurrentTerm() != term {
		t.Fatalf("leadership moved: leader %s term %d (was %s, %d)", now.ID(), l.meta.raft.CurrentTerm(), l.ID(), term)
	}
	for i, n := range tc.nodes {
		if got := n.meta.raft.LastIndex(); got != lastIndex[i] {
			t.Fatalf("%s: log last index %d, was %d", n.ID(), got, lastIndex[i])
		}
	}
	if l.meta.voters() != 3 {
		t.Fatalf("%d voters, want 3", l.meta.voters())
	}
	if got := testutil.ToFloat64(l.metrics.peerRefused); got == 0 {
		t.Fatal("no refused connection counted")
	}
	mustSubmit(t, tc.nodes[tc.followers()[0]], bfAdd("k", "after"))
	for _, n := range tc.live() {
		if !exists(t, n, "k", "after") || !exists(t, n, "k", "before") {
			t.Fatalf("%s lost a write", n.ID())
		}
	}
}

// A node with a certificate of the cluster CA but no gossip key never joins;
// one with both joins over TLS and becomes a voter.
func TestTLSClusterJoin(t *testing.T) {
	tc, ca := newTLSCluster(t, 3)
	_, l := tc.leader(15 * time.Second)
	mustSubmit(t, l, bfAdd("k", "before"))
	noKey := tc.add(func(c *Config) { c.PeerTLS = ca.peerTLS(c.ID) })
	friend := tc.add(func(c *Config) {
		c.PeerTLS = ca.peerTLS(c.ID)
		c.GossipKey = []byte("0123456789abcdef")
	})
	eventually(t, 20*time.Second, "the member with key and certificate to become a voter", func() bool {
		for _, i := range []int{0, 1, 2, friend} {
			if n := tc.nodes[i]; n.meta.IsLeader() {
				l = n
			}
		}
		return l.meta.IsLeader() && l.meta.voters() == 4
	})
	if tc.nodes[noKey].Ready() {
		t.Fatal("a node without the gossip key became ready")
	}
	mustSubmit(t, tc.nodes[friend], bfAdd("k", "via-friend"))
	if !exists(t, tc.nodes[friend], "k", "via-friend") || !exists(t, tc.nodes[friend], "k", "before") {
		t.Fatal("writes not visible on the new member")
	}
	for _, m := range l.members() {
		if m.ID == tc.cfgs[noKey].ID {
			t.Fatal("the node without the gossip key is a member")
		}
	}
}

// A member that holds the gossip key but no certificate cannot make itself a
// voter, and gossip metadata cannot move a member's Raft address: neither by
// naming another member's id, nor by pointing at another member's port.
func TestForgedGossipChangesNothing(t *testing.T) {
	for _, secure := range []bool{true, false} {
		t.Run("tls="+strconv.FormatBool(secure), func(t *testing.T) {
			var tc *testCluster
			key := []byte("0123456789abcdef")
			if secure {
				tc, _ = newTLSCluster(t, 3)
			} else {
				tc = newTestCluster(t, 3, func(c *Config) { c.GossipKey = key })
			}
			_, l := tc.leader(15 * time.Second)
			before := l.meta.raft.GetConfiguration().Configuration().Servers

			// A listener that accepts but is not a member.
			fake, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer fake.Close()
			go func() {
				for {
					c, err := fake.Accept()
					if err != nil {
						return
					}
					go func() { io.Copy(io.Discard, c); c.Close() }()
				}
			}()
			forged := []struct{ name, id, raft string }{
				{"evil", "n1", fake.Addr().String()},             // speaks for n1
				{"n1x", "n1x", fake.Addr().String()},             // a voter-to-be at a fake port
				{"n9", "n9", tc.nodes[1].RaftAddr()},             // at a member's real port
				{"evil2", "n2", tc.nodes[2].RaftAddr()},          // moves n2 onto n3
				{"evil3", "evil3", tc.nodes[0].RaftAddr() + "x"}, // unreachable
			}
			for _, f := range forged {
				startForger(t, tc, key, f.name, meta{ID: f.id, Raft: f.raft, RESP: "127.0.0.1:1", HTTP: "127.0.0.1:2"})
			}
			eventually(t, 10*time.Second, "the forgers to be known to gossip", func() bool {
				return l.ml.NumMembers() >= 3+len(forged)
			})
			waitRounds(t, l, 3) // rounds that would have acted on the forged members
			_, l = tc.leader(5 * time.Second)
			after := l.meta.raft.GetConfiguration().Configuration().Servers
			if fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("configuration changed:\nbefore %v\nafter  %v", before, after)
			}
			for _, m := range l.members() {
				if m.ID == "n1" && m.Raft != tc.nodes[0].RaftAddr() {
					t.Fatalf("n1's raft address became %s", m.Raft)
				}
				if m.ID == "n2" && m.Raft != tc.nodes[1].RaftAddr() {
					t.Fatalf("n2's raft address became %s", m.Raft)
				}
			}
			mustSubmit(t, l, bfAdd("k", "still-writable"))
		})
	}
}

// startForger joins the cluster's gossip as name, with the key, gossiping md.
func startForger(t *testing.T, tc *testCluster, key []byte, name string, md meta) {
	t.Helper()
	addr := freeGossipAddr(t)
	host, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	mc := memberlist.DefaultLANConfig()
	mc.Name = name
	mc.BindAddr, mc.BindPort = host, port
	mc.SecretKey = key
	mc.Logger = log.New(io.Discard, "", 0)
	d := &delegate{}
	b, _ := json.Marshal(md)
	d.meta = b
	mc.Delegate = d
	ml, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ml.Shutdown() })
	if _, err := ml.Join([]string{tc.cfgs[0].GossipAddr}); err != nil {
		t.Fatalf("forger %s could not join: %v", name, err)
	}
}
