package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// impostor listens at an address with peer TLS and a certificate it may
// change, and tells of the first byte each connection sends after the
// handshake (the stream byte), or 0 if none came.
type impostor struct {
	ln      net.Listener
	cfg     atomic.Pointer[tls.Config]
	streams chan byte
}

func startImpostor(t *testing.T, addr string, cfg *tls.Config) *impostor {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	im := &impostor{ln: ln, streams: make(chan byte, 64)}
	im.cfg.Store(cfg)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(2 * time.Second))
				tc := tls.Server(c, im.cfg.Load())
				if tc.Handshake() != nil {
					return
				}
				var b [1]byte
				if _, err := tc.Read(b[:]); err != nil {
					b[0] = 0
				}
				select {
				case im.streams <- b[0]:
				default:
				}
			}()
		}
	}()
	return im
}

// sent lists the stream bytes the impostor has been told of so far.
func (im *impostor) sent() []byte {
	var out []byte
	for {
		select {
		case b := <-im.streams:
			if b != 0 {
				out = append(out, b)
			}
		default:
			return out
		}
	}
}

// TestPeerDialRefusesAnotherNodesCertificate: n3 is down and a holder of n2's
// node certificate answers at n3's Raft address. Every dialler of n1 and n2
// refuses it before writing a byte of its stream: the Raft transport of every
// group (group 0 and two more), and node-to-node requests, of group 0 and of
// a group; each refusal is counted by stream and logged with both names.
// With n3's certificate the same dials get through, so it is the name that
// is refused.
func TestPeerDialRefusesAnotherNodesCertificate(t *testing.T) {
	ca := newTestCA(t)
	logs := newLogCapture()
	tc := newTestCluster(t, 3, func(c *Config) {
		c.PeerTLS = ca.peerTLS(c.ID)
		c.GossipKey = []byte("0123456789abcdef")
		if c.ID == "n1" {
			c.Logger = slog.New(logs)
		}
	})
	tc.leader(30 * time.Second)
	for _, n := range tc.nodes[:2] {
		for _, gid := range []int{1, 2} {
			if _, err := n.openGroup(gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	n3 := raft.ServerAddress(tc.nodes[2].RaftAddr())
	tc.crash(2)
	im := startImpostor(t, string(n3), ca.peerTLS("n2").Server)

	// refused dials until a dial is refused as a wrong peer; what fails
	// before is a connection to n3 from before it stopped, pooled.
	refused := func(what string, dial func() error) {
		t.Helper()
		for try := 0; ; try++ {
			err := dial()
			if err == nil {
				t.Fatalf("%s reached the holder of n2's certificate at n3's address", what)
			}
			if errors.Is(err, errWrongPeer) {
				return
			}
			if try == 5 {
				t.Fatalf("%s: %v, want it refused as another node", what, err)
			}
		}
	}
	vote := func(g *group) func() error {
		return func() error {
			var resp raft.RequestVoteResponse
			return g.trans.RequestVote("n3", n3, &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{
				ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(g.n.ID()), Addr: []byte(g.n.RaftAddr())}}, &resp)
		}
	}
	status := func(n *Node, gid int) func() error {
		return func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := n.groupByID(gid).call(ctx, "n3", string(n3), opStatus, nil)
			return err
		}
	}
	for _, n := range tc.nodes[:2] {
		groups := n.openGroups()
		if len(groups) != 3 {
			t.Fatalf("%s holds %d groups, want 3", n.ID(), len(groups))
		}
		for _, g := range groups {
			refused(fmt.Sprintf("%s's raft of group %d", n.ID(), g.id), vote(g))
		}
		refused(n.ID()+"'s requests of group 0", status(n, 0))
		refused(n.ID()+"'s requests of group 1", status(n, 1))
	}
	if got := im.sent(); len(got) > 0 {
		t.Fatalf("the impostor was sent stream bytes %q", got)
	}
	n1 := tc.nodes[0]
	if got := testutil.ToFloat64(n1.metrics.dialRefused.WithLabelValues("raft")); got < 3 {
		t.Fatalf("%v raft dials refused on n1, want one per group at least", got)
	}
	if got := testutil.ToFloat64(n1.metrics.dialRefused.WithLabelValues("rpc")); got < 1 {
		t.Fatalf("%v rpc dials refused on n1", got)
	}
	logged := false
	for _, r := range logs.records(slog.LevelWarn) {
		logged = logged || r.attrs["expected"] == "n3" && r.attrs["presented"] == "n2" && r.attrs["addr"] == string(n3)
	}
	if !logged {
		t.Fatalf("no warning names expected n3 and presented n2: %v", logs.records(slog.LevelWarn))
	}

	// The certificate of n3 at the same address: the dials go through.
	im.cfg.Store(ca.peerTLS("n3").Server)
	for _, g := range n1.openGroups() {
		if err := vote(g)(); errors.Is(err, errWrongPeer) {
			t.Fatalf("group %d refused n3's own certificate: %v", g.id, err)
		}
	}
	if err := status(n1, 0)(); errors.Is(err, errWrongPeer) {
		t.Fatalf("requests refused n3's own certificate: %v", err)
	}
	seen := map[byte]bool{}
	eventually(t, 2*time.Second, "raft, group and rpc streams to reach the holder of n3's certificate", func() bool {
		for _, b := range im.sent() {
			seen[b] = true
		}
		return seen[streamRaft] && seen[streamGroup] && seen[streamRPC]
	})
}

// recordLayer is a raft.StreamLayer that dials nothing and keeps the targets
// it was asked to dial.
type recordLayer struct {
	net.Listener
	mu      sync.Mutex
	targets []raft.ServerAddress
}

func (l *recordLayer) Dial(target raft.ServerAddress, _ time.Duration) (net.Conn, error) {
	l.mu.Lock()
	l.targets = append(l.targets, target)
	l.mu.Unlock()
	return nil, errors.New("not dialled")
}

// TestRaftDialNamesTheServer: every request raft sends through the node's
// transport dials the server's id with its address, so that the stream layer
// can check the certificate; the target splits back into both.
func TestRaftDialNamesTheServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	layer := &recordLayer{Listener: ln}
	nt := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: layer, MaxPool: 1, Timeout: time.Second})
	defer nt.Close()
	tr := newPipelinedTransport(nt, nil, 1)
	const id, addr = raft.ServerID("n3"), raft.ServerAddress("[::1]:6481")
	_ = tr.AppendEntries(id, addr, &raft.AppendEntriesRequest{}, &raft.AppendEntriesResponse{})
	_, _ = tr.AppendEntriesPipeline(id, addr)
	_ = tr.RequestVote(id, addr, &raft.RequestVoteRequest{}, &raft.RequestVoteResponse{})
	_ = tr.RequestPreVote(id, addr, &raft.RequestPreVoteRequest{}, &raft.RequestPreVoteResponse{})
	_ = tr.InstallSnapshot(id, addr, &raft.InstallSnapshotRequest{}, &raft.InstallSnapshotResponse{}, strings.NewReader(""))
	_ = tr.TimeoutNow(id, addr, &raft.TimeoutNowRequest{}, &raft.TimeoutNowResponse{})
	layer.mu.Lock()
	defer layer.mu.Unlock()
	if len(layer.targets) != 6 {
		t.Fatalf("%d dials, want 6: %q", len(layer.targets), layer.targets)
	}
	for _, target := range layer.targets {
		if gotID, gotAddr := splitDialTarget(target); gotID != string(id) || gotAddr != string(addr) {
			t.Fatalf("dialled %q: id %q address %q", target, gotID, gotAddr)
		}
	}
	if gotID, gotAddr := splitDialTarget("127.0.0.1:6481"); gotID != "" || gotAddr != "127.0.0.1:6481" {
		t.Fatalf("a target naming no id split into %q %q", gotID, gotAddr)
	}
}
