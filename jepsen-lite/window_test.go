package main

import (
	"fmt"
	"testing"
	"time"
)

// TestWindowCheckerCatchesViolations feeds checkWindows histories with known
// faults of a windowed filter: it must refuse each and accept the correct
// ones. Times are ns since a run that began at a generation boundary.
func TestWindowCheckerCatchesViolations(t *testing.T) {
	start := 1000 * windowPeriod // Unix ns, a generation boundary
	ms := int64(time.Millisecond)
	life := 8 * windowPeriod // an item added at 0 retires then
	o := func(k kind, key, item string, call, ret int64, out bool) op {
		return op{kind: k, key: key, item: item, call: call, ret: ret, out: out}
	}
	cnt := func(item string, call, ret, n int64) op {
		return op{kind: wcfCount, key: windowCuckooKey, item: item, call: call, ret: ret, n: n}
	}
	// tick is a write elsewhere acknowledged at t: the log's clock passed t.
	tick := func(t int64) op { return o(wbfAdd, windowBloomKey, fmt.Sprint("clock-", t), t, t+ms, true) }
	bf, cf := windowBloomKey, windowCuckooKey
	cases := []struct {
		name string
		ops  []op
		ok   bool
	}{
		{"present inside the window, absent after its slack", []op{
			o(wbfAdd, bf, "a", 0, ms, true), o(wbfExists, bf, "a", 2*ms, 3*ms, true),
			o(wbfExists, bf, "a", life-100*ms, life-90*ms, true),
			tick(life + 100*ms), o(wbfExists, bf, "a", life+200*ms, life+210*ms, false),
			o(wcfAdd, cf, "c", 0, ms, true), cnt("c", 2*ms, 3*ms, 1), o(wcfDel, cf, "c", 4*ms, 5*ms, true),
			cnt("c", 6*ms, 7*ms, 0),
		}, true},
		{"a Bloom item lost inside its window", []op{
			o(wbfAdd, bf, "a", 0, ms, true), o(wbfExists, bf, "a", windowPeriod, windowPeriod+ms, false)}, false},
		{"a coupon not counted inside its window", []op{
			o(wcfAdd, cf, "c", 0, ms, true), cnt("c", 2*windowPeriod, 2*windowPeriod+ms, 0)}, false},
		{"a valid coupon refused", []op{
			o(wcfAdd, cf, "c", 0, ms, true), o(wcfDel, cf, "c", 2*windowPeriod, 2*windowPeriod+ms, false)}, false},
		{"an expired coupon redeemed", []op{
			o(wcfAdd, cf, "c", 0, ms, true), tick(life + 100*ms),
			o(wcfDel, cf, "c", life+200*ms, life+210*ms, true)}, false},
		{"an expired coupon counted", []op{
			o(wcfAdd, cf, "c", 0, ms, true), tick(life + 100*ms), cnt("c", life+200*ms, life+210*ms, 1)}, false},
		{"a coupon counted twice", []op{o(wcfAdd, cf, "c", 0, ms, true), cnt("c", 2*ms, 3*ms, 2)}, false},
		{"a redeemed coupon counted", []op{
			o(wcfAdd, cf, "c", 0, ms, true), o(wcfDel, cf, "c", 2*ms, 3*ms, true), cnt("c", 4*ms, 5*ms, 1)}, false},
		{"no write shows the clock passed: an old coupon may still count", []op{
			o(wcfAdd, cf, "c", 0, ms, true), cnt("c", life+200*ms, life+210*ms, 1)}, true},
		{"an add of unknown outcome may land late", []op{
			{kind: wcfAdd, key: cf, item: "c", call: 0, ret: 100 * life, unknown: true}, tick(life + 100*ms),
			cnt("c", life+200*ms, life+210*ms, 1)}, true},
		{"a delete of unknown outcome may have redeemed it", []op{
			o(wcfAdd, cf, "c", 0, ms, true), {kind: wcfDel, key: cf, item: "c", call: 2 * ms, ret: 100 * life, unknown: true},
			cnt("c", 4*ms, 5*ms, 0)}, true},
	}
	for _, c := range cases {
		rep := &Report{OK: true}
		checkWindows(c.ops, start, rep)
		if rep.OK != c.ok {
			t.Errorf("%s: ok %v, want %v: %v", c.name, rep.OK, c.ok, rep.Problems)
		}
	}
	// Bloom items past their slack answering present: a few are false
	// positives; most of them are a filter that does not forget.
	for _, c := range []struct {
		present int
		ok      bool
	}{{3, true}, {60, false}} {
		ops := []op{tick(life + 100*ms)}
		for i := range 100 {
			it := fmt.Sprint("b", i)
			ops = append(ops, o(wbfAdd, bf, it, 0, ms, true), o(wbfExists, bf, it, life+200*ms, life+210*ms, i < c.present))
		}
		rep := &Report{OK: true}
		checkWindows(ops, start, rep)
		if rep.OK != c.ok {
			t.Errorf("%d of 100 retired items present: ok %v, want %v", c.present, rep.OK, c.ok)
		}
	}
}
