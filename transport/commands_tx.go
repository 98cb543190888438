package transport

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/acl"
	"github.com/rookerydb/rookery/internal/slot"
)

// Transactions: MULTI, EXEC, DISCARD, WATCH and UNWATCH, as Redis Cluster
// has them (docs/TRANSACTIONS.md). The commands between MULTI and EXEC are
// checked as they arrive and queued on the connection; EXEC sends them to
// their shard as one log entry (fsm.OpExec), which every replica applies at
// once, in order. Every key of a transaction, watched keys included, must
// hash to one slot (CROSSSLOT otherwise), on every cluster, so code written
// against one node keeps working once the cluster is sharded. A command a
// transaction cannot carry is refused when it is queued and the
// transaction is then discarded at EXEC (EXECABORT): nothing of it ever runs.

var (
	errNestedMulti   = redisError("ERR MULTI calls can not be nested")
	errExecNoMulti   = redisError("ERR EXEC without MULTI")
	errDiscardNoMult = redisError("ERR DISCARD without MULTI")
	errExecAbort     = redisError("EXECABORT Transaction discarded because of previous errors.")
	errNotInMulti    = redisError("ERR Command not allowed inside a transaction")
	errTxTooLarge    = redisError(fmt.Sprintf("ERR transaction too large: at most %d commands and %d MB of keys and items in one EXEC",
		maxTxCommands, maxTxBytes>>20))
)

// A transaction is one log entry, which every replica applies at once: its
// size is bounded so that no EXEC makes the leader miss its heartbeats.
const (
	maxTxCommands = 10000
	maxTxBytes    = maxEntryBytes // of keys and items; the entry adds a little per command
)

func txCommands() []*command {
	f := []string{"noscript", "loading", "stale", "fast", "allow_busy"}
	return []*command{
		{name: "multi", arity: 1, flags: f, parse: parseTxVerb},
		{name: "exec", arity: 1, flags: []string{"noscript", "loading", "stale", "skip_slowlog"}, parse: parseTxVerb},
		{name: "discard", arity: 1, flags: f, parse: parseTxVerb},
		{name: "watch", arity: -2, flags: f, firstKey: 1, lastKey: -1, step: 1, parse: parseTxVerb},
		{name: "unwatch", arity: 1, flags: f, parse: parseTxVerb},
	}
}

// parseTxVerb: the connection serves these itself (conn.txStep); the op is
// what runs if one ever got past it.
func parseTxVerb(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) { w.fail(errNotInMulti) }), nil
}

// txState is a connection's transaction: what MULTI queued and what WATCH
// recorded.
type txState struct {
	active  bool // between MULTI and EXEC or DISCARD
	dirty   bool // a command was refused while queuing: EXEC answers EXECABORT
	bytes   int  // of the queued commands' keys and items
	queued  []txQueued
	watched []watched
}

// txQueued is one command of a transaction.
type txQueued struct {
	o    op
	keys []string // what it touches (the slot check)
	args [][]byte // as sent, for EXEC to check its user's rules again
	// readCmd and readRender are a read's log command and reply (op.tx).
	readCmd    *fsm.Command
	readRender func(w *reply, r *fsm.Result)
}

// watched is one WATCHed key and the applied index its shard's replica had
// when it was read (fsm.FSM.WatchIndex).
type watched struct {
	key   string
	index uint64
}

// txStep serves the transaction commands and queues any command that arrives
// while a transaction is open; it reports whether it served args.
func (c *conn) txStep(o op, err error, args [][]byte, start time.Time) bool {
	t := &c.tx
	name := ""
	if o.def != nil {
		name = o.def.name
	}
	if err == nil {
		switch {
		case name == "watch" && c.scope != nil:
			c.watchIndex(o, start)
			return true
		case name == "multi":
			c.immediate(o, start, func(w *reply) {
				if t.active {
					w.fail(errNestedMulti)
					return
				}
				t.active = true
				w.ok()
			})
			return true
		case name == "exec":
			c.execTx(o, start)
			return true
		case name == "discard":
			c.immediate(o, start, func(w *reply) {
				if !t.active {
					w.fail(errDiscardNoMult)
					return
				}
				*t = txState{}
				w.ok()
			})
			return true
		case name == "watch":
			if t.active {
				t.dirty = true
				c.immediate(o, start, func(w *reply) { w.fail(errNotInMulti) })
				return true
			}
			c.watch(o, args, start)
			return true
		case name == "unwatch" && !t.active:
			t.watched = nil
			c.immediate(o, start, func(w *reply) { w.ok() })
			return true
		}
	}
	if !t.active || name == "quit" || name == "reset" {
		return false
	}
	if err == nil {
		err = c.queueable(&o, args)
	}
	if err != nil {
		t.dirty = true
		c.immediate(o, start, func(w *reply) { w.fail(err) })
		return true
	}
	size := 0
	for _, a := range args {
		size += len(a)
	}
	if len(t.queued) >= maxTxCommands || t.bytes+size > maxTxBytes {
		t.dirty = true
		c.immediate(o, start, func(w *reply) { w.fail(errTxTooLarge) })
		return true
	}
	t.bytes += size
	if name == "unwatch" {
		// Queued, it answers OK at EXEC, as in Redis (the watched keys
		// were checked by then).
		o.local = func(_ *session, w *reply) { w.ok() }
	}
	keys := c.s.keysOf(o.def, args)
	q := txQueued{o: o, args: args} // the reader's private copy (readBatch)
	if o.kind == opRead {
		q.readCmd, q.readRender = o.tx()
	}
	for _, i := range keys {
		q.keys = append(q.keys, string(args[i]))
	}
	t.queued = append(t.queued, q)
	c.immediate(o, start, func(w *reply) { w.simple("QUEUED") })
	return true
}

// queueable checks that o can run inside a transaction: a write the log can
// carry in one OpExec, a read it can answer there (EXISTS, COUNT), PING or
// ECHO; its own keys in one slot.
func (c *conn) queueable(o *op, args [][]byte) error {
	switch {
	case wrapped(args):
		return errNotInMulti // IDEM: one session sequence number per command
	case o.kind == opWrite && o.cmd != nil && fsm.InExec(o.cmd.Op):
	case o.kind == opRead && o.tx != nil:
	case o.kind == opLocal && o.def != nil && (o.def.name == "ping" || o.def.name == "echo" || o.def.name == "unwatch"):
		return nil
	default:
		return errNotInMulti
	}
	keys := c.s.keysOf(o.def, args)
	for _, i := range keys {
		if slot.Of(args[i]) != slot.Of(args[keys[0]]) {
			return errCrossSlot
		}
	}
	return nil
}

// watch serves WATCH key...: each key's shard tells the index it has applied
// after a read barrier (a replica here, or one a node that holds it runs
// the WATCH for: watchIndex), and the key is watched from there.
func (c *conn) watch(o op, args [][]byte, start time.Time) {
	c.drain() // this connection's earlier writes first
	byShard := map[int][][]byte{}
	for _, k := range args[1:] {
		sh := c.s.be.ShardOf(string(k))
		byShard[sh] = append(byShard[sh], k)
	}
	for _, sh := range slices.Sorted(maps.Keys(byShard)) {
		req := append([][]byte{[]byte("WATCH")}, byShard[sh]...)
		b, err := c.onShardProto(sh, req, 2)
		if err == nil {
			var v respValue
			if v, err = parseReply(b); err == nil {
				switch v.kind {
				case ':':
					for _, k := range byShard[sh] {
						c.tx.watched = append(c.tx.watched, watched{key: string(k), index: uint64(v.n)})
					}
					continue
				case '-':
					err = redisError(string(v.s))
				default:
					err = errors.New("unexpected answer to WATCH from the shard")
				}
			}
		}
		c.answer(o, start, func(w *reply) { w.fail(readErr(err)) })
		return
	}
	c.answer(o, start, func(w *reply) { w.ok() })
}

// watchIndex answers a WATCH run for another connection (ExecShard) on this
// replica: its applied index after the connection's read barrier.
func (c *conn) watchIndex(o op, start time.Time) {
	if err := c.scope.ReadBarrier(c.ctx(), c.sess.level); err != nil {
		c.answer(o, start, func(w *reply) { w.fail(readErr(err)) })
		return
	}
	idx := c.scope.FSM().WatchIndex()
	c.answer(o, start, func(w *reply) { w.int(int64(min(idx, 1<<63-1))) })
}

// execTx serves EXEC: the queued commands go to their shard as one OpExec
// and the reply is the array of their replies, or a null array when a
// watched key changed.
func (c *conn) execTx(o op, start time.Time) {
	t := c.tx
	c.tx = txState{}
	switch {
	case !t.active:
		c.immediate(o, start, func(w *reply) { w.fail(errExecNoMulti) })
		return
	case t.dirty:
		c.immediate(o, start, func(w *reply) { w.fail(errExecAbort) })
		return
	}
	// The user's rules may have changed since a command was queued: as
	// Redis's EXEC, each is checked again, and one now refused is answered
	// with the refusal in its place and not run.
	for i := range t.queued {
		q := &t.queued[i]
		d, err := c.s.aclDenial(&c.sess, q.o.def, q.args, acl.ContextMulti)
		if err != nil {
			c.immediate(o, start, func(w *reply) { w.fail(err) })
			return
		}
		if d != nil {
			refusal := errRulesChanged(d)
			q.o, q.keys = localOp(func(_ *session, w *reply) { w.fail(refusal) }), nil
		}
	}
	// The first key touched routes the entry; "" is a key like any other.
	var key string
	have, same := false, true
	note := func(k string) {
		if !have {
			key, have = k, true
		} else if slot.OfString(k) != slot.OfString(key) {
			same = false
		}
	}
	for _, q := range t.queued {
		for _, k := range q.keys {
			note(k)
		}
	}
	for _, w := range t.watched {
		note(w.key)
	}
	if !same {
		c.immediate(o, start, func(w *reply) { w.fail(errCrossSlot) })
		return
	}
	render := func(w *reply, r *fsm.Result) {
		switch {
		case errors.Is(r.Err, fsm.ErrWatched):
			w.nullArray()
			return
		case r.Err != nil:
			w.fail(r.Err)
			return
		}
		w.array(len(t.queued))
		i := 0
		for _, q := range t.queued {
			switch {
			case q.o.kind == opLocal:
				q.o.local(&c.sess, w)
			case i >= len(r.Subs):
				w.fail(errors.New("no result"))
			case q.o.kind == opRead:
				q.readRender(w, r.Subs[i])
				i++
			default:
				q.o.render(w, r.Subs[i])
				i++
			}
		}
	}
	if !have {
		// Nothing that touches a key (PING, ECHO): nothing for the log.
		c.immediate(o, start, func(w *reply) { render(w, &fsm.Result{}) })
		return
	}
	cmd := &fsm.Command{Op: fsm.OpExec, Key: key, Subs: []*fsm.Command{}}
	for _, w := range t.watched {
		cmd.Keys = append(cmd.Keys, w.key)
		cmd.Watch = append(cmd.Watch, w.index)
	}
	for _, q := range t.queued {
		switch q.o.kind {
		case opWrite:
			cmd.Subs = append(cmd.Subs, q.o.cmd)
		case opRead:
			cmd.Subs = append(cmd.Subs, q.readCmd)
		}
	}
	c.pending = append(c.pending, pending{fut: c.s.be.Submit(cmd), render: render,
		proto: c.sess.proto, name: o.name, def: o.def, start: start})
	c.barrierDone = false
}

// txRead makes a read that a transaction can carry: tx gives the command
// (fsm.OpTest, OpCount) applied in its place and how its result is
// rendered.
func txRead(o op, tx func() (*fsm.Command, func(*reply, *fsm.Result))) op {
	o.tx = tx
	return o
}

// nullArray is RESP2's null array or RESP3's null (EXEC after a watched key
// changed).
func (w *reply) nullArray() {
	if w.resp3() {
		w.b = append(w.b, '_', '\r', '\n')
		return
	}
	w.b = append(w.b, "*-1\r\n"...)
}
