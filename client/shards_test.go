package client_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rookerydb/rookery/client"
	"github.com/rookerydb/rookery/internal/nodeproc"
	"github.com/rookerydb/rookery/internal/slot"
)

// shardView is a shard as GET /v1/shards describes it.
type shardView struct {
	ID       int    `json:"id"`
	First    int    `json:"first_slot"`
	Last     int    `json:"last_slot"`
	Leader   string `json:"leader"`
	Created  bool   `json:"created"`
	Replicas []struct {
		ID string `json:"id"`
	} `json:"replicas"`
}

// holds reports whether node id holds a replica of sh.
func (sh shardView) holds(id string) bool {
	for _, r := range sh.Replicas {
		if r.ID == id {
			return true
		}
	}
	return false
}

// shardsOf reads m's /v1/shards.
func shardsOf(m *nodeproc.Member) ([]shardView, error) {
	resp, err := m.HTTPDo(http.MethodGet, "/v1/shards")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/shards: %s", resp.Status)
	}
	var out []shardView
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// leadersOf is each shard's leader as every node of c sees it, or an error
// unless they all name the same, for every shard.
func leadersOf(c *nodeproc.Cluster, shards int) ([]string, []shardView, error) {
	var leaders []string
	var view []shardView
	for _, m := range c.Nodes {
		v, err := shardsOf(m)
		if err != nil {
			return nil, nil, err
		}
		if len(v) != shards {
			return nil, nil, fmt.Errorf("%s lists %d shards", m.ID, len(v))
		}
		var ls []string
		for _, sh := range v {
			if sh.Leader == "" || !sh.Created {
				return nil, nil, fmt.Errorf("%s: shard %d has no leader yet", m.ID, sh.ID)
			}
			ls = append(ls, sh.Leader)
		}
		if leaders != nil && !slices.Equal(ls, leaders) {
			return nil, nil, fmt.Errorf("nodes disagree on the leaders: %v, %v", leaders, ls)
		}
		leaders, view = ls, v
	}
	return leaders, view, nil
}

var commandsRE = regexp.MustCompile(`(?m)^rookery_commands_total\{command="([a-z.]+)",outcome="ok"\} (\d+)$`)

// commandCounts is how many of each command m served with an ok outcome,
// from its /metrics: a command forwarded from another node counts on both.
func commandCounts(m *nodeproc.Member) (map[string]int, error) {
	resp, err := m.HTTPDo(http.MethodGet, "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, g := range commandsRE.FindAllStringSubmatch(string(b), -1) {
		out[g[1]], _ = strconv.Atoi(g[2])
	}
	return out, nil
}

// TestShardedClusterRoutesDirectly: on three nodes holding three shards of
// two replicas, 1,000 keys over every shard are added and read through the
// client with no error, then 30 deleted with one DEL; and no command took a
// forwarding hop: each node
// served exactly the writes of the keys of the shards it leads, and reads
// only of keys of shards it holds, every command counted once across the
// nodes (a forwarded one counts on the node that forwards it and on the one
// that runs it).
func TestShardedClusterRoutesDirectly(t *testing.T) {
	const nodes, shards, keys = 3, 3, 1000
	cl, err := nodeproc.StartCluster(rookery(t), t.TempDir(), nodes, "--shards", strconv.Itoa(shards), "--replicas", "2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	deadline := time.Now().Add(90 * time.Second)
	for {
		_, _, err := leadersOf(cl, shards)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shards never settled: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c, err := client.New(bg, client.Options{Addrs: cl.RESPAddrs()[:1], RetryBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// A leader may move while the keys go in (the machine is shared):
	// then the counts cannot say where the writes should have gone, and
	// the round runs again with new keys.
	for round := 0; ; round++ {
		leaders, view, err := leadersOf(cl, shards)
		if err != nil {
			t.Fatal(err)
		}
		before := make([]map[string]int, nodes)
		for i, m := range cl.Nodes {
			if before[i], err = commandCounts(m); err != nil {
				t.Fatal(err)
			}
		}
		names := make([]string, keys)
		for i := range names {
			names[i] = fmt.Sprintf("r%d:key:%d", round, i)
		}
		run(t, names, func(k string) error {
			_, err := c.BFAdd(bg, k, "item")
			return err
		})
		run(t, names, func(k string) error {
			ok, err := c.BFExists(bg, k, "item")
			if err == nil && !ok {
				err = fmt.Errorf("BF.EXISTS %s: false after BF.ADD", k)
			}
			return err
		})
		after, _, err := leadersOf(cl, shards)
		if err == nil && !slices.Equal(after, leaders) {
			err = fmt.Errorf("leaders moved from %v to %v", leaders, after)
		}
		if err != nil {
			if round < 2 {
				t.Logf("round %d: %v; again", round, err)
				continue
			}
			t.Fatal(err)
		}

		// What each node should have served, by shard.
		ranges := make([]slot.Range, len(view))
		for i, sh := range view {
			ranges[i] = slot.Range{First: sh.First, Last: sh.Last}
		}
		perShard := make([]int, len(view))
		for _, k := range names {
			perShard[slot.Shard(ranges, slot.OfString(k))]++
		}
		totalW, totalR := 0, 0
		for i, m := range cl.Nodes {
			now, err := commandCounts(m)
			if err != nil {
				t.Fatal(err)
			}
			w, r := now["bf.add"]-before[i]["bf.add"], now["bf.exists"]-before[i]["bf.exists"]
			led, held := 0, 0
			for s, sh := range view {
				if sh.Leader == m.ID {
					led += perShard[s]
				}
				if sh.holds(m.ID) {
					held += perShard[s]
				}
			}
			t.Logf("%s: %d writes (leads shards of %d keys), %d reads (holds shards of %d keys)", m.ID, w, led, r, held)
			if w != led {
				t.Errorf("%s served %d BF.ADD, want %d: the writes of the keys of the shards it leads", m.ID, w, led)
			}
			if r > held {
				t.Errorf("%s served %d BF.EXISTS, more than the %d keys of the shards it holds", m.ID, r, held)
			}
			totalW += w
			totalR += r
		}
		if totalW != keys || totalR != keys {
			t.Errorf("the nodes served %d BF.ADD and %d BF.EXISTS, want %d each (none forwarded)", totalW, totalR, keys)
		}
		for s, n := range perShard {
			if n == 0 {
				t.Errorf("no key of shard %d", s)
			}
		}

		// A write of keys of every shard (IDEM DEL, split by the node per
		// shard) removes them all.
		if n, err := c.Del(bg, names[:30]...); err != nil || n != 30 {
			t.Fatalf("DEL of 30 keys over the shards: %d, %v", n, err)
		}
		if ok, err := c.Exists(bg, names[0]); err != nil || ok {
			t.Fatalf("EXISTS %s after DEL: %v, %v", names[0], ok, err)
		}
		return
	}
}

// run calls fn for every key, from a few goroutines, and fails t on the
// first error.
func run(t *testing.T, keys []string, fn func(string) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	next := make(chan string)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				if err := fn(k); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for _, k := range keys {
		next <- k
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}
