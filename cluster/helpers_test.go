package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
)

// freeAddr returns a 127.0.0.1 address with a port free at the moment of the call.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// freeGossipAddr returns an address whose port is free for both TCP and UDP.
func freeGossipAddr(t *testing.T) string {
	t.Helper()
	for i := 0; i < 50; i++ {
		a := freeAddr(t)
		pc, err := net.ListenPacket("udp", a)
		if err == nil {
			pc.Close()
			return a
		}
	}
	t.Fatal("no free gossip port")
	return ""
}

// testCluster is a set of in-process nodes on real TCP.
type testCluster struct {
	t       *testing.T
	faults  *Faults
	cfgs    []Config
	nodes   []*Node // nil where stopped
	started []bool  // whether node i ever ran (its addresses are then fixed)
	raft    map[string]*addrBox
}

// addrBox holds a node's Raft address for its fault-injecting dialer, so that
// a first start that lost its port to another process can take a new one.
type addrBox struct {
	mu sync.Mutex
	s  string
}

func (b *addrBox) get() string  { b.mu.Lock(); defer b.mu.Unlock(); return b.s }
func (b *addrBox) set(s string) { b.mu.Lock(); b.s = s; b.mu.Unlock() }

func testLogger() *slog.Logger {
	if os.Getenv("ROOKERY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(discard{}, nil))
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// skipShort skips, with -short, a test that runs real nodes.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test runs Raft nodes on real TCP")
	}
}

// newTestCluster starts n nodes that bootstrap together.
func newTestCluster(t *testing.T, n int, tweak func(*Config)) *testCluster {
	t.Helper()
	skipShort(t)
	tc := &testCluster{t: t, faults: NewFaults(), raft: map[string]*addrBox{}}
	var first string
	for i := 0; i < n; i++ {
		cfg := tc.config(fmt.Sprintf("n%d", i+1))
		cfg.BootstrapExpect = n
		if i == 0 {
			first = cfg.GossipAddr
		} else {
			cfg.Join = []string{first}
		}
		if tweak != nil {
			tweak(&cfg)
		}
		tc.cfgs = append(tc.cfgs, cfg)
	}
	for i := range tc.cfgs {
		tc.start(i)
	}
	t.Cleanup(tc.stopAll)
	return tc
}

func (tc *testCluster) config(id string) Config {
	raftAddr := freeAddr(tc.t)
	box := &addrBox{s: raftAddr}
	if tc.raft == nil {
		tc.raft = map[string]*addrBox{}
	}
	tc.raft[id] = box
	return Config{
		ID:                id,
		DataDir:           filepath.Join(tc.t.TempDir(), id),
		RaftAddr:          raftAddr,
		GossipAddr:        freeGossipAddr(tc.t),
		RESPAddr:          "127.0.0.1:1" + strconv.Itoa(len(tc.cfgs)),
		HTTPAddr:          "127.0.0.1:2" + strconv.Itoa(len(tc.cfgs)),
		HeartbeatTimeout:  300 * time.Millisecond,
		ElectionTimeout:   300 * time.Millisecond,
		ApplyTimeout:      3 * time.Second,
		DeadServerTimeout: time.Hour,
		Logger:            testLogger().With("node", id),
		Dial:              tc.faults.Dial(box.get),
	}
}

// steady gives a node the timeouts of a calmer network, for tests whose
// assertions need leadership to stay where it is for seconds: with the
// 300 ms of config on a loaded machine (two cores, race-built, other test
// binaries beside) a leader's lease lapses now and then and leadership
// moves by itself.
func steady(c *Config) {
	c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
}

// add starts one more node that joins the first node's gossip.
func (tc *testCluster) add(tweak func(*Config)) int {
	cfg := tc.config(fmt.Sprintf("n%d", len(tc.cfgs)+1))
	cfg.Join = []string{tc.cfgs[0].GossipAddr}
	if tweak != nil {
		tweak(&cfg)
	}
	tc.cfgs = append(tc.cfgs, cfg)
	tc.start(len(tc.cfgs) - 1)
	return len(tc.cfgs) - 1
}

func (tc *testCluster) start(i int) {
	tc.t.Helper()
	for len(tc.nodes) <= i {
		tc.nodes = append(tc.nodes, nil)
	}
	for len(tc.started) <= i {
		tc.started = append(tc.started, false)
	}
	n, err := New(tc.cfgs[i])
	// The ports were free when picked; another test process may have taken
	// one since. Before a node's first start nothing refers to them but the
	// configurations of nodes not yet started: pick again.
	for tries := 0; err != nil && !tc.started[i] && strings.Contains(err.Error(), "address already in use") && tries < 5; tries++ {
		tc.repick(i)
		n, err = New(tc.cfgs[i])
	}
	if err != nil {
		tc.t.Fatalf("start %s: %v", tc.cfgs[i].ID, err)
	}
	tc.nodes[i] = n
	tc.started[i] = true
}

// repick gives node i, never started, new Raft and gossip addresses.
func (tc *testCluster) repick(i int) {
	c := &tc.cfgs[i]
	oldGossip := c.GossipAddr
	c.RaftAddr, c.GossipAddr = freeAddr(tc.t), freeGossipAddr(tc.t)
	tc.raft[c.ID].set(c.RaftAddr)
	for j := range tc.cfgs {
		for k, a := range tc.cfgs[j].Join {
			if a == oldGossip {
				tc.cfgs[j].Join[k] = c.GossipAddr
			}
		}
	}
}

// crash stops node i without any courtesy to the others (no leadership
// transfer, no leave).
func (tc *testCluster) crash(i int) {
	tc.t.Helper()
	if n := tc.nodes[i]; n != nil {
		tc.nodes[i] = nil
		_ = n.closeAll()
	}
}

func (tc *testCluster) stopAll() {
	for i := range tc.nodes {
		tc.crash(i)
	}
}

func (tc *testCluster) live() []*Node {
	var out []*Node
	for _, n := range tc.nodes {
		if n != nil {
			out = append(out, n)
		}
	}
	return out
}

// leader waits until exactly one live node leads and every live node knows it.
func (tc *testCluster) leader(within time.Duration) (int, *Node) {
	tc.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		li := -1
		agreed := true
		for i, n := range tc.nodes {
			if n == nil {
				continue
			}
			if n.meta.IsLeader() {
				li = i
			}
		}
		if li >= 0 {
			for _, n := range tc.live() {
				if id, _ := n.meta.Leader(); id != tc.cfgs[li].ID {
					agreed = false
				}
			}
			if agreed {
				return li, tc.nodes[li]
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	var views []string
	for _, n := range tc.live() {
		id, _ := n.meta.Leader()
		st := n.meta.raft.Stats()
		views = append(views, fmt.Sprintf("%s: %s term %s, leader %q, last contact %s", n.ID(), st["state"], st["term"], id, st["last_contact"]))
	}
	tc.t.Fatalf("no agreed leader within %v: %s", within, strings.Join(views, "; "))
	return -1, nil
}

func (tc *testCluster) followers() []int {
	var out []int
	for i, n := range tc.nodes {
		if n != nil && !n.meta.IsLeader() {
			out = append(out, i)
		}
	}
	return out
}

func bfAdd(key string, items ...string) *fsm.Command {
	c := &fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyBF, Key: key, Multi: true,
		Spec: fsm.Spec{Kind: filters.KindScalable, Capacity: 1000, ErrorRate: 0.01, Expansion: 2}}
	for _, it := range items {
		c.Items = append(c.Items, []byte(it))
	}
	return c
}

func submit(ctx context.Context, n *Node, c *fsm.Command) (*fsm.Result, error) {
	return n.Submit(c).Wait(ctx)
}

func mustSubmit(t *testing.T, n *Node, c *fsm.Command) *fsm.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := submit(ctx, n, c)
	// As a client does: a write refused for want of a leader was not applied,
	// so it is sent again until a leader is known (an election may be under
	// way on a loaded machine).
	for (errors.Is(err, ErrNoLeader) || errors.Is(err, ErrNotLeader)) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		r, err = submit(ctx, n, c)
	}
	if err != nil {
		t.Fatalf("submit to %s: %v", n.ID(), err)
	}
	if r.Err != nil {
		t.Fatalf("submit to %s: domain error %v", n.ID(), r.Err)
	}
	return r
}

// exists reads through a linearizable barrier on n.
func exists(t *testing.T, n *Node, key, item string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.meta.ReadBarrier(ctx, ReadLinearizable); err != nil {
		t.Fatalf("read barrier on %s: %v", n.ID(), err)
	}
	return n.meta.fsm.Exists(fsm.FamilyBF, key, [][]byte{[]byte(item)})[0]
}

// eventually polls cond until it holds or the time is up.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s", within, what)
}

// mustWrite submits an idempotent write (a Bloom add) to the cluster's leader,
// retrying on a new leader when leadership moves under it, as a client would.
func (tc *testCluster) mustWrite(c *fsm.Command) {
	tc.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, l := tc.leader(10 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := submit(ctx, l, c)
		cancel()
		if err == nil && r.Err == nil {
			return
		}
		if time.Now().After(deadline) {
			tc.t.Fatalf("write %v: %v / %v", c.Items, err, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitRounds waits until leader l has run n more membership rounds than when
// called: long enough for whatever a round would do to have been done.
func waitRounds(t *testing.T, l *Node, n uint64) {
	t.Helper()
	from := l.reconciled.Load()
	eventually(t, 30*time.Second, fmt.Sprintf("%d membership rounds on %s", n, l.ID()), func() bool {
		return l.reconciled.Load() >= from+n
	})
}
