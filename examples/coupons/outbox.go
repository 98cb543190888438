package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rookerydb/rookery/client"
)

// The outbox: every filter operation is recorded in the store, with its key,
// before it is sent (Store.Issue, Store.Redeem). The handler that recorded it
// sends it at once; if that does not settle it (ErrIndeterminate: the cluster
// may have applied it; ErrUnavailable: it did not), the operation stays in the
// outbox and RunOutbox sends it again, under the same key, until the cluster
// answers. However many times it is sent, from however many processes, the
// cluster applies it once and answers every attempt with the first answer.
//
// The policy, in one line: the store decides, the filter follows. A coupon is
// redeemed when the store says so, whatever became of the CF.DEL; the CF.DEL
// only keeps the filter from sending more requests for it to the store.
//
// A key can be re-sent for client.KeyLifetime (14 minutes) after it was made;
// later the cluster may have forgotten its answer and would apply it again,
// so the client refuses (ErrKeyExpired). That happens only when the cluster
// was unreachable for longer than that. What is left is decided by which
// mistake is harmless:
//
//   - An add that may not have applied is sent again under a new key. If it
//     had applied, the filter now holds two copies of the code: after the
//     redeem deletes one, the other makes the filter say "yes" to a used code,
//     which costs one store lookup per attempt and answers "already redeemed".
//     Not adding it could refuse a valid coupon.
//   - A delete that may not have applied is settled by CF.COUNT: 0 means the
//     filter holds no copy of the code's fingerprint, so it did apply (or there
//     was nothing to delete). A count above 0 cannot tell an unapplied delete
//     from another code sharing the fingerprint, and deleting again could take
//     that other code's copy, refusing a valid coupon. So the copy is left,
//     and the coupon is marked stale (counted in /stats): again, at worst a
//     store lookup per attempt. A filter rebuilt from the store's issued
//     coupons clears every stale copy.

// claims are the operations being sent now, so that the handler that created
// an operation and the outbox loop never send it at the same time (which
// would be harmless, since both use its key, but would muddle who settles it).
type claims struct {
	mu   sync.Mutex
	held map[[2]uint64]bool
}

// take claims k; false if it is taken.
func (c *claims) take(k client.Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := [2]uint64{k.Session, k.Seq}
	if c.held[id] {
		return false
	}
	if c.held == nil {
		c.held = make(map[[2]uint64]bool)
	}
	c.held[id] = true
	return true
}

func (c *claims) release(k client.Key) {
	c.mu.Lock()
	delete(c.held, [2]uint64{k.Session, k.Seq})
	c.mu.Unlock()
}

// send sends op under its key and, once the cluster has answered, records the
// answer in the store. An error wrapping client.ErrIndeterminate or
// client.ErrUnavailable leaves op in the outbox.
func (s *Service) send(ctx context.Context, op Op) error {
	ctx = client.WithKey(ctx, op.Key)
	switch op.Kind {
	case opAdd:
		added, err := s.c.CFInsert(ctx, s.filter, op.Codes...)
		if err != nil {
			return err
		}
		return s.st.SettleAdd(op, added)
	case opDelete:
		found, err := s.c.CFDel(ctx, s.filter, op.Codes[0])
		switch {
		case errors.Is(err, client.ErrNotFound):
			s.log.Error("the filter is gone; the store's issued coupons must be added to a new one", "filter", s.filter)
		case err != nil:
			return err
		case !found:
			// Only codes the filter was given are deleted, so this means the
			// filter lost it (deleted or rebuilt without it).
			s.log.Warn("redeemed code was not in the filter", "code", op.Codes[0])
		}
		return s.st.SettleDelete(op)
	}
	return fmt.Errorf("outbox entry %d: unknown kind %q", op.ID, op.Kind)
}

// RunOutbox sends the outbox's operations every interval until ctx ends.
func (s *Service) RunOutbox(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.DrainOutbox(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// DrainOutbox sends every operation of the outbox once, oldest first, and
// stops at the first the cluster does not settle (it is down or electing: the
// next round tries again). It returns the number still pending.
func (s *Service) DrainOutbox(ctx context.Context) int {
	ops, err := s.st.Pending()
	if err != nil {
		s.log.Error("read outbox", "err", err)
		return -1
	}
	left := len(ops)
	for _, op := range ops {
		if ctx.Err() != nil {
			break
		}
		if !s.claims.take(op.Key) {
			continue // its handler is sending it
		}
		err := s.retry(ctx, op)
		s.claims.release(op.Key)
		if err != nil {
			s.log.Warn("outbox: filter operation not settled; will retry",
				"id", op.ID, "kind", op.Kind, "key", op.Key.String(), "err", err)
			break
		}
		left--
	}
	return left
}

// retry sends op again under its key, or settles it as the package comment
// says when its key has expired.
func (s *Service) retry(ctx context.Context, op Op) error {
	ctx, cancel := context.WithTimeout(ctx, s.opTimeout)
	defer cancel()
	err := s.send(ctx, op)
	if !errors.Is(err, client.ErrKeyExpired) {
		return err
	}
	switch op.Kind {
	case opAdd:
		s.log.Warn("outbox: add key expired; adding again under a new key", "id", op.ID, "codes", len(op.Codes))
		op, err = s.st.Rekey(op, s.c.NewKey())
		if err != nil {
			return err
		}
		return s.send(ctx, op)
	default:
		n, err := s.c.CFCount(ctx, s.filter, op.Codes[0])
		if err != nil {
			return err
		}
		if n == 0 {
			return s.st.SettleDelete(op)
		}
		s.log.Warn("outbox: delete key expired and the filter still reports the code; leaving it",
			"id", op.ID, "code", op.Codes[0], "copies", n)
		return s.st.MarkStale(op, time.Now())
	}
}
