package transport

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/internal/slot"
)

// Redirects for Redis Cluster clients (docs/SHARDING.md, "Routing"). A
// connection becomes a cluster client when it asks for the slot map
// (CLUSTER SLOTS, SHARDS or NODES) or sends READONLY: Redis Cluster's
// clients do one or the other, plain clients neither. A cluster client's
// command on the keys of one shard that this node does not serve is answered
// `MOVED slot host:port` with the address of a node that does, so the client
// refreshes its map at once; every other connection is forwarded as before,
// so redis-cli without -c and clients of one node keep working unchanged.
//
// Who serves a key: for a write, the shard's leader (a follower would only
// hand the entry on); for a read, any replica of the shard, since each serves
// linearizable reads through the read index and READONLY reads from its own
// state. A node that does not know the leader (an election, a shard not
// created yet) serves the command as before, so the usual hold and
// CLUSTERDOWN apply, and never redirects to itself. A cluster of one group
// is served by every node: it never redirects.

// errMovedFormat is Redis Cluster's redirect: slot, then the serving node's
// RESP address.
const errMovedFormat = "MOVED %d %s"

// shardView is the node's view of the shards at one moment.
type shardView struct {
	self   string // this node's id
	shards []cluster.ShardInfo
}

// view reads the shards as the node sees them now.
func (s *Server) view() *shardView {
	return &shardView{self: s.selfID(), shards: s.be.Shards()}
}

// self holds this node's id, read once (it never changes).
type self struct {
	once sync.Once
	id   string
}

// selfID is this node's id.
func (s *Server) selfID() string {
	s.self.once.Do(func() { s.self.id = s.be.Status().ID })
	return s.self.id
}

// leader is shard sh's leader as a replica with its RESP address, if known.
func (v *shardView) leader(sh int) (cluster.ShardReplica, bool) {
	if sh < 0 || sh >= len(v.shards) || v.shards[sh].Leader == "" {
		return cluster.ShardReplica{}, false
	}
	for _, r := range v.shards[sh].Replicas {
		if r.ID == v.shards[sh].Leader {
			return r, r.RESPAddr != ""
		}
	}
	return cluster.ShardReplica{}, false
}

// markClusterClient records that the connection behaves as a Redis Cluster
// client (it asked for the slot map, or sent READONLY): from now on it is
// redirected rather than forwarded, and counts keys per node (DBSIZE).
func (c *session) markClusterClient() {
	c.clusterClient = true
}

// parseAsking: ASKING, accepted as Redis Cluster accepts it. Slots never
// migrate key by key here (a shard moves whole, by Raft), so no node answers
// ASK and ASKING changes nothing.
func parseAsking(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) { w.ok() }), nil
}

// moved answers MOVED for a cluster client's command on key, of shard sh,
// when this node does not serve it, and reports whether it did.
func (c *conn) moved(o op, sh int, key []byte, start time.Time) bool {
	if rep, err := c.s.be.Replica(sh); err == nil && (o.kind != opWrite || rep.Leads()) {
		return false // any replica serves a read, its leader a write
	}
	v := c.s.view()
	l, ok := v.leader(sh)
	if !ok || l.ID == v.self {
		return false // no leader known (it is served here, with the usual hold), or this node
	}
	err := redisError(fmt.Sprintf(errMovedFormat, slot.Of(key), l.RESPAddr))
	c.answer(o, start, func(w *reply) { w.fail(err) })
	return true
}

// ownShards lists the shards whose slots this node shows as its own in
// CLUSTER NODES (nodesView): what DBSIZE and INFO keyspace count for a
// cluster client, so that redis-cli --cluster info and check, go-redis's
// ClusterClient.DBSize and redis-py's dbsize, which add up the masters'
// counts, count every key once.
func (c *conn) ownShards() []int {
	v := c.s.view()
	nv := projectNodes(v.shards, c.s.be.Nodes())
	var out []int
	for _, sh := range nv.owns[v.self] {
		out = append(out, sh.ID)
	}
	return out
}

// ownCount answers a cluster client's DBSIZE: the keys of the shards this
// node shows as its own, each counted at its replica here.
func (c *conn) ownCount(o op, args [][]byte, start time.Time) {
	c.drain()
	total := int64(0)
	for _, sh := range c.ownShards() {
		b, err := c.onShard(sh, args)
		if err != nil {
			c.answer(o, start, func(w *reply) { w.fail(readErr(err)) })
			return
		}
		v, perr := parseReply(b)
		if perr == nil && v.kind == '-' {
			c.s.observe(o.name, o.def, "error", start, false)
			c.out = append(c.out, b...)
			return
		}
		total += v.n
	}
	c.answer(o, start, func(w *reply) { w.int(total) })
}

// Redis's words for CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT.
var (
	errInvalidSlot      = redisError("ERR Invalid slot")
	errInvalidSlotCount = redisError("ERR Invalid slot or number of keys")
)

// parseSlotArg reads a slot number as Redis does: an integer (else
// errNotInteger), then in range.
func parseSlotArg(b []byte) (int64, error) {
	n, ok := parseInt64(b)
	if !ok {
		return 0, errNotInteger
	}
	return n, nil
}

// parseClusterCountKeysInSlot: CLUSTER COUNTKEYSINSLOT slot, the number of
// keys in slot, read where the slot's shard is (route.go, slotCommand).
func parseClusterCountKeysInSlot(s *Server, args [][]byte) (op, error) {
	n, err := parseSlotArg(args[2])
	if err != nil {
		return op{}, err
	}
	if n < 0 || n >= slot.Count {
		return op{}, errInvalidSlot
	}
	return readOp(func(q queries, w *reply) {
		w.int(int64(len(keysInSlot(q, int(n), -1))))
	}), nil
}

// parseClusterGetKeysInSlot: CLUSTER GETKEYSINSLOT slot count, at most count
// keys of slot.
func parseClusterGetKeysInSlot(s *Server, args [][]byte) (op, error) {
	n, err := parseSlotArg(args[2])
	if err != nil {
		return op{}, err
	}
	limit, err := parseSlotArg(args[3])
	if err != nil {
		return op{}, err
	}
	if n < 0 || n >= slot.Count || limit < 0 {
		return op{}, errInvalidSlotCount
	}
	return readOp(func(q queries, w *reply) {
		keys := keysInSlot(q, int(n), limit)
		w.array(len(keys))
		for _, k := range keys {
			w.bulkString(k)
		}
	}), nil
}

// keysInSlot lists the keys of slot n in q, at most limit of them (-1: all).
func keysInSlot(q queries, n int, limit int64) []string {
	var out []string
	match := func(key string, _ filters.Kind) bool { return slot.Of([]byte(key)) == n }
	cursor := uint64(0)
	for limit < 0 || int64(len(out)) < limit {
		next, keys := q.Scan(cursor, maxScanCount, match)
		for _, k := range keys {
			if limit >= 0 && int64(len(out)) >= limit {
				break
			}
			out = append(out, k)
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	return out
}

// slotOf is the slot argument of CLUSTER COUNTKEYSINSLOT or GETKEYSINSLOT
// (already checked by its parser), and whether args is one of them.
func slotOf(name string, args [][]byte) (int, bool) {
	if name != "cluster|countkeysinslot" && name != "cluster|getkeysinslot" || len(args) < 3 {
		return 0, false
	}
	n, err := strconv.Atoi(string(args[2]))
	return n, err == nil
}

// shardOfSlot is the shard whose range holds slot n, or -1.
func shardOfSlot(shards []cluster.ShardInfo, n int) int {
	for _, sh := range shards {
		if sh.First <= n && n <= sh.Last {
			return sh.ID
		}
	}
	return -1
}

// routeSlot routes CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT on a sharded
// node: read at this node's replica of the slot's shard when it holds one;
// otherwise a cluster client gets what Redis answers for a slot the node does
// not hold (no keys), and a plain connection is forwarded as for a key.
func (c *conn) routeSlot(o op, args [][]byte, n int, start time.Time) bool {
	sh := shardOfSlot(c.s.be.Shards(), n)
	if rep, err := c.s.be.Replica(sh); err == nil {
		c.rep = rep
		return false
	}
	if c.sess.clusterClient || sh < 0 {
		c.answer(o, start, func(w *reply) {
			if o.name == "cluster|countkeysinslot" {
				w.int(0)
			} else {
				w.array(0)
			}
		})
		return true
	}
	c.forward(o, sh, args, start)
	return true
}
