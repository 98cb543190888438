package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/internal/nodeproc"
	"github.com/rookerydb/rookery/internal/slot"
)

// startSharded starts n nodes with --shards and --replicas and waits until
// every shard has a leader (CLUSTER INFO says ok on every node).
func startSharded(t *testing.T, n, shards, replicas int, extra ...string) *localCluster {
	t.Helper()
	args := append([]string{"--shards", fmt.Sprint(shards), "--replicas", fmt.Sprint(replicas)}, extra...)
	c, err := nodeproc.StartCluster(bin(t), t.TempDir(), n, args...)
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
	// ReadOnly sends reads to any replica, as READONLY: a follower's own
	// state, which may not have applied the last writes yet, and must soon.
	for i := 0; i < keys; i += 97 {
		var ok bool
		var err error
		eventually(t, 10*time.Second, fmt.Sprintf("key:%d to be read through the ClusterClient", i), func() bool {
			ok, err = cc.BFExists(ctx, fmt.Sprintf("key:%d", i), "item").Result()
			return err == nil && ok
		})
	}
	// go-redis sums DBSIZE over the masters of CLUSTER SLOTS (the leaders);
	// on its connections (READONLY: cluster clients) each node counts the
	// slots it shows as its own in CLUSTER NODES, so the sum is every key
	// once, once the leaders the client knows are the ones the nodes see.
	var dbsize int64
	eventually(t, 20*time.Second, "the ClusterClient's DBSIZE to count every key once", func() bool {
		var err error
		dbsize, err = cc.DBSize(ctx).Result()
		if err != nil || dbsize != keys {
			cc.ReloadState(ctx)
			return false
		}
		return true
	})

	// A plain client on one node reaches every key through it.
	plain := redis.NewClient(&redis.Options{Addr: c.Nodes[0].RESP})
	defer plain.Close()
	if n, err := plain.DBSize(ctx).Result(); err != nil || n != keys {
		t.Fatalf("DBSIZE through one node: %d %v", n, err)
	}
	// INFO keyspace counts every shard, whichever node answers.
	if err := plain.Expire(ctx, "key:7", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	// INFO reads each shard at a replica without a read barrier (as Redis's
	// INFO is a node's own view): another connection's EXPIRE shows once that
	// replica has applied it.
	for _, m := range []int{0, 4} {
		cl := redis.NewClient(&redis.Options{Addr: c.Nodes[m].RESP})
		want := fmt.Sprintf("db0:keys=%d,expires=1,", keys)
		eventually(t, 10*time.Second, "INFO keyspace on "+c.Nodes[m].ID+" to say "+want, func() bool {
			info, err := cl.Info(ctx, "keyspace").Result()
			return err == nil && strings.Contains(info, want)
		})
		cl.Close()
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

	// Every node exports its shards' health.
	resp, err := c.Nodes[0].HTTPDo("GET", "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if held := strings.Count(string(body), "rookery_shard_applied_index{shard="); held != 3 ||
		!strings.Contains(string(body), "rookery_shards_held 3") {
		t.Errorf("/metrics shows %d shards' applied index:\n%s", held, body)
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

// TestShardedKillNode: kill -9 of a node of six (six shards, three
// replicas): every key is readable and writable again within 5 s; after the
// dead-server timeout every shard is back to three replicas on the five
// survivors; restarted, the node takes replicas back.
func TestShardedKillNode(t *testing.T) {
	// The dead-server timeout outlasts the 5 s in which every key must be
	// served again: the replicas are re-created afterwards.
	c := startSharded(t, 6, 6, 3, "--dead-server-timeout", "8s")
	ctx := context.Background()
	const keys = 600
	plain := redis.NewClient(&redis.Options{Addr: c.Nodes[0].RESP, MaxRetries: -1})
	defer plain.Close()
	for i := range keys {
		if err := plain.BFAdd(ctx, fmt.Sprintf("k:%d", i), "a").Err(); err != nil {
			t.Fatal(err)
		}
	}
	victim := c.Nodes[2]
	victim.Kill()
	killed := time.Now()
	via := redis.NewClient(&redis.Options{Addr: c.Nodes[4].RESP, MaxRetries: -1})
	defer via.Close()
	// Ten keys of each shard, read and written in one round trip per try.
	sample := map[int][]string{}
	for i := 0; len(sample) < 6 || i < keys; i++ {
		k := fmt.Sprintf("k:%d", i)
		s, err := via.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if sh := int(s) * 6 / 16384; len(sample[sh]) < 10 {
			sample[sh] = append(sample[sh], k)
		}
		if i >= keys {
			break
		}
	}
	var lastErr error
	eventually(t, 5*time.Second, "every shard's keys readable and writable after the kill", func() bool {
		pipe := via.Pipeline()
		for _, ks := range sample {
			for _, k := range ks {
				pipe.BFExists(ctx, k, "a")
				pipe.BFAdd(ctx, k, "b")
			}
		}
		cmds, _ := pipe.Exec(ctx)
		for _, cmd := range cmds {
			if cmd.Err() != nil {
				lastErr = fmt.Errorf("%v: %v", cmd.Args(), cmd.Err())
				return false
			}
		}
		return true
	})
	if lastErr != nil {
		t.Logf("until then: %v", lastErr)
	}
	t.Logf("every key readable and writable %v after the kill", time.Since(killed).Round(10*time.Millisecond))
	for i := range keys {
		if err := notApplied(func() error { return via.BFAdd(ctx, fmt.Sprintf("k:%d", i), "b").Err() }); err != nil {
			t.Fatalf("k:%d after the kill: %v", i, err)
		}
	}
	c.waitPlaced(6, 3, 90*time.Second)
	if err := victim.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "the restarted node to take replicas back", func() bool {
		st, err := victim.Status()
		return err == nil && len(st.Shards) >= 2
	})
	c.waitPlaced(6, 3, 90*time.Second)
	for i := range keys {
		var ok bool
		err := notApplied(func() (err error) { ok, err = via.BFExists(ctx, fmt.Sprintf("k:%d", i), "b").Result(); return err })
		if err != nil || !ok {
			t.Fatalf("k:%d lost its second item: %v %v", i, ok, err)
		}
	}
}

// notApplied runs f again, as a client would, while it fails with an error
// that says nothing was applied and to try again (an election, a replica
// moving), for up to ten seconds.
func notApplied(f func() error) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) ||
			!strings.HasPrefix(err.Error(), "CLUSTERDOWN") && !strings.HasPrefix(err.Error(), "TRYAGAIN") {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestShardedJoinAndDrain: a seventh node joins a six-node sharded cluster
// while twenty writers go on, and receives replicas until every node holds
// two or three; no acknowledged write is lost. `rookery node drain` then
// empties a node, and `rookery shards` shows every shard on the others.
func TestShardedJoinAndDrain(t *testing.T) {
	c := startSharded(t, 6, 6, 3)
	ctx, stop := context.WithCancel(context.Background())
	type ack struct{ key, item string }
	acks := make(chan ack, 1<<16)
	done := make(chan struct{})
	for w := range 20 {
		go func() {
			defer func() { done <- struct{}{} }()
			cl := redis.NewClient(&redis.Options{Addr: c.Nodes[w%6].RESP, MaxRetries: -1})
			defer cl.Close()
			for i := 0; ctx.Err() == nil; i++ {
				k, item := fmt.Sprintf("w%d:%d", w, i%50), fmt.Sprint(i)
				if err := cl.BFAdd(ctx, k, item).Err(); err == nil {
					acks <- ack{k, item}
				}
			}
		}()
	}
	n7, err := c.Add("n7")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 120*time.Second, "the seventh node to hold its share of replicas", func() bool {
		st, err := n7.Status()
		return err == nil && len(st.Shards) >= 2
	})
	time.Sleep(time.Second) // writes go on through the last moves
	stop()
	for range 20 {
		<-done
	}
	close(acks)
	c.waitPlaced(6, 3, 60*time.Second)
	for _, m := range c.Nodes {
		st, err := m.Status()
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Shards) < 2 || len(st.Shards) > 3 {
			t.Errorf("%s holds %d replicas after n7 joined, want 2 or 3", m.ID, len(st.Shards))
		}
	}
	check := redis.NewClient(&redis.Options{Addr: n7.RESP})
	defer check.Close()
	n := 0
	for a := range acks {
		var ok bool
		err := notApplied(func() (err error) { ok, err = check.BFExists(context.Background(), a.key, a.item).Result(); return err })
		if err != nil || !ok {
			t.Fatalf("acknowledged %s %s lost: %v %v", a.key, a.item, ok, err)
		}
		n++
	}
	t.Logf("%d acknowledged writes, every one found", n)

	// Drain n2: it ends up holding nothing, and every shard is served.
	code, out, errOut := runTool(t, "node", nil, "drain", "--addr", c.Nodes[0].HTTP, "n2")
	if code != 0 {
		t.Fatalf("rookery node drain: %d %s %s", code, out, errOut)
	}
	eventually(t, 120*time.Second, "n2 to hold no replica", func() bool {
		st, err := c.Nodes[1].Status()
		return err == nil && len(st.Shards) == 0
	})
	code, out, errOut = runTool(t, "shards", nil, "--addr", c.Nodes[0].HTTP)
	if code != 0 || strings.Contains(out, "n2(") || strings.Count(out, "leader)") != 6 {
		t.Fatalf("rookery shards after the drain: %d\n%s%s", code, out, errOut)
	}
	c.Nodes[1].Kill()
	c.waitShardsOK(30 * time.Second)
}

// TestShardedBackupRestore: rookery snapshot save bundles every shard's
// backup; inspect describes each; restore into a fresh cluster of as many
// shards gives back every key, and refuses a cluster of another count.
func TestShardedBackupRestore(t *testing.T) {
	src := startSharded(t, 3, 3, 3)
	ctx := context.Background()
	cl := redis.NewClient(&redis.Options{Addr: src.Nodes[0].RESP})
	defer cl.Close()
	for i := range 300 {
		if err := notApplied(func() error { return cl.BFAdd(ctx, fmt.Sprintf("b:%d", i), "x").Err() }); err != nil {
			t.Fatal(err)
		}
	}
	file := t.TempDir() + "/cluster.backup"
	if code, out, errOut := runTool(t, "snapshot", nil, "save", "--addr", src.Nodes[1].HTTP, file); code != 0 ||
		!strings.Contains(out, "3 shards, 300 filters") {
		t.Fatalf("save: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := runTool(t, "snapshot", nil, "inspect", file); code != 0 || !strings.Contains(out, "a bundle of 3 shard backups") {
		t.Fatalf("inspect: %d %s %s", code, out, errOut)
	}
	src.Close()

	other := startSharded(t, 3, 2, 3)
	if code, out, errOut := runTool(t, "snapshot", nil, "restore", "--addr", other.Nodes[0].HTTP, file); code == 0 ||
		!strings.Contains(errOut, "it holds 3 shards and the cluster has 2") {
		t.Fatalf("restore into 2 shards: %d %s %s", code, out, errOut)
	}
	other.Close()

	dst := startSharded(t, 3, 3, 3)
	if code, out, errOut := runTool(t, "snapshot", nil, "restore", "--addr", dst.Nodes[2].HTTP, file); code != 0 {
		t.Fatalf("restore: %d %s %s", code, out, errOut)
	}
	check := redis.NewClient(&redis.Options{Addr: dst.Nodes[1].RESP})
	defer check.Close()
	if n, err := check.DBSize(ctx).Result(); err != nil || n != 300 {
		t.Fatalf("DBSIZE after the restore: %d %v", n, err)
	}
	for i := range 300 {
		var ok bool
		err := notApplied(func() (err error) { ok, err = check.BFExists(ctx, fmt.Sprintf("b:%d", i), "x").Result(); return err })
		if err != nil || !ok {
			t.Fatalf("b:%d after the restore: %v %v", i, ok, err)
		}
	}
}

// TestShardedRecoverOneShard: rookery recover --shard moves one replica's
// log aside; started again, the node has the shard's leader remove it, is
// added back as a new member and catches up, with every key.
func TestShardedRecoverOneShard(t *testing.T) {
	c := startSharded(t, 3, 3, 3)
	ctx := context.Background()
	cl := redis.NewClient(&redis.Options{Addr: c.Nodes[0].RESP})
	defer cl.Close()
	for i := range 200 {
		if err := notApplied(func() error { return cl.BFAdd(ctx, fmt.Sprintf("r:%d", i), "x").Err() }); err != nil {
			t.Fatal(err)
		}
	}
	victim := c.Nodes[2]
	filtersOf := func(shard int) int {
		st, err := victim.Status()
		if err != nil {
			return -1
		}
		for _, s := range st.Shards {
			if s.Shard == shard {
				return s.Filters
			}
		}
		return -1
	}
	want := 0 // the keys of shard 1
	for i := range 200 {
		if slot.Shard(slot.Ranges(3), slot.OfString(fmt.Sprintf("r:%d", i))) == 1 {
			want++
		}
	}
	eventually(t, 10*time.Second, "the victim's replica of shard 1 to hold its keys", func() bool { return filtersOf(1) == want })
	if err := victim.Stop(syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runTool(t, "recover", nil, "--data-dir", victim.Dir, "--shard", "1")
	if code != 0 || !strings.Contains(out, "moved the log and snapshots") {
		t.Fatalf("recover --shard 1: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := runTool(t, "recover", nil, "--data-dir", victim.Dir, "--shard", "7"); code == 0 ||
		!strings.Contains(errOut, "holds no replica of shard 7") {
		t.Fatalf("recover --shard 7: %d %s %s", code, out, errOut)
	}
	if err := victim.Restart(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			st, _ := victim.Status()
			t.Logf("%s: %+v\n%s", victim.ID, st, tail(victim.Logs(), 40))
		}
	}()
	eventually(t, 60*time.Second, "the recovered replica of shard 1 to catch up", func() bool { return filtersOf(1) == want })
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestShardsFlagKeepsAOneGroupCluster: a node of a cluster of one group that
// holds filters, restarted with --shards, keeps serving them as they are
// (shards are chosen when a cluster bootstraps) and says why it does not
// shard; sharding it would hide every filter it holds.
func TestShardsFlagKeepsAOneGroupCluster(t *testing.T) {
	dir := t.TempDir()
	p := devNode(t, dir)
	if err := p.client(2).BFAdd(bg(), "kept", "x").Err(); err != nil {
		t.Fatal(err)
	}
	if err := p.stop(syscall.SIGTERM, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	p = devNode(t, dir, "--shards", "4")
	c := p.client(2)
	if ok, err := c.BFExists(bg(), "kept", "x").Result(); err != nil || !ok {
		t.Fatalf("BF.EXISTS kept x after a restart with --shards: %v %v", ok, err)
	}
	if err := c.BFAdd(bg(), "new", "y").Err(); err != nil {
		t.Fatalf("BF.ADD after a restart with --shards: %v", err)
	}
	if n, err := c.DBSize(bg()).Result(); err != nil || n != 2 {
		t.Fatalf("DBSIZE %d %v", n, err)
	}
	eventually(t, 10*time.Second, "the node to say why it does not shard", func() bool {
		return strings.Contains(p.Logs(), "not sharding: this cluster holds filters in one group")
	})
}

// TestShardedJoinerHoldsTheMap: a sixth node joining a five-node sharded
// cluster joins the map group (group 0) and becomes ready, as a non-voter:
// the map group keeps five voters however many nodes hold the map.
func TestShardedJoinerHoldsTheMap(t *testing.T) {
	c := startSharded(t, 5, 4, 3)
	n6, err := c.Add("n6")
	if err != nil {
		t.Fatal(err)
	}
	if err := n6.WaitReady(30 * time.Second); err != nil {
		t.Fatalf("the sixth node of a sharded cluster: %v", err)
	}
	var nodes []struct {
		ID    string `json:"id"`
		Voter bool   `json:"voter"`
	}
	eventually(t, 30*time.Second, "n6 in the map group's configuration", func() bool {
		resp, err := c.Nodes[0].HTTPDo("GET", "/v1/nodes")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		nodes = nil
		if json.NewDecoder(resp.Body).Decode(&nodes) != nil {
			return false
		}
		for _, n := range nodes {
			if n.ID == "n6" {
				return true
			}
		}
		return false
	})
	voters := 0
	for _, n := range nodes {
		if n.Voter {
			voters++
		}
	}
	if voters != 5 {
		t.Errorf("the map group has %d voters of %d members, want 5: %+v", voters, len(nodes), nodes)
	}
}
