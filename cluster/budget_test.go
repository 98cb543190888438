package cluster

import (
	"reflect"
	"testing"
	"time"
)

// TestNodeBudget: one memory budget per node, whatever group asks.
func TestNodeBudget(t *testing.T) {
	now := time.Unix(1000, 0)
	ttl := 5 * time.Second
	t.Run("every group counts against the node's one limit", func(t *testing.T) {
		b := newNodeBudget()
		groups := map[int]uint64{1: 40, 2: 40}
		ans := b.reserve(3, []uint64{15, 10, 5}, 100, groups, now, ttl)
		if !reflect.DeepEqual(ans.OK, []bool{true, false, true}) || ans.Used != 80 || ans.Room != 20 {
			t.Fatalf("reserve in a node holding 80 of 100: %+v", ans)
		}
		// What group 3 reserved counts for group 1's next write.
		if ans := b.reserve(1, []uint64{1}, 100, groups, now, ttl); ans.OK[0] {
			t.Fatalf("100 of 100 reserved, and one more byte taken: %+v", ans)
		}
	})
	t.Run("a reservation counts until applied, never twice", func(t *testing.T) {
		b := newNodeBudget()
		groups := map[int]uint64{1: 50}
		ans := b.reserve(1, []uint64{30}, 100, groups, now, ttl)
		if total, _ := b.usage(now, groups); total != 80 {
			t.Fatalf("before it applies: %d, want 50 + 30", total)
		}
		groups[1] = 80 // applied here
		if total, _ := b.usage(now, groups); total != 80 {
			t.Fatalf("applied, not yet released: %d, want 80 (not 110)", total)
		}
		b.release(ans.Token, now)
		if total, _ := b.usage(now.Add(releaseGrace+time.Millisecond), groups); total != 80 {
			t.Fatalf("released: %d", total)
		}
	})
	t.Run("a released reservation a replica has not applied yet still counts a moment", func(t *testing.T) {
		b := newNodeBudget()
		groups := map[int]uint64{1: 50}
		ans := b.reserve(1, []uint64{30}, 100, groups, now, ttl)
		b.release(ans.Token, now) // the leader applied it; this replica not yet
		if total, _ := b.usage(now.Add(time.Millisecond), groups); total != 80 {
			t.Fatalf("released before applied here: %d, want 80", total)
		}
	})
	t.Run("a reservation nobody releases expires", func(t *testing.T) {
		b := newNodeBudget()
		groups := map[int]uint64{1: 50}
		b.reserve(1, []uint64{30}, 100, groups, now, ttl)
		if total, _ := b.usage(now.Add(ttl+time.Millisecond), groups); total != 50 {
			t.Fatalf("expired: %d", total)
		}
	})
	t.Run("no limit: everything fits", func(t *testing.T) {
		b := newNodeBudget()
		if ans := b.reserve(1, []uint64{1 << 40}, 0, map[int]uint64{}, now, ttl); !ans.OK[0] || ans.Token != 0 {
			t.Fatalf("%+v", ans)
		}
	})
}
