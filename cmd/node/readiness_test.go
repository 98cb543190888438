package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// readyz asks m's /readyz (with query q) once: its status and body.
func readyz(m *nodeproc.Member, q string) (int, string, error) {
	resp, err := m.HTTPDo("GET", "/readyz"+q)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestShardedReadyWhileAnotherShardLostQuorum: five nodes, three shards of
// three. Node a leads shard t and holds a replica of shard s; two of s's
// replicas are killed (neither leaves t without a quorum, and the map group
// keeps three of its five voters). s has no leader any more, and a load
// balancer must not pull a: /readyz on a stays 200 while its body names s as
// without a leader, /readyz?shard=s answers 503, /readyz?shard=t 200, and a
// serves t's keys.
func TestShardedReadyWhileAnotherShardLostQuorum(t *testing.T) {
	c := startSharded(t, 5, 3, 3, "--dead-server-timeout", "10m")
	byID := map[string]*nodeproc.Member{}
	for _, m := range c.Nodes {
		byID[m.ID] = m
	}
	shards, err := shardsOf(c.Nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	// A layout where a, leading t, survives the loss of s's other two
	// replicas, and t keeps two of its three.
	var a *nodeproc.Member
	var healthy, sick int
	var killed []string
	for _, ts := range shards {
		for _, ss := range shards {
			lead := ts.Leader
			if a != nil || ss.ID == ts.ID || lead == "" || !slices.Contains(ss.replicaIDs(), lead) {
				continue
			}
			others := slices.DeleteFunc(ss.replicaIDs(), func(id string) bool { return id == lead })
			if !slices.Contains(ts.replicaIDs(), others[0]) || !slices.Contains(ts.replicaIDs(), others[1]) {
				a, healthy, sick, killed = byID[lead], ts.ID, ss.ID, others
			}
		}
	}
	if a == nil {
		t.Fatalf("no layout where a shard's leader holds a replica of a shard that can lose two replicas without its own: %+v", shards)
	}
	t.Logf("%s leads shard %d and holds shard %d; killing %v", a.ID, healthy, sick, killed)
	if code, body, err := readyz(a, ""); err != nil || code != 200 {
		t.Fatalf("/readyz on %s before the kill: %d %q %v", a.ID, code, body, err)
	}
	for _, id := range killed {
		byID[id].Kill()
	}

	// Once a's replica of the sick shard has lost its leader, a is still
	// ready, and its body says which shard is down.
	noLeader := fmt.Sprintf("\nshard %d: no leader; this node: ", sick)
	var code int
	var body string
	eventually(t, 30*time.Second, fmt.Sprintf("%s to see shard %d without a leader", a.ID, sick), func() bool {
		code, body, err = readyz(a, "")
		return err == nil && strings.Contains(body, noLeader)
	})
	if code != 200 || !strings.HasPrefix(body, "ready\n") {
		t.Fatalf("/readyz on %s, which leads shard %d, while shard %d has no leader: %d\n%s", a.ID, healthy, sick, code, body)
	}
	if !strings.Contains(body, fmt.Sprintf("\nshard %d: leader %s; this node: leader, ", healthy, a.ID)) {
		t.Errorf("/readyz on %s does not say it leads shard %d:\n%s", a.ID, healthy, body)
	}
	if code, body, err := readyz(a, fmt.Sprintf("?shard=%d", sick)); err != nil || code != 503 ||
		!strings.Contains(body, fmt.Sprintf("shard %d has no leader among its replicas", sick)) {
		t.Errorf("/readyz?shard=%d: %d %q %v", sick, code, body, err)
	}
	// t's leader may have changed meanwhile; a's replica of it serves
	// either way.
	if code, body, err := readyz(a, fmt.Sprintf("?shard=%d", healthy)); err != nil || code != 200 {
		t.Errorf("/readyz?shard=%d: %d %q %v", healthy, code, body, err)
	}
	if code, body, err := readyz(a, "?shard=3"); err != nil || code != 404 {
		t.Errorf("/readyz?shard=3 of 3 shards: %d %q %v", code, body, err)
	}
	cl := redis.NewClient(&redis.Options{Addr: a.RESP, MaxRetries: -1})
	defer cl.Close()
	for _, k := range keysOfShards("ready:", 3, 5)[healthy] {
		if err := notApplied(func() error { return cl.BFAdd(context.Background(), k, "x").Err() }); err != nil {
			t.Fatalf("BF.ADD %s of shard %d through %s: %v", k, healthy, a.ID, err)
		}
	}
	// Still ready after serving them: nothing flapped.
	if code, body, err := readyz(a, ""); err != nil || code != 200 || !strings.Contains(body, noLeader) {
		t.Fatalf("/readyz on %s after the writes: %d %q %v", a.ID, code, body, err)
	}
}

// TestClusterReadWaitsForTheElection: a linearizable read sent to a follower
// the moment the leader is killed (-9) waits for the new leader, as a write
// does, and answers: the reader sees no CLUSTERDOWN for an election. The
// election timeout is 1 s, so the hold (five of them) covers an election on
// a loaded machine.
func TestClusterReadWaitsForTheElection(t *testing.T) {
	nc, err := nodeproc.StartCluster(bin(t), t.TempDir(), 3, "--election-timeout", "1s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c := &localCluster{Cluster: nc, t: t}
	old := c.leader(10 * time.Second)
	var survivor *nodeproc.Member
	for _, m := range c.Nodes {
		if m != old {
			survivor = m
		}
	}
	cl := redis.NewClient(&redis.Options{Addr: survivor.RESP, MaxRetries: -1, ReadTimeout: 15 * time.Second})
	defer cl.Close()
	if err := notApplied(func() error { return cl.BFAdd(context.Background(), "k", "x").Err() }); err != nil {
		t.Fatal(err)
	}
	// The follower has applied the write: its read needs the leader's index.
	if ok, err := cl.BFExists(context.Background(), "k", "x").Result(); err != nil || !ok {
		t.Fatalf("BF.EXISTS before the kill: %v %v", ok, err)
	}
	old.Kill()
	killed := time.Now()
	ok, err := cl.BFExists(context.Background(), "k", "x").Result()
	waited := time.Since(killed)
	if err != nil || !ok {
		t.Fatalf("a read sent as the leader died: %v %v after %v (want it to wait for the new leader)", ok, err, waited)
	}
	st, err := survivor.Status()
	if err != nil || st.LeaderID == "" || st.LeaderID == old.ID {
		t.Fatalf("after the read, %s's leader is %q (%v), want a new one", survivor.ID, st.LeaderID, err)
	}
	t.Logf("the read answered %v after kill -9 of the leader, once %s led", waited, st.LeaderID)
}

// TestShardedForwardedReadWaitsForTheElection: a read of a shard's key sent,
// the moment the shard's leader is killed (-9), to a node that holds no
// replica of it is forwarded to a replica that waits for the new leader,
// and answers.
func TestShardedForwardedReadWaitsForTheElection(t *testing.T) {
	c := startSharded(t, 5, 3, 3, "--election-timeout", "1s", "--dead-server-timeout", "10m")
	byID := map[string]*nodeproc.Member{}
	for _, m := range c.Nodes {
		byID[m.ID] = m
	}
	shards, err := shardsOf(c.Nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	s := shards[0]
	var via *nodeproc.Member
	for _, m := range c.Nodes {
		if !slices.Contains(s.replicaIDs(), m.ID) {
			via = m
		}
	}
	leader := byID[s.Leader]
	if leader == nil || via == nil {
		t.Fatalf("shard 0 has no leader, or every node holds it: %+v", s)
	}
	cl := redis.NewClient(&redis.Options{Addr: via.RESP, MaxRetries: -1, ReadTimeout: 15 * time.Second})
	defer cl.Close()
	key := keysOfShards("fwd:", 3, 1)[0][0]
	if err := notApplied(func() error { return cl.BFAdd(context.Background(), key, "x").Err() }); err != nil {
		t.Fatal(err)
	}
	if ok, err := cl.BFExists(context.Background(), key, "x").Result(); err != nil || !ok {
		t.Fatalf("BF.EXISTS %s through %s before the kill: %v %v", key, via.ID, ok, err)
	}
	leader.Kill()
	killed := time.Now()
	ok, err := cl.BFExists(context.Background(), key, "x").Result()
	if err != nil || !ok {
		t.Fatalf("a read of shard 0 through %s as its leader %s died: %v %v after %v (want it to wait for the new leader)",
			via.ID, leader.ID, ok, err, time.Since(killed))
	}
	t.Logf("the forwarded read answered %v after kill -9 of shard 0's leader %s", time.Since(killed), leader.ID)
}
