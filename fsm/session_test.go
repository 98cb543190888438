package fsm

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

func withSession(c *Command, client, seq uint64) *Command {
	c.Session = Session{ClientID: client, Seq: seq}
	return c
}

// TestSessionReplayAppliesOnce: a retried CF.ADD stores one copy, a retried
// CF.DEL deletes one copy, and each retry answers the first answer.
func TestSessionReplayAppliesOnce(t *testing.T) {
	h := newHarness(t)
	first := h.ok(withSession(add(FamilyCF, "coupons", "C1"), 7, 1))
	again := h.ok(withSession(add(FamilyCF, "coupons", "C1"), 7, 1))
	if !reflect.DeepEqual(first, again) {
		t.Fatalf("replay answered %+v, first %+v", again, first)
	}
	if n := h.f.Count(FamilyCF, "coupons", []byte("C1")); n != 1 {
		t.Fatalf("replayed add stored %d copies", n)
	}
	h.ok(withSession(add(FamilyCF, "coupons", "C1"), 7, 2)) // a new request: a second copy
	del1 := h.ok(withSession(del(FamilyCF, "coupons", "C1"), 7, 3))
	del2 := h.ok(withSession(del(FamilyCF, "coupons", "C1"), 7, 3))
	if del1.Ints[0] != 1 || del2.Ints[0] != 1 {
		t.Fatalf("delete and its replay: %v %v", del1.Ints, del2.Ints)
	}
	if n := h.f.Count(FamilyCF, "coupons", []byte("C1")); n != 1 {
		t.Fatalf("after a replayed delete %d copies remain, want 1", n)
	}
	// Another client with the same sequence number is another request.
	h.ok(withSession(del(FamilyCF, "coupons", "C1"), 8, 3))
	if h.exists(FamilyCF, "coupons", "C1") {
		t.Fatal("second client's delete was taken for a replay")
	}
	// A replayed error is replayed too, even once the error no longer holds.
	r1 := h.apply(withSession(reserve(FamilyBF, "coupons", bfSpec(10, 0.01, 2)), 9, 1))
	h.ok(&Command{Op: OpDelKeys, Keys: []string{"coupons"}})
	r2 := h.apply(withSession(reserve(FamilyBF, "coupons", bfSpec(10, 0.01, 2)), 9, 1))
	if !errors.Is(r1.Err, ErrWrongType) || !errors.Is(r2.Err, ErrWrongType) {
		t.Fatalf("replayed error: %v then %v", r1.Err, r2.Err)
	}
	if _, ok := h.f.KindOf("coupons"); ok {
		t.Fatal("a replay created a filter")
	}
}

// TestSessionWindow: a pipelined client may retry any of its last
// sessionWindow requests; older ones are refused, not applied again.
func TestSessionWindow(t *testing.T) {
	h := newHarness(t)
	req := func(seq uint64) *Command {
		return withSession(add(FamilyCF, "k", fmt.Sprint("item-", seq)), 1, seq)
	}
	// Out of order, as concurrent connections of one client may deliver them.
	for _, seq := range []uint64{2, 1, 3} {
		h.ok(req(seq))
	}
	for seq := uint64(4); seq <= sessionWindow+10; seq++ {
		h.ok(req(seq))
	}
	held := func() uint64 { in, _ := h.f.Info(FamilyCF, "k"); return in.Items }
	n := held()
	if n != sessionWindow+10 {
		t.Fatalf("%d items held, want %d", n, sessionWindow+10)
	}
	if r := h.apply(req(5)); !errors.Is(r.Err, ErrSessionExpired) {
		t.Fatalf("retry older than the window: %v", r.Err)
	}
	h.ok(req(sessionWindow + 10))
	h.ok(req(20))
	if held() != n {
		t.Fatalf("retries changed the items held from %d to %d", n, held())
	}
}

// TestSessionExpiresByLogTime: sessions expire by the time the leader stamps
// into entries, whatever the replica's own clock says.
func TestSessionExpiresByLogTime(t *testing.T) {
	h := newHarness(t)
	ttl := int64(DefaultSessionTTL)
	h.ok(withSession(add(FamilyCF, "k", "x"), 1, 1))
	h.now += ttl / 2
	h.ok(add(FamilyCF, "other", "y"))
	h.ok(withSession(add(FamilyCF, "k", "x"), 1, 1)) // still remembered: a replay
	if n := h.f.Count(FamilyCF, "k", []byte("x")); n != 1 {
		t.Fatalf("%d copies within the TTL", n)
	}
	h.now += 2 * ttl
	h.ok(add(FamilyCF, "other", "y")) // the log clock moves on; the session is swept
	h.ok(withSession(add(FamilyCF, "k", "x"), 1, 1))
	if n := h.f.Count(FamilyCF, "k", []byte("x")); n != 2 {
		t.Fatalf("%d copies after the session expired, want 2", n)
	}
	// An entry stamped earlier (a new leader with a slower clock) does not move
	// the log clock back.
	before := h.f.sessions.now
	h.apply(&Command{Op: OpDelKeys, Keys: []string{"none"}, Time: h.now - int64(time.Hour)})
	if h.f.sessions.now != before {
		t.Fatal("the log clock went backwards")
	}
}

// TestSessionTableBounded: past maxSessions the least recently seen clients are
// forgotten, in an order that does not depend on map iteration.
func TestSessionTableBounded(t *testing.T) {
	a, b := newSessionTable(int64(time.Hour)), newSessionTable(int64(time.Hour))
	for id := uint64(1); id <= maxSessions+10; id++ {
		for _, tab := range []*sessionTable{a, b} {
			tab.advance(int64(id))
			tab.store(Session{ClientID: id, Seq: 1}, int64(id), &Result{Ints: []int64{1}})
		}
	}
	if len(a.clients) > maxSessions {
		t.Fatalf("%d sessions kept, at most %d", len(a.clients), maxSessions)
	}
	if _, ok := a.clients[1]; ok {
		t.Error("the oldest client survived eviction")
	}
	if _, ok := a.clients[maxSessions+10]; !ok {
		t.Error("the newest client was evicted")
	}
	if !reflect.DeepEqual(encodeSessions(a), encodeSessions(b)) {
		t.Error("two tables fed the same requests differ")
	}
}
