package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// startSharded starts n nodes with --shards and --replicas and waits until
// every shard has a leader (CLUSTER INFO says ok on every node).
func startSharded(t *testing.T, n, shards, replicas int) *localCluster {
	t.Helper()
	c, err := nodeproc.StartCluster(binary, t.TempDir(), n, "--shards", fmt.Sprint(shards), "--replicas", fmt.Sprint(replicas),
		"--dead-server-timeout", "3s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	lc := &localCluster{Cluster: c, t: t}
	lc.waitShardsOK(60 * time.Second)
	lc.waitPlaced(shards, replicas, 60*time.Second)
	return lc
}

// waitPlaced waits until the live nodes hold every shard's replicas and no
// more, each shard led by one of them.
func (c *localCluster) waitPlaced(shards, replicas int, within time.Duration) {
	c.t.Helper()
	var last []string
	defer func() {
		if c.t.Failed() {
			c.t.Logf("last seen: %v", last)
		}
	}()
	eventually(c.t, within, "every replica to be in place", func() bool {
		last = nil
		held, leaders := 0, map[int]bool{}
		for _, m := range c.Nodes {
			if !m.Alive() {
				continue
			}
			st, err := m.Status()
			if err != nil {
				return false
			}
			last = append(last, fmt.Sprintf("%s:%v", m.ID, st.Shards))
			for _, s := range st.Shards {
				held++
				if s.Role == "leader" {
					leaders[s.Shard] = true
				}
			}
		}
		return held == shards*replicas && len(leaders) == shards
	})
}

// waitShardsOK waits until every live node's CLUSTER INFO says ok.
func (c *localCluster) waitShardsOK(within time.Duration) {
	c.t.Helper()
	eventually(c.t, within, "every shard to have a leader", func() bool {
		for _, m := range c.Nodes {
			if !m.Alive() {
				continue
			}
			cl := redis.NewClient(&redis.Options{Addr: m.RESP})
			info, err := cl.ClusterInfo(context.Background()).Result()
			cl.Close()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
		}
		return true
	})
}

// TestShardedClusterServesRedisClusterClients: six nodes, six shards of three
// replicas. go-redis's ClusterClient (routing by CLUSTER SLOTS) and redis-cli
// -c add and read 10,000 keys spread over every shard with no error; each
// node holds 40-60% of the filters' bytes and leads one shard, give or take
// one; a plain client on any node reaches every key through it.
func TestShardedClusterServesRedisClusterClients(t *testing.T) {
	c := startSharded(t, 6, 6, 3)
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.RESPAddrs(), ReadOnly: true})
	defer cc.Close()
	const keys = 10000
	pipe := cc.Pipeline()
	for i := range keys {
		pipe.BFAdd(ctx, fmt.Sprintf("key:%d", i), "item")
	}
	if cmds, err := pipe.Exec(ctx); err != nil {
		for _, cmd := range cmds {
			if cmd.Err() != nil {
				t.Fatalf("ClusterClient BF.ADD %v: %v", cmd.Args(), cmd.Err())
			}
		}
		t.Fatal(err)
	}
	for i := 0; i < keys; i += 97 {
		ok, err := cc.BFExists(ctx, fmt.Sprintf("key:%d", i), "item").Result()
		if err != nil || !ok {
			t.Fatalf("ClusterClient BF.EXISTS key:%d: %v %v", i, ok, err)
		}
	}
	if n, err := cc.DBSize(ctx).Result(); err != nil || n < keys {
		// go-redis sums DBSIZE over the masters; each of ours counts the whole cluster.
		t.Fatalf("DBSIZE %d %v", n, err)
	}

	// A plain client on one node reaches every key through it.
	plain := redis.NewClient(&redis.Options{Addr: c.Nodes[0].RESP})
	defer plain.Close()
	if n, err := plain.DBSize(ctx).Result(); err != nil || n != keys {
		t.Fatalf("DBSIZE through one node: %d %v", n, err)
	}
	for i := 0; i < keys; i += 501 {
		if ok, err := plain.BFExists(ctx, fmt.Sprintf("key:%d", i), "item").Result(); err != nil || !ok {
			t.Fatalf("BF.EXISTS key:%d through one node: %v %v", i, ok, err)
		}
	}
	// redis-cli -c follows the cluster as it knows it.
	if out, err := exec.Command("redis-cli", "-c", "-p", port(c.Nodes[3].RESP), "BF.ADD", "cli:key", "x").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Fatalf("redis-cli -c BF.ADD: %q %v", out, err)
	}
	if out, err := exec.Command("redis-cli", "-c", "-p", port(c.Nodes[1].RESP), "BF.EXISTS", "cli:key", "x").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Fatalf("redis-cli -c BF.EXISTS: %q %v", out, err)
	}

	// Bytes and leaders spread evenly.
	var total uint64
	bytes := map[string]uint64{}
	leads := map[string]int{}
	for _, m := range c.Nodes {
		st, err := m.Status()
		if err != nil {
			t.Fatal(err)
		}
		bytes[m.ID] = st.Memory
		total += st.Memory
		for _, s := range st.Shards {
			if s.Role == "leader" {
				leads[m.ID]++
			}
		}
	}
	total /= 3 // every byte is on three replicas
	for _, m := range c.Nodes {
		share := float64(bytes[m.ID]) / float64(total)
		if share < 0.40 || share > 0.60 {
			t.Errorf("%s holds %.0f%% of the filters' bytes, want 40-60%%: %v", m.ID, 100*share, bytes)
		}
		if leads[m.ID] > 2 {
			t.Errorf("%s leads %d shards: %v", m.ID, leads[m.ID], leads)
		}
	}
}

func port(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }
