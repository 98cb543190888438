package filters

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// The guarantees of windowed filters, checked under random insertion rates:
// idle stretches, steady rates and bursts of 100 times the capacity within one
// generation.
//
//   - No false negative: an item added (last) at most Window ago, or among
//     the last Last insertions, answers present.
//   - Retired after the slack: a filter answers every lookup exactly as a
//     filter that received only the adds of its live generations, so an item
//     older than Window+Slack answers present only as a false positive of the
//     items that are younger.

// wtAdd is one add: the item and its time (or insertion number).
type wtAdd struct {
	item []byte
	at   int64
}

// wtRegime picks how many items the next generation receives: none, a few, the
// capacity's share, or a burst of 100 times the capacity.
func wtRegime(rng *rand.Rand, capacity uint64) int {
	switch rng.IntN(8) {
	case 0:
		return 0
	case 1:
		return int(100 * capacity)
	case 2, 3:
		return rng.IntN(int(capacity/7) + 1)
	}
	return int(capacity / 7)
}

// wtItem draws an item: often one added before (an add refreshes it), else a
// new one.
func wtItem(rng *rand.Rand, adds []wtAdd, n int) []byte {
	if len(adds) > 0 && rng.IntN(4) == 0 {
		return adds[len(adds)-1-rng.IntN(min(len(adds), 5000))].item
	}
	return fmt.Appendf(nil, "wt-%d", n)
}

// TestWindowBloomTimeGuarantees runs a time-windowed Bloom filter through
// random regimes, checking both guarantees at random moments against a replay
// of the live generations' adds.
func TestWindowBloomTimeGuarantees(t *testing.T) {
	const capacity, window = 700, int64(7_000_000) // a generation is 1 ms
	cfg := WindowConfig{Capacity: capacity, ErrorRate: 0.01, Window: window}
	w := mustWindowBloom(t, cfg)
	rng := rand.New(rand.NewPCG(22, 1))
	now := int64(1_700_000_000_000_000_000) // a realistic Unix time in ns
	w.Advance(now)
	var adds []wtAdd
	last := map[string]int64{}
	n, checks := 0, 0
	for gen := 0; gen < 60; gen++ {
		start := now
		k := wtRegime(rng, capacity)
		for i := range k {
			now = start + int64(i)*1_000_000/int64(k+1)
			w.Advance(now)
			it := wtItem(rng, adds, n)
			n++
			w.Add(it)
			adds = append(adds, wtAdd{it, now})
			last[string(it)] = now
		}
		now = start + 1_000_000 + rng.Int64N(300_000)
		if rng.IntN(10) == 0 {
			now += 12 * 1_000_000 // idle for twelve generations
		}
		w.Advance(now)
		if rng.IntN(3) == 0 {
			wtCheckBloom(t, cfg, w, adds, last, now, func(a wtAdd) bool {
				return w.clock.genOf(a.at)+windowGens > w.clock.cur
			})
			checks++
		}
	}
	if checks < 10 {
		t.Fatalf("only %d checks", checks)
	}
}

// TestWindowBloomCountGuarantees does the same for a count window: the last n
// insertions answer present, and the filter answers as a replay of its live
// generations.
func TestWindowBloomCountGuarantees(t *testing.T) {
	const capacity, last = 1000, 1000
	cfg := WindowConfig{Capacity: capacity, ErrorRate: 0.01, Last: last}
	w := mustWindowBloom(t, cfg)
	rng := rand.New(rand.NewPCG(22, 2))
	var adds []wtAdd
	latest := map[string]int64{}
	n := 0
	for round := range 40 {
		k := wtRegime(rng, capacity)
		if k == 0 {
			k = 1
		}
		for range k {
			it := wtItem(rng, adds, n)
			n++
			w.Add(it)
			adds = append(adds, wtAdd{it, int64(len(adds))})
			latest[string(it)] = int64(len(adds) - 1)
		}
		// The live generations hold the insertions since the oldest began.
		first := int64(0)
		if w.clock.cur >= windowGens-1 {
			first = int64((w.clock.cur - (windowGens - 1)) * w.clock.period)
		}
		// Insertion number at is among the last n when len(adds)-at <= n.
		wtCheckBloom(t, cfg, w, adds, latest, int64(len(adds)), func(a wtAdd) bool { return a.at >= first })
		if round == 0 && first != 0 {
			t.Fatal("the first round filled more than the window")
		}
	}
}

// wtCheckBloom checks w at time now (for a count window, now-at <= window
// means among the last Last insertions): every item last added within the
// window answers present, and every item answers as in a filter that replayed
// only the adds liveAdd accepts.
func wtCheckBloom(t *testing.T, cfg WindowConfig, w *WindowBloom, adds []wtAdd, last map[string]int64, now int64, liveAdd func(wtAdd) bool) {
	t.Helper()
	window := cfg.Window
	if window == 0 {
		window = int64(cfg.Last)
	}
	replay := mustWindowBloom(t, cfg)
	for _, a := range adds {
		if liveAdd(a) {
			replay.Advance(a.at)
			replay.Add(a.item)
		}
	}
	replay.Advance(now)
	for item, at := range last {
		got := w.Test([]byte(item))
		if now-at <= window && !got {
			t.Fatalf("false negative: %q added %d before now, window %d", item, now-at, window)
		}
		if want := replay.Test([]byte(item)); got != want {
			t.Fatalf("%q (added %d before now) answers %v, a replay of the live generations %v", item, now-at, got, want)
		}
	}
	for i := range 2000 {
		item := fmt.Appendf(nil, "never-%d", i)
		if w.Test(item) != replay.Test(item) {
			t.Fatalf("%q answers %v, a replay of the live generations %v", item, w.Test(item), replay.Test(item))
		}
	}
	if w.Count() != replay.Count() {
		t.Fatalf("Count %d, the replay's %d", w.Count(), replay.Count())
	}
}

func mustWindowBloom(t testing.TB, cfg WindowConfig) *WindowBloom {
	t.Helper()
	w, err := NewWindowBloom(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func mustWindowCuckoo(t testing.TB, cfg WindowConfig) *WindowCuckoo {
	t.Helper()
	c, err := NewWindowCuckoo(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wcClass is the set of items a cuckoo lookup cannot tell apart: the same
// fingerprint and bucket pair.
type wcClass struct{ fp, lo, hi uint64 }

func wcClassOf(c *WindowCuckoo, item []byte) wcClass {
	k := c.key(Hash(item))
	return wcClass{k.fp, min(k.i1, k.i2), max(k.i1, k.i2)}
}

// wcModel is a windowed cuckoo filter as a multiset: the generations of the
// copies held in each class.
type wcModel map[wcClass][]uint64

func (m wcModel) live(cl wcClass, cur uint64) []uint64 {
	var out []uint64
	for _, g := range m[cl] {
		if g+windowGens > cur {
			out = append(out, g)
		}
	}
	m[cl] = out
	return out
}

// TestWindowCuckooGuarantees runs a windowed cuckoo filter through random
// regimes with deletes, and compares every answer with a model: EXISTS, COUNT,
// DEL and the item count are exact for the copies inside the window, up to
// items that share a fingerprint and a bucket pair, which no cuckoo filter
// tells apart (the model counts them together).
func TestWindowCuckooGuarantees(t *testing.T) {
	const capacity, window = 700, int64(7_000_000)
	// Few evictions: a burst tries to add 70,000 items to a full filter.
	cfg := WindowConfig{Capacity: capacity, Window: window, MaxIterations: 30}
	c := mustWindowCuckoo(t, cfg)
	rng := rand.New(rand.NewPCG(22, 3))
	now := int64(1_700_000_000_000_000_000)
	c.Advance(now)
	model := wcModel{}
	var universe [][]byte
	full, deletes := 0, 0
	for gen := 0; gen < 50; gen++ {
		start := now
		k := wtRegime(rng, capacity)
		for i := range k {
			now = start + int64(i)*1_000_000/int64(k+1)
			c.Advance(now)
			var item []byte
			if len(universe) > 0 && rng.IntN(3) == 0 {
				item = universe[rng.IntN(len(universe))]
			} else {
				item = fmt.Appendf(nil, "wc-%d", len(universe))
				universe = append(universe, item)
			}
			cl := wcClassOf(c, item)
			if rng.IntN(4) == 0 && len(model.live(cl, c.clock.cur)) > 0 {
				if !c.Delete(item) {
					t.Fatalf("delete of %q with live copies failed", item)
				}
				wcDeleteOldest(model, cl, c.clock.cur)
				deletes++
				continue
			}
			if err := c.Add(item); err != nil {
				full++
				continue
			}
			model[cl] = append(model[cl], c.clock.cur)
		}
		now = start + 1_000_000 + rng.Int64N(300_000)
		if rng.IntN(10) == 0 {
			now += int64(rng.IntN(20)) * 1_000_000
		}
		c.Advance(now)
		wcCheckModel(t, c, model, universe)
	}
	if full == 0 || deletes == 0 {
		t.Fatalf("%d adds refused as full, %d deletes: the regimes missed a case", full, deletes)
	}
}

func wcDeleteOldest(m wcModel, cl wcClass, cur uint64) {
	gens := m.live(cl, cur)
	at := 0
	for i, g := range gens {
		if g < gens[at] {
			at = i
		}
	}
	m[cl] = append(gens[:at:at], gens[at+1:]...)
}

// wcCheckModel compares every answer of c with the model.
func wcCheckModel(t *testing.T, c *WindowCuckoo, model wcModel, universe [][]byte) {
	t.Helper()
	total := uint64(0)
	for cl := range model {
		total += uint64(len(model.live(cl, c.clock.cur)))
	}
	if c.Items() != total {
		t.Fatalf("Items %d, the model holds %d live copies", c.Items(), total)
	}
	// The newest items and a sample of the others.
	sample := slices.Clone(universe[max(0, len(universe)-20_000):])
	for i := 0; i < len(universe); i += 1 + len(universe)/5000 {
		sample = append(sample, universe[i])
	}
	for _, item := range sample {
		want := uint64(len(model.live(wcClassOf(c, item), c.clock.cur)))
		if got := c.Count(item); got != want {
			t.Fatalf("Count(%q) = %d, the model %d", item, got, want)
		}
		if c.Test(item) != (want > 0) {
			t.Fatalf("Test(%q) = %v with %d live copies", item, c.Test(item), want)
		}
	}
	if err := ltOracle(c); err != nil {
		t.Fatal(err)
	}
}

// TestWindowFalsePositives: a full window at capacity, at the worst moment
// (the current generation full too), stays within the target rate: the
// measured rate of 300,000 absent items is at most 1.1 times it (three
// standard deviations at 1% are 5% of it).
func TestWindowFalsePositives(t *testing.T) {
	for _, p := range []float64{0.01, 0.001} {
		const capacity = 70_000
		cfg := WindowConfig{Capacity: capacity, ErrorRate: p, Window: 7_000_000}
		w := mustWindowBloom(t, cfg)
		now := int64(1_700_000_000_000_000_000)
		// Nine generations of a seventh of the capacity each, the last one
		// ending at the moment of the lookups.
		for g := range 9 {
			for i := range capacity / 7 {
				w.Advance(now + int64(g)*1_000_000 + int64(i))
				w.Add(fmt.Appendf(nil, "fp-%d-%d", g, i))
			}
		}
		fp := 0
		const absent = 300_000
		for i := range absent {
			if w.Test(fmt.Appendf(nil, "absent-%d", i)) {
				fp++
			}
		}
		rate := float64(fp) / absent
		t.Logf("p=%v: measured %.5f, estimated %.5f, %.2f bits per item", p, rate, w.EstimatedFPP(),
			float64(w.Superblocks()*wbSuperWords*64)/capacity)
		if rate > 1.1*p {
			t.Errorf("p=%v: measured false-positive rate %.5f", p, rate)
		}
	}
}
