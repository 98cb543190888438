package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/internal/nodeproc"
	"github.com/rookerydb/rookery/internal/slot"
)

// The node is a store of groups (cluster/DESIGN.md): these tests hold it to
// what is per node, with real processes.

// shardReport is one shard of GET /v1/shards.
type shardReport struct {
	ID       int                               `json:"id"`
	Leader   string                            `json:"leader"`
	Replicas []struct{ ID string }             `json:"replicas"`
	Fenced   []string                          `json:"fenced"`
	Status   map[string]struct{ State string } `json:"replica_state"`
}

// shardsOf reads GET /v1/shards from m.
func shardsOf(m *nodeproc.Member) ([]shardReport, error) {
	resp, err := m.HTTPDo("GET", "/v1/shards")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET /v1/shards: %s %s", resp.Status, b)
	}
	var out []shardReport
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// replicaIDs lists a shard's replicas.
func (s shardReport) replicaIDs() []string {
	var out []string
	for _, r := range s.Replicas {
		out = append(out, r.ID)
	}
	return out
}

// keysOfShards returns n keys of each of shards shards.
func keysOfShards(prefix string, shards, n int) map[int][]string {
	out := map[int][]string{}
	ranges := slot.Ranges(shards)
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s%d", prefix, i)
		s := slot.Shard(ranges, slot.OfString(k))
		if len(out[s]) < n {
			out[s] = append(out[s], k)
		}
		full := len(out) == shards
		for _, ks := range out {
			full = full && len(ks) == n
		}
		if full {
			return out
		}
	}
}

// TestShardedNodeMemoryBudget: --max-memory binds a node, every shard it
// holds together. Four nodes of four shards of three replicas (each node
// holds three shards), 256 MB each: reserving filters on keys of every shard
// is refused once a node's total would pass its limit, with an OOM error that
// names the node, and no node's total ever passes it.
func TestShardedNodeMemoryBudget(t *testing.T) {
	const limit = 256 << 20
	c := startSharded(t, 4, 4, 3, "--max-memory", "256mb")
	ctx := context.Background()
	cl := redis.NewClient(&redis.Options{Addr: c.Nodes[0].RESP, MaxRetries: -1})
	defer cl.Close()
	keys := keysOfShards("mem:", 4, 40)
	refused, lastErr := 0, ""
	for i := 0; i < 40 && refused < 8; i++ {
		for s := range 4 {
			// About 7 MB of counted filter each.
			err := notApplied(func() error { return cl.BFReserve(ctx, keys[s][i], 0.01, 6_000_000).Err() })
			if err == nil {
				continue
			}
			if !strings.HasPrefix(err.Error(), "OOM") || !strings.Contains(err.Error(), "node n") ||
				!strings.Contains(err.Error(), "--max-memory") {
				t.Fatalf("reserve on shard %d: %v", s, err)
			}
			refused++
			lastErr = err.Error()
		}
	}
	if refused == 0 {
		t.Fatal("no reserve was refused")
	}
	t.Logf("refused: %s", lastErr)
	highest := uint64(0)
	for _, m := range c.Nodes {
		st, err := m.Status()
		if err != nil {
			t.Fatal(err)
		}
		if st.Memory > limit {
			t.Errorf("%s holds %d bytes of filters over its %d shard replicas, past its limit of %d", m.ID, st.Memory, len(st.Shards), limit)
		}
		highest = max(highest, st.Memory)
		t.Logf("%s: %d MB in %d shard replicas", m.ID, st.Memory>>20, len(st.Shards))
	}
	// Refused near the limit, not far below it.
	if highest < limit*3/4 {
		t.Errorf("the fullest node holds %d bytes when reserves are refused, want at least 3/4 of %d", highest, limit)
	}
}

// leadsOf lists the shards node m leads now.
func leadsOf(m *nodeproc.Member) []int {
	st, err := m.Status()
	if err != nil {
		return nil
	}
	var out []int
	for _, s := range st.Shards {
		if s.Role == "leader" {
			out = append(out, s.Shard)
		}
	}
	return out
}

// writers runs w clients, one per node in turn, each adding items to keys of
// every shard until stopped, and returns what was acknowledged.
type writers struct {
	stop context.CancelFunc
	wg   sync.WaitGroup
	mu   sync.Mutex
	acks map[string][]string // key -> items acknowledged
}

func startWriters(c *localCluster, w int, skip func(m *nodeproc.Member) bool) *writers {
	ctx, cancel := context.WithCancel(context.Background())
	ws := &writers{stop: cancel, acks: map[string][]string{}}
	var addrs []string
	for _, m := range c.Nodes {
		if m.Alive() && (skip == nil || !skip(m)) {
			addrs = append(addrs, m.RESP)
		}
	}
	for i := range w {
		ws.wg.Add(1)
		go func() {
			defer ws.wg.Done()
			cl := redis.NewClient(&redis.Options{Addr: addrs[i%len(addrs)], MaxRetries: -1})
			defer cl.Close()
			for j := 0; ctx.Err() == nil; j++ {
				k, item := fmt.Sprintf("w%d:%d", i, j%64), fmt.Sprint(j)
				if cl.BFAdd(ctx, k, item).Err() == nil {
					ws.mu.Lock()
					ws.acks[k] = append(ws.acks[k], item)
					ws.mu.Unlock()
				}
			}
		}()
	}
	return ws
}

// check stops the writers and finds every acknowledged item through m.
func (ws *writers) check(t *testing.T, m *nodeproc.Member) int {
	t.Helper()
	ws.stop()
	ws.wg.Wait()
	cl := redis.NewClient(&redis.Options{Addr: m.RESP, MaxRetries: -1})
	defer cl.Close()
	n := 0
	for k, items := range ws.acks {
		var got []bool
		err := notApplied(func() (err error) {
			got, err = cl.BFMExists(context.Background(), k, anys(items)...).Result()
			return err
		})
		if err != nil {
			t.Fatalf("read %s: %v", k, err)
		}
		for i, ok := range got {
			if !ok {
				t.Fatalf("acknowledged %s %s lost", k, items[i])
			}
		}
		n += len(items)
	}
	return n
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// TestShardedStopAndLeave: the lifecycle is the node's, every group's.
// Twenty times in a row, under write load, SIGTERM to the node that leads the
// most shards: it hands over every shard it leads before it exits, and exits
// within 5 s; it is started again on its data. Then POST /v1/leave on a node:
// it leaves every shard's group and the map, each shard is back to three
// replicas on the others, and no acknowledged write is lost.
func TestShardedStopAndLeave(t *testing.T) {
	if testing.Short() {
		t.Skip("twenty restarts of a node of a real sharded cluster")
	}
	c := startSharded(t, 4, 8, 3, "--dead-server-timeout", "30s")
	ws := startWriters(c, 8, nil)
	var exits, handed []time.Duration
	defer func() {
		slices.Sort(exits)
		slices.Sort(handed)
		if len(exits) > 0 {
			t.Logf("%d rounds: exit after SIGTERM median %v, slowest %v; every led shard with a new leader seen after median %v, slowest %v",
				len(exits), exits[len(exits)/2], exits[len(exits)-1], handed[len(handed)/2], handed[len(handed)-1])
		}
	}()
	observer := c.Nodes[0]
	for round := range 20 {
		var victim *nodeproc.Member
		eventually(t, 30*time.Second, "a node other than n1 to lead a shard", func() bool {
			victim = nil
			for _, m := range c.Nodes[1:] {
				if len(leadsOf(m)) > 0 && (victim == nil || len(leadsOf(m)) > len(leadsOf(victim))) {
					victim = m
				}
			}
			return victim != nil
		})
		led := leadsOf(victim)
		start := time.Now()
		if err := victim.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-victim.Exited():
		case <-time.After(5 * time.Second):
			// Where it waits, for the report.
			_ = victim.Signal(syscall.SIGQUIT)
			<-victim.Exited()
			t.Fatalf("round %d: the node did not exit within 5 s of SIGTERM:\n%s", round, victim.Logs())
		}
		exits = append(exits, time.Since(start))
		// It handed every shard it led over before it exited: each has
		// another leader, which the others hear of.
		eventually(t, 5*time.Second, "every shard the stopped node led to have another leader", func() bool {
			shards, err := shardsOf(observer)
			if err != nil {
				return false
			}
			for _, s := range led {
				if l := shards[s].Leader; l == victim.ID || l == "" {
					return false
				}
			}
			return true
		})
		handed = append(handed, time.Since(start))
		if err := victim.Restart(); err != nil {
			t.Fatal(err)
		}
		if err := victim.WaitReady(30 * time.Second); err != nil {
			t.Fatalf("%v\n%s", err, victim.Logs())
		}
	}

	leaver := c.Nodes[2]
	c.waitPlaced(8, 3, 60*time.Second)
	hc, req, err := leaver.Sec.Request("POST", leaver.HTTP, "/v1/leave")
	if err != nil {
		t.Fatal(err)
	}
	hc.Timeout = 60 * time.Second
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST /v1/leave: %s %s", resp.Status, body)
	}
	select {
	case <-leaver.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("the node that left did not stop")
	}
	left := time.Since(start)
	var last []shardReport
	eventually(t, 30*time.Second, "every shard back to three voting replicas without the node that left", func() bool {
		shards, err := shardsOf(observer)
		if err != nil {
			return false
		}
		last = shards
		for _, s := range shards {
			ids := s.replicaIDs()
			if len(ids) != 3 || slices.Contains(ids, leaver.ID) || s.Leader == "" {
				return false
			}
			for _, st := range s.Status {
				if st.State != "leader" && st.State != "follower" {
					return false
				}
			}
		}
		return true
	})
	if t.Failed() {
		t.Logf("shards: %+v", last)
	}
	t.Logf("left in %v (its replicas re-created on the others first); every shard back to three replicas %v after the request",
		left.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	voters, err := observer.Voters()
	if err != nil || slices.Contains(voters, leaver.ID) {
		t.Fatalf("group 0's voters after the leave: %v %v", voters, err)
	}
	t.Logf("%d acknowledged writes, every one found", ws.check(t, observer))
}

// TestShardedEarlyWritesStillShard: six nodes started together with --shards
// 6 --replicas 3 while a client writes from the moment a port answers (as a
// compose file starting the application beside the cluster does): the
// cluster shards all the same, every acknowledged write is readable, the map
// group has five voters, and CLUSTER SLOTS names at least five masters.
func TestShardedEarlyWritesStillShard(t *testing.T) {
	rookery := bin(t)
	dir := t.TempDir()
	var procs []*nodeproc.Proc
	var seed string
	var argsOf [][]string
	for i := range 6 {
		args, err := nodeproc.NodeArgs(fmt.Sprintf("n%d", i+1), fmt.Sprintf("%s/n%d", dir, i+1), 6, nil)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			seed = args[slices.Index(args, "--gossip-addr")+1]
		} else {
			args = append(args, "--join", seed)
		}
		argsOf = append(argsOf, append(args, "--shards", "6", "--replicas", "3"))
	}
	respOf := func(args []string) string { return args[slices.Index(args, "--resp-addr")+1] }
	// The writer starts first, and writes as soon as the first port answers.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	acked := make(chan string, 1<<16)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		var clients []*redis.Client
		for _, a := range argsOf {
			clients = append(clients, redis.NewClient(&redis.Options{Addr: respOf(a), MaxRetries: -1,
				DialTimeout: 100 * time.Millisecond}))
		}
		defer func() {
			for _, cl := range clients {
				cl.Close()
			}
		}()
		errs := map[string]int{}
		defer func() { t.Logf("refused before the cluster was ready: %v", errs) }()
		for i := 0; ctx.Err() == nil; i++ {
			k := fmt.Sprintf("warm:%d", i)
			start := time.Now()
			if err := clients[i%6].BFAdd(ctx, k, "x").Err(); err == nil {
				acked <- k
			} else if ctx.Err() == nil {
				msg := err.Error()
				errs[fmt.Sprintf("%s (after %v)", msg[:min(len(msg), 72)], time.Since(start).Round(100*time.Millisecond))]++
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()
	var wg sync.WaitGroup
	procs = make([]*nodeproc.Proc, 6)
	for i, args := range argsOf {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := nodeproc.Start(rookery, nil, args...)
			if err != nil {
				t.Errorf("start n%d: %v", i+1, err)
				return
			}
			procs[i] = p
			t.Cleanup(p.Kill)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	c := &localCluster{Cluster: &nodeproc.Cluster{}, t: t}
	for i, p := range procs {
		c.Nodes = append(c.Nodes, &nodeproc.Member{Proc: p, ID: fmt.Sprintf("n%d", i+1)})
	}
	c.waitShardsOK(60 * time.Second)
	// Writes go on into the sharded cluster.
	eventually(t, 20*time.Second, "a hundred writes acknowledged", func() bool { return len(acked) >= 100 })
	stop()
	<-writerDone
	close(acked)
	shards, err := shardsOf(c.Nodes[3])
	if err != nil || len(shards) != 6 {
		t.Fatalf("the cluster did not shard: %v %v", err, shards)
	}
	voters, err := c.Nodes[0].Voters()
	if err != nil || len(voters) != 5 {
		t.Fatalf("the map group votes with %v, want five voters: %v", voters, err)
	}
	cl := redis.NewClient(&redis.Options{Addr: c.Nodes[5].RESP, MaxRetries: -1})
	defer cl.Close()
	n := 0
	for k := range acked {
		var ok bool
		err := notApplied(func() (err error) { ok, err = cl.BFExists(context.Background(), k, "x").Result(); return err })
		if err != nil || !ok {
			t.Fatalf("acknowledged %s lost: %v %v", k, ok, err)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no write was acknowledged")
	}
	masters := map[string]bool{}
	eventually(t, 30*time.Second, "CLUSTER SLOTS to name five masters", func() bool {
		slots, err := cl.ClusterSlots(context.Background()).Result()
		if err != nil {
			return false
		}
		masters = map[string]bool{}
		for _, s := range slots {
			masters[s.Nodes[0].Addr] = true
		}
		return len(masters) >= 5
	})
	t.Logf("%d acknowledged writes from the first moment, every one found; %d masters", n, len(masters))
}

// TestShardedLostQuorumFencesTheCutReplicas: the lost-quorum drill. Shard s
// has replicas a, b and c; a is cut off from b and c while writes go on (b
// and c acknowledge them: a never has them), then b and c are killed. `rookery
// recover --shard s --peers a` on a, restarted: the shard takes writes again,
// the map fences b and c off it, and placement brings it back to three
// replicas on live nodes. b, started again on its old data (which holds the
// writes a lacks), is refused: its replica of s says "removed", it serves
// nothing of s from that state, and s is never placed on it again.
func TestShardedLostQuorumFencesTheCutReplicas(t *testing.T) {
	// Dead nodes are not replaced during the test: the recovered shard heals
	// because the recovery fences what it cut off, and b comes back while
	// the map would otherwise still place the shard on it.
	c := startSharded(t, 5, 3, 3, "--dead-server-timeout", "10m", "--fault-injection")
	ctx := context.Background()
	observer := c.Nodes[0]
	shards, err := shardsOf(observer)
	if err != nil {
		t.Fatal(err)
	}
	s := -1
	for _, sh := range shards {
		if !slices.Contains(sh.replicaIDs(), observer.ID) {
			s = sh.ID
		}
	}
	if s < 0 {
		t.Fatalf("every shard has a replica on %s: %+v", observer.ID, shards)
	}
	byID := map[string]*nodeproc.Member{}
	for _, m := range c.Nodes {
		byID[m.ID] = m
	}
	// a is a follower: a leader cut off would append the late writes to its
	// log before it stepped down, and the recovery commits all it holds.
	var ids []string
	eventually(t, 10*time.Second, "shard's leader to be known", func() bool {
		shards, err = shardsOf(observer)
		if err != nil || shards[s].Leader == "" {
			return false
		}
		ids = shards[s].replicaIDs()
		i := slices.Index(ids, shards[s].Leader)
		ids = append(ids[:i:i], ids[i+1:]...)
		ids = append(ids, shards[s].Leader)
		return true
	})
	a, b, cc := byID[ids[0]], byID[ids[1]], byID[ids[2]]
	keys := keysOfShards("q:", 3, 40)[s]
	early, late := keys[:20], keys[20:]
	cl := redis.NewClient(&redis.Options{Addr: observer.RESP, MaxRetries: -1})
	defer cl.Close()
	for _, k := range early {
		if err := notApplied(func() error { return cl.BFAdd(ctx, k, "x").Err() }); err != nil {
			t.Fatal(err)
		}
	}
	// a alone on one side: b and c keep the shard's quorum.
	for _, p := range [][2]*nodeproc.Member{{a, b}, {a, cc}, {b, a}, {cc, a}} {
		if err := p[0].Cut(p[1].Raft); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range late {
		// An election among b and c may leave a write's outcome unknown;
		// adding an item again is harmless.
		err := notApplied(func() error { return cl.BFAdd(ctx, k, "x").Err() })
		for try := 0; err != nil && strings.HasPrefix(err.Error(), "INDETERMINATE") && try < 20; try++ {
			err = notApplied(func() error { return cl.BFAdd(ctx, k, "x").Err() })
		}
		if err != nil {
			t.Fatalf("a write b and c acknowledge: %v", err)
		}
	}
	b.Kill()
	cc.Kill()
	if err := a.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runTool(t, "recover", nil, "--data-dir", a.Dir, "--shard", fmt.Sprint(s), "--peers", a.ID)
	if code != 0 {
		t.Fatalf("recover --shard %d --peers %s: %d %s %s", s, a.ID, code, out, errOut)
	}
	if err := a.Restart(); err != nil {
		t.Fatal(err)
	}
	var last shardReport
	// The recovered node, race-built, starts its groups and the controller
	// places two new replicas: on a loaded 2-core machine (the whole suite
	// at once) this has taken over a minute.
	back := func() bool {
		shards, err := shardsOf(observer)
		if err != nil {
			return false
		}
		last = shards[s]
		reps := last.replicaIDs()
		if len(reps) != 3 || slices.Contains(reps, b.ID) || slices.Contains(reps, cc.ID) || last.Leader == "" ||
			!slices.Contains(last.Fenced, b.ID) || !slices.Contains(last.Fenced, cc.ID) {
			return false
		}
		for _, st := range last.Status {
			if st.State != "leader" && st.State != "follower" {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(2 * time.Minute); !back(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the recovered shard %d is not back at three replicas with the cut ones fenced after 2m: %+v\n%s", s, last, tail(a.Logs(), 40))
		}
	}
	for _, k := range early {
		var ok bool
		if err := notApplied(func() (err error) { ok, err = cl.BFExists(ctx, k, "x").Result(); return err }); err != nil || !ok {
			t.Fatalf("%s, written before the partition, after the recovery: %v %v", k, ok, err)
		}
	}

	// b comes back on its old data: it holds the late writes, applied.
	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "b to say its replica of the shard is removed", func() bool {
		st, err := b.Status()
		if err != nil {
			return false
		}
		for _, sh := range st.Shards {
			if sh.Shard == s {
				return sh.Role == "removed" && strings.Contains(sh.Problem, "a recovery of shard")
			}
		}
		return false
	})
	eventually(t, 10*time.Second, "b to say in its log that a recovery cut it off", func() bool {
		return strings.Contains(b.Logs(), "cut off by a recovery")
	})
	viaB := redis.NewClient(&redis.Options{Addr: b.RESP, MaxRetries: -1})
	defer viaB.Close()
	for _, k := range late {
		var ok bool
		if err := notApplied(func() (err error) { ok, err = viaB.BFExists(ctx, k, "x").Result(); return err }); err != nil || ok {
			t.Fatalf("%s through the fenced node: %v %v (it must answer from the shard's replicas, which never had it)", k, ok, err)
		}
	}
	time.Sleep(3 * time.Second) // rounds of placement with b alive again
	shards, err = shardsOf(observer)
	if err != nil || slices.Contains(shards[s].replicaIDs(), b.ID) {
		t.Fatalf("shard %d placed on the fenced node again: %+v %v", s, shards[s], err)
	}
}
