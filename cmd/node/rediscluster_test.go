package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/internal/nodeproc"
	"github.com/rookerydb/rookery/internal/slot"
)

// TestShardedRedisClusterTools: six nodes, six shards of three replicas,
// one key. redis-cli --cluster info and check count the key once and show
// replicas (each node leads a shard, and CLUSTER NODES still shows some as
// replicas of others: transport/rediscluster_nodes.go); check finds every
// slot covered and every node agreeing. A go-redis ClusterClient (ReadOnly)
// whose map was read before the key's shard moved (its leader drained) is
// answered MOVED once by the old leader, then sends the shard's writes
// straight to the new one.
func TestShardedRedisClusterTools(t *testing.T) {
	c := startSharded(t, 6, 6, 3)
	ctx := context.Background()
	plain := redis.NewClient(&redis.Options{Addr: c.Nodes[0].RESP})
	defer plain.Close()
	// Leadership may still be balancing after the start: retry what was not
	// applied, as a client would.
	if err := notApplied(func() error { return plain.BFAdd(ctx, "only-key", "x").Err() }); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := notApplied(func() (err error) { n, err = plain.DBSize(ctx).Result(); return err }); err != nil || n != 1 {
		t.Fatalf("a plain client's DBSIZE: %d %v, want the cluster's 1", n, err)
	}
	plain.Close()
	plain = redis.NewClient(&redis.Options{Addr: c.Nodes[1].RESP}) // for CLUSTER SLOTS

	t.Run("redis-cli --cluster", func(t *testing.T) {
		entry := "127.0.0.1:" + port(c.Nodes[2].RESP)
		slavesRE := regexp.MustCompile(`-> (\d+) keys \| \d+ slots \| (\d+) slaves\.`)
		var info, check string
		// Leadership may still be settling after the start (the controller
		// balances it): wait for check to find every node agreeing.
		eventually(t, 60*time.Second, "redis-cli --cluster check to pass", func() bool {
			out, err := exec.Command("redis-cli", "--cluster", "check", entry).CombinedOutput()
			check = string(out)
			return err == nil && strings.Contains(check, "[OK] All nodes agree about slots configuration.")
		})
		out, err := exec.Command("redis-cli", "--cluster", "info", entry).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli --cluster info: %v\n%s", err, out)
		}
		info = string(out)
		t.Logf("redis-cli --cluster info:\n%s", info)
		t.Logf("redis-cli --cluster check:\n%s", check)
		for name, text := range map[string]string{"info": info, "check": check} {
			masters := slavesRE.FindAllStringSubmatch(text, -1)
			keys, slaves := 0, 0
			for _, m := range masters {
				k, _ := strconv.Atoi(m[1])
				s, _ := strconv.Atoi(m[2])
				keys, slaves = keys+k, slaves+s
			}
			want := fmt.Sprintf("[OK] 1 keys in %d masters.", len(masters))
			if !strings.Contains(text, want) || keys != 1 {
				t.Errorf("--cluster %s: want %q and one key over the masters' lines, got %d", name, want, keys)
			}
			if slaves == 0 || len(masters)+slaves != 6 {
				t.Errorf("--cluster %s: %d masters and %d replicas, want replicas and six nodes in all", name, len(masters), slaves)
			}
		}
		for _, want := range []string{"[OK] All 16384 slots covered.", "additional replica(s)", "\nS: "} {
			if !strings.Contains(check, want) {
				t.Errorf("--cluster check lacks %q", want)
			}
		}
	})

	t.Run("ClusterClient follows MOVED", func(t *testing.T) {
		const key = "moved-key"
		// ReadOnly: every connection sends READONLY, as go-redis's replica
		// reads have it do, so every one is a cluster client's.
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.RESPAddrs(), ReadOnly: true})
		defer cc.Close()
		if err := cc.BFAdd(ctx, key, "warm").Err(); err != nil {
			t.Fatal(err)
		}
		old := leaderFor(t, cc, key)
		if l := leaderOf(t, plain, key); l != old {
			t.Fatalf("the client's map names %s as the key's master, the cluster %s", old, l)
		}
		// The shard moves: its leader is drained. The client's map, read
		// before, still names it.
		om := memberAt(t, c, old)
		if code, out, errOut := runTool(t, "node", nil, "drain", "--addr", c.Nodes[0].HTTP, om.ID); code != 0 {
			t.Fatalf("rookery node drain: %d %s %s", code, out, errOut)
		}
		// The old leader answers MOVED once it knows the new one (until
		// then it hands the write on itself): wait for both views.
		oc := redis.NewClient(&redis.Options{Addr: om.RESP})
		defer oc.Close()
		slotN, err := plain.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		shard := slot.Shard(slot.Ranges(6), int(slotN))
		// CLUSTER SLOTS names a shard's first replica as its master while a
		// leader hands over: wait for the node it names to lead.
		var now string
		eventually(t, 60*time.Second, "the key's shard to have a new leader, known to the old one", func() bool {
			now = leaderOf(t, plain, key)
			if now == "" || now == old || leaderOf(t, oc, key) != now {
				return false
			}
			st, err := memberAt(t, c, now).Status()
			if err != nil {
				return false
			}
			for _, s := range st.Shards {
				if s.Shard == shard && s.Role == "leader" {
					return true
				}
			}
			return false
		})
		nm := memberAt(t, c, now)
		o0, n0 := addCount(t, om), addCount(t, nm)
		if err := cc.BFAdd(ctx, key, "first").Err(); err != nil {
			t.Fatalf("BF.ADD through the stale map: %v", err)
		}
		o1, n1 := addCount(t, om), addCount(t, nm)
		if o1-o0 != 1 || n1-n0 != 1 {
			t.Fatalf("the first write: %d on the old leader, %d on the new; want 1 (MOVED) and 1", o1-o0, n1-n0)
		}
		// go-redis reloads its map in the background after a MOVED.
		eventually(t, 10*time.Second, "the client to learn the new leader", func() bool { return leaderFor(t, cc, key) == now })
		const n = 20
		for i := range n {
			if err := cc.BFAdd(ctx, key, fmt.Sprint(i)).Err(); err != nil {
				t.Fatal(err)
			}
		}
		o2, n2 := addCount(t, om), addCount(t, nm)
		if o2 != o1 || n2-n1 != n {
			t.Fatalf("after the MOVED: %d writes on the old leader, %d on the new; want 0 and %d", o2-o1, n2-n1, n)
		}
	})
}

// leaderFor is the RESP address cc's map names as key's master.
func leaderFor(t *testing.T, cc *redis.ClusterClient, key string) string {
	t.Helper()
	node, err := cc.MasterForKey(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return node.Options().Addr
}

// leaderOf is the RESP address CLUSTER SLOTS names as key's master.
func leaderOf(t *testing.T, cl *redis.Client, key string) string {
	t.Helper()
	ctx := context.Background()
	n, err := cl.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	slots, err := cl.ClusterSlots(ctx).Result()
	if err != nil {
		return ""
	}
	for _, s := range slots {
		if int64(s.Start) <= n && n <= int64(s.End) && len(s.Nodes) > 0 {
			return s.Nodes[0].Addr
		}
	}
	return ""
}

// memberAt is the node listening on RESP address addr.
func memberAt(t *testing.T, c *localCluster, addr string) *nodeproc.Member {
	t.Helper()
	for _, m := range c.Nodes {
		if port(m.RESP) == port(addr) {
			return m
		}
	}
	t.Fatalf("no node at %s", addr)
	return nil
}

var bfAddRE = regexp.MustCompile(`(?m)^rookery_commands_total\{command="bf\.add",outcome="[a-z]+"\} (\d+)$`)

// addCount is how many BF.ADD node m has served, whatever their outcome.
func addCount(t *testing.T, m *nodeproc.Member) int {
	t.Helper()
	b := metricsOf(t, m)
	n := 0
	for _, g := range bfAddRE.FindAllStringSubmatch(string(b), -1) {
		v, _ := strconv.Atoi(g[1])
		n += v
	}
	return n
}

// metricsOf is node m's /metrics page.
func metricsOf(t *testing.T, m *nodeproc.Member) []byte {
	t.Helper()
	resp, err := m.HTTPDo("GET", "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
