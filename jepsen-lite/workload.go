package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rookerydb/rookery/client"
)

// The long-lived filters every worker writes to.
const (
	bloomKey    = "jepsen-bf"  // non-scaling Bloom
	scalableKey = "jepsen-sbf" // scalable Bloom, small, pushed through expansions
	cuckooKey   = "jepsen-cf"
	countingKey = "jepsen-cbf"
)

// shortLived says whether key is one of the keys a worker creates, dumps,
// loads, deletes and creates again.
func shortLived(key string) bool {
	return len(key) > 4 && (key[:4] == "eph-" || key[:5] == "copy-")
}

// counts tallies outcomes for the report.
type counts struct {
	ok, failed, unknown atomic.Int64
}

// recent keeps the last items whose add was acknowledged, for the readers
// pinned to one node to ask about.
type recent struct {
	mu    sync.Mutex
	items []ackedItem
	next  int
}

type ackedItem struct {
	key, item string
	at        int64 // when the add was acknowledged
}

func newRecent(n int) *recent { return &recent{items: make([]ackedItem, 0, n)} }

func (r *recent) put(a ackedItem) {
	r.mu.Lock()
	if len(r.items) < cap(r.items) {
		r.items = append(r.items, a)
	} else {
		r.items[r.next] = a
		r.next = (r.next + 1) % len(r.items)
	}
	r.mu.Unlock()
}

// pick returns a random item, or false if there is none yet.
func (r *recent) pick(rng *rand.Rand) (ackedItem, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.items) == 0 {
		return ackedItem{}, false
	}
	return r.items[rng.IntN(len(r.items))], true
}

// since returns the items of key acknowledged after t.
func (r *recent) since(key string, t int64) []ackedItem {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ackedItem
	for _, a := range r.items {
		if a.key == key && a.at > t {
			out = append(out, a)
		}
	}
	return out
}

// worker is one client of the cluster's writes and reads.
type worker struct {
	id        int
	c         *client.Client
	h         *history
	opTimeout time.Duration
	n         *counts
	acked     *recent
	progress  *atomic.Int64 // the index of the item this worker is at, for the READONLY readers

	// What the worker knows of its own items: copies held in the cuckoo and
	// the counting filter, while no write of the item had an unknown outcome.
	cfHeld, cbfHeld map[string]int
	tainted         map[string]bool // key+item with an unknown write: never deleted again

	eph      string   // its short-lived key
	ephGen   int      // bumped when eph had a write of unknown outcome
	ephItems []string // what eph holds, while it is clean
	copies   int

	// The windowed filters (window.go): the items and coupons whose add was
	// acknowledged, oldest first.
	seen, coupons []windowItem
}

// result is what a recorded call answered.
type result struct {
	b  bool
	n  int64
	bs []bool // per item, for batches
}

// do runs f as one operation (or, for a batch, one per item of items) and
// records it. It returns the answer and whether the outcome is known.
func (w *worker) do(_ context.Context, k kind, key string, items []string, f func(ctx context.Context) (result, error)) (result, bool) {
	octx, cancel := context.WithTimeout(context.Background(), w.opTimeout)
	defer cancel()
	call := w.h.now()
	r, err := f(octx)
	ret := w.h.now()
	ops := make([]op, len(items))
	for i, it := range items {
		ops[i] = op{client: w.id, kind: k, key: key, item: it, call: call, ret: ret, out: r.b, n: r.n}
		if r.bs != nil && i < len(r.bs) {
			ops[i].out = r.bs[i]
		}
	}
	switch {
	case err == nil:
		w.n.ok.Add(int64(len(ops)))
	case k.write() && errors.Is(err, client.ErrIndeterminate):
		w.n.unknown.Add(int64(len(ops)))
		for i := range ops {
			ops[i].unknown, ops[i].err = true, err.Error()
			w.tainted[key+"\x00"+ops[i].item] = true
		}
		w.tainted[key] = true
	default:
		w.n.failed.Add(int64(len(ops)))
		for i := range ops {
			ops[i].failed, ops[i].err = true, err.Error()
		}
	}
	w.h.add(ops...)
	return r, err == nil
}

func asResult(b bool, err error) (result, error)     { return result{b: b}, err }
func asCount(n int64, err error) (result, error)     { return result{n: n}, err }
func asResults(bs []bool, err error) (result, error) { return result{bs: bs}, err }

// notFoundIsAbsent reads a missing key as "absent", as RedisBloom answers.
func notFoundIsAbsent(b bool, err error) (result, error) {
	if errors.Is(err, client.ErrNotFound) {
		return result{}, nil
	}
	return result{b: b}, err
}

// run works until ctx ends. Each step takes a fresh item through every
// long-lived filter, re-adds and deletes older items, and now and then takes
// the worker's short-lived key through a life cycle.
func (w *worker) run(ctx context.Context) {
	w.cfHeld, w.cbfHeld, w.tainted = map[string]int{}, map[string]int{}, map[string]bool{}
	w.eph = fmt.Sprintf("eph-%d-0", w.id)
	for i := 0; ctx.Err() == nil; i++ {
		w.progress.Store(int64(i))
		x := itemName(w.id, i)
		w.bloom(ctx, i, x)
		w.cuckoo(ctx, i, x)
		w.counting(ctx, i, x)
		w.windowed(ctx, i)
		if i%5 == 4 && ctx.Err() == nil {
			w.shortLived(ctx, i)
		}
	}
}

func itemName(worker, i int) string { return fmt.Sprintf("w%d-%d", worker, i) }

func (w *worker) bloom(ctx context.Context, i int, x string) {
	c := w.c
	if i%4 == 0 {
		batch := []string{x, x + "+1", x + "+2"}
		if _, ok := w.do(ctx, bfMAdd, bloomKey, batch, func(ctx context.Context) (result, error) {
			return asResults(c.BFMAdd(ctx, bloomKey, batch...))
		}); ok {
			for _, it := range batch {
				w.acked.put(ackedItem{bloomKey, it, w.h.now()})
			}
		}
	} else if _, ok := w.do(ctx, bfAdd, bloomKey, []string{x}, func(ctx context.Context) (result, error) {
		return asResult(c.BFAdd(ctx, bloomKey, x))
	}); ok {
		w.acked.put(ackedItem{bloomKey, x, w.h.now()})
	}
	w.do(ctx, bfExists, bloomKey, []string{x}, func(ctx context.Context) (result, error) {
		return asResult(c.BFExists(ctx, bloomKey, x))
	})
	if i >= 3 && i%7 == 3 {
		// Added before: must not be new.
		old := itemName(w.id, i-3)
		w.do(ctx, bfAdd, bloomKey, []string{old}, func(ctx context.Context) (result, error) {
			return asResult(c.BFAdd(ctx, bloomKey, old))
		})
	}
	if _, ok := w.do(ctx, bfAdd, scalableKey, []string{x}, func(ctx context.Context) (result, error) {
		return asResult(c.BFAdd(ctx, scalableKey, x))
	}); ok {
		w.acked.put(ackedItem{scalableKey, x, w.h.now()})
	}
	w.do(ctx, bfExists, scalableKey, []string{x}, func(ctx context.Context) (result, error) {
		return asResult(c.BFExists(ctx, scalableKey, x))
	})
}

// cuckoo adds x (twice, every third step), counts and deletes it, and re-adds
// an older item whose copies were all deleted, then deletes it again: an add
// or a delete applied twice changes the next answer.
func (w *worker) cuckoo(ctx context.Context, i int, x string) {
	c := w.c
	add := func(it string) {
		if _, ok := w.do(ctx, cfAdd, cuckooKey, []string{it}, func(ctx context.Context) (result, error) {
			return result{b: true}, c.CFAdd(ctx, cuckooKey, it)
		}); ok {
			w.cfHeld[it]++
			w.acked.put(ackedItem{cuckooKey, it, w.h.now()})
		}
	}
	if i%4 == 1 {
		batch := []string{x, x + "+1"}
		if r, ok := w.do(ctx, cfInsert, cuckooKey, batch, func(ctx context.Context) (result, error) {
			return asResults(c.CFInsert(ctx, cuckooKey, batch...))
		}); ok {
			for j, it := range batch {
				if j < len(r.bs) && r.bs[j] {
					w.cfHeld[it]++
				}
			}
		}
	} else {
		add(x)
	}
	if i%3 == 0 {
		add(x)
	}
	w.cuckooReads(ctx, x)
	w.cuckooDelete(ctx, x)
	if i >= 5 {
		old := itemName(w.id, i-5)
		if w.cfHeld[old] == 0 && !w.tainted[cuckooKey+"\x00"+old] {
			add(old)
			w.cuckooReads(ctx, old)
			w.cuckooDelete(ctx, old)
		}
	}
}

func (w *worker) cuckooReads(ctx context.Context, it string) {
	c := w.c
	w.do(ctx, cfCount, cuckooKey, []string{it}, func(ctx context.Context) (result, error) {
		return asCount(c.CFCount(ctx, cuckooKey, it))
	})
	w.do(ctx, cfExists, cuckooKey, []string{it}, func(ctx context.Context) (result, error) {
		return asResult(c.CFExists(ctx, cuckooKey, it))
	})
}

// cuckooDelete deletes one copy of it if the worker surely holds one (deleting
// what was never added may remove another item's fingerprint), and reads.
func (w *worker) cuckooDelete(ctx context.Context, it string) {
	if w.cfHeld[it] == 0 || w.tainted[cuckooKey+"\x00"+it] {
		return
	}
	c := w.c
	if r, ok := w.do(ctx, cfDel, cuckooKey, []string{it}, func(ctx context.Context) (result, error) {
		return asResult(c.CFDel(ctx, cuckooKey, it))
	}); ok && r.b {
		w.cfHeld[it]--
	}
	w.cuckooReads(ctx, it)
}

// counting adds x once or twice, deletes one copy, and checks the count and
// presence after each step.
func (w *worker) counting(ctx context.Context, i int, x string) {
	c := w.c
	times := 1 + i%2
	for range times {
		if _, ok := w.do(ctx, cbfAdd, countingKey, []string{x}, func(ctx context.Context) (result, error) {
			return asResult(c.CBFAdd(ctx, countingKey, x))
		}); ok {
			w.cbfHeld[x]++
		}
	}
	reads := func() {
		w.do(ctx, cbfCount, countingKey, []string{x}, func(ctx context.Context) (result, error) {
			return asCount(c.CBFCount(ctx, countingKey, x))
		})
		w.do(ctx, cbfExists, countingKey, []string{x}, func(ctx context.Context) (result, error) {
			return asResult(c.CBFExists(ctx, countingKey, x))
		})
	}
	reads()
	if w.cbfHeld[x] > 0 && !w.tainted[countingKey+"\x00"+x] {
		if r, ok := w.do(ctx, cbfDel, countingKey, []string{x}, func(ctx context.Context) (result, error) {
			return asResult(c.CBFDel(ctx, countingKey, x))
		}); ok && r.b {
			w.cbfHeld[x]--
		}
		reads()
	}
}

// shortLived takes the worker's short-lived key through a life: created,
// filled, read, dumped and loaded into a fresh key (while the worker knows
// exactly what it holds), deleted, created again by an add, and deleted. After
// a write of unknown outcome the worker moves on to a new key name, so no key
// carries more than one unknown write.
func (w *worker) shortLived(ctx context.Context, i int) {
	c, key := w.c, w.eph
	one := func(k kind, it string, f func(ctx context.Context) (result, error)) (result, bool) {
		return w.do(ctx, k, key, []string{it}, f)
	}
	reserve := func(ctx context.Context) (result, error) {
		err := c.BFReserve(ctx, key, ephRate, ephCapacity, nil)
		if errors.Is(err, client.ErrExists) {
			return result{b: false}, nil
		}
		return result{b: err == nil}, err
	}
	if r, ok := one(keyReserve, "", reserve); ok && r.b {
		w.ephItems = nil
	}
	for j := range 3 {
		it := fmt.Sprintf("%s-e%d", itemName(w.id, i), j)
		if _, ok := one(bfAdd, it, func(ctx context.Context) (result, error) { return asResult(c.BFAdd(ctx, key, it)) }); ok {
			w.ephItems = append(w.ephItems, it)
		}
		one(bfExists, it, func(ctx context.Context) (result, error) {
			return notFoundIsAbsent(c.BFExists(ctx, key, it))
		})
	}
	if !w.tainted[key] {
		w.dumpAndLoad(ctx, key)
	}
	one(keyDel, "", func(ctx context.Context) (result, error) {
		n, err := c.Del(ctx, key)
		return result{b: n == 1}, err
	})
	one(keyExists, "", func(ctx context.Context) (result, error) { return asResult(c.Exists(ctx, key)) })
	it := itemName(w.id, i) + "-again"
	one(bfAdd, it, func(ctx context.Context) (result, error) { return asResult(c.BFAdd(ctx, key, it)) })
	one(bfExists, it, func(ctx context.Context) (result, error) { return notFoundIsAbsent(c.BFExists(ctx, key, it)) })
	one(keyDel, "", func(ctx context.Context) (result, error) {
		n, err := c.Del(ctx, key)
		return result{b: n == 1}, err
	})
	w.ephItems = nil
	if w.tainted[key] {
		// A write of unknown outcome may still land: leave this name behind.
		w.ephGen++
		w.eph = fmt.Sprintf("eph-%d-%d", w.id, w.ephGen)
	}
}

// dumpAndLoad copies key, chunk by chunk, into a fresh key, records the copy
// as one load of the items key holds, reads them back and deletes the copy.
func (w *worker) dumpAndLoad(ctx context.Context, key string) {
	c := w.c
	w.copies++
	dst := fmt.Sprintf("copy-%d-%d", w.id, w.copies)
	var chunks [][]byte
	var iters []int64
	octx, cancel := context.WithTimeout(context.Background(), w.opTimeout)
	defer cancel()
	for it := int64(0); ; {
		next, chunk, err := c.ScanDump(octx, "BF", key, it)
		if err != nil {
			return // a read that failed: nothing to check
		}
		if next == 0 {
			break
		}
		chunks, iters = append(chunks, chunk), append(iters, next)
		it = next
	}
	items := append([]string(nil), w.ephItems...)
	call := w.h.now()
	var err error
	for i, ch := range chunks {
		if err = c.LoadChunk(octx, "BF", dst, iters[i], ch); err != nil {
			break
		}
	}
	o := op{client: w.id, kind: keyLoad, key: dst, items: items, call: call, ret: w.h.now(), out: err == nil}
	switch {
	case err == nil:
		w.n.ok.Add(1)
	case errors.Is(err, client.ErrIndeterminate) || errors.Is(err, client.ErrUnavailable):
		// Some chunks may have landed: the copy is in no state the model
		// knows, and is never touched again.
		o.unknown, o.err = true, err.Error()
		w.n.unknown.Add(1)
		w.h.add(o)
		return
	default:
		o.failed, o.err = true, err.Error()
		w.n.failed.Add(1)
		w.h.add(o)
		return
	}
	w.h.add(o)
	for _, it := range items {
		w.do(ctx, bfExists, dst, []string{it}, func(ctx context.Context) (result, error) {
			return notFoundIsAbsent(c.BFExists(ctx, dst, it))
		})
	}
	w.do(ctx, keyDel, dst, []string{""}, func(ctx context.Context) (result, error) {
		n, err := c.Del(ctx, dst)
		return result{b: n == 1}, err
	})
}
