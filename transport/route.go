package transport

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/slot"
)

// Routing in a sharded cluster (docs/SHARDING.md, "Routing"). Any node takes
// any key: a command whose keys are all in one shard runs here if this node
// holds a replica of it, and is forwarded whole to a node that does
// otherwise; DEL, UNLINK and EXISTS over keys of several shards are split
// into one command per shard and their counts summed; DBSIZE, KEYS, SCAN,
// FLUSHALL and FLUSHDB run on every shard and their replies are combined;
// RENAME and RENAMENX between slots answer CROSSSLOT, as Redis Cluster does.
// A command forwarded here for a shard (ExecShard) runs against that shard
// alone, never forwarded again. Without a map (ShardCount 0) nothing is
// routed.

// errCrossSlot is Redis Cluster's answer to keys of different slots.
var errCrossSlot = redisError("CROSSSLOT Keys in request don't hash to the same slot")

// How a command spread over shards combines.
const (
	splitSum  = iota + 1 // keyed: one command per shard, integer replies summed
	fanSum               // every shard: integer replies summed (DBSIZE)
	fanConcat            // every shard: arrays concatenated (KEYS)
	fanScan              // every shard: SCAN's cursors merged
	fanOK                // every shard: OK (FLUSHALL, FLUSHDB)
	sameSlot             // keyed: every key in one slot or CROSSSLOT (RENAME)
)

// spread says how each command that spans shards is routed.
var spread = map[string]int{
	"del": splitSum, "unlink": splitSum, "exists": splitSum,
	"dbsize": fanSum, "keys": fanConcat, "scan": fanScan,
	"flushall": fanOK, "flushdb": fanOK,
	"rename": sameSlot, "renamenx": sameSlot,
}

// wrapped says whether args is an IDEM request: its op's def is then the
// command IDEM wraps (parseIdem), so only the request itself can tell.
func wrapped(args [][]byte) bool { return len(args) > idemPrefix && keyword(args[0], "IDEM") }

// keysOf lists the key arguments of a command (its table's firstKey,
// lastKey and step; IDEM's are its inner command's, after IDEM's own
// arguments), with their indexes in args.
func (s *Server) keysOf(def *command, args [][]byte) (idx []int) {
	base := 0
	if wrapped(args) {
		inner, err := s.resolve(args[idemPrefix:])
		if inner == nil || err != nil {
			return nil
		}
		def, base = inner, idemPrefix
	}
	if def.firstKey <= 0 {
		return nil
	}
	last := def.lastKey
	if last < 0 {
		last = len(args) - base + last
	}
	step := max(def.step, 1)
	for i := def.firstKey; i <= last && base+i < len(args); i += step {
		idx = append(idx, base+i)
	}
	return idx
}

// innerName is the command IDEM wraps, or the command's own name.
func (s *Server) innerName(def *command, args [][]byte) string {
	if wrapped(args) {
		if inner, err := s.resolve(args[idemPrefix:]); inner != nil && err == nil {
			return inner.name
		}
	}
	return def.name
}

// route serves op o of args if it is not this node's to serve as one shard's
// command here, and reports whether it did; otherwise it sets c.rep to the
// replica the op runs on here (nil: none, a node-wide command).
func (c *conn) route(o op, args [][]byte, start time.Time) bool {
	c.rep = nil
	if c.scope != nil {
		c.rep = c.scope // forwarded here for one shard: it runs here
		return false
	}
	if rep := c.onlyShard(); rep != nil {
		// One shard, held here (a cluster of one group on every node):
		// everything runs on it, as without shards.
		if o.def != nil && o.kind != opLocal {
			c.rep = rep
		}
		return false
	}
	if o.name == "info" {
		if want, all := infoWant(args); all || want["keyspace"] {
			c.infoFanOut(o, want, all, start)
			return true
		}
	}
	if o.def == nil || o.kind == opLocal {
		return false
	}
	if n, ok := slotOf(o.name, args); ok {
		return c.routeSlot(o, args, n, start)
	}
	name := c.s.innerName(o.def, args)
	how := spread[name]
	keys := c.s.keysOf(o.def, args)
	if len(keys) == 0 {
		if how == 0 {
			return false
		}
		if how == fanSum && c.sess.clusterClient {
			c.ownCount(o, args, start) // DBSIZE per node, as Redis Cluster's tools add it up
			return true
		}
		c.fanOut(o, args, how, start)
		return true
	}
	shards := map[int][]int{} // shard -> key argument indexes
	slot0 := slot.Of(args[keys[0]])
	for _, i := range keys {
		if how == sameSlot && slot.Of(args[i]) != slot0 {
			c.answer(o, start, func(w *reply) { w.fail(errCrossSlot) })
			return true
		}
		sh := c.s.be.ShardOf(string(args[i]))
		shards[sh] = append(shards[sh], i)
	}
	if len(shards) > 1 {
		c.split(o, args, shards, start)
		return true
	}
	for sh := range shards {
		if c.sess.clusterClient && c.moved(o, sh, args[keys[0]], start) {
			return true
		}
		if rep, err := c.s.be.Replica(sh); err == nil {
			c.rep = rep
			return false
		}
		c.forward(o, sh, args, start)
	}
	return true
}

// onlyShard is the replica of a cluster's only shard when this node holds
// it, else nil.
func (c *conn) onlyShard() Replica {
	if c.s.be.ShardCount() != 1 {
		return nil
	}
	rep, err := c.s.be.Replica(0)
	if err != nil {
		return nil
	}
	return rep
}

// answer writes a reply rendered here, after the connection's earlier writes.
func (c *conn) answer(o op, start time.Time, render func(w *reply)) {
	c.drain()
	w := reply{b: c.out, proto: c.sess.proto}
	render(&w)
	c.s.observe(o.name, o.def, replyOutcome(w.b, len(c.out)), start, o.rejected)
	c.out = w.b
}

// forward runs args on a node that holds shard sh and writes its reply.
func (c *conn) forward(o op, sh int, args [][]byte, start time.Time) {
	c.drain()
	b, err := c.onShard(sh, args)
	if err != nil && o.kind == opRead && errors.Is(err, cluster.ErrIndeterminate) {
		// The node it went to died with the read (a leader killed): a
		// read changes nothing, so it goes once more, to a replica that
		// waits for the shard's new leader if it must.
		b, err = c.onShard(sh, args)
	}
	if err != nil {
		if o.kind != opWrite {
			err = readErr(err) // a read changes nothing: never indeterminate
		}
		c.answer(o, start, func(w *reply) { w.fail(err) })
		return
	}
	c.s.observe(o.name, o.def, replyOutcome(b, 0), start, false)
	c.out = append(c.out, b...)
}

// onShard runs args against shard sh: here if this node holds it, else on a
// node that does; it returns the raw reply.
func (c *conn) onShard(sh int, args [][]byte) ([]byte, error) {
	return c.onShardProto(sh, args, c.sess.proto)
}

// onShardProto is onShard with the reply in RESP version proto.
func (c *conn) onShardProto(sh int, args [][]byte, proto int) ([]byte, error) {
	if rep, err := c.s.be.Replica(sh); err == nil {
		return c.s.ExecShard(c.ctx(), rep, args, proto, c.sess.level == cluster.ReadStale), nil
	}
	ctx, cancel := context.WithTimeout(c.ctx(), c.s.cfg.RequestTimeout)
	defer cancel()
	return c.s.be.Forward(ctx, sh, args, proto, c.sess.level == cluster.ReadStale)
}

// infoFanOut answers an INFO that includes Keyspace on a sharded node: the
// other sections are this node's, Keyspace counts every shard once (at a
// replica the connection's read level allows), after the connection's
// earlier writes; for a cluster client, the shards this node shows as its own
// (ownShards), as its DBSIZE.
func (c *conn) infoFanOut(o op, want map[string]bool, all bool, start time.Time) {
	c.drain()
	var ks keyspaceCount
	shards := make([]int, c.s.be.ShardCount())
	for i := range shards {
		shards[i] = i
	}
	if c.sess.clusterClient {
		shards = c.ownShards() // a cluster client's node counts what it shows as its own, as DBSIZE
	}
	for _, sh := range shards {
		b, err := c.onShardProto(sh, [][]byte{[]byte("INFO"), []byte("keyspace")}, 2)
		v, perr := parseReply(b)
		if err != nil || perr != nil || v.kind != '$' {
			ks.missing++
			continue
		}
		keys, expires := parseKeyspace(v.s)
		ks.keys += keys
		ks.expires += expires
	}
	c.answer(o, start, func(w *reply) { w.verbatim(c.s.info(want, all, &ks)) })
}

// split runs a command over keys of several shards as one command per shard
// (IDEM's session prefix kept on each) and sums their integer replies.
func (c *conn) split(o op, args [][]byte, shards map[int][]int, start time.Time) {
	c.drain()
	prefix := 1
	if wrapped(args) {
		prefix = idemPrefix + 1 // IDEM client seq DEL
	}
	total := int64(0)
	var failed []byte
	for _, sh := range slices.Sorted(maps.Keys(shards)) {
		sub := append([][]byte(nil), args[:prefix]...)
		for _, i := range shards[sh] {
			sub = append(sub, args[i])
		}
		b, err := c.onShard(sh, sub)
		if err != nil {
			if o.kind != opWrite {
				err = readErr(err)
			}
			failed = []byte("-" + renderErr(err) + "\r\n")
			continue
		}
		v, err := parseReply(b)
		switch {
		case err != nil:
			failed = []byte("-ERR " + err.Error() + "\r\n")
		case v.kind == '-':
			failed = b
		default:
			total += v.n
		}
	}
	if failed != nil {
		c.s.observe(o.name, o.def, "error", start, false)
		c.out = append(c.out, failed...)
		return
	}
	c.answer(o, start, func(w *reply) { w.int(total) })
}

// fanOut runs a keyless command on every shard and combines the replies.
func (c *conn) fanOut(o op, args [][]byte, how int, start time.Time) {
	c.drain()
	n := c.s.be.ShardCount()
	replies := make([]respValue, 0, n)
	for sh := range n {
		b, err := c.onShard(sh, args)
		if err == nil {
			var v respValue
			if v, err = parseReply(b); err == nil && v.kind == '-' {
				c.s.observe(o.name, o.def, "error", start, false)
				c.out = append(c.out, b...)
				return
			}
			replies = append(replies, v)
		}
		if err != nil {
			c.answer(o, start, func(w *reply) { w.fail(readErr(err)) })
			return
		}
	}
	c.answer(o, start, func(w *reply) { combine(w, how, replies) })
}

// combine renders the replies of every shard as one.
func combine(w *reply, how int, rs []respValue) {
	switch how {
	case fanSum:
		total := int64(0)
		for _, r := range rs {
			total += r.n
		}
		w.int(total)
	case fanOK:
		w.ok()
	case fanConcat:
		var all [][]byte
		for _, r := range rs {
			for _, e := range r.arr {
				all = append(all, e.s)
			}
		}
		w.array(len(all))
		for _, k := range all {
			w.bulk(k)
		}
	case fanScan:
		combineScan(w, rs)
	}
}

// combineScan merges every shard's SCAN reply from one cursor. Shards order
// their keys alike (by fsm.ScanPosition), so the next cursor is the lowest of
// the shards' next cursors, and a key at or past it is left for the next call,
// which returns it again.
func combineScan(w *reply, rs []respValue) {
	next := uint64(0)
	for _, r := range rs {
		if len(r.arr) != 2 {
			continue
		}
		if c, ok := parseUint64(r.arr[0].s); ok && c != 0 && (next == 0 || c < next) {
			next = c
		}
	}
	var keys [][]byte
	for _, r := range rs {
		if len(r.arr) != 2 {
			continue
		}
		for _, e := range r.arr[1].arr {
			if next == 0 || fsm.ScanPosition(string(e.s)) < next {
				keys = append(keys, e.s)
			}
		}
	}
	w.array(2)
	w.bulkString(strconv.FormatUint(next, 10))
	w.array(len(keys))
	for _, k := range keys {
		w.bulk(k)
	}
}

// ExecShard runs a command against this node's replica of shard sh, as a
// client of this node would (authenticated: it came from a node), and returns
// its reply: what a command forwarded here for that shard gets.
func (s *Server) ExecShard(ctx context.Context, rep Replica, args [][]byte, proto int, readStale bool) []byte {
	level := cluster.ReadLinearizable
	if readStale {
		level = cluster.ReadStale
	}
	c := &conn{s: s, scope: rep, reqCtx: ctx, sess: session{proto: proto, authed: true, level: level}}
	c.sess.conn = c // INFO asks its connection which shard it runs for
	c.exec([][][]byte{args})
	return c.out
}

// queriesFor is what a read of op runs against: its replica's state here,
// or, for a node-wide read, every replica's this node holds.
func (c *conn) queriesFor() queries {
	if c.rep != nil {
		return c.rep.FSM()
	}
	reps := c.s.be.Replicas()
	if len(reps) == 1 {
		return reps[0].FSM()
	}
	fs := make([]*fsm.FSM, len(reps))
	for i, r := range reps {
		fs[i] = r.FSM()
	}
	return multiQueries(fs)
}

// multiQueries reads the state of several shards as one, for node-wide reads
// (INFO, MEMORY STATS): keyed queries go to the shard that has the key.
type multiQueries []*fsm.FSM

func (m multiQueries) of(key string) *fsm.FSM {
	for _, f := range m {
		if _, ok := f.KindOf(key); ok {
			return f
		}
	}
	if len(m) > 0 {
		return m[0]
	}
	return fsm.New(fsm.Options{})
}

func (m multiQueries) Exists(fam fsm.Family, key string, items [][]byte) []bool {
	return m.of(key).Exists(fam, key, items)
}
func (m multiQueries) Count(fam fsm.Family, key string, item []byte) uint64 {
	return m.of(key).Count(fam, key, item)
}
func (m multiQueries) Card(key string) (uint64, error) { return m.of(key).Card(key) }
func (m multiQueries) Info(fam fsm.Family, key string) (fsm.Info, error) {
	return m.of(key).Info(fam, key)
}
func (m multiQueries) ScanDump(fam fsm.Family, key string, iter int64) (int64, []byte, error) {
	return m.of(key).ScanDump(fam, key, iter)
}
func (m multiQueries) KindOf(key string) (filters.Kind, bool) { return m.of(key).KindOf(key) }
func (m multiQueries) Expiry(key string) (int64, bool)        { return m.of(key).Expiry(key) }
func (m multiQueries) MemoryUsage(key string) (uint64, bool)  { return m.of(key).MemoryUsage(key) }

func (m multiQueries) Expires() (n int) {
	for _, f := range m {
		n += f.Expires()
	}
	return n
}

func (m multiQueries) ExpiredKeys() (n uint64) {
	for _, f := range m {
		n += f.ExpiredKeys()
	}
	return n
}

func (m multiQueries) Len() (n int) {
	for _, f := range m {
		n += f.Len()
	}
	return n
}

func (m multiQueries) MemoryBytes() (n uint64) {
	for _, f := range m {
		n += f.MemoryBytes()
	}
	return n
}

func (m multiQueries) List() (out []fsm.Info) {
	for _, f := range m {
		out = append(out, f.List()...)
	}
	return out
}

// Scan walks the shards' keys in their common order: each from the cursor,
// keys before the lowest next cursor.
func (m multiQueries) Scan(cursor uint64, count int, match func(string, filters.Kind) bool) (uint64, []string) {
	next := uint64(0)
	type part struct {
		next uint64
		keys []string
	}
	parts := make([]part, len(m))
	for i, f := range m {
		parts[i].next, parts[i].keys = f.Scan(cursor, count, match)
		if c := parts[i].next; c != 0 && (next == 0 || c < next) {
			next = c
		}
	}
	var keys []string
	for _, p := range parts {
		for _, k := range p.keys {
			if next == 0 || fsm.ScanPosition(k) < next {
				keys = append(keys, k)
			}
		}
	}
	return next, keys
}
