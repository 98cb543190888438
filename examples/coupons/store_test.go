package main

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rookerydb/rookery/client"
)

// These tests need no cluster: the store alone.

func openTestStore(t *testing.T) *Store {
	t.Helper()
	st, err := OpenStore(filepath.Join(t.TempDir(), "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func key(seq uint64) client.Key { return client.Key{Session: 7, Seq: seq, Made: time.Now()} }

// TestStoreRedeemOnce: of many concurrent redeems of one code, exactly one
// wins and records one delete; the others see it used.
func TestStoreRedeemOnce(t *testing.T) {
	st := openTestStore(t)
	ops, err := st.Issue("c", []string{"AAAA-BBBB-CCCC"}, []client.Key{key(1)}, 10, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Until the filter confirms the add, the coupon cannot be redeemed.
	if out, _, err := st.Redeem("AAAA-BBBB-CCCC", key(2), time.Now()); err != nil || out != NotYetActive {
		t.Fatalf("redeem before the add settled: %v %v", out, err)
	}
	if err := st.SettleAdd(ops[0], []bool{true}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[Outcome]int{}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, _, err := st.Redeem("AAAA-BBBB-CCCC", key(uint64(10+i)), time.Now())
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			got[out]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if got[Redeemed] != 1 || got[AlreadyRedeemed] != 19 {
		t.Fatalf("outcomes %v, want one Redeemed and 19 AlreadyRedeemed", got)
	}
	pending, err := st.Pending()
	if err != nil || len(pending) != 1 || pending[0].Kind != opDelete {
		t.Fatalf("outbox after the redeem: %+v %v", pending, err)
	}
	if out, _, _ := st.Redeem("ZZZZ-ZZZZ-ZZZZ", key(99), time.Now()); out != NoSuchCoupon {
		t.Fatalf("redeem of a code never issued: %v", out)
	}
}

// TestStoreIssue: issuing is all or nothing, a code the filter had no room
// for is void, and Unissue takes coupons back.
func TestStoreIssue(t *testing.T) {
	st := openTestStore(t)
	codes := []string{"AAAA-AAAA-AAA2", "AAAA-AAAA-AAA3", "AAAA-AAAA-AAA4"}
	ops, err := st.Issue("c", codes, []client.Key{key(1), key(2)}, 2, time.Now())
	if err != nil || len(ops) != 2 || len(ops[0].Codes) != 2 || len(ops[1].Codes) != 1 {
		t.Fatalf("issue in chunks of 2: %+v %v", ops, err)
	}
	// A batch with a taken code changes nothing.
	_, err = st.Issue("c", []string{"AAAA-AAAA-AAA5", codes[0]}, []client.Key{key(3)}, 2, time.Now())
	if !errors.Is(err, ErrCodeTaken) {
		t.Fatalf("issue of a taken code: %v", err)
	}
	if _, ok, _ := st.Get("AAAA-AAAA-AAA5"); ok {
		t.Fatal("a failed issue left a coupon behind")
	}
	if err := st.SettleAdd(ops[0], []bool{true, false}); err != nil {
		t.Fatal(err)
	}
	if c := mustGet(t, st, codes[0]); c.State != StateIssued || c.Pending != "" {
		t.Fatalf("added: %+v", c)
	}
	if c := mustGet(t, st, codes[1]); c.State != StateVoid {
		t.Fatalf("no room: %+v", c)
	}
	if out, _, _ := st.Redeem(codes[1], key(4), time.Now()); out != NoSuchCoupon {
		t.Fatalf("redeem of a void code: %v", out)
	}
	if err := st.Unissue(ops[1:]); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := st.Get(codes[2]); ok {
		t.Fatal("Unissue left the coupon")
	}
	if pending, stale, err := st.Counts(); err != nil || pending != 0 || stale != 0 {
		t.Fatalf("counts %d %d %v", pending, stale, err)
	}
}

// TestCodes: codes are well formed, distinct, read back in either case, and
// nothing else passes for one.
func TestCodes(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range newCodes(1000) {
		if n, ok := normalizeCode(c); !ok || n != c || seen[c] {
			t.Fatalf("code %q: %q %v (seen %v)", c, n, ok, seen[c])
		}
		seen[c] = true
	}
	if n, ok := normalizeCode("7kqm-x3pf-92hd"); !ok || n != "7KQM-X3PF-92HD" {
		t.Fatalf("lower case: %q %v", n, ok)
	}
	for _, bad := range []string{"", "7KQM-X3PF-92H", "7KQM-X3PF-92HDD", "7KQMX3PF-92HD-", "0KQM-X3PF-92HD", "7KQM_X3PF_92HD", "7KQM-X3PF-92H\xff"} {
		if _, ok := normalizeCode(bad); ok {
			t.Errorf("%q passed for a code", bad)
		}
	}
}

// FuzzNormalizeCode: any input is refused or read as a well-formed code that
// reads back as itself.
func FuzzNormalizeCode(f *testing.F) {
	for _, s := range []string{"7KQM-X3PF-92HD", "7kqm-x3pf-92hd", "", "----------", "7KQM-X3PF-92H\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := normalizeCode(s)
		if !ok {
			return
		}
		if again, ok2 := normalizeCode(n); !ok2 || again != n || len(n) != codeLen {
			t.Fatalf("%q read as %q, which reads as %q %v", s, n, again, ok2)
		}
	})
}
