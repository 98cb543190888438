package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rookerydb/rookery/client"
)

const (
	bloomKey  = "jepsen-seen"
	cuckooKey = "jepsen-coupons"
)

// counts tallies outcomes for the report.
type counts struct {
	ok, failed, unknown atomic.Int64
}

// worker runs until ctx ends: for each fresh item it adds it to the Bloom
// filter and reads it back, adds it to the cuckoo filter and reads it back,
// and for every other item deletes it again and reads once more. Every
// operation's call and return go into the history.
func worker(ctx context.Context, id int, c *client.Client, h *history, opTimeout time.Duration, n *counts) {
	for i := 0; ctx.Err() == nil; i++ {
		item := fmt.Sprintf("w%d-%d", id, i)
		do := func(k kind, f func(ctx context.Context) (bool, error)) (bool, bool) {
			if ctx.Err() != nil {
				return false, false // the run is over: the rest of this item is skipped
			}
			octx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			call := h.now()
			out, err := f(octx)
			ret := h.now()
			switch {
			case err == nil:
				n.ok.Add(1)
				h.add(op{client: id, kind: k, item: item, call: call, ret: ret, out: out})
				return out, true
			case k.write() && errors.Is(err, client.ErrIndeterminate):
				n.unknown.Add(1)
				h.add(op{client: id, kind: k, item: item, call: call, ret: ret, unknown: true, err: err.Error()})
			default:
				n.failed.Add(1)
				h.add(op{client: id, kind: k, item: item, call: call, ret: ret, failed: true, err: err.Error()})
			}
			return false, false
		}
		do(bfAdd, func(ctx context.Context) (bool, error) { return c.BFAdd(ctx, bloomKey, item) })
		do(bfExists, func(ctx context.Context) (bool, error) { return c.BFExists(ctx, bloomKey, item) })
		_, added := do(cfAdd, func(ctx context.Context) (bool, error) { return true, c.CFAdd(ctx, cuckooKey, item) })
		do(cfExists, func(ctx context.Context) (bool, error) { return c.CFExists(ctx, cuckooKey, item) })
		// Only what surely was added is deleted: deleting an absent item from a
		// cuckoo filter may remove another's fingerprint.
		if added && i%2 == 0 {
			do(cfDel, func(ctx context.Context) (bool, error) { return c.CFDel(ctx, cuckooKey, item) })
			do(cfExists, func(ctx context.Context) (bool, error) { return c.CFExists(ctx, cuckooKey, item) })
		}
	}
}
