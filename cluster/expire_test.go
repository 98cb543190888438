package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/fsm"
)

// expiries records, per node, the keys its state machine removed by expiry
// and at which index, and lets a test skew each node's clock.
type expiries struct {
	mu    sync.Mutex
	by    map[string][]string // node id -> "key@index"
	skews map[string]*atomic.Int64
}

func newExpiries() *expiries {
	return &expiries{by: map[string][]string{}, skews: map[string]*atomic.Int64{}}
}

// tweak hooks a node's config into x.
func (x *expiries) tweak(c *Config) {
	id := c.ID
	skew := &atomic.Int64{}
	x.skews[id] = skew
	c.testClock = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	c.testOnExpire = func(key string, index uint64) {
		x.mu.Lock()
		x.by[id] = append(x.by[id], fmt.Sprintf("%s@%d", key, index))
		x.mu.Unlock()
	}
}

func (x *expiries) of(id string) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.by[id])
}

// agree waits until every node of ids removed exactly want's keys, and checks
// that they removed each at the same index; it returns the indexes by key.
func (x *expiries) agree(t *testing.T, ids []string, want ...string) map[string]uint64 {
	t.Helper()
	sort.Strings(want)
	eventually(t, 15*time.Second, fmt.Sprintf("every node to expire %v", want), func() bool {
		for _, id := range ids {
			if len(x.of(id)) != len(want) {
				return false
			}
		}
		return true
	})
	first := x.of(ids[0])
	for _, id := range ids[1:] {
		if got := x.of(id); !slices.Equal(got, first) {
			t.Fatalf("%s expired %v, %s expired %v", ids[0], first, id, got)
		}
	}
	at := map[string]uint64{}
	var keys []string
	for _, s := range first {
		var key string
		var idx uint64
		for i := len(s) - 1; i >= 0; i-- {
			if s[i] == '@' {
				key = s[:i]
				fmt.Sscan(s[i+1:], &idx)
				break
			}
		}
		at[key] = idx
		keys = append(keys, key)
	}
	sort.Strings(keys)
	if !slices.Equal(keys, want) {
		t.Fatalf("expired %v, want %v", keys, want)
	}
	return at
}

func (x *expiries) reset() {
	x.mu.Lock()
	x.by = map[string][]string{}
	x.mu.Unlock()
}

func pexpire(key string, ms int64) *fsm.Command {
	return &fsm.Command{Op: fsm.OpExpire, Key: key, Expire: ms}
}

func ids(tc *testCluster) []string {
	var out []string
	for _, n := range tc.live() {
		out = append(out, n.ID())
	}
	return out
}

// entryOps decodes the ops of the entry at index in n's log.
func entryOps(t *testing.T, n *Node, index uint64) []fsm.Op {
	t.Helper()
	var lg raft.Log
	if err := n.meta.logs.GetLog(index, &lg); err != nil {
		t.Fatalf("entry %d: %v", index, err)
	}
	_, cs, err := fsm.DecodeEntry(lg.Data)
	if err != nil {
		t.Fatalf("entry %d: %v", index, err)
	}
	var ops []fsm.Op
	for _, c := range cs {
		ops = append(ops, c.Op)
	}
	return ops
}

// TestKeysExpireOnEveryNode: with no other writes a key goes on every node,
// at the same index, by a tick the leader proposes; a follower whose clock
// runs an hour fast expires nothing early (its clock is never read for
// expiry), and once it leads, its clock is the one that counts.
func TestKeysExpireOnEveryNode(t *testing.T) {
	x := newExpiries()
	tc := newTestCluster(t, 3, func(c *Config) { x.tweak(c); steady(c) })
	li, l := tc.leader(10 * time.Second)
	fast := tc.followers()[0]
	x.skews[tc.cfgs[fast].ID].Store(int64(time.Hour))

	for _, k := range []string{"seen:today", "seen:tomorrow", "keep"} {
		mustSubmit(t, l, bfAdd(k, "https://example.com/"))
	}
	mustSubmit(t, l, pexpire("seen:today", 1500))
	mustSubmit(t, l, pexpire("seen:tomorrow", 10*60*1000))
	expireAt := l.meta.fsm.AppliedIndex()
	for _, n := range tc.live() {
		eventually(t, 5*time.Second, "the deadlines on every node", func() bool {
			d, _ := n.meta.fsm.Expiry("seen:tomorrow")
			return d != 0 && n.meta.fsm.Expires() == 2
		})
	}

	at := x.agree(t, ids(tc), "seen:today")
	if at["seen:today"] <= expireAt || !slices.Contains(entryOps(t, l, at["seen:today"]), fsm.OpExpireTick) {
		t.Fatalf("seen:today expired at %d (its EXPIRE at %d): want the leader's tick", at["seen:today"], expireAt)
	}
	// The fast follower's clock is past every deadline; nothing more goes
	// while the leader's is not.
	time.Sleep(2 * time.Second)
	if got := x.of(tc.cfgs[fast].ID); len(got) != 1 {
		t.Fatalf("the follower with a fast clock expired %v", got)
	}
	for _, n := range tc.live() {
		if _, ok := n.meta.fsm.KindOf("seen:tomorrow"); !ok || n.meta.fsm.ExpiredKeys() != 1 {
			t.Fatalf("%s: seen:tomorrow gone, or %d keys expired", n.ID(), n.meta.fsm.ExpiredKeys())
		}
		if d, _ := n.meta.fsm.Expiry("keep"); d != 0 {
			t.Fatalf("%s: keep has deadline %d", n.ID(), d)
		}
	}

	// Leadership moves to the fast node: its clock says seen:tomorrow is
	// due, so it goes, on every node at one index.
	x.reset()
	fastNode := tc.nodes[fast]
	eventually(t, 30*time.Second, fmt.Sprintf("leadership to move from n%d to the fast node n%d", li+1, fast+1), func() bool {
		// (On a loaded machine leadership may move by itself meanwhile.)
		got, l := tc.leader(10 * time.Second)
		if got == fast {
			return true
		}
		err := l.meta.raft.LeadershipTransferToServer(raft.ServerID(fastNode.ID()), raft.ServerAddress(fastNode.RaftAddr())).Error()
		if err != nil {
			t.Logf("leadership transfer: %v", err)
		}
		return false
	})
	x.agree(t, ids(tc), "seen:tomorrow")
	for _, n := range tc.live() {
		if n.meta.fsm.Len() != 1 || n.meta.fsm.Expires() != 0 || n.meta.fsm.NextDeadline() != 0 {
			t.Fatalf("%s: %d keys, %d deadlines left", n.ID(), n.meta.fsm.Len(), n.meta.fsm.Expires())
		}
	}
}

// TestExpirySurvivesRestartAndSnapshotInstall: deadlines come back with a
// node that installs a snapshot and with a whole cluster restarted from its
// data directories, and keys still expire on time, at one index everywhere.
func TestExpirySurvivesRestartAndSnapshotInstall(t *testing.T) {
	x := newExpiries()
	tc := newTestCluster(t, 3, func(c *Config) {
		x.tweak(c)
		steady(c)
		c.TrailingLogs = 10
		c.SnapshotThreshold = 1 << 20 // only the snapshots the test asks for
	})
	_, l := tc.leader(10 * time.Second)
	lag := tc.followers()[0]
	mustSubmit(t, l, bfAdd("soon", "x"))
	mustSubmit(t, l, bfAdd("later", "x"))
	tc.crash(lag)
	mustSubmit(t, l, pexpire("soon", 5000))
	mustSubmit(t, l, pexpire("later", 15000))
	// Two snapshots: compaction keeps the log after the older one.
	for round := range 2 {
		for i := range 50 {
			mustSubmit(t, l, bfAdd("filler", fmt.Sprint(round, i)))
		}
		if err := l.meta.raft.Snapshot().Error(); err != nil {
			t.Fatalf("snapshot: %v", err)
		}
	}
	// l applied every write it acknowledged, unless leadership moved under
	// the writes and another node acknowledged them: wait for l to apply.
	var want int64
	eventually(t, 10*time.Second, "later's deadline on "+l.ID(), func() bool {
		want, _ = l.meta.fsm.Expiry("later")
		return want != 0
	})
	if first, _ := l.meta.logs.FirstIndex(); first <= 5 {
		t.Fatalf("log still starts at %d: the lagging node would not need the snapshot", first)
	}
	tc.start(lag)
	eventually(t, 20*time.Second, "the lagging node to install the snapshot", func() bool {
		d, _ := tc.nodes[lag].meta.fsm.Expiry("later")
		return d == want && tc.nodes[lag].meta.fsm.Expires() >= 1
	})
	// raft records the snapshot it installed just after the state machine
	// has restored it: give it a moment.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && tc.nodes[lag].meta.raft.Stats()["last_snapshot_index"] == "0"; {
		time.Sleep(10 * time.Millisecond)
	}
	if st := tc.nodes[lag].meta.raft.Stats()["last_snapshot_index"]; st == "0" {
		f1, _ := l.meta.logs.FirstIndex()
		f2, _ := tc.nodes[lag].meta.logs.FirstIndex()
		l2, _ := tc.nodes[lag].meta.logs.LastIndex()
		t.Fatalf("the lagging node caught up without a snapshot: leader log from %d; lagging node log %d..%d, raft %v, started at %d", f1, f2, l2, tc.nodes[lag].meta.raft.Stats(), tc.nodes[lag].meta.startIndex)
	}
	soon := x.agree(t, ids(tc), "soon")["soon"]

	// The whole cluster stops and starts from its data directories before
	// later's deadline: it comes back, and goes on time.
	tc.stopAll()
	x.reset()
	for i := range tc.cfgs {
		tc.start(i)
	}
	tc.leader(10 * time.Second)
	for _, n := range tc.live() {
		eventually(t, 10*time.Second, "the deadline back after a restart", func() bool {
			d, _ := n.meta.fsm.Expiry("later")
			return d == want
		})
	}
	// Replaying the log from each node's snapshot removes soon again, at
	// the same index as the first time (unless the snapshot covered it).
	var laterAt uint64
	for _, id := range ids(tc) {
		eventually(t, 20*time.Second, "later to expire on "+id, func() bool {
			return slices.ContainsFunc(x.of(id), func(s string) bool { return strings.HasPrefix(s, "later@") })
		})
		for _, s := range x.of(id) {
			var idx uint64
			switch {
			case strings.HasPrefix(s, "soon@"):
				fmt.Sscan(strings.TrimPrefix(s, "soon@"), &idx)
				if idx != soon {
					t.Fatalf("%s removed soon at %d on replay, at %d the first time", id, idx, soon)
				}
			case strings.HasPrefix(s, "later@"):
				fmt.Sscan(strings.TrimPrefix(s, "later@"), &idx)
				if laterAt != 0 && idx != laterAt {
					t.Fatalf("%s removed later at %d, another node at %d", id, idx, laterAt)
				}
				laterAt = idx
			default:
				t.Fatalf("%s expired %s", id, s)
			}
		}
	}
	if now := time.Now().UnixMilli(); now < want {
		t.Fatalf("later expired at %d, before its deadline %d", now, want)
	}
}

// TestExpiryWaitsForLogFormat5: while a member reads only format 4, EXPIRE
// is refused before it is proposed, through the leader and through a
// follower, with an error naming the format; once the member is upgraded it
// is taken, and the key expires on every node.
func TestExpiryWaitsForLogFormat5(t *testing.T) {
	x := newExpiries()
	tc := newTestCluster(t, 3, func(c *Config) {
		x.tweak(c)
		if c.ID == "n3" {
			c.MaxLogFormat = fsm.CodecV4
		}
	})
	held := 2
	tc.mustWrite(bfAdd("k", "a"))
	_, l := tc.leader(10 * time.Second)
	for _, n := range tc.live() {
		eventually(t, 10*time.Second, "gossip of n3's format on "+n.ID(), func() bool { return n.forwardCodec() == fsm.CodecV4 })
		for _, c := range []*fsm.Command{pexpire("k", 1000), {Op: fsm.OpPersist, Key: "k"}} {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := submit(ctx, n, c)
			cancel()
			want := "not every node of the cluster can apply this command: it needs log format 5 and a member reads only up to 4; upgrade every node"
			if !errors.Is(err, ErrNeedsUpgrade) || err.Error() != want {
				t.Fatalf("op %d through %s (leader %s): %v, want %q", c.Op, n.ID(), l.ID(), err, want)
			}
		}
	}
	if d, _ := l.meta.fsm.Expiry("k"); d != 0 || l.meta.fsm.NextDeadline() != 0 {
		t.Fatal("a refused EXPIRE set a deadline")
	}

	tc.crash(held)
	tc.cfgs[held].MaxLogFormat = 0
	tc.start(held)
	eventually(t, 20*time.Second, "the leader to write the newest format", func() bool {
		_, l := tc.leader(10 * time.Second)
		return l.Status().LogFormatUse == int(fsm.CodecVersion)
	})
	tc.mustWrite(pexpire("k", 500))
	x.agree(t, ids(tc), "k")
}
