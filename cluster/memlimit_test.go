package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
)

// TestSmallestMemoryLimitRules: with limits of 3 GB, 64 MB and 64 MB, the
// leader refuses a filter of a few hundred MB naming a 64 MB node, whichever
// node leads; growth inside apply stops at 64 MB on every replica alike.
func TestSmallestMemoryLimitRules(t *testing.T) {
	limits := map[string]uint64{"n1": 3 << 30, "n2": 64 << 20, "n3": 64 << 20}
	tc := newTestCluster(t, 3, func(c *Config) { c.MaxMemory = limits[c.ID] })
	_, l := tc.leader(30 * time.Second)
	eventually(t, 10*time.Second, "the leader to hear every limit", func() bool {
		for id, lim := range limits {
			if id != l.ID() && l.memLimitOf(id) != lim {
				return false
			}
		}
		return true
	})
	big := &fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyBF, Key: "big",
		Spec: fsm.Spec{Kind: filters.KindScalable, Capacity: 200_000_000, ErrorRate: 0.01, Expansion: 2}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := submit(ctx, l, big)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "past its limit of 67108864 bytes") ||
		!(strings.Contains(err.Error(), "node n2") || strings.Contains(err.Error(), "node n3")) {
		t.Fatalf("a 200M-item filter on a cluster with 64 MB nodes: %v", err)
	}
	// Growth inside apply: beside 60 MB of Bloom filter, a cuckoo filter that
	// grows fourfold, fed until it cannot; each replica stops at the same
	// sub-filter, under 64 MB.
	mustSubmit(t, l, &fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyBF, Key: "ballast",
		Spec: fsm.Spec{Kind: filters.KindBloom, Capacity: 50_000_000, ErrorRate: 0.01}})
	mustSubmit(t, l, &fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyCF, Key: "cf",
		Spec: fsm.Spec{Kind: filters.KindCuckoo, Capacity: 1 << 16, BucketSize: 1, MaxIterations: 1, Expansion: 4, FingerprintBits: 8}})
	refused := false
	for round := 0; round < 400 && !refused; round++ {
		c := &fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyCF, Key: "cf", Multi: true}
		for i := range 20_000 {
			c.Items = append(c.Items, []byte(fmt.Sprint(round, ":", i)))
		}
		_, l = tc.leader(10 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		r, err := submit(ctx, l, c)
		cancel()
		switch {
		case errors.Is(err, ErrTooLarge):
			refused = true // admission saw the next sub-filter would not fit
		case errors.Is(err, ErrIndeterminate), errors.Is(err, ErrNotLeader), errors.Is(err, ErrNoLeader):
			continue // a loaded machine: copies of items do no harm here
		case err != nil:
			t.Fatal(err)
		default:
			for _, v := range r.Ints {
				if v == -1 {
					refused = true
				}
			}
		}
	}
	if !refused {
		t.Fatal("the filter grew without end")
	}
	_, l = tc.leader(10 * time.Second)
	settled(t, tc, l)
	want := l.meta.fsm.MemoryBytes()
	for _, n := range tc.live() {
		if got := n.meta.fsm.MemoryBytes(); got > 64<<20 || got != want {
			t.Fatalf("%s counts %d bytes (leader %d, limit %d)", n.ID(), got, want, 64<<20)
		}
	}
}

// TestMemLimitStampedOnlyFromFormat7: the limit travels in commands only once
// every server reads log format 7; a node held at 6 gets commands without it.
func TestMemLimitStampedOnlyFromFormat7(t *testing.T) {
	b := memBudget{cap: 1 << 20, limit: 1 << 21, who: "n2", v: fsm.CodecV6}
	c := &fsm.Command{Op: fsm.OpAdd}
	b.stampCap(c)
	if c.MemLimit != 0 {
		t.Fatal("stamped in format 6")
	}
	b.v = fsm.CodecV7
	for _, op := range []fsm.Op{fsm.OpReserve, fsm.OpAdd} {
		c := &fsm.Command{Op: op}
		if b.stampCap(c); c.MemLimit != 1<<20 {
			t.Fatalf("op %d not stamped", op)
		}
	}
	for _, c := range []*fsm.Command{{Op: fsm.OpDelete}, {Op: fsm.OpLoadChunk, Iter: 7}, {Op: fsm.OpExpire}} {
		if b.stampCap(c); c.MemLimit != 0 {
			t.Fatalf("op %d stamped", c.Op)
		}
	}
	if memMeta(0) != -1 || memMeta(5) != 5 {
		t.Fatal("memMeta")
	}
}
