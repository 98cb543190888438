package main

import (
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// Three (or more) rookery processes on 127.0.0.1 forming a cluster by gossip,
// each on ports chosen once, so that a restarted node comes back at the same
// addresses, as it would on a real host.

type localCluster struct {
	*nodeproc.Cluster
	t *testing.T
}

// startCluster starts n nodes that bootstrap together and waits for them.
func startCluster(t *testing.T, n int) *localCluster {
	t.Helper()
	c, err := nodeproc.StartCluster(bin(t), t.TempDir(), n, "--log-level", "debug")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &localCluster{Cluster: c, t: t}
}

func (c *localCluster) add(id string) *nodeproc.Member {
	c.t.Helper()
	m, err := c.Add(id)
	if err != nil {
		c.t.Fatal(err)
	}
	return m
}

func (c *localCluster) leader(within time.Duration) *nodeproc.Member {
	c.t.Helper()
	m, err := c.Leader(within)
	if err != nil {
		c.t.Fatal(err)
	}
	return m
}

func (c *localCluster) followers() []*nodeproc.Member {
	c.t.Helper()
	f, err := c.Followers(10 * time.Second)
	if err != nil {
		c.t.Fatal(err)
	}
	return f
}

// proc wraps a member for the test's helpers.
func (c *localCluster) proc(m *nodeproc.Member) *proc { return &proc{Proc: m.Proc, t: c.t} }

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClusterReadsOnFollowers: a BF.ADD sent to one follower is visible at once
// through BF.EXISTS on the other follower (linearizable reads on every node),
// and writes to a follower reach the leader.
func TestClusterReadsOnFollowers(t *testing.T) {
	c := startCluster(t, 3)
	f := c.followers()
	a, b := client(t, f[0].RESP, 2), client(t, f[1].RESP, 3)
	for i := 0; i < 200; i++ {
		item := fmt.Sprint("user-", i)
		// The answer may be 0 for a false positive; what must hold is that the
		// write is applied and visible everywhere at once.
		if err := a.BFAdd(bg(), "users", item).Err(); err != nil {
			t.Fatalf("BF.ADD via follower %s: %v", f[0].ID, err)
		}
		if ok, err := b.BFExists(bg(), "users", item).Result(); err != nil || !ok {
			t.Fatalf("BF.EXISTS %s on the other follower right after the add: %v %v", item, ok, err)
		}
	}
	// Cuckoo deletes through a follower, seen on the leader.
	l := client(t, c.leader(5*time.Second).RESP, 2)
	if err := a.CFAdd(bg(), "coupons", "C1").Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.CFDel(bg(), "coupons", "C1").Result(); err != nil || !ok {
		t.Fatalf("CF.DEL via follower: %v %v", ok, err)
	}
	if l.CFExists(bg(), "coupons", "C1").Val() {
		t.Fatal("deleted coupon still present on the leader")
	}
	// READONLY reads local state without a round trip, and still answers.
	if err := b.Do(bg(), "READONLY").Err(); err != nil {
		t.Fatal(err)
	}
	if !b.BFExists(bg(), "users", "user-0").Val() {
		t.Fatal("READONLY read lost an old item")
	}
	role, err := a.Do(bg(), "ROLE").Slice()
	if err != nil || len(role) != 6 || role[0] != "follower" {
		t.Fatalf("ROLE on a follower: %v %v", role, err)
	}
}

// TestClusterLeaderKill: kill -9 of the leader under load; writes succeed again
// on a new leader within 2 s, every acknowledged write is present on every node,
// and the killed node, restarted, catches up.
func TestClusterLeaderKill(t *testing.T) {
	c := startCluster(t, 3)
	old := c.leader(10 * time.Second)
	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, m := range c.Nodes {
		if m == old {
			continue
		}
		wg.Add(1)
		go func(m *nodeproc.Member) {
			defer wg.Done()
			cl := redis.NewClient(&redis.Options{Addr: m.RESP, MaxRetries: -1, ReadTimeout: 15 * time.Second})
			defer cl.Close()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				item := fmt.Sprintf("%s-%d", m.ID, i)
				if err := cl.BFAdd(bg(), "acked", item).Err(); err == nil {
					mu.Lock()
					acked[item] = true
					mu.Unlock()
				} else {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}(m)
	}
	time.Sleep(500 * time.Millisecond)
	old.Kill()
	killed := time.Now()

	// A fresh write through a survivor succeeds once a new leader is in place.
	survivor := c.followers()[0]
	probe := redis.NewClient(&redis.Options{Addr: survivor.RESP, MaxRetries: -1})
	defer probe.Close()
	var recovered time.Duration
	for i := 0; ; i++ {
		if err := probe.BFAdd(bg(), "probe", fmt.Sprint(i)).Err(); err == nil {
			recovered = time.Since(killed)
			break
		}
		if time.Since(killed) > 10*time.Second {
			t.Fatal("no write succeeded within 10 s of killing the leader")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("writes succeeded again %v after kill -9 of the leader", recovered)
	if recovered > 2*time.Second {
		t.Errorf("writes took %v to succeed after the leader was killed, want at most 2 s", recovered)
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()

	check := func(m *nodeproc.Member) {
		t.Helper()
		cl := client(t, m.RESP, 2)
		mu.Lock()
		defer mu.Unlock()
		for item := range acked {
			if ok, err := cl.BFExists(bg(), "acked", item).Result(); err != nil || !ok {
				t.Fatalf("acknowledged %s missing on %s: %v %v", item, m.ID, ok, err)
			}
		}
	}
	for _, m := range c.Nodes {
		if m.Alive() {
			check(m)
		}
	}
	c.proc(old).restart()
	c.proc(old).waitReady(20 * time.Second)
	check(old)
	t.Logf("%d acknowledged writes present on all three nodes", len(acked))
}

// TestClusterMembership: a fourth node started with --join becomes a voter; a
// follower stopped with SIGTERM stays a member and, restarted on its data
// directory, rejoins with its data; an explicit leave shrinks the configuration.
func TestClusterMembership(t *testing.T) {
	c := startCluster(t, 3)
	n4 := c.add("n4")
	c.proc(n4).waitReady(20 * time.Second)
	eventually(t, 20*time.Second, "n4 to become a voter", func() bool {
		v, err := c.leader(5 * time.Second).Voters()
		return err == nil && len(v) == 4
	})
	if err := client(t, n4.RESP, 2).BFAdd(bg(), "k", "via-n4").Err(); err != nil {
		t.Fatal(err)
	}

	// SIGTERM of a follower: the cluster keeps serving, the node stays a voter.
	f := c.proc(c.followers()[0])
	if err := f.stop(syscall.SIGTERM, 15*time.Second); err != nil {
		t.Fatalf("SIGTERM exit: %v", err)
	}
	l := c.leader(10 * time.Second)
	if err := client(t, l.RESP, 2).BFAdd(bg(), "k", "while-down").Err(); err != nil {
		t.Fatalf("write with a follower down: %v", err)
	}
	if v, _ := l.Voters(); len(v) != 4 {
		t.Fatalf("a SIGTERM'd follower left the configuration: voters %v", v)
	}
	f.restart()
	f.waitReady(20 * time.Second)
	for _, item := range []string{"via-n4", "while-down"} {
		if !f.client(2).BFExists(bg(), "k", item).Val() {
			t.Fatalf("restarted follower lacks %s", item)
		}
	}

	// An explicit leave removes the node before it exits.
	leaving := c.followers()[0]
	resp, err := http.Post("http://"+leaving.HTTP+"/v1/leave", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/leave: %s", resp.Status)
	}
	select {
	case <-leaving.Exited():
	case <-time.After(15 * time.Second):
		t.Fatal("the node did not exit after leaving")
	}
	eventually(t, 10*time.Second, "the configuration to shrink to 3", func() bool {
		v, err := c.leader(5 * time.Second).Voters()
		return err == nil && len(v) == 3
	})
	if err := client(t, c.leader(5*time.Second).RESP, 2).BFAdd(bg(), "k", "after-leave").Err(); err != nil {
		t.Fatalf("write after a leave: %v", err)
	}
}

// TestClusterPartitionedLeader: a leader cut off from the others (while it keeps
// running and taking clients) acknowledges no write and serves no linearizable
// read; the majority elects a new leader and serves; healed, the old leader
// catches up.
func TestClusterPartitionedLeader(t *testing.T) {
	cl, err := nodeproc.StartCluster(bin(t), t.TempDir(), 3, "--fault-injection", "--log-level", "debug")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	c := &localCluster{Cluster: cl, t: t}
	old := c.leader(10 * time.Second)
	for _, o := range cl.Nodes {
		if o != old {
			if err := old.Cut(o.Raft); err != nil {
				t.Fatal(err)
			}
			if err := o.Cut(old.Raft); err != nil {
				t.Fatal(err)
			}
		}
	}
	oc := redis.NewClient(&redis.Options{Addr: old.RESP, MaxRetries: -1, ReadTimeout: 20 * time.Second})
	defer oc.Close()
	err = oc.BFAdd(bg(), "k", "on-the-minority-side").Err()
	if err == nil {
		t.Fatal("a leader cut off from its followers acknowledged a write")
	}
	t.Logf("write to the isolated leader: %v", err)
	if err := oc.BFExists(bg(), "k", "x").Err(); err == nil {
		t.Fatal("an isolated leader served a linearizable read")
	}

	var nl *nodeproc.Member
	eventually(t, 10*time.Second, "a new leader on the majority side", func() bool {
		for _, m := range cl.Nodes {
			if st, err := m.Status(); m != old && err == nil && st.Role == "leader" {
				nl = m
				return true
			}
		}
		return false
	})
	if err := client(t, nl.RESP, 2).BFAdd(bg(), "k", "on-the-majority-side").Err(); err != nil {
		t.Fatalf("write to the new leader: %v", err)
	}
	for _, m := range cl.Nodes {
		if err := m.Heal(); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "the old leader to catch up", func() bool {
		ok, err := oc.BFExists(bg(), "k", "on-the-majority-side").Result()
		return err == nil && ok
	})
}

// TestClusterLeaderSIGTERM: a leader stopped with SIGTERM hands leadership over
// first, so writes go on with hardly a pause; restarted, it rejoins as a
// follower with every write.
func TestClusterLeaderSIGTERM(t *testing.T) {
	c := startCluster(t, 3)
	old := c.leader(10 * time.Second)
	if err := client(t, old.RESP, 2).BFAdd(bg(), "k", "before").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.proc(old).stop(syscall.SIGTERM, 15*time.Second); err != nil {
		t.Fatalf("SIGTERM exit: %v", err)
	}
	nl := c.leader(5 * time.Second)
	if nl == old {
		t.Fatal("the stopped node still leads")
	}
	if err := client(t, nl.RESP, 2).BFAdd(bg(), "k", "after").Err(); err != nil {
		t.Fatalf("write after the leader's SIGTERM: %v", err)
	}
	if v, _ := nl.Voters(); len(v) != 3 {
		t.Fatalf("the stopped leader left the configuration: voters %v", v)
	}
	c.proc(old).restart()
	c.proc(old).waitReady(20 * time.Second)
	oc := client(t, old.RESP, 2)
	for _, item := range []string{"before", "after"} {
		if !oc.BFExists(bg(), "k", item).Val() {
			t.Fatalf("restarted former leader lacks %s", item)
		}
	}
	if st, err := old.Status(); err != nil || st.Role != "follower" {
		t.Fatalf("restarted former leader: %+v %v", st, err)
	}
}
