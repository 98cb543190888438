package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/client"
	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/internal/nodeproc"
)

// The windowed workload: a windowed Bloom filter (a crawler's seen URLs) and a
// windowed cuckoo filter (coupons valid for the window, each redeemed once).
// Their answers depend on the leader's time stamped into the log, which the
// checker cannot read but can bound: the nodes run on this machine, so the
// leader stamps a write between the moment its client sent it and the moment
// the answer came back, and the log's clock when the write applies lies in
// that interval too (it is the largest time stamped so far, and every
// earlier stamp was taken before this write applied). A read sees a log clock
// no later than its return, and no earlier than the send time of any write
// acknowledged before the read was sent.
//
// From those bounds, per item, with a generation period P (the window over 7):
//
//   - an item added at a (a between the add's send and return) lives until
//     the generation of a+8 begins, retire(a) = (a/P + 8) * P; a read that
//     returned before retire(a's send) must find it (no false negative), and
//     a coupon deleted then must be found;
//   - a read whose log clock is surely past retire(a's return) for every add
//     of the item must not find it: exactly for coupons with no collision, and
//     for the Bloom filter as a rate (its false positives), at most 10 plus 5%
//     of such reads;
//   - a coupon, added once, is counted at most once, and not after its
//     redemption was acknowledged;
//   - after the run, once the window and slack have passed, the leader's
//     ticks have emptied both filters on every node with no further write.

// The windowed filters and their parameters.
const (
	windowBloomKey  = "jepsen-wbf"
	windowCuckooKey = "jepsen-wcf"
	windowLength    = 3 * time.Second // generations of 429 ms
	windowCapacity  = 1 << 16
	windowRate      = 0.001
	windowMaxIter   = 500
	// windowTolerance allows for the client's clock and the nodes' reading
	// the same wall clock at slightly different instants.
	windowTolerance = int64(25 * time.Millisecond)
)

// Operations on the windowed filters, checked by checkWindows rather than
// by porcupine.
const (
	wbfAdd    kind = "BF.ADD/window"
	wbfExists kind = "BF.EXISTS/window"
	wcfAdd    kind = "CF.ADD/window"
	wcfDel    kind = "CF.DEL/window"
	wcfCount  kind = "CF.COUNT/window"
)

// windowed says whether key is one of the windowed filters.
func windowed(key string) bool { return key == windowBloomKey || key == windowCuckooKey }

// windowPeriod is the filters' generation: the window over 7, rounded up.
var windowPeriod = (int64(windowLength) + 6) / 7

// retireAt is when an item added at Unix time t (ns) leaves the filters.
func retireAt(t int64) int64 { return (t/windowPeriod + 8) * windowPeriod }

// createWindowed makes the windowed filters.
func createWindowed(ctx context.Context, c *client.Client) error {
	if err := c.BFReserve(ctx, windowBloomKey, windowRate, windowCapacity, &client.BFReserveOptions{Window: windowLength}); err != nil {
		return fmt.Errorf("create %s: %w", windowBloomKey, err)
	}
	if err := c.CFReserve(ctx, windowCuckooKey, windowCapacity, &client.CFReserveOptions{Window: windowLength,
		MaxIterations: windowMaxIter}); err != nil {
		return fmt.Errorf("create %s: %w", windowCuckooKey, err)
	}
	return nil
}

// windowItem is an item the worker added to a windowed filter, with the
// moment the add was acknowledged (ns since the run began).
type windowItem struct {
	item     string
	at       int64
	redeemed bool // a coupon whose CF.DEL was sent
}

// olderThan returns the newest of items acknowledged at least d before now.
func olderThan(items []windowItem, now int64, d time.Duration) (int, bool) {
	i := sort.Search(len(items), func(i int) bool { return items[i].at > now-int64(d) })
	return i - 1, i > 0
}

// windowed takes item i through both windowed filters: an add and a read,
// reads of items added half a window, nine tenths of one and two windows
// ago, and the redemption of a coupon from half a window or two windows ago.
func (w *worker) windowed(ctx context.Context, i int) {
	c := w.c
	x := "win-" + itemName(w.id, i)
	read := func(key, it string) {
		w.do(ctx, wbfExists, key, []string{it}, func(ctx context.Context) (result, error) {
			return asResult(c.BFExists(ctx, key, it))
		})
	}
	count := func(it string) {
		w.do(ctx, wcfCount, windowCuckooKey, []string{it}, func(ctx context.Context) (result, error) {
			return asCount(c.CFCount(ctx, windowCuckooKey, it))
		})
	}
	if _, ok := w.do(ctx, wbfAdd, windowBloomKey, []string{x}, func(ctx context.Context) (result, error) {
		return asResult(c.BFAdd(ctx, windowBloomKey, x))
	}); ok {
		w.seen = append(w.seen, windowItem{item: x, at: w.h.now()})
	}
	read(windowBloomKey, x)
	for _, d := range []time.Duration{windowLength / 2, windowLength * 9 / 10, 2 * windowLength} {
		if j, ok := olderThan(w.seen, w.h.now(), d); ok {
			read(windowBloomKey, w.seen[j].item)
		}
	}
	if _, ok := w.do(ctx, wcfAdd, windowCuckooKey, []string{x}, func(ctx context.Context) (result, error) {
		return result{b: true}, c.CFAdd(ctx, windowCuckooKey, x)
	}); ok {
		w.coupons = append(w.coupons, windowItem{item: x, at: w.h.now()})
	}
	count(x)
	d := windowLength / 2
	if i%3 == 0 {
		d = 2 * windowLength
	}
	if j, ok := olderThan(w.coupons, w.h.now(), d); ok && !w.coupons[j].redeemed {
		it := w.coupons[j].item
		w.coupons[j].redeemed = true
		w.do(ctx, wcfDel, windowCuckooKey, []string{it}, func(ctx context.Context) (result, error) {
			return asResult(c.CFDel(ctx, windowCuckooKey, it))
		})
		count(it)
	}
}

// clockBounds gives, for any moment of the run, a lower bound of the log's
// clock at a read sent then: the latest send time of a write acknowledged
// before it. Times are Unix ns.
type clockBounds struct {
	rets []int64 // acknowledged writes' returns, ascending (ns since the run began)
	lo   []int64 // lo[i]: the latest send time (Unix ns) among writes rets[:i+1]
}

func newClockBounds(ops []op, start int64) clockBounds {
	var ws []op
	for _, o := range ops {
		if o.kind.write() && !o.failed && !o.unknown {
			ws = append(ws, o)
		}
	}
	slices.SortFunc(ws, func(a, b op) int { return int(a.ret - b.ret) })
	b := clockBounds{rets: make([]int64, len(ws)), lo: make([]int64, len(ws))}
	for i, o := range ws {
		b.rets[i] = o.ret
		b.lo[i] = start + o.call
		if i > 0 {
			b.lo[i] = max(b.lo[i], b.lo[i-1])
		}
	}
	return b
}

// at is the lower bound for a read sent at call.
func (b clockBounds) at(call int64) int64 {
	i := sort.Search(len(b.rets), func(i int) bool { return b.rets[i] >= call })
	if i == 0 {
		return 0
	}
	return b.lo[i-1] - windowTolerance
}

// checkWindows checks the windowed filters' history; start is the run's
// start (Unix ns), ops every operation of the run.
func checkWindows(ops []op, start int64, rep *Report) {
	bounds := newClockBounds(ops, start)
	wall := func(t int64) int64 { return start + t }
	by := map[string][]op{}
	for _, o := range ops {
		if windowed(o.key) && !o.failed {
			by[o.key+"\x00"+o.item] = append(by[o.key+"\x00"+o.item], o)
		}
	}
	exact := exactCoupons(ops)
	var retired, retiredPresent int
	for _, its := range by {
		var adds []op
		unknown := false
		for _, o := range its {
			if o.kind == wbfAdd || o.kind == wcfAdd {
				adds = append(adds, o)
				unknown = unknown || o.unknown
			}
		}
		// surelyLive: some acknowledged add before o, whose item o had to
		// see (it returned before the add's generation retired).
		surelyLive := func(o op) bool {
			for _, a := range adds {
				if !a.unknown && a.ret < o.call && wall(o.ret)+windowTolerance < retireAt(wall(a.call)-windowTolerance) {
					return true
				}
			}
			return false
		}
		// surelyGone: every add that may precede o retired before o's log
		// clock.
		surelyGone := func(o op) bool {
			if unknown {
				return false
			}
			for _, a := range adds {
				if a.call < o.ret && retireAt(wall(a.ret)+windowTolerance) > bounds.at(o.call) {
					return false
				}
			}
			return true
		}
		if its[0].key == windowBloomKey {
			for _, o := range its {
				if o.kind != wbfExists {
					continue
				}
				if !o.out && surelyLive(o) {
					rep.fail(checkWindowed, "%s %s: absent %v after its add, inside its window of %v",
						o.key, o.item, time.Duration(o.ret-adds[0].call).Round(time.Millisecond), windowLength)
				}
				if surelyGone(o) {
					retired++
					if o.out {
						retiredPresent++
					}
				}
			}
			continue
		}
		checkCoupon(its, exact[its[0].item], surelyLive, surelyGone, rep)
	}
	if retiredPresent > 10+retired/20 {
		rep.fail(checkWindowed, "%s: %d of %d reads past the window and slack found the item (more than false positives explain)",
			windowBloomKey, retiredPresent, retired)
	}
}

// checkCoupon checks one coupon's history: added once, counted at most once
// and not after it was redeemed, found while surely live, refused once
// surely expired (exactly, when no other coupon shares its fingerprint and
// buckets).
func checkCoupon(its []op, exact bool, surelyLive, surelyGone func(op) bool, rep *Report) {
	var redeemed *op // an acknowledged delete that found the coupon
	mayBeDeleted := func(o op) bool {
		for _, d := range its {
			if d.kind == wcfDel && d.call < o.ret && (d.unknown || d.out) {
				return true
			}
		}
		return false
	}
	for i, o := range its {
		switch o.kind {
		case wcfCount:
			switch {
			case exact && o.n > 1:
				rep.fail(checkWindowed, "%s %s: counted %d times, added once", o.key, o.item, o.n)
			case o.n == 0 && surelyLive(o) && !mayBeDeleted(o):
				rep.fail(checkWindowed, "%s %s: not counted inside its window", o.key, o.item)
			case exact && o.n > 0 && redeemed != nil && redeemed.ret < o.call:
				rep.fail(checkWindowed, "%s %s: counted after its redemption was acknowledged", o.key, o.item)
			case exact && o.n > 0 && surelyGone(o):
				rep.fail(checkWindowed, "%s %s: counted after its window and slack", o.key, o.item)
			}
		case wcfDel:
			if o.unknown {
				continue
			}
			switch {
			case !o.out && surelyLive(o) && !mayBeDeleted(o):
				rep.fail(checkWindowed, "%s %s: a valid coupon could not be redeemed", o.key, o.item)
			case o.out && exact && surelyGone(o):
				rep.fail(checkWindowed, "%s %s: redeemed after its window and slack", o.key, o.item)
			}
			if o.out {
				redeemed = &its[i]
			}
		}
	}
}

// exactCoupons returns the coupons no other coupon of the run collides with
// (the same fingerprint and bucket pair): added once each to an empty filter
// of the same shape, their count is 1.
func exactCoupons(ops []op) map[string]bool {
	oracle, err := filters.NewWindowCuckoo(filters.WindowConfig{Capacity: windowCapacity, Window: int64(windowLength),
		MaxIterations: windowMaxIter})
	if err != nil {
		return nil
	}
	var coupons []string
	seen := map[string]bool{}
	for _, o := range ops {
		if o.key == windowCuckooKey && o.kind == wcfAdd && !seen[o.item] {
			seen[o.item] = true
			coupons = append(coupons, o.item)
		}
	}
	full := false
	for _, it := range coupons {
		if err := oracle.Add([]byte(it)); errors.Is(err, filters.ErrFull) {
			full = true
		}
	}
	exact := map[string]bool{}
	for _, it := range coupons {
		exact[it] = !full && oracle.Count([]byte(it)) == 1
	}
	return exact
}

// checkWindowFinal waits, after the cluster is healed, for the windowed
// filters to empty on every node with no write but the leader's ticks (the
// window, its slack, and time for a write of unknown outcome that applies
// late), then holds every coupon without a collision to a count of 0.
func checkWindowFinal(cl *nodeproc.Cluster, ops []op, rep *Report) {
	ctx := context.Background()
	deadline := time.Now().Add(windowLength*8/7 + 20*time.Second)
	exact := exactCoupons(ops)
	for _, m := range cl.Nodes {
		r := finalClient(cl, m)
		for {
			card, err := r.Do(ctx, "BF.CARD", windowBloomKey).Int64()
			info, ierr := infoMap(ctx, r, "CF.INFO", windowCuckooKey)
			held := info["Number of items inserted"]
			if err == nil && ierr == nil && card == 0 && held == 0 {
				break
			}
			if time.Now().After(deadline) {
				rep.fail(checkWindowed, "%s: %s counts %d and %s holds %d items (%v %v) %v after the run, past every window",
					m.ID, windowBloomKey, card, windowCuckooKey, held, err, ierr, windowLength*8/7+20*time.Second)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		p := r.Pipeline()
		var items []string
		for it, ok := range exact {
			if ok {
				items = append(items, it)
			}
		}
		slices.Sort(items)
		cmds := make([]*redis.IntCmd, len(items))
		for i, it := range items {
			cmds[i] = p.CFCount(ctx, windowCuckooKey, it)
		}
		if _, err := p.Exec(ctx); err != nil && len(items) > 0 {
			rep.fail(checkRecovery, "%s: CF.COUNT %s: %v", m.ID, windowCuckooKey, err)
		}
		for i, c := range cmds {
			if n, err := c.Result(); err == nil && n != 0 {
				rep.fail(checkWindowed, "%s: coupon %s counted %d after every window", m.ID, items[i], n)
			}
		}
		r.Close()
	}
}
