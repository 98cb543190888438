package client

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeCluster is a set of RESP servers that describe a sharded cluster
// (CLUSTER MEMBERS, SHARDS and SLOTS, from a topology a test can change) and
// record which of them each command on a key reached, answering it at once.
type fakeCluster struct {
	mu      sync.Mutex
	members []*fakeMember
	leader  int // of the cluster (CLUSTER MEMBERS); -1: none
	shards  []fakeShard
	// mapless nodes know neither CLUSTER SHARDS nor SLOTS (a build before
	// shards); slotsOnly ones know SLOTS but not SHARDS.
	mapless, slotsOnly bool
	// auth, when set, is the AUTH arguments every connection must send
	// before anything else; conns and authed count the connections each
	// node accepted and those that sent them, noauth the commands refused.
	auth                  []string
	conns, authed, noauth int
}

type fakeShard struct {
	first, last int
	leader      int // member index; -1: none
	replicas    []int
}

// fakeMember is one node of a fakeCluster.
type fakeMember struct {
	fc   *fakeCluster
	ln   net.Listener
	addr string
	wg   sync.WaitGroup

	// Guarded by fc.mu.
	got []received
	// onWrite, when set, answers a write instead: a RESP error text, or
	// "drop" to close the connection without an answer; "" answers as usual.
	onWrite func(key string) string
}

// received is a command on a key as a node received it.
type received struct {
	cmd, key string
	stale    bool   // on a connection that said READONLY
	idem     string // "session seq" of a write
}

// startFakeCluster starts n nodes, the cluster led by node 0, with shards
// cut from the slots in equal ranges: shard i led by node i%n and held by it
// and the next node.
func startFakeCluster(t *testing.T, n, shards int) *fakeCluster {
	fc := &fakeCluster{}
	for i := range shards {
		fc.shards = append(fc.shards, fakeShard{first: slotCount * i / shards, last: slotCount*(i+1)/shards - 1,
			leader: i % n, replicas: []int{i % n, (i + 1) % n}})
	}
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		m := &fakeMember{fc: fc, ln: ln, addr: ln.Addr().String()}
		fc.members = append(fc.members, m)
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				m.wg.Add(1)
				go m.serve(c)
			}
		}()
		t.Cleanup(func() { ln.Close(); m.wg.Wait() })
	}
	return fc
}

func (fc *fakeCluster) addrs() []string {
	var out []string
	for _, m := range fc.members {
		out = append(out, m.addr)
	}
	return out
}

// shardOf is the index of the shard that holds key's slot.
func (fc *fakeCluster) shardOf(key string) int {
	s := keySlot(key)
	for i, sh := range fc.shards {
		if sh.first <= s && s <= sh.last {
			return i
		}
	}
	return -1
}

// setLeader makes member l lead shard sh.
func (fc *fakeCluster) setLeader(sh, l int) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.shards[sh].leader = l
}

// take returns and forgets what every member received, by member index.
func (fc *fakeCluster) take() [][]received {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	out := make([][]received, len(fc.members))
	for i, m := range fc.members {
		out[i], m.got = m.got, nil
	}
	return out
}

func (m *fakeMember) serve(c net.Conn) {
	defer m.wg.Done()
	defer c.Close()
	br := bufio.NewReader(c)
	bw := bufio.NewWriter(c)
	stale := false
	m.fc.mu.Lock()
	m.fc.conns++
	authed := m.fc.auth == nil
	m.fc.mu.Unlock()
	for {
		req, err := readReply(br)
		if err != nil || req.kind != '*' || len(req.arr) == 0 {
			return
		}
		var args []string
		for _, a := range req.arr {
			args = append(args, a.str)
		}
		idem := ""
		if strings.EqualFold(args[0], "IDEM") {
			idem, args = args[1]+" "+args[2], args[3:]
		}
		name := strings.ToUpper(args[0])
		if !authed || name == "AUTH" {
			m.fc.mu.Lock()
			switch {
			case name == "AUTH" && strings.Join(args[1:], " ") == strings.Join(m.fc.auth, " "):
				m.fc.authed++
				authed = true
				bw.WriteString("+OK\r\n")
			case name == "AUTH":
				bw.WriteString("-WRONGPASS invalid username-password pair or user is disabled.\r\n")
			default:
				m.fc.noauth++
				bw.WriteString("-NOAUTH Authentication required.\r\n")
			}
			m.fc.mu.Unlock()
			if bw.Flush() != nil {
				return
			}
			continue
		}
		switch {
		case name == "CLUSTER":
			m.fc.describe(bw, strings.ToUpper(args[1]))
		case name == "READONLY":
			stale = true
			bw.WriteString("+OK\r\n")
		case len(args) >= 2:
			m.fc.mu.Lock()
			m.got = append(m.got, received{cmd: name, key: args[1], stale: stale, idem: idem})
			var answer string
			if idem != "" && m.onWrite != nil {
				answer = m.onWrite(args[1])
			}
			m.fc.mu.Unlock()
			switch {
			case answer == "drop":
				return
			case answer != "":
				bw.WriteString("-" + answer + "\r\n")
			case name == "DEL" || strings.HasSuffix(name, ".ADD") || strings.HasSuffix(name, ".EXISTS"):
				bw.WriteString(":1\r\n")
			default:
				bw.WriteString("+OK\r\n")
			}
		default:
			bw.WriteString("+OK\r\n")
		}
		if bw.Flush() != nil {
			return
		}
	}
}

// describe answers CLUSTER sub from the cluster's topology, as the nodes do
// in RESP2.
func (fc *fakeCluster) describe(bw *bufio.Writer, sub string) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	bulk := func(s string) { fmt.Fprintf(bw, "$%d\r\n%s\r\n", len(s), s) }
	hostPort := func(i int) (string, int) {
		h, p, _ := net.SplitHostPort(fc.members[i].addr)
		port, _ := strconv.Atoi(p)
		return h, port
	}
	switch {
	case sub == "MEMBERS":
		var b strings.Builder
		for i, m := range fc.members {
			role := "follower"
			if i == fc.leader {
				role = "leader"
			}
			fmt.Fprintf(&b, "n%d %s - - %s voter alive\n", i, m.addr, role)
		}
		bulk(b.String())
	case sub == "SHARDS" && !fc.mapless && !fc.slotsOnly:
		fmt.Fprintf(bw, "*%d\r\n", len(fc.shards))
		for _, sh := range fc.shards {
			fmt.Fprintf(bw, "*4\r\n$5\r\nslots\r\n*2\r\n:%d\r\n:%d\r\n$5\r\nnodes\r\n*%d\r\n", sh.first, sh.last, len(sh.replicas))
			for _, r := range sh.replicas {
				host, port := hostPort(r)
				role := "replica"
				if r == sh.leader {
					role = "master"
				}
				bw.WriteString("*14\r\n")
				for _, kv := range [][2]string{{"id", fmt.Sprintf("n%d", r)}, {"port", ""}, {"ip", host}, {"endpoint", host},
					{"role", role}, {"replication-offset", ""}, {"health", "online"}} {
					bulk(kv[0])
					switch kv[0] {
					case "port":
						fmt.Fprintf(bw, ":%d\r\n", port)
					case "replication-offset":
						bw.WriteString(":0\r\n")
					default:
						bulk(kv[1])
					}
				}
			}
		}
	case sub == "SLOTS" && !fc.mapless:
		fmt.Fprintf(bw, "*%d\r\n", len(fc.shards))
		for _, sh := range fc.shards {
			order := []int{}
			if sh.leader >= 0 {
				order = append(order, sh.leader)
			}
			for _, r := range sh.replicas {
				if r != sh.leader {
					order = append(order, r)
				}
			}
			fmt.Fprintf(bw, "*%d\r\n:%d\r\n:%d\r\n", 2+len(order), sh.first, sh.last)
			for _, r := range order {
				host, port := hostPort(r)
				bw.WriteString("*4\r\n")
				bulk(host)
				fmt.Fprintf(bw, ":%d\r\n", port)
				bulk(fmt.Sprintf("n%d", r))
				bw.WriteString("*0\r\n")
			}
		}
	default:
		fmt.Fprintf(bw, "-ERR unknown subcommand '%s'. Try CLUSTER HELP.\r\n", strings.ToLower(sub))
	}
}

func newFakeClient(t *testing.T, fc *fakeCluster, refresh time.Duration) *Client {
	t.Helper()
	c, err := New(context.Background(), Options{Addrs: fc.addrs()[:1], RefreshInterval: refresh, RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("key:%d", i)
	}
	return keys
}

// TestRoutesByShard: a write on one key reaches its shard's leader and
// nothing else; a read, linearizable or stale, reaches a replica of its shard,
// and reads go round every replica; a command on several keys, or a pipeline
// of keys of several shards, reaches the cluster's leader, as without shards.
// Learnt from CLUSTER SHARDS, and from CLUSTER SLOTS of a node without it.
func TestRoutesByShard(t *testing.T) {
	for _, slotsOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("slotsOnly=%v", slotsOnly), func(t *testing.T) {
			fc := startFakeCluster(t, 3, 3)
			fc.slotsOnly = slotsOnly
			c := newFakeClient(t, fc, time.Hour)
			ctx := context.Background()
			keys := testKeys(300)
			for _, k := range keys {
				if _, err := c.BFAdd(ctx, k, "x"); err != nil {
					t.Fatal(err)
				}
			}
			for i, got := range fc.take() {
				for _, r := range got {
					if want := fc.shards[fc.shardOf(r.key)].leader; want != i {
						t.Fatalf("write of %s (shard %d, led by node %d) reached node %d", r.key, fc.shardOf(r.key), want, i)
					}
				}
			}
			for _, level := range []ReadLevel{ReadLinearizable, ReadStale} {
				for range 2 {
					for _, k := range keys {
						if _, err := c.BFExists(WithReadLevel(ctx, level), k, "x"); err != nil {
							t.Fatal(err)
						}
					}
				}
				served := map[[2]int]int{} // shard, node -> reads
				total := 0
				for i, got := range fc.take() {
					for _, r := range got {
						sh := fc.shardOf(r.key)
						if !contains(fc.shards[sh].replicas, i) || r.stale != (level == ReadStale) {
							t.Fatalf("read of %s (shard %d on nodes %v) reached node %d, stale %v", r.key, sh, fc.shards[sh].replicas, i, r.stale)
						}
						served[[2]int{sh, i}]++
						total++
					}
				}
				if total != 2*len(keys) {
					t.Fatalf("%d reads reached the nodes, want %d", total, 2*len(keys))
				}
				for sh, s := range fc.shards {
					for _, r := range s.replicas {
						if served[[2]int{sh, r}] == 0 {
							t.Errorf("level %v: no read of shard %d reached its replica %d: %v", level, sh, r, served)
						}
					}
				}
			}

			// Several keys of several shards: the cluster's leader.
			if _, err := c.Del(ctx, keys[0], keys[1], keys[2]); err != nil {
				t.Fatal(err)
			}
			p := c.Pipeline()
			for _, k := range keys[:20] {
				p.BFAdd(k, "y")
			}
			if err := p.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			got := fc.take()
			if len(got[0]) != 21 || len(got[1])+len(got[2]) != 0 {
				t.Fatalf("DEL of three keys and a pipeline over shards reached nodes %d, %d, %d times; want all on the leader, node 0",
					len(got[0]), len(got[1]), len(got[2]))
			}

			// A pipeline of one shard's keys: its leader.
			p = c.Pipeline()
			var one []string
			for _, k := range keys {
				if fc.shardOf(k) == 1 {
					one = append(one, k)
					p.BFAdd(k, "y")
					p.BFExists(k, "y")
				}
			}
			if err := p.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			got = fc.take()
			if len(got[1]) != 2*len(one) || len(got[0])+len(got[2]) != 0 {
				t.Fatalf("a pipeline of shard 1's keys reached nodes %d, %d, %d times; want %d, all on its leader, node 1",
					len(got[0]), len(got[1]), len(got[2]), 2*len(one))
			}
		})
	}
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestRoutingFallsBack: without a slot map (a build before shards) writes
// reach the cluster's leader and reads every node in turn, as before shards;
// a write of a shard that has no leader reaches the cluster's leader, which
// forwards it.
func TestRoutingFallsBack(t *testing.T) {
	fc := startFakeCluster(t, 3, 3)
	fc.mapless = true
	c := newFakeClient(t, fc, time.Hour)
	ctx := context.Background()
	keys := testKeys(60)
	for _, k := range keys {
		if _, err := c.BFAdd(ctx, k, "x"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.BFExists(ctx, k, "x"); err != nil {
			t.Fatal(err)
		}
	}
	reads := 0
	for i, got := range fc.take() {
		nr := 0
		for _, r := range got {
			if r.idem != "" && i != 0 {
				t.Fatalf("without a map, a write reached node %d, not the leader", i)
			}
			if r.idem == "" {
				nr++
			}
		}
		if nr == 0 {
			t.Errorf("without a map, no read reached node %d", i)
		}
		reads += nr
	}
	if reads != len(keys) {
		t.Fatalf("%d reads, want %d", reads, len(keys))
	}

	fc = startFakeCluster(t, 3, 3)
	fc.shards[2].leader = -1
	c = newFakeClient(t, fc, time.Hour)
	for _, k := range keys {
		if _, err := c.BFAdd(ctx, k, "x"); err != nil {
			t.Fatal(err)
		}
	}
	for i, got := range fc.take() {
		for _, r := range got {
			sh := fc.shardOf(r.key)
			want := fc.shards[sh].leader
			if sh == 2 {
				want = 0
			}
			if i != want {
				t.Fatalf("write of %s (shard %d) reached node %d, want %d", r.key, sh, i, want)
			}
		}
	}
}

// keyOfShard is a key of fc's shard sh.
func keyOfShard(fc *fakeCluster, sh int) string {
	for i := 0; ; i++ {
		if k := fmt.Sprintf("k%d", i); fc.shardOf(k) == sh {
			return k
		}
	}
}

// TestFollowsShardLeaderChange: when a shard's leader changes, writes of its
// keys reach the new leader: after the next refresh of the map; at once
// after the old leader answers TRYAGAIN; and after the old leader loses a
// write's reply, whose retry keeps its session and sequence number (so it is
// applied once) and reaches another node.
func TestFollowsShardLeaderChange(t *testing.T) {
	ctx := context.Background()
	t.Run("refresh", func(t *testing.T) {
		fc := startFakeCluster(t, 3, 3)
		c := newFakeClient(t, fc, 20*time.Millisecond)
		k := keyOfShard(fc, 0)
		fc.setLeader(0, 1)
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := c.BFAdd(ctx, k, "x"); err != nil {
				t.Fatal(err)
			}
			if got := fc.take(); len(got[1]) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("writes never reached the shard's new leader")
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	for _, answer := range []string{"TRYAGAIN leadership moved", "drop"} {
		t.Run(strings.Fields(answer)[0], func(t *testing.T) {
			fc := startFakeCluster(t, 3, 3)
			fc.leader = 2 // not the shard's old leader, so a retry may go there
			c := newFakeClient(t, fc, time.Hour)
			k := keyOfShard(fc, 0)
			fc.setLeader(0, 1)
			fc.mu.Lock()
			fc.members[0].onWrite = func(string) string { return answer }
			fc.mu.Unlock()
			if _, err := c.BFAdd(ctx, k, "x"); err != nil {
				t.Fatal(err)
			}
			got := fc.take()
			if len(got[0]) != 1 || len(got[1])+len(got[2]) == 0 {
				t.Fatalf("a write reached the old leader %d times and the others %d times; want once, then a retry", len(got[0]), len(got[1])+len(got[2]))
			}
			first := got[0][0].idem
			for _, g := range append(got[1], got[2]...) {
				if g.idem != first {
					t.Fatalf("a retry was sent as %q, the first attempt as %q", g.idem, first)
				}
			}
			// The client has the new map by the next write (a refresh is
			// asynchronous: wait for it to land).
			deadline := time.Now().Add(10 * time.Second)
			for {
				if _, err := c.BFAdd(ctx, k, "y"); err != nil {
					t.Fatal(err)
				}
				got = fc.take()
				if len(got[0])+len(got[2]) == 0 && len(got[1]) == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("writes after the change never reached the new leader alone: %v", got)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

// TestFollowsMoved: a node that answers MOVED (the connection asked for the
// slot map, as this client's do) sends the write to the address it names at
// once, with the same session and sequence number, and the writes after it
// go straight there.
func TestFollowsMoved(t *testing.T) {
	ctx := context.Background()
	fc := startFakeCluster(t, 3, 3)
	fc.leader = 2 // the cluster's leader is neither the old nor the new one
	// A retry's pause of an hour: a redirect that paused would not end
	// within the call's 20 seconds.
	c, err := New(ctx, Options{Addrs: fc.addrs()[:1], RefreshInterval: time.Hour, RetryBackoff: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	k := keyOfShard(fc, 0)
	fc.setLeader(0, 1)
	fc.mu.Lock()
	fc.members[0].onWrite = func(key string) string {
		return fmt.Sprintf("MOVED %d %s", keySlot(key), fc.members[1].addr)
	}
	fc.mu.Unlock()
	call, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := c.BFAdd(call, k, "x"); err != nil {
		t.Fatal(err)
	}
	got := fc.take()
	if len(got[0]) != 1 || len(got[1]) != 1 || len(got[2]) != 0 || got[1][0].idem != got[0][0].idem {
		t.Fatalf("the write reached the old leader, the new one and the cluster's leader %d, %d and %d times, want 1, 1, 0 (same session and sequence): %v",
			len(got[0]), len(got[1]), len(got[2]), got)
	}
	for i := range 5 {
		if _, err := c.BFAdd(call, k, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := fc.take(); len(got[0]) != 0 || len(got[1]) != 5 {
		t.Fatalf("after the redirect the old leader got %d writes, the new one %d; want 0 and 5", len(got[0]), len(got[1]))
	}
}

// TestKeySlotAsRedisCluster pins the client's slots to Redis Cluster's
// (CLUSTER KEYSLOT of Redis 7 and the examples of the Redis Cluster
// specification), which the nodes compute too.
func TestKeySlotAsRedisCluster(t *testing.T) {
	for key, want := range map[string]int{
		"":                     0,
		"foo":                  12182,
		"bar":                  5061,
		"hello":                866,
		"123456789":            12739, // CRC16-CCITT (XMODEM) check value 0x31C3
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"user1000":             3443,
		"foo{}{bar}":           8363, // an empty tag: the whole key
		"foo{{bar}}zap":        4015, // the tag "{bar"
		"foo{bar}{zap}":        5061, // the first tag: "bar"
		"{bar":                 keySlot("{bar"),
	} {
		if got := keySlot(key); got != want {
			t.Errorf("slot of %q: %d, want %d", key, got, want)
		}
	}
	if crc16("123456789") != 0x31C3 {
		t.Errorf("CRC16 of the check string: %#x, want 0x31c3", crc16("123456789"))
	}
}

// TestParsesSlotMapsStrictly: a reply that is not a slot map, or one whose
// ranges fall outside the slots or overlap, leaves the client without a map
// rather than with a wrong one.
func TestParsesSlotMapsStrictly(t *testing.T) {
	num := func(n int64) reply { return reply{kind: ':', num: n} }
	node := func(port int64) reply {
		return reply{kind: '*', arr: []reply{{kind: '$', str: "127.0.0.1"}, num(port), {kind: '$', str: "id"}, {kind: '*'}}}
	}
	rng := func(first, last int64) reply {
		return reply{kind: '*', arr: []reply{num(first), num(last), node(7000), node(7001)}}
	}
	m, err := parseSlots(reply{kind: '*', arr: []reply{rng(8192, 16383), rng(0, 8191)}})
	if err != nil {
		t.Fatal(err)
	}
	if sh := m.shardOf(100); sh == nil || sh.leader != "127.0.0.1:7000" || len(sh.replicas) != 2 || m.shardOf(16383) == sh {
		t.Fatalf("shard of slot 100: %+v", sh)
	}
	for name, r := range map[string]reply{
		"bulk":     {kind: '$', str: "n1 127.0.0.1:7000 - - leader voter alive"},
		"beyond":   {kind: '*', arr: []reply{rng(0, 16384)}},
		"reversed": {kind: '*', arr: []reply{rng(10, 9)}},
		"overlap":  {kind: '*', arr: []reply{rng(0, 100), rng(100, 200)}},
		"short":    {kind: '*', arr: []reply{{kind: '*', arr: []reply{num(0)}}}},
	} {
		if _, err := parseSlots(r); err == nil {
			t.Errorf("%s: parsed", name)
		}
		if _, err := parseShards(r); err == nil {
			t.Errorf("%s: parsed as CLUSTER SHARDS", name)
		}
	}
}
