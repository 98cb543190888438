package cluster

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/atomicfile"
	"github.com/rookerydb/rookery/internal/certs"
)

// clientTLS is a dialling TLS configuration presenting a certificate of kind
// for name, from the test CA.
func (c *testCA) clientTLS(kind certs.Kind, name string) *tls.Config {
	c.t.Helper()
	var p certs.Pair
	var err error
	switch kind {
	case certs.KindClient:
		p, err = certs.IssueClient(c.ca, name, time.Hour)
	case certs.KindLegacy:
		p, err = certs.IssueLegacy(c.ca, name, nil, time.Hour)
	default:
		p, err = certs.Issue(c.ca, name, nil, time.Hour)
	}
	if err != nil {
		c.t.Fatal(err)
	}
	s, err := certs.New(c.ca.CertPEM, p)
	if err != nil {
		c.t.Fatal(err)
	}
	return s.PeerClientConfig()
}

// clusterState is what an attack must not change: per node, the log's last
// index, the term, the applied index, the configuration and the filters.
func clusterState(tc *testCluster) string {
	var b strings.Builder
	for _, n := range tc.live() {
		fmt.Fprintf(&b, "%s last=%d term=%d applied=%d config=%v filters=%v\n", n.ID(), n.meta.raft.LastIndex(),
			n.meta.raft.CurrentTerm(), n.meta.fsm.AppliedIndex(), n.meta.raft.GetConfiguration().Configuration().Servers, n.meta.fsm.List())
	}
	return b.String()
}

// settled waits until every node has applied the leader's log.
func settled(t *testing.T, tc *testCluster, l *Node) {
	t.Helper()
	eventually(t, 10*time.Second, "every node to apply", func() bool {
		for _, n := range tc.live() {
			if n.meta.fsm.AppliedIndex() < l.meta.fsm.AppliedIndex() || n.meta.raft.LastIndex() != l.meta.raft.LastIndex() {
				return false
			}
		}
		return true
	})
}

// raftAttacks sends each Raft request, as sender, to every live node, and
// fails the test if any is answered.
func raftAttacks(t *testing.T, tc *testCluster, cfg *tls.Config, sender string) {
	t.Helper()
	tr := newAttacker(t, cfg, streamRaft)
	for _, n := range tc.live() {
		addr, id := raft.ServerAddress(n.RaftAddr()), raft.ServerID(n.ID())
		term, last := n.meta.raft.CurrentTerm(), n.meta.raft.LastIndex()
		hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(sender), Addr: []byte(tr.LocalAddr())}
		var ae raft.AppendEntriesResponse
		if err := tr.AppendEntries(id, addr, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: term + 1000,
			PrevLogEntry: last, PrevLogTerm: term, LeaderCommitIndex: last + 1,
			Entries: []*raft.Log{{Index: last + 1, Term: term + 1000, Type: raft.LogCommand, Data: []byte("\xffgarbage")}}}, &ae); err == nil {
			t.Errorf("%s answered an AppendEntries from %q", n.ID(), sender)
		}
		var rv raft.RequestVoteResponse
		if err := tr.RequestVote(id, addr, &raft.RequestVoteRequest{RPCHeader: hdr, Term: 1 << 30,
			LastLogIndex: last + 1000, LastLogTerm: term + 999}, &rv); err == nil {
			t.Errorf("%s answered a RequestVote from %q", n.ID(), sender)
		}
		var pv raft.RequestPreVoteResponse
		if err := tr.RequestPreVote(id, addr, &raft.RequestPreVoteRequest{RPCHeader: hdr, Term: 1 << 30,
			LastLogIndex: last + 1000, LastLogTerm: term + 999}, &pv); err == nil {
			t.Errorf("%s answered a RequestPreVote from %q", n.ID(), sender)
		}
		var tn raft.TimeoutNowResponse
		if err := tr.TimeoutNow(id, addr, &raft.TimeoutNowRequest{RPCHeader: hdr}, &tn); err == nil {
			t.Errorf("%s answered a TimeoutNow from %q", n.ID(), sender)
		}
		var is raft.InstallSnapshotResponse
		if err := tr.InstallSnapshot(id, addr, &raft.InstallSnapshotRequest{RPCHeader: hdr, SnapshotVersion: 1, Term: term + 1000,
			LastLogIndex: last + 1000, LastLogTerm: term + 1000, Size: 8}, &is, strings.NewReader("garbage!")); err == nil {
			t.Errorf("%s answered an InstallSnapshot from %q", n.ID(), sender)
		}
	}
}

// rpcFrames sends every node-to-node request (or those named in only), each
// on a connection of its own, and returns what came back. removeID is the id
// opRemove names.
func rpcFrames(t *testing.T, addr string, cfg *tls.Config, term uint64, removeID string, only ...string) map[string][]byte {
	t.Helper()
	var confirm [8]byte
	binary.BigEndian.PutUint64(confirm[:], term)
	frames := map[string]struct {
		op   byte
		body []byte
	}{
		"apply":      {opApply, fsm.EncodeCommand(bfAdd("k", "forged"))},
		"read index": {opReadIndex, nil},
		"status":     {opStatus, nil},
		"remove":     {opRemove, []byte(removeID)},
		"confirm":    {opConfirm, confirm[:]},
	}
	got := map[string][]byte{}
	for name, f := range frames {
		if len(only) > 0 && !slices.Contains(only, name) {
			continue
		}
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, cfg)
		if err != nil {
			continue // refused at the handshake: nothing came back
		}
		c.SetDeadline(time.Now().Add(2 * time.Second))
		c.Write([]byte{streamRPC})
		w := bufio.NewWriter(c)
		writeFrame(w, 1, f.op, f.body)
		w.Flush()
		b, _ := io.ReadAll(c)
		c.Close()
		got[name] = b
	}
	return got
}

// TestClientCertificateOpensNoPeerPort: a client certificate of the cluster
// CA gets no answer to any Raft request or node-to-node frame, and nothing on
// any node changes.
func TestClientCertificateOpensNoPeerPort(t *testing.T) {
	tc, ca := newTLSCluster(t, 3)
	li, l := tc.leader(30 * time.Second)
	mustSubmit(t, l, bfAdd("k", "before"))
	settled(t, tc, l)
	before := clusterState(tc)

	client := ca.clientTLS(certs.KindClient, "client1")
	for _, sender := range []string{tc.cfgs[li].ID, "client1"} {
		raftAttacks(t, tc, client, sender)
	}
	for _, n := range tc.live() {
		for name, b := range rpcFrames(t, n.RaftAddr(), client, n.meta.raft.CurrentTerm(), "n3") {
			if len(b) > 0 {
				t.Errorf("%s answered a %s frame from a client certificate: %q", n.ID(), name, b)
			}
		}
	}
	time.Sleep(time.Second) // long enough for a forged entry or term to show
	if after := clusterState(tc); after != before {
		t.Fatalf("an attack with a client certificate changed the cluster:\nbefore\n%safter\n%s", before, after)
	}
	if got := testutil.ToFloat64(l.metrics.peerRefused); got == 0 {
		t.Fatal("no refusal counted")
	}
	mustSubmit(t, l, bfAdd("k", "after"))
}

// TestNodeSpeaksOnlyAsItself: with node n3's certificate, requests claiming
// to come from n1 are refused before they reach raft, and a removal of n1
// asked over n3's connection is not answered; as n3 it is heard.
func TestNodeSpeaksOnlyAsItself(t *testing.T) {
	tc, ca := newTLSCluster(t, 3)
	_, l := tc.leader(30 * time.Second)
	mustSubmit(t, l, bfAdd("k", "before"))
	settled(t, tc, l)
	before := clusterState(tc)

	n3 := ca.clientTLS(certs.KindNode, "n3")
	raftAttacks(t, tc, n3, "n1")
	for _, n := range tc.live() {
		if got := rpcFrames(t, n.RaftAddr(), n3, n.meta.raft.CurrentTerm(), "n1", "remove")["remove"]; len(got) > 0 {
			t.Errorf("%s answered n3's request to remove n1: %q", n.ID(), got)
		}
	}
	time.Sleep(time.Second)
	if after := clusterState(tc); after != before {
		t.Fatalf("n3's certificate speaking as n1 changed the cluster:\nbefore\n%safter\n%s", before, after)
	}
	// As itself, n3's certificate is heard (a vote request of an old term is
	// answered, and refused by raft).
	tr := newAttacker(t, n3, streamRaft)
	var rv raft.RequestVoteResponse
	if err := tr.RequestVote(raft.ServerID(l.ID()), raft.ServerAddress(l.RaftAddr()), &raft.RequestVoteRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n3"), Addr: []byte(tr.LocalAddr())}}, &rv); err != nil {
		t.Fatalf("n3 as n3 was not heard: %v", err)
	} else if rv.Granted {
		t.Fatal("a vote of term 0 was granted")
	}
	if got := rpcFrames(t, l.RaftAddr(), n3, 0, "n3", "status")["status"]; len(got) == 0 {
		t.Fatal("n3's status request was not answered")
	}
}

// TestPeerAuthRules: who a peer certificate may be, for a node holding a
// node certificate and for one still holding a legacy one.
func TestPeerAuthRules(t *testing.T) {
	ca := newTestCA(t)
	leaf := func(kind certs.Kind, name string) *x509.Certificate {
		cfg := ca.clientTLS(kind, name)
		c, err := cfg.GetClientCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf
	}
	servers := map[string]bool{"n1": true, "n2": true}
	var warned []string
	auth := func(local *x509.Certificate) *peerAuth {
		return &peerAuth{local: func() *x509.Certificate { return local }, isServer: func(id string) bool { return servers[id] },
			warnLegacy: func(name string) { warned = append(warned, name) }}
	}
	cases := []struct {
		local, peer *x509.Certificate
		want        string // "" refused
	}{
		{leaf(certs.KindNode, "n1"), leaf(certs.KindNode, "n2"), "n2"},
		{leaf(certs.KindNode, "n1"), leaf(certs.KindNode, "n9"), "n9"}, // a new member
		{leaf(certs.KindNode, "n1"), leaf(certs.KindClient, "n2"), ""},
		{leaf(certs.KindNode, "n1"), leaf(certs.KindLegacy, "n2"), "n2"},
		{leaf(certs.KindNode, "n1"), leaf(certs.KindLegacy, "client1"), ""},
		{leaf(certs.KindLegacy, "n1"), leaf(certs.KindLegacy, "n9"), "n9"}, // as before, until re-issued
		{leaf(certs.KindLegacy, "n1"), leaf(certs.KindNode, "n2"), "n2"},
		{leaf(certs.KindLegacy, "n1"), leaf(certs.KindClient, "n2"), ""},
	}
	for i, c := range cases {
		id, err := auth(c.local).identify(tls.ConnectionState{PeerCertificates: []*x509.Certificate{c.peer}})
		if id != c.want || (c.want == "") != (err != nil) {
			t.Errorf("case %d: %q %v, want %q", i, id, err, c.want)
		}
	}
	if strings.Join(warned, ",") != "n2,n9" {
		t.Errorf("legacy peers warned of: %v", warned)
	}
	if _, err := auth(nil).identify(tls.ConnectionState{}); err == nil {
		t.Error("no certificate was taken")
	}

	// The node a dial reaches: the one it meant, by the same rules.
	dials := []struct {
		local, peer *x509.Certificate
		want        string
		ok          bool
	}{
		{leaf(certs.KindNode, "n1"), leaf(certs.KindNode, "n2"), "n2", true},
		{leaf(certs.KindNode, "n1"), leaf(certs.KindNode, "n2"), "n3", false},
		{leaf(certs.KindNode, "n1"), leaf(certs.KindNode, "n2"), "", false},
		{leaf(certs.KindNode, "n1"), leaf(certs.KindLegacy, "n2"), "n2", true},
		{leaf(certs.KindNode, "n1"), leaf(certs.KindLegacy, "n9"), "n9", false}, // no server
		{leaf(certs.KindNode, "n1"), leaf(certs.KindClient, "n2"), "n2", false},
		{leaf(certs.KindLegacy, "n1"), leaf(certs.KindLegacy, "n9"), "n9", true},
		{leaf(certs.KindLegacy, "n1"), leaf(certs.KindLegacy, "n2"), "n3", false},
	}
	for i, d := range dials {
		_, err := auth(d.local).dialled(tls.ConnectionState{PeerCertificates: []*x509.Certificate{d.peer}}, d.want)
		if (err == nil) != d.ok {
			t.Errorf("dial case %d: %v, want ok=%v", i, err, d.ok)
		}
	}
}

// TestLegacyCertificatesReissued: a cluster whose nodes hold certificates of
// the old kind works; re-issued one node at a time as node certificates
// (written over the files, reloaded without a restart), it keeps working, and
// a re-issued node takes a legacy peer only as a server of the cluster.
func TestLegacyCertificatesReissued(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(id string, p certs.Pair) {
		cert, key := certs.CertFiles(dir, id)
		if err := atomicfile.Write(key, p.KeyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := atomicfile.Write(cert, p.CertPEM, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sources := map[string]*certs.Source{}
	tc := newTestCluster(t, 3, func(c *Config) {
		p, err := certs.IssueLegacy(ca.ca, c.ID, nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		write(c.ID, p)
		cert, key := certs.CertFiles(dir, c.ID)
		s, err := certs.LoadNode(caFile, cert, key, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		sources[c.ID] = s
		c.PeerTLS = &PeerTLS{Server: s.PeerServerConfig(), Client: s.PeerClientConfig(), Local: s.Leaf}
		c.GossipKey = []byte("0123456789abcdef")
	})
	_, l := tc.leader(30 * time.Second)
	mustSubmit(t, l, bfAdd("k", "legacy"))

	for i, id := range []string{"n1", "n2", "n3"} {
		p, err := certs.Issue(ca.ca, id, nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		write(id, p)
		if _, err := sources[id].Reload(); err != nil {
			t.Fatal(err)
		}
		tc.mustWrite(bfAdd("k", fmt.Sprint("reissued-", i)))
	}
	n1 := tc.nodes[0]
	heard := func(cfg *tls.Config, sender string) bool {
		tr := newAttacker(t, cfg, streamRaft)
		var rv raft.RequestVoteResponse
		return tr.RequestVote(raft.ServerID(n1.ID()), raft.ServerAddress(n1.RaftAddr()), &raft.RequestVoteRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(sender), Addr: []byte(tr.LocalAddr())}}, &rv) == nil
	}
	if !heard(ca.clientTLS(certs.KindLegacy, "n2"), "n2") {
		t.Fatal("a legacy certificate of a server was refused during the move")
	}
	if heard(ca.clientTLS(certs.KindLegacy, "n9"), "n9") {
		t.Fatal("a legacy certificate of no server was heard by a re-issued node")
	}
	if heard(ca.clientTLS(certs.KindLegacy, "n2"), "n1") {
		t.Fatal("a legacy certificate spoke as another node")
	}
	// New connections between the re-issued nodes: move leadership.
	_, l = tc.leader(10 * time.Second)
	if err := l.meta.raft.LeadershipTransfer().Error(); err != nil {
		t.Fatal(err)
	}
	tc.mustWrite(bfAdd("k", "after-transfer"))
	for _, n := range tc.live() {
		if !exists(t, n, "k", "legacy") || !exists(t, n, "k", "after-transfer") {
			t.Fatalf("%s lost a write", n.ID())
		}
	}
}
