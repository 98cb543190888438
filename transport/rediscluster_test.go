package transport

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/internal/slot"
)

// TestRedisClusterFormats: go-redis v9's own parsers read CLUSTER SLOTS,
// SHARDS, KEYSLOT, INFO and MYID in both protocols, and CLUSTER NODES lines
// have Redis Cluster's fields: the leader a master with every slot, the other
// replica its slave.
func TestRedisClusterFormats(t *testing.T) {
	bothProtocols(t, func(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
		slots := res(c.ClusterSlots(ctx).Result()).must(t)
		if len(slots) != 1 || slots[0].Start != 0 || slots[0].End != slot.Count-1 || len(slots[0].Nodes) != 2 ||
			slots[0].Nodes[0].Addr != "127.0.0.1:6379" || slots[0].Nodes[0].ID != redisNodeID("n1") ||
			slots[0].Nodes[1].Addr != "127.0.0.1:6380" {
			t.Fatalf("CLUSTER SLOTS: %+v", slots)
		}
		shards := res(c.ClusterShards(ctx).Result()).must(t)
		if len(shards) != 1 || len(shards[0].Slots) != 1 || shards[0].Slots[0].End != slot.Count-1 || len(shards[0].Nodes) != 2 ||
			shards[0].Nodes[0].Role != "master" || shards[0].Nodes[1].Role != "replica" || shards[0].Nodes[1].Health != "failed" ||
			shards[0].Nodes[0].Port != 6379 || shards[0].Nodes[0].IP != "127.0.0.1" {
			t.Fatalf("CLUSTER SHARDS: %+v", shards)
		}
		for key, want := range map[string]int64{"foo": 12182, "{user1000}.following": 3443} {
			if got := res(c.ClusterKeySlot(ctx, key).Result()).must(t); got != want {
				t.Errorf("CLUSTER KEYSLOT %s = %d, want %d", key, got, want)
			}
		}
		info := res(c.ClusterInfo(ctx).Result()).must(t)
		for _, want := range []string{"cluster_enabled:1\r\n", "cluster_state:ok\r\n", "cluster_slots_ok:16384\r\n", "cluster_known_nodes:2\r\n", "cluster_size:1\r\n"} {
			if !strings.Contains(info, want) {
				t.Errorf("CLUSTER INFO lacks %q: %q", want, info)
			}
		}
		if id := res(c.Do(ctx, "CLUSTER", "MYID").Text()).must(t); id != redisNodeID("n1") || len(id) != 40 {
			t.Errorf("CLUSTER MYID %q", id)
		}
		lines := strings.Split(strings.TrimSpace(res(c.ClusterNodes(ctx).Result()).must(t)), "\n")
		if len(lines) != 2 {
			t.Fatalf("CLUSTER NODES: %q", lines)
		}
		f0, f1 := strings.Fields(lines[0]), strings.Fields(lines[1])
		if len(f0) != 9 || f0[0] != redisNodeID("n1") || f0[1] != "127.0.0.1:6379@7000" || f0[2] != "myself,master" ||
			f0[3] != "-" || f0[7] != "connected" || f0[8] != "0-16383" {
			t.Errorf("CLUSTER NODES, the leader: %q", f0)
		}
		if len(f1) != 8 || f1[2] != "slave,fail" || f1[3] != redisNodeID("n1") || f1[7] != "disconnected" {
			t.Errorf("CLUSTER NODES, the replica: %q", f1)
		}
		if n := res(c.Do(ctx, "CLUSTER", "KEYSLOT").Result()); n.err == nil || !strings.Contains(n.err.Error(), "wrong number of arguments") {
			t.Errorf("CLUSTER KEYSLOT without a key: %v", n.err)
		}
	})
}
