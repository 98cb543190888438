package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// After the run every node is healed and read directly, linearizably, so each
// has applied everything committed. Then:
//
//   - every acknowledged Bloom add is present on every node;
//   - every cuckoo and counting-Bloom item's count on every node lies in the
//     range its history allows (acknowledged adds less acknowledged deletes,
//     widened by the writes of unknown outcome), exactly for items with no
//     collision and from below for the rest; the filters' item totals too;
//   - the replicas agree: the same keys, the same INFO for each, and the same
//     SCANDUMP bytes for every Bloom and cuckoo filter.
//
// In a sharded run "every node" is every replica of the key's shard, as the
// map places them once the cluster has settled after healing: each is read
// directly, where it answers from its own replica of the shard, and the
// replicas of each shard are compared key by key.

// itemRange is how many copies of an item a filter may hold at the end.
type itemRange struct{ lo, hi int64 }

// expectation is what the final state of the filters must satisfy.
type expectation struct {
	bloomPresent map[string][]string             // per Bloom key, items whose add was acknowledged
	held         map[string]map[string]itemRange // cuckoo and counting: per key, per item
	total        map[string]itemRange            // per key: the filter's item count
}

func expect(ops []op) expectation {
	e := expectation{bloomPresent: map[string][]string{}, held: map[string]map[string]itemRange{},
		total: map[string]itemRange{}}
	for _, o := range ops {
		if o.failed || shortLived(o.key) {
			continue
		}
		switch o.kind {
		case bfAdd, bfMAdd:
			if !o.unknown {
				e.bloomPresent[o.key] = append(e.bloomPresent[o.key], o.item)
			}
			continue
		case cfAdd, cfInsert, cbfAdd, cfDel, cbfDel:
		default:
			continue
		}
		if e.held[o.key] == nil {
			e.held[o.key] = map[string]itemRange{}
		}
		r, t := e.held[o.key][o.item], e.total[o.key]
		switch {
		case o.kind == cfDel || o.kind == cbfDel:
			if o.unknown {
				r.lo--
				t.lo--
			} else if o.out {
				r.lo, r.hi, t.lo, t.hi = r.lo-1, r.hi-1, t.lo-1, t.hi-1
			}
		case o.unknown:
			r.hi++
			t.hi++
		case o.kind == cfInsert && !o.out: // no room: not added
		default:
			r.lo, r.hi, t.lo, t.hi = r.lo+1, r.hi+1, t.lo+1, t.hi+1
		}
		e.held[o.key][o.item], e.total[o.key] = r, t
	}
	return e
}

// finalClient reads one node directly.
func finalClient(cl *nodeproc.Cluster, m *nodeproc.Member) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: m.RESP, MaxRetries: 3, ReadTimeout: 30 * time.Second,
		Password: cl.Sec.Password, TLSConfig: cl.Sec.RESPTLSConfig(), Protocol: 2, DisableIdentity: true})
}

// checkFinal checks every node's final state against the history, and the
// replicas against each other; sm, in a sharded run, says which nodes hold
// which keys.
func checkFinal(cl *nodeproc.Cluster, sm shardMap, e expectation, exact map[string]map[string]bool, rep *Report) {
	ctx := context.Background()
	for _, k := range []string{bloomKey, scalableKey} {
		rep.AckedBloom += len(e.bloomPresent[k])
	}
	for _, k := range []string{cuckooKey, countingKey} {
		for _, r := range e.held[k] {
			if r.lo > 0 {
				rep.AckedCuckoo++
			}
		}
	}
	rep.HeldRange = [2]int64{e.total[cuckooKey].lo, e.total[cuckooKey].hi}
	rep.Held = map[string]int64{}
	states := map[string]map[string]string{} // node -> key -> INFO and dump digest
	var ids []string
	for _, m := range cl.Nodes {
		r := finalClient(cl, m)
		holds := sm.holder(m.ID)
		if err := checkNode(ctx, r, m.ID, holds, e, exact, rep); err != nil {
			rep.fail(checkRecovery, "%s: %v", m.ID, err)
		} else if st, err := nodeState(ctx, r, holds, sm != nil); err != nil {
			rep.fail(checkRecovery, "%s: %v", m.ID, err)
		} else {
			states[m.ID] = st
			ids = append(ids, m.ID)
		}
		r.Close()
	}
	if sm == nil {
		compareReplicas(ids, states, rep)
		return
	}
	for s, group := range sm.replicaStates(ids, states) {
		if len(group.ids) < shardReplicas {
			rep.fail(checkRecovery, "shard %d: only %v of its replicas %v answered the final reads", s, group.ids, sm.replicas(s))
		}
		compareReplicas(group.ids, group.states, rep)
	}
}

// holder says which keys node holds: in a sharded run those of the shards
// the map places on it, else every key.
func (sm shardMap) holder(node string) func(key string) bool {
	if sm == nil {
		return func(string) bool { return true }
	}
	return func(key string) bool { return slices.Contains(sm.replicas(sm.shardOf(key)), node) }
}

// shardStates is one shard's replicas and, for each, its keys' states.
type shardStates struct {
	ids    []string
	states map[string]map[string]string
}

// replicaStates splits the nodes' states by shard: per shard, the replicas
// the map places it on (of ids, the nodes that answered) with the states of
// the shard's keys only.
func (sm shardMap) replicaStates(ids []string, states map[string]map[string]string) []shardStates {
	out := make([]shardStates, len(sm))
	for s := range sm {
		out[s].states = map[string]map[string]string{}
		for _, id := range sm.replicas(s) {
			if !slices.Contains(ids, id) {
				continue
			}
			out[s].ids = append(out[s].ids, id)
			st := map[string]string{}
			for k, v := range states[id] {
				if sm.shardOf(k) == s {
					st[k] = v
				}
			}
			out[s].states[id] = st
		}
	}
	return out
}

func checkNode(ctx context.Context, r *redis.Client, id string, holds func(string) bool, e expectation, exact map[string]map[string]bool,
	rep *Report) error {
	for _, key := range []string{bloomKey, scalableKey} {
		if !holds(key) {
			continue
		}
		for _, batch := range chunks(e.bloomPresent[key], 1000) {
			got, err := r.BFMExists(ctx, key, batch...).Result()
			if err != nil {
				return fmt.Errorf("BF.MEXISTS: %w", err)
			}
			for i, ok := range got {
				if !ok {
					rep.fail(checkAckedKept, "%s: acknowledged BF.ADD %s %v lost", id, key, batch[i])
				}
			}
		}
	}
	for _, key := range []string{cuckooKey, countingKey} {
		if !holds(key) {
			continue
		}
		cmd := "CF.COUNT"
		if key == countingKey {
			cmd = "CBF.COUNT"
		}
		items := make([]string, 0, len(e.held[key]))
		for it := range e.held[key] {
			items = append(items, it)
		}
		slices.Sort(items)
		for len(items) > 0 {
			batch := items[:min(1000, len(items))]
			items = items[len(batch):]
			p := r.Pipeline()
			cmds := make([]*redis.Cmd, len(batch))
			for i, it := range batch {
				cmds[i] = p.Do(ctx, cmd, key, it)
			}
			if _, err := p.Exec(ctx); err != nil {
				return fmt.Errorf("%s: %w", cmd, err)
			}
			for i, it := range batch {
				got, err := cmds[i].Int64()
				if err != nil {
					return fmt.Errorf("%s %s %s: %w", cmd, key, it, err)
				}
				want := e.held[key][it]
				switch {
				case got < want.lo:
					rep.fail(checkAckedKept, "%s: %s %s %s is %d, the history says at least %d: an acknowledged write lost or a delete applied twice",
						id, cmd, key, it, got, want.lo)
				case got > want.hi && exact[key][it]:
					rep.fail(checkCount, "%s: %s %s %s is %d, the history allows at most %d: a write applied twice",
						id, cmd, key, it, got, want.hi)
				}
			}
		}
		info, err := infoMap(ctx, r, strings.Split(cmd, ".")[0]+".INFO", key)
		if err != nil {
			return err
		}
		n := info["Number of items inserted"]
		t := e.total[key]
		if key == cuckooKey {
			rep.Held[id] = n
		}
		if n < t.lo || n > t.hi {
			rep.fail(checkCount, "%s: %s holds %d items, the history allows [%d, %d]: a write was lost or applied twice",
				id, key, n, t.lo, t.hi)
		}
	}
	return nil
}

// infoMap reads the integer fields of an INFO reply.
func infoMap(ctx context.Context, r *redis.Client, cmd, key string) (map[string]int64, error) {
	v, err := r.Do(ctx, cmd, key).Slice()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", cmd, key, err)
	}
	m := map[string]int64{}
	for i := 0; i+1 < len(v); i += 2 {
		if k, ok := v[i].(string); ok {
			if n, ok := v[i+1].(int64); ok {
				m[k] = n
			}
		}
	}
	return m, nil
}

// nodeState is every key of a node with its INFO and, for Bloom and cuckoo
// filters, a digest of its dump. In a sharded cluster (sharded) SCAN lists
// every shard's keys: the node's state is those of the shards it holds
// (holds) that its own replica has.
func nodeState(ctx context.Context, r *redis.Client, holds func(string) bool, sharded bool) (map[string]string, error) {
	var keys []string
	for cur := uint64(0); ; {
		ks, next, err := r.Scan(ctx, cur, "*", 1000).Result()
		if err != nil {
			return nil, fmt.Errorf("SCAN: %w", err)
		}
		keys = append(keys, ks...)
		if cur = next; cur == 0 {
			break
		}
	}
	st := map[string]string{}
	for _, k := range keys {
		if !holds(k) {
			continue
		}
		if sharded {
			// Listed by another replica of its shard: absent here is a
			// difference, for compareReplicas to report.
			n, err := r.Exists(ctx, k).Result()
			if err != nil {
				return nil, fmt.Errorf("EXISTS %s: %w", k, err)
			}
			if n == 0 {
				continue
			}
		}
		family := "BF"
		switch k {
		case cuckooKey, windowCuckooKey:
			family = "CF"
		case countingKey:
			family = "CBF"
		}
		info, err := r.Do(ctx, family+".INFO", k).Slice()
		if err != nil {
			return nil, fmt.Errorf("%s.INFO %s: %w", family, k, err)
		}
		s := fmt.Sprint(info)
		if family != "CBF" {
			d, err := dumpDigest(ctx, r, family, k)
			if err != nil {
				return nil, err
			}
			s += " dump " + d
		}
		st[k] = s
	}
	return st, nil
}

func dumpDigest(ctx context.Context, r *redis.Client, family, key string) (string, error) {
	h := sha256.New()
	for it := int64(0); ; {
		v, err := r.Do(ctx, family+".SCANDUMP", key, it).Slice()
		if err != nil || len(v) != 2 {
			return "", fmt.Errorf("%s.SCANDUMP %s: %v", family, key, err)
		}
		next, _ := v[0].(int64)
		if next == 0 {
			break
		}
		chunk, _ := v[1].(string)
		h.Write([]byte(chunk))
		it = next
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// compareReplicas reports every key whose state differs between the nodes.
func compareReplicas(ids []string, states map[string]map[string]string, rep *Report) {
	if len(ids) < 2 {
		return
	}
	keys := map[string]bool{}
	for _, st := range states {
		for k := range st {
			keys[k] = true
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	differ := 0
	for _, k := range sorted {
		first := states[ids[0]][k]
		for _, id := range ids[1:] {
			if states[id][k] != first {
				differ++
				if differ <= 10 {
					rep.fail(checkReplicas, "replicas differ on %s: %s has %s; %s has %s", k, ids[0],
						orMissing(first), id, orMissing(states[id][k]))
				}
				break
			}
		}
	}
	if differ > 10 {
		rep.fail(checkReplicas, "replicas differ on %d keys in all", differ)
	}
}

func orMissing(s string) string {
	if s == "" {
		return "no such key"
	}
	return s
}

func chunks(items []string, n int) [][]any {
	var out [][]any
	for len(items) > 0 {
		k := min(n, len(items))
		b := make([]any, k)
		for i := range b {
			b[i] = items[i]
		}
		out = append(out, b)
		items = items[k:]
	}
	return out
}
