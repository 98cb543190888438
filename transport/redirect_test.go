package transport

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/slot"
)

// shardedFake is node n1 of a three-node, three-shard cluster:
//
//	shard 0, slots     0-5460: n1 (leader), n3   held here, led here
//	shard 1, slots  5461-10922: n2 (leader), n1   held here, a follower
//	shard 2, slots 10923-16383: n3 (leader), n2   not held here
//
// Each replica is a fakeBackend; a command forwarded for shard 2 runs on
// its replica through a server of its own, as on the node that holds it.
type shardedFake struct {
	*fakeBackend // n1's own status, memory, readiness
	reps         [3]*fakeBackend
	remote       *Server // runs what is forwarded to shard 2

	mu       sync.Mutex
	leaders  [3]string
	forwards []int // shards forwarded to, in order
}

var fakeAddrs = map[string]string{"n1": "127.0.0.1:7001", "n2": "127.0.0.1:7002", "n3": "127.0.0.1:7003"}

func newShardedFake(t *testing.T) *shardedFake {
	f := &shardedFake{fakeBackend: newFakeBackend(t), leaders: [3]string{"n1", "n2", "n3"}}
	for i := range f.reps {
		f.reps[i] = newFakeBackend(t)
	}
	f.reps[1].follower = true // n1 follows shard 1
	f.remote = New(Config{Registry: prometheus.NewRegistry()}, f.reps[2])
	t.Cleanup(func() { f.remote.Close() })
	return f
}

var fakeLayout = [3][]string{{"n1", "n3"}, {"n2", "n1"}, {"n3", "n2"}}

func (f *shardedFake) setLeader(sh int, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leaders[sh] = id
}

func (f *shardedFake) forwarded() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.forwards)
}

func (f *shardedFake) ShardCount() int        { return 3 }
func (f *shardedFake) Sharded() bool          { return true }
func (f *shardedFake) ShardOf(key string) int { return fakeShardOf(slot.Of([]byte(key))) }

// fakeShardOf is the shard of slot n: shard s's slots start at s*16384/3.
func fakeShardOf(n int) int {
	s := 2
	for n < s*slot.Count/3 {
		s--
	}
	return s
}

func (f *shardedFake) Replica(s int) (Replica, error) {
	if s == 0 || s == 1 {
		return f.reps[s], nil
	}
	return nil, cluster.ErrNotHosted
}

func (f *shardedFake) Replicas() []Replica { return []Replica{f.reps[0], f.reps[1]} }

func (f *shardedFake) Submit(cmd *fsm.Command) *cluster.Future {
	return f.reps[f.ShardOf(cmd.Key)].Submit(cmd)
}

func (f *shardedFake) Forward(ctx context.Context, s int, args [][]byte, proto int, stale bool) ([]byte, error) {
	f.mu.Lock()
	f.forwards = append(f.forwards, s)
	f.mu.Unlock()
	if s != 2 {
		return nil, cluster.ErrNotHosted
	}
	return f.remote.ExecShard(ctx, f.reps[2], args, proto, stale), nil
}

func (f *shardedFake) Shards() []cluster.ShardInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []cluster.ShardInfo
	for s, ids := range fakeLayout {
		sh := cluster.ShardInfo{ID: s, First: s * slot.Count / 3, Last: (s+1)*slot.Count/3 - 1, Leader: f.leaders[s]}
		for _, id := range ids {
			sh.Replicas = append(sh.Replicas, cluster.ShardReplica{ID: id, RESPAddr: fakeAddrs[id], Voter: true, Health: "alive"})
		}
		out = append(out, sh)
	}
	return out
}

func (f *shardedFake) Nodes() []cluster.NodeInfo {
	var out []cluster.NodeInfo
	for _, id := range []string{"n1", "n2", "n3"} {
		out = append(out, cluster.NodeInfo{ID: id, RESPAddr: fakeAddrs[id], RaftAddr: "127.0.0.1:800" + id[1:], Voter: true, Health: "alive"})
	}
	return out
}

// keyIn is a key of shard sh (of three).
func keyIn(t *testing.T, sh int, skip int) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("key:%d", i)
		if fakeShardOf(slot.Of([]byte(k))) == sh {
			if skip == 0 {
				return k
			}
			skip--
		}
		if i > 100000 {
			t.Fatal("no key found")
		}
	}
}

func startSharded(t *testing.T) (*shardedFake, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := newShardedFake(t)
	s := New(Config{Registry: prometheus.NewRegistry()}, f)
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return f, ln.Addr().String()
}

// TestMovedForClusterClients: a connection that asked for the slot map, or
// sent READONLY, is answered MOVED with Redis's format for a key this node
// does not serve (a write: the shard's leader; a read: any replica), and
// served where it does; a plain connection is forwarded for every key, and a
// shard whose leader nobody knows is served as before rather than redirected.
func TestMovedForClusterClients(t *testing.T) {
	f, addr := startSharded(t)
	k0, k1, k2 := keyIn(t, 0, 0), keyIn(t, 1, 0), keyIn(t, 2, 0)
	moved := func(k, to string) string {
		return fmt.Sprintf("-MOVED %d %s\r\n", slot.Of([]byte(k)), to)
	}

	plain := dialRaw(t, addr)
	for _, k := range []string{k0, k1, k2} {
		if got := plain.do("BF.ADD", k, "a"); got != ":1\r\n" {
			t.Errorf("plain BF.ADD %s: %q", k, got)
		}
	}
	if got := f.forwarded(); !slices.Equal(got, []int{2}) {
		t.Errorf("a plain connection's write to shard 2 was forwarded to %v, want [2]", got)
	}

	for i, hello := range [][]string{{"CLUSTER", "SLOTS"}, {"CLUSTER", "SHARDS"}, {"CLUSTER", "NODES"}, {"READONLY"}} {
		t.Run(strings.Join(hello, " "), func(t *testing.T) {
			c := dialRaw(t, addr)
			item := fmt.Sprint("c", i)
			if got := c.do("BF.ADD", k2, item); got != ":1\r\n" {
				t.Fatalf("before %v, BF.ADD of shard 2: %q (a plain connection is forwarded)", hello, got)
			}
			c.do(hello...)
			for _, tc := range []struct {
				req  []string
				want string
			}{
				{[]string{"BF.ADD", k0, item}, ":1\r\n"},                    // led here
				{[]string{"BF.ADD", k1, item}, moved(k1, "127.0.0.1:7002")}, // a follower here: to the leader
				{[]string{"BF.ADD", k2, item}, moved(k2, "127.0.0.1:7003")}, // not held here
				{[]string{"BF.EXISTS", k1, "a"}, ":1\r\n"},                  // any replica serves a read
				{[]string{"BF.EXISTS", k2, "a"}, moved(k2, "127.0.0.1:7003")},
				{[]string{"DEL", k2}, moved(k2, "127.0.0.1:7003")},
				{[]string{"ASKING"}, "+OK\r\n"},
			} {
				if got := c.do(tc.req...); got != tc.want {
					t.Errorf("%v: %q, want %q", tc.req, got, tc.want)
				}
			}
		})
	}
	// The redirected writes ran nowhere.
	for sh, k := range []string{k0, k1, k2} {
		n := 0
		for _, cmd := range f.reps[sh].submitted() {
			if cmd.Key == k {
				n++
			}
		}
		if want := []int{5, 1, 5}[sh]; n != want {
			t.Errorf("shard %d took %d writes of %s, want %d", sh, n, k, want)
		}
	}

	// Shard 0's leadership moves away from n1: until the view names the new
	// leader, n1 serves the write (its replica hands it on) rather than
	// redirect to itself; then MOVED names the new leader.
	f.reps[0].set(func(b *fakeBackend) { b.follower = true })
	c0 := dialRaw(t, addr)
	c0.do("CLUSTER", "SHARDS")
	if got := c0.do("BF.ADD", k0, "e"); got != ":1\r\n" {
		t.Errorf("a write on a deposed leader the view still names: %q", got)
	}
	f.setLeader(0, "n3")
	if got, want := c0.do("BF.ADD", k0, "f"), moved(k0, "127.0.0.1:7003"); got != want {
		t.Errorf("a write on a deposed leader: %q, want %q", got, want)
	}

	// No leader known for shard 2: served as before (forwarded, where the
	// hold and CLUSTERDOWN apply), never MOVED to nobody.
	f.setLeader(2, "")
	c := dialRaw(t, addr)
	c.do("CLUSTER", "SLOTS")
	before := len(f.forwarded())
	if got := c.do("BF.ADD", k2, "d"); got != ":1\r\n" {
		t.Errorf("BF.ADD of a shard without a known leader: %q", got)
	}
	if len(f.forwarded()) != before+1 {
		t.Errorf("not forwarded: %v", f.forwarded())
	}
}

// TestMovedNeverOnOneGroup: a cluster of one group is served by every node:
// a cluster client there is never redirected, and DBSIZE counts every key.
func TestMovedNeverOnOneGroup(t *testing.T) {
	ts := mustStartServer(t, Config{})
	ts.be.set(func(b *fakeBackend) { b.follower = true }) // n2, a follower
	c := dialRaw(t, ts.addr)
	c.do("READONLY")
	c.do("CLUSTER", "SLOTS")
	if got := c.do("BF.ADD", "k", "a"); got != ":1\r\n" {
		t.Fatalf("BF.ADD on a follower of a one-group cluster: %q", got)
	}
	if got := c.do("DBSIZE"); got != ":1\r\n" {
		t.Fatalf("DBSIZE: %q", got)
	}
}

// TestKeysInSlot: CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT answer as Redis
// does, errors in its words, for slots this node holds; a plain connection
// is forwarded for another slot, a cluster client told this node holds none.
func TestKeysInSlot(t *testing.T) {
	_, addr := startSharded(t)
	c := dialRaw(t, addr)
	a, b := keyIn(t, 0, 0), keyIn(t, 2, 0)
	// Two keys of a's slot: a and {a}x.
	for _, k := range []string{a, "{" + a + "}x", b} {
		if got := c.do("CF.ADD", k, "i"); got != ":1\r\n" {
			t.Fatalf("CF.ADD %s: %q", k, got)
		}
	}
	sa, sb := fmt.Sprint(slot.Of([]byte(a))), fmt.Sprint(slot.Of([]byte(b)))
	for _, tc := range []struct {
		req  []string
		want string
	}{
		{[]string{"CLUSTER", "COUNTKEYSINSLOT", sa}, ":2\r\n"},
		{[]string{"CLUSTER", "GETKEYSINSLOT", sa, "1"}, "*1\r\n"},
		{[]string{"CLUSTER", "GETKEYSINSLOT", sa, "0"}, "*0\r\n"},
		{[]string{"CLUSTER", "COUNTKEYSINSLOT", sb}, ":1\r\n"}, // forwarded
		{[]string{"CLUSTER", "GETKEYSINSLOT", sb, "10"}, fmt.Sprintf("*1\r\n$%d\r\n%s\r\n", len(b), b)},
		{[]string{"cluster", "countkeysinslot", "0"}, ":0\r\n"},
		{[]string{"CLUSTER", "COUNTKEYSINSLOT", "x"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"CLUSTER", "COUNTKEYSINSLOT", "-1"}, "-ERR Invalid slot\r\n"},
		{[]string{"CLUSTER", "COUNTKEYSINSLOT", "16384"}, "-ERR Invalid slot\r\n"},
		{[]string{"CLUSTER", "GETKEYSINSLOT", "16384", "1"}, "-ERR Invalid slot or number of keys\r\n"},
		{[]string{"CLUSTER", "GETKEYSINSLOT", "1", "-1"}, "-ERR Invalid slot or number of keys\r\n"},
		{[]string{"CLUSTER", "GETKEYSINSLOT", "1", "y"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"CLUSTER", "COUNTKEYSINSLOT"}, "-ERR wrong number of arguments for 'cluster|countkeysinslot' command\r\n"},
		{[]string{"CLUSTER", "GETKEYSINSLOT", "1"}, "-ERR wrong number of arguments for 'cluster|getkeysinslot' command\r\n"},
	} {
		got := c.do(tc.req...)
		if tc.want == "*1\r\n" && strings.HasPrefix(got, tc.want) && strings.Count(got, "$") == 1 {
			continue // one of the slot's two keys
		}
		if got != tc.want {
			t.Errorf("%v: %q, want %q", tc.req, got, tc.want)
		}
	}
	cc := dialRaw(t, addr)
	cc.do("CLUSTER", "NODES")
	if got := cc.do("CLUSTER", "COUNTKEYSINSLOT", sb); got != ":0\r\n" {
		t.Errorf("a cluster client's COUNTKEYSINSLOT of a slot not held here: %q, want :0", got)
	}
	if got := cc.do("CLUSTER", "GETKEYSINSLOT", sb, "5"); got != "*0\r\n" {
		t.Errorf("a cluster client's GETKEYSINSLOT of a slot not held here: %q, want *0", got)
	}
}

// TestDBSizePerNodeForClusterClients: a plain connection's DBSIZE and INFO
// keyspace count the whole cluster; a cluster client's count the keys of the
// slots this node shows as its own in CLUSTER NODES, and over the masters
// of CLUSTER NODES those add up to every key once.
func TestDBSizePerNodeForClusterClients(t *testing.T) {
	f, addr := startSharded(t)
	c := dialRaw(t, addr)
	for sh, n := range []int{2, 3, 4} {
		for i := range n {
			if got := c.do("BF.ADD", keyIn(t, sh, i), "x"); got != ":1\r\n" {
				t.Fatal(got)
			}
		}
	}
	if got := c.do("DBSIZE"); got != ":9\r\n" {
		t.Errorf("plain DBSIZE: %q, want 9", got)
	}
	if got := c.do("INFO", "keyspace"); !strings.Contains(got, "db0:keys=9,") {
		t.Errorf("plain INFO keyspace: %q", got)
	}
	cc := dialRaw(t, addr)
	nodes := cc.do("CLUSTER", "NODES")
	// The projection: n1 shows shards 0 and 1, n2 shard 2 (n3, which leads
	// it, holds no shard n2 does not), n3 replicates n1.
	for _, want := range []string{
		redisNodeID("n1") + " 127.0.0.1:7001@8001 myself,master - 0 0 1 connected 0-5460 5461-10921\n",
		redisNodeID("n2") + " 127.0.0.1:7002@8002 master - 0 0 3 connected 10922-16383\n",
		redisNodeID("n3") + " 127.0.0.1:7003@8003 slave " + redisNodeID("n1") + " 0 0 0 connected\n",
	} {
		if !strings.Contains(nodes, want) {
			t.Errorf("CLUSTER NODES lacks %q:\n%s", want, nodes)
		}
	}
	if got := cc.do("DBSIZE"); got != ":5\r\n" {
		t.Errorf("a cluster client's DBSIZE on n1: %q, want 5 (shards 0 and 1)", got)
	}
	if got := cc.do("INFO", "keyspace"); !strings.Contains(got, "db0:keys=5,") {
		t.Errorf("a cluster client's INFO keyspace on n1: %q", got)
	}
	_ = f
}

// TestProjectNodesRing: six nodes, six shards of three placed in turn, each
// node leading one: CLUSTER NODES shows as few masters as cover every shard,
// all of them leaders, each shard's slots on exactly one, and every other
// node as a replica, spread evenly, so redis-cli --cluster check shows
// replicas where the leaders alone would leave none.
func TestProjectNodesRing(t *testing.T) {
	var nodes []cluster.NodeInfo
	for i := range 6 {
		nodes = append(nodes, cluster.NodeInfo{ID: fmt.Sprintf("n%d", i), RESPAddr: fmt.Sprintf("h:%d", i)})
	}
	var shards []cluster.ShardInfo
	for s := range 6 {
		sh := cluster.ShardInfo{ID: s, First: s * 100, Last: s*100 + 99, Leader: fmt.Sprintf("n%d", s)}
		for r := range 3 {
			sh.Replicas = append(sh.Replicas, cluster.ShardReplica{ID: fmt.Sprintf("n%d", (s+r)%6), RESPAddr: "x"})
		}
		shards = append(shards, sh)
	}
	nv := projectNodes(shards, nodes)
	if len(nv.masters) != 2 || len(nv.replicaOf) != 4 {
		t.Fatalf("masters %v, replicas %v", nv.masters, nv.replicaOf)
	}
	seen := map[int]int{}
	for _, m := range nv.masters {
		for _, sh := range nv.owns[m] {
			seen[sh.ID]++
			if !slices.ContainsFunc(sh.Replicas, func(r cluster.ShardReplica) bool { return r.ID == m }) {
				t.Errorf("%s shows shard %d, which it does not hold", m, sh.ID)
			}
		}
	}
	for s := range 6 {
		if seen[s] != 1 {
			t.Errorf("shard %d shown on %d masters", s, seen[s])
		}
	}
	per := map[string]int{}
	for _, m := range nv.replicaOf {
		per[m]++
	}
	for _, m := range nv.masters {
		if per[m] != 2 {
			t.Errorf("master %s has %d replicas, want 2: %v", m, per[m], nv.replicaOf)
		}
	}
	// Projected again, the same answer (every node renders the same lines).
	again := projectNodes(shards, nodes)
	if !slices.Equal(again.masters, nv.masters) || fmt.Sprint(again.replicaOf) != fmt.Sprint(nv.replicaOf) {
		t.Errorf("not deterministic: %v %v then %v %v", nv.masters, nv.replicaOf, again.masters, again.replicaOf)
	}
}
