package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Readers pinned to one node. The cluster client spreads reads over the
// nodes and skips one that fails; these stay on their node whatever happens
// to it, as a service connected to one node does, so a node that was paused,
// isolated or deposed is asked at once when it comes back.

// Client ids of the history: workers are 0..workers-1.
const (
	pinnedClient   = 1000 // + node slot: linearizable reads pinned to a node
	probeClient    = 2000 // + probe number: reads sent to a paused leader
	readOnlyClient = 3000 // + node slot: READONLY reads
)

// nodeConn opens go-redis clients to whichever node holds a slot now.
type nodeConn struct {
	addr     func(slot int) string
	id       func(slot int) string // the id of the node in slot now
	password string
	tls      *tls.Config
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
}

// open connects to the node in slot, through the cutter, with up to pool
// connections.
func (nc nodeConn) open(slot int, readOnly bool, readTimeout time.Duration, pool int) *redis.Client {
	return nc.openCounted(slot, readOnly, readTimeout, pool, nil)
}

// openCounted is open, counting in dials every connection it opens: go-redis
// replaces a connection it finds broken without a word, and a new connection
// is a new promise for READONLY reads.
func (nc nodeConn) openCounted(slot int, readOnly bool, readTimeout time.Duration, pool int, dials *atomic.Int64) *redis.Client {
	dial := nc.dialTLS
	if dials != nil {
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return nc.dialTLS(ctx, network, addr)
		}
	}
	o := &redis.Options{Addr: nc.addr(slot), Password: nc.password, Protocol: 2, MaxRetries: -1, PoolSize: pool,
		ReadTimeout: readTimeout, DialTimeout: 2 * time.Second, DisableIdentity: true, Dialer: dial}
	if readOnly {
		o.OnConnect = func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }
	}
	return redis.NewClient(o)
}

func (nc nodeConn) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := nc.dial(ctx, network, addr)
	if err != nil || nc.tls == nil {
		return conn, err
	}
	cfg := nc.tls.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}

// pinnedReader reads, linearizably, items recently acknowledged, from the node
// in its slot, until ctx ends.
func pinnedReader(ctx context.Context, slot int, nc nodeConn, h *history, acked *recent, n *counts, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(slot)))
	r := nc.open(slot, false, 10*time.Second, 1)
	defer func() { r.Close() }()
	for ctx.Err() == nil {
		a, ok := acked.pick(rng)
		if !ok {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		cmd := "BF.EXISTS"
		k := bfExists
		if a.key == cuckooKey {
			cmd, k = "CF.EXISTS", cfExists
		}
		call := h.now()
		v, err := r.Do(context.Background(), cmd, a.key, a.item).Int64()
		o := op{client: pinnedClient + slot, kind: k, key: a.key, item: a.item, call: call, ret: h.now(), out: v == 1}
		if err != nil {
			o.failed, o.err = true, err.Error()
			n.failed.Add(1)
			h.add(o)
			// The node may have been replaced, or its connection cut: reconnect.
			r.Close()
			time.Sleep(50 * time.Millisecond)
			r = nc.open(slot, false, 10*time.Second, 1)
			continue
		}
		n.ok.Add(1)
		h.add(o)
		time.Sleep(readerPause)
	}
}

// readerPause spaces each pinned reader's reads, leaving the nodes' CPU to
// the workers' writes.
const readerPause = 2 * time.Millisecond

// readOnlyReader reads on a READONLY connection to the node in its slot:
// alternately an item recently acknowledged and an item a worker has not
// reached yet. Each connection is numbered, so the checker can hold each to
// its own promise.
//
// In a sharded run (watch not nil) it reads only while its node holds a
// voting replica of the Bloom filter's shard (shardMap.servesLocally), and
// opens a new connection whenever that changes: a node that gains or loses
// the replica answers from another replica, or from one of its own that
// starts again from a snapshot, and makes no promise across the change.
func readOnlyReader(ctx context.Context, slot int, nc nodeConn, h *history, acked *recent, progress []*atomic.Int64, n *counts, seed uint64,
	watch *shardWatch) {
	rng := rand.New(rand.NewPCG(seed, uint64(slot)+100))
	var dials atomic.Int64 // one connection at a time: the op used the latest
	r := nc.openCounted(slot, true, 5*time.Second, 1, &dials)
	defer func() { r.Close() }()
	serving := watch == nil
	for i := 0; ctx.Err() == nil; i++ {
		if watch != nil {
			if now := watch.get().servesLocally(bloomKey, nc.id(slot)); now != serving {
				r.Close()
				r = nc.openCounted(slot, true, 5*time.Second, 1, &dials)
				serving = now
			}
			if !serving {
				time.Sleep(50 * time.Millisecond)
				continue
			}
		}
		var item string
		if i%2 == 0 {
			a, ok := acked.pick(rng)
			if !ok || a.key != bloomKey {
				continue
			}
			item = a.item
		} else {
			w := rng.IntN(len(progress))
			item = itemName(w, int(progress[w].Load())+20+rng.IntN(20))
		}
		call := h.now()
		v, err := r.Do(context.Background(), "BF.EXISTS", bloomKey, item).Int64()
		o := op{client: readOnlyClient + slot, conn: int(dials.Load()), kind: roExists, key: bloomKey, item: item, call: call,
			ret: h.now(), out: v == 1}
		if err != nil {
			o.failed, o.err = true, err.Error()
			n.failed.Add(1)
			h.add(o)
			r.Close()
			time.Sleep(50 * time.Millisecond)
			r = nc.openCounted(slot, true, 5*time.Second, 1, &dials)
			continue
		}
		n.ok.Add(1)
		h.add(o)
		time.Sleep(readerPause)
	}
}

// warm opens k connections of r, so that later requests need no handshake.
func warm(r *redis.Client, k int) error {
	errs := make(chan error, k)
	for range k {
		go func() { errs <- r.Ping(context.Background()).Err() }()
	}
	var first error
	for range k {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// probeWith sends reads of items at once, one per connection of r, and
// returns a function that waits for their answers and records them. Sent to
// a paused node, they wait in its sockets and are the first thing it answers
// when it runs again, before it can have heard of a newer leader.
func probeWith(r *redis.Client, h *history, items []ackedItem, n *counts, first int) func() {
	results := make(chan op, len(items))
	for i, a := range items {
		go func() {
			call := h.now()
			v, err := r.Do(context.Background(), "BF.EXISTS", a.key, a.item).Int64()
			o := op{client: probeClient + first + i, kind: bfExists, key: a.key, item: a.item, call: call,
				ret: h.now(), out: v == 1}
			if err != nil {
				o.failed, o.err = true, err.Error()
			}
			results <- o
		}()
	}
	return func() {
		for range items {
			o := <-results
			if o.failed {
				n.failed.Add(1)
			} else {
				n.ok.Add(1)
			}
			h.add(o)
		}
	}
}

// checkReadOnly holds READONLY reads to what they promise: never ahead of the
// log (an item reads as present only once its add was sent: the items a
// worker has not reached yet are never added before the read, and a false
// positive for them is below one in 10^12 at the filter's load), and
// monotonic on one connection (an item seen present stays present).
func checkReadOnly(ops []op) []string {
	addCall := map[string]int64{}
	for _, o := range ops {
		if o.key == bloomKey && (o.kind == bfAdd || o.kind == bfMAdd) && !o.failed {
			if c, ok := addCall[o.item]; !ok || o.call < c {
				addCall[o.item] = o.call
			}
		}
	}
	type connKey struct{ client, conn int }
	seen := map[connKey]map[string]int64{} // item -> when it was first seen present
	var problems []string
	for _, o := range ops { // in the order they returned, per connection
		if o.kind != roExists || o.failed {
			continue
		}
		ck := connKey{o.client, o.conn}
		if seen[ck] == nil {
			seen[ck] = map[string]int64{}
		}
		if o.out {
			if c, ok := addCall[o.item]; !ok || c > o.ret {
				problems = append(problems, "READONLY read on "+describeConn(o)+" saw "+o.item+" before any add of it was sent")
			}
			if _, ok := seen[ck][o.item]; !ok {
				seen[ck][o.item] = o.ret
			}
			continue
		}
		if t, ok := seen[ck][o.item]; ok && t < o.call {
			problems = append(problems, "READONLY read on "+describeConn(o)+" lost "+o.item+" after seeing it")
		}
	}
	return problems
}

func describeConn(o op) string {
	return fmt.Sprintf("reader %d connection %d", o.client-readOnlyClient, o.conn)
}
