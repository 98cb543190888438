package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/rookerydb/rookery/internal/nodeproc"
	"github.com/rookerydb/rookery/internal/slot"
)

// Sharded mode (-shards N > 1): the cluster runs with --shards N --replicas 3,
// each shard its own Raft group on three of the nodes. The run reads the
// shards as an operator does, from GET /v1/shards: which nodes hold a key's
// shard, which node leads it. What follows from it is decided here by pure
// functions over that answer, so that the nemesis, the READONLY readers and
// the final checks agree on one meaning of "holds" and "leads".

// shardReplicas is the replication factor of a sharded run.
const shardReplicas = 3

// shardMap is a /v1/shards answer.
type shardMap []shardJSON

// shardJSON is one shard of GET /v1/shards, as docs/SHARDING.md documents it
// for operators. jepsen-lite reads the server through its public faces
// alone, so that a checker never shares the types of what it checks.
type shardJSON struct {
	ID       int                    `json:"id"`
	First    int                    `json:"first_slot"`
	Last     int                    `json:"last_slot"`
	Leader   string                 `json:"leader"`
	Replicas []replicaJSON          `json:"replicas"`
	Created  bool                   `json:"created"`
	Status   map[string]replicaJSON `json:"replica_state"`
}

// replicaJSON is a replica of a shard (in replicas: its node; in
// replica_state: what its group says of itself).
type replicaJSON struct {
	ID    string `json:"id,omitempty"`
	State string `json:"state,omitempty"`
}

// shardOf is the shard holding key, or -1 if none does.
func (sm shardMap) shardOf(key string) int {
	s := slot.OfString(key)
	for i, sh := range sm {
		if s >= sh.First && s <= sh.Last {
			return i
		}
	}
	return -1
}

// replicas are the nodes the map places shard s on, sorted: after healing,
// the nodes that must each hold every acknowledged write of the shard.
func (sm shardMap) replicas(s int) []string {
	if s < 0 || s >= len(sm) {
		return nil
	}
	var out []string
	for _, r := range sm[s].Replicas {
		out = append(out, r.ID)
	}
	slices.Sort(out)
	return out
}

// servesLocally says whether node reads key from a replica of its own that
// votes in the key's shard: the leader or a caught-up follower. A node
// placed but still catching up (a non-voter), or not placed, answers from
// another node's replica or an incomplete one of its own, so a READONLY read
// there promises nothing about this connection's earlier reads.
func (sm shardMap) servesLocally(key, node string) bool {
	s := sm.shardOf(key)
	if s < 0 || !slices.Contains(sm.replicas(s), node) {
		return false
	}
	st := sm[s].Status[node].State
	return st == "leader" || st == "follower"
}

// leaders are the nodes that lead at least one shard, sorted.
func (sm shardMap) leaders() []string {
	var out []string
	for _, sh := range sm {
		if sh.Leader != "" && !slices.Contains(out, sh.Leader) {
			out = append(out, sh.Leader)
		}
	}
	slices.Sort(out)
	return out
}

// leaderOf is the node leading key's shard, or "".
func (sm shardMap) leaderOf(key string) string {
	if s := sm.shardOf(key); s >= 0 {
		return sm[s].Leader
	}
	return ""
}

// holds counts the replicas the map places on each node.
func (sm shardMap) holds() map[string]int {
	out := map[string]int{}
	for s := range sm {
		for _, id := range sm.replicas(s) {
			out[id]++
		}
	}
	return out
}

// settled says what keeps the map from being settled, or "" when it is:
// every shard created, led, with exactly replicas replicas, each a voter
// that answers, on the nodes given (the running cluster) and on no other,
// and no node draining replicas off itself. held is, per node, how many
// shard replicas the node says it holds (/v1/status): it must be what the
// map places there, so that no replica is still being opened or closed.
func (sm shardMap) settled(replicas int, nodes []string, held map[string]int) string {
	if len(sm) == 0 {
		return "no shards"
	}
	for s, sh := range sm {
		reps := sm.replicas(s)
		switch {
		case !sh.Created:
			return fmt.Sprintf("shard %d not created", s)
		case sh.Leader == "":
			return fmt.Sprintf("shard %d has no leader", s)
		case len(reps) != replicas:
			return fmt.Sprintf("shard %d has %d replicas %v, want %d", s, len(reps), reps, replicas)
		}
		for _, id := range reps {
			if !slices.Contains(nodes, id) {
				return fmt.Sprintf("shard %d is placed on %s, not a node of the cluster", s, id)
			}
			if st := sh.Status[id].State; st != "leader" && st != "follower" {
				return fmt.Sprintf("shard %d replica %s is %s", s, id, orUnknown(st))
			}
		}
	}
	want := sm.holds()
	for _, id := range nodes {
		if held[id] != want[id] {
			return fmt.Sprintf("%s holds %d replicas, the map places %d there", id, held[id], want[id])
		}
	}
	return ""
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// fetchShards reads m's /v1/shards.
func fetchShards(m *nodeproc.Member) (shardMap, error) {
	resp, err := m.HTTPDo(http.MethodGet, "/v1/shards")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/shards on %s: %s", m.ID, resp.Status)
	}
	var sm shardMap
	if err := json.NewDecoder(resp.Body).Decode(&sm); err != nil {
		return nil, fmt.Errorf("GET /v1/shards on %s: %w", m.ID, err)
	}
	return sm, nil
}

// anyShards reads /v1/shards from the first running node that answers.
func anyShards(nodes []*nodeproc.Member) (shardMap, error) {
	err := errors.New("no running node")
	for _, m := range nodes {
		if !m.Alive() {
			continue
		}
		var sm shardMap
		if sm, err = fetchShards(m); err == nil {
			return sm, nil
		}
	}
	return nil, err
}

// heldReplicas is how many shard replicas each node says it holds.
func heldReplicas(nodes []*nodeproc.Member) (map[string]int, error) {
	out := map[string]int{}
	for _, m := range nodes {
		st, err := m.Status()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.ID, err)
		}
		out[m.ID] = len(st.Shards)
	}
	return out, nil
}

// waitSettled waits until the shards are settled (shardMap.settled) as every
// node sees them, twice in a row half a second apart, and returns the map.
func waitSettled(nodes []*nodeproc.Member, replicas int, within time.Duration) (shardMap, error) {
	ids := make([]string, len(nodes))
	for i, m := range nodes {
		ids[i] = m.ID
	}
	deadline := time.Now().Add(within)
	why, stable := "", 0
	for {
		sm, err := settledOnce(nodes, replicas, ids)
		switch {
		case err != nil:
			why, stable = err.Error(), 0
		default:
			if stable++; stable == 2 {
				return sm, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("shards not settled within %v: %s", within, why)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func settledOnce(nodes []*nodeproc.Member, replicas int, ids []string) (shardMap, error) {
	var first shardMap
	for _, m := range nodes {
		sm, err := fetchShards(m)
		if err != nil {
			return nil, err
		}
		if first == nil {
			first = sm
		} else if fmt.Sprint(placement(sm)) != fmt.Sprint(placement(first)) {
			return nil, fmt.Errorf("%s sees %v, %s sees %v", nodes[0].ID, placement(first), m.ID, placement(sm))
		}
	}
	held, err := heldReplicas(nodes)
	if err != nil {
		return nil, err
	}
	if why := first.settled(replicas, ids, held); why != "" {
		return nil, errors.New(why)
	}
	return first, nil
}

// placement is each shard's replicas and leader, for comparing two nodes'
// views.
func placement(sm shardMap) []string {
	out := make([]string, len(sm))
	for s, sh := range sm {
		out[s] = fmt.Sprintf("%d:%v@%s", s, sm.replicas(s), sh.Leader)
	}
	return out
}

// shardWatch keeps a recent /v1/shards answer for the READONLY readers.
type shardWatch struct {
	mu sync.Mutex
	sm shardMap
}

func (w *shardWatch) get() shardMap {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sm
}

// run refreshes the answer every period until done is closed.
func (w *shardWatch) run(done <-chan struct{}, topo *topology, period time.Duration) {
	for {
		if sm, err := anyShards(topo.nodes()); err == nil {
			w.mu.Lock()
			w.sm = sm
			w.mu.Unlock()
		}
		select {
		case <-done:
			return
		case <-time.After(period):
		}
	}
}
