package filters

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// rbcModel is RedisBloom's cuckoo filter written as plainly as it can be: one
// byte slice per sub-filter, a loop per bucket, every index taken modulo the
// bucket count. RBCuckoo packs the same bytes into paged words and searches
// them with SWAR; the tests here run both side by side and compare every answer
// and every byte.
type rbcModel struct {
	nb, bs, maxIter, expansion uint64
	items, deletes             uint64
	subs                       [][]byte // oldest first
}

func newRBCModel(capacity, bs, maxIter, expansion uint64) *rbcModel {
	pow2 := func(n uint64) uint64 {
		p := uint64(1)
		for p < n {
			p *= 2
		}
		if n == 0 {
			return 0
		}
		return p
	}
	m := &rbcModel{nb: max(pow2(capacity/bs), 1), bs: bs, maxIter: maxIter, expansion: pow2(expansion)}
	m.grow()
	return m
}

func (m *rbcModel) grow() {
	n := m.nb
	for range m.subs {
		n *= m.expansion
	}
	m.subs = append(m.subs, make([]byte, n*m.bs))
}

func (m *rbcModel) buckets(i int) uint64 { return uint64(len(m.subs[i])) / m.bs }

// index is (h mod buckets) * bs, truncated to 32 bits.
func (m *rbcModel) index(i int, h uint64) uint64 { return uint64(uint32(h % m.buckets(i) * m.bs)) }

func rbcModelKey(item []byte) (h1, h2, fp uint64) {
	h := murmurHash64A(item, 0)
	fp = h%255 + 1
	return h, h ^ fp*0x5bd1e995, fp
}

// slot returns the first slot of the bucket at off holding v, or -1.
func (m *rbcModel) slot(sub []byte, off uint64, v byte) int64 {
	for s := uint64(0); s < m.bs; s++ {
		if sub[off+s] == v {
			return int64(off + s)
		}
	}
	return -1
}

func (m *rbcModel) test(item []byte) bool {
	h1, h2, fp := rbcModelKey(item)
	for i, sub := range m.subs {
		if m.slot(sub, m.index(i, h1), byte(fp)) >= 0 || m.slot(sub, m.index(i, h2), byte(fp)) >= 0 {
			return true
		}
	}
	return false
}

func (m *rbcModel) count(item []byte) uint64 {
	h1, h2, fp := rbcModelKey(item)
	n := uint64(0)
	for i, sub := range m.subs {
		for _, off := range []uint64{m.index(i, h1), m.index(i, h2)} {
			for s := uint64(0); s < m.bs; s++ {
				if sub[off+s] == byte(fp) {
					n++
				}
			}
		}
	}
	return n
}

// add returns "1", "full" or "nomem", as CuckooFilter_Insert's statuses.
func (m *rbcModel) add(item []byte) string {
	h1, h2, fp := rbcModelKey(item)
	for {
		for i := len(m.subs) - 1; i >= 0; i-- {
			for _, off := range []uint64{m.index(i, h1), m.index(i, h2)} {
				if s := m.slot(m.subs[i], off, 0); s >= 0 {
					m.subs[i][s] = byte(fp)
					m.items++
					return "1"
				}
			}
		}
		if m.kick(h1, fp) {
			m.items++
			return "1"
		}
		if m.expansion == 0 {
			return "full"
		}
		if len(m.subs) >= RBCuckooMaxFilters {
			return "nomem"
		}
		m.grow()
	}
}

func (m *rbcModel) kick(h1, fp uint64) bool {
	sub := m.subs[len(m.subs)-1]
	nb := uint64(len(sub)) / m.bs
	victim, b := uint64(0), h1%nb
	for c := uint64(0); c < m.maxIter; c++ {
		old := uint64(sub[b*m.bs+victim])
		sub[b*m.bs+victim] = byte(fp)
		fp = old
		b = (b ^ fp*0x5bd1e995) % nb
		if s := m.slot(sub, b*m.bs, 0); s >= 0 {
			sub[s] = byte(fp)
			return true
		}
		victim = (victim + 1) % m.bs
	}
	for c := uint64(0); c < m.maxIter; c++ {
		victim = (victim + m.bs - 1) % m.bs
		b = (b ^ fp*0x5bd1e995) % nb
		old := uint64(sub[b*m.bs+victim])
		sub[b*m.bs+victim] = byte(fp)
		fp = old
	}
	return false
}

func (m *rbcModel) addNX(item []byte) string {
	if m.test(item) {
		return "0"
	}
	return m.add(item)
}

func (m *rbcModel) del(item []byte) bool {
	h1, h2, fp := rbcModelKey(item)
	for i := len(m.subs) - 1; i >= 0; i-- {
		for _, off := range []uint64{m.index(i, h1), m.index(i, h2)} {
			if s := m.slot(m.subs[i], off, byte(fp)); s >= 0 {
				m.subs[i][s] = 0
				if m.items > 0 {
					m.items--
				}
				m.deletes++
				if len(m.subs) > 1 && float64(m.deletes) > float64(m.items)*0.10 {
					m.compact(false)
				}
				return true
			}
		}
	}
	return false
}

func (m *rbcModel) compact(cont bool) {
	for j := len(m.subs) - 1; j > 0; j-- {
		sub, ok := m.subs[j], true
		for b := uint64(0); b < uint64(len(sub))/m.bs; b++ {
			for s := uint64(0); s < m.bs; s++ {
				fp := uint64(sub[b*m.bs+s])
				if fp == 0 {
					continue
				}
				if !m.relocate(j, b, fp) {
					ok = false
					continue
				}
				sub[b*m.bs+s] = 0
			}
		}
		if ok && j == len(m.subs)-1 {
			m.subs = m.subs[:j]
		}
		if !ok && !cont {
			break
		}
	}
	m.deletes = 0
}

func (m *rbcModel) relocate(j int, b, fp uint64) bool {
	for i := 0; i < j; i++ {
		for _, off := range []uint64{m.index(i, b), m.index(i, b^fp*0x5bd1e995)} {
			if s := m.slot(m.subs[i], off, 0); s >= 0 {
				m.subs[i][s] = byte(fp)
				return true
			}
		}
	}
	return false
}

// rbcAddReply renders an RBCuckoo Add error as the model's status.
func rbcAddReply(err error) string {
	switch {
	case err == nil:
		return "1"
	case errors.Is(err, ErrRBCuckooGrow):
		return "nomem"
	case errors.Is(err, ErrFull):
		return "full"
	}
	return err.Error()
}

// rbcBytes returns the bytes of every sub-filter of c, oldest first, read
// through its dump.
func rbcBytes(c *RBCuckoo) [][]byte {
	out := make([][]byte, len(c.subs))
	for i := range c.subs {
		out[i] = c.subs[i].read(0, c.subs[i].size)
	}
	return out
}

// rbcSameAsModel reports how c differs from m, or "".
func rbcSameAsModel(c *RBCuckoo, m *rbcModel) string {
	if c.Items() != m.items || c.Deleted() != m.deletes || c.Filters() != len(m.subs) {
		return fmt.Sprintf("items %d/%d deletes %d/%d filters %d/%d", c.Items(), m.items, c.Deleted(), m.deletes, c.Filters(), len(m.subs))
	}
	for i, b := range rbcBytes(c) {
		if !bytes.Equal(b, m.subs[i]) {
			return fmt.Sprintf("sub-filter %d differs", i)
		}
	}
	return ""
}

// TestRBCuckooModel runs random adds, NX adds, deletes (of added items and of
// others), compactions and lookups on an RBCuckoo and on the model, comparing
// every answer and, every so often, every byte.
func TestRBCuckooModel(t *testing.T) {
	shapes := []struct{ capacity, bs, maxIter, exp uint64 }{
		{100, 2, 20, 1}, {64, 1, 5, 2}, {200, 4, 50, 4}, {48, 3, 7, 1}, {300, 8, 20, 2},
		{40, 5, 3, 0}, {255 * 4, 255, 10, 1}, {96, 6, 1, 2}, {22, 11, 30, 1}, {1000, 2, 500, 0},
	}
	for si, sh := range shapes {
		t.Run(fmt.Sprintf("c%d-b%d-i%d-x%d", sh.capacity, sh.bs, sh.maxIter, sh.exp), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(si), 77))
			c, err := NewRBCuckoo(sh.capacity, uint16(sh.bs), uint16(sh.maxIter), uint16(sh.exp))
			if err != nil {
				t.Fatal(err)
			}
			m := newRBCModel(sh.capacity, sh.bs, sh.maxIter, sh.exp)
			universe := int(sh.capacity) * 3
			for op := range 6000 {
				item := fmt.Appendf(nil, "m-%d", r.IntN(universe))
				var got, want string
				switch k := r.IntN(20); {
				case k < 9:
					got, want = rbcAddReply(c.Add(item)), m.add(item)
				case k < 11:
					ok, err := c.AddNX(item)
					got, want = rbcAddReply(err), m.addNX(item)
					if err == nil && !ok {
						got = "0"
					}
				case k < 17:
					got, want = fmt.Sprint(c.Delete(item)), fmt.Sprint(m.del(item))
				case k < 18:
					c.Compact()
					m.compact(true)
				default:
					got = fmt.Sprint(c.Test(item), c.Count(item))
					want = fmt.Sprint(m.test(item), m.count(item))
				}
				if got != want {
					t.Fatalf("op %d on %q: got %s, model %s", op, item, got, want)
				}
				if op%97 == 0 {
					if d := rbcSameAsModel(c, m); d != "" {
						t.Fatalf("op %d: %s", op, d)
					}
				}
			}
			if d := rbcSameAsModel(c, m); d != "" {
				t.Fatal(d)
			}
			t.Logf("%d sub-filters, %d items", c.Filters(), c.Items())
		})
	}
}

// TestRBCuckooProperties holds RBCuckoo to what users rely on, against a
// multiset of what was added and deleted: no false negatives, Count at least
// the copies held, Items the fingerprints stored, whatever growth, evictions
// and compactions happened, as long as only added items are deleted.
func TestRBCuckooProperties(t *testing.T) {
	for seed := range uint64(6) {
		r := rand.New(rand.NewPCG(seed, 99))
		bs := uint16(1 + r.IntN(6))
		c := mustNewRBCuckoo(t, uint64(2*bs)+uint64(r.IntN(300)), bs, uint16(1+r.IntN(40)), uint16(r.IntN(5)))
		held := map[string]uint64{}
		var keys []string // insertion order, for determinism
		for op := range 4000 {
			switch k := r.IntN(10); {
			case k < 6 || len(keys) == 0:
				item := fmt.Sprintf("p-%d", r.IntN(2000))
				if c.Add([]byte(item)) == nil {
					if _, seen := held[item]; !seen {
						keys = append(keys, item)
					}
					held[item]++
				}
			case k < 9:
				item := keys[r.IntN(len(keys))]
				if held[item] == 0 {
					continue
				}
				if !c.Delete([]byte(item)) {
					t.Fatalf("seed %d op %d: %s held %d times, not found", seed, op, item, held[item])
				}
				held[item]--
			default:
				c.Compact()
			}
		}
		total := uint64(0)
		for _, item := range keys {
			m := held[item]
			total += m
			if m > 0 && (!c.Test([]byte(item)) || c.Count([]byte(item)) < m) {
				t.Fatalf("seed %d: %s held %d times: Test %v Count %d", seed, item, m, c.Test([]byte(item)), c.Count([]byte(item)))
			}
		}
		stored := uint64(0)
		for _, b := range rbcBytes(c) {
			stored += uint64(len(b) - bytes.Count(b, []byte{0}))
		}
		if c.Items() != total || stored != total {
			t.Fatalf("seed %d: Items %d, %d fingerprints stored, %d held", seed, c.Items(), stored, total)
		}
		t.Logf("seed %d: %s", seed, c.Debug())
	}
}

// TestRBCuckooDeterministic applies the same operations to two filters, one
// of them forked, encoded and decoded along the way: their encodings and dumps
// are the same bytes.
func TestRBCuckooDeterministic(t *testing.T) {
	a := mustNewRBCuckoo(t, 100, 2, 20, 2)
	b := mustNewRBCuckoo(t, 100, 2, 20, 2)
	r := rand.New(rand.NewPCG(3, 4))
	for op := range 5000 {
		item := fmt.Appendf(nil, "det-%d", r.IntN(800))
		k := r.IntN(10)
		for _, c := range []*RBCuckoo{a, b} {
			switch {
			case k < 6:
				c.Add(item)
			case k < 9:
				c.Delete(item)
			default:
				c.Compact()
			}
		}
		if op%1000 == 999 {
			var buf bytes.Buffer
			if _, err := b.Fork().WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			g, err := Decode(&buf)
			if err != nil {
				t.Fatal(err)
			}
			b = g.(*RBCuckoo)
		}
	}
	if !bytes.Equal(ctEncode(t, a), ctEncode(t, b)) || !rbcSameDump(rbcDump(a), rbcDump(b)) {
		t.Fatal("the same operations gave different filters")
	}
}

// TestRBCuckooForkIsolation checks that deletes, compactions, growth and chunk
// loads on a fork leave the original as it was, and the other way round.
func TestRBCuckooForkIsolation(t *testing.T) {
	orig := mustNewRBCuckoo(t, 64, 2, 20, 1)
	for i := range 300 {
		orig.Add(fmt.Appendf(nil, "f-%d", i))
	}
	write := func(c *RBCuckoo, tag string) {
		for i := range 150 {
			c.Delete(fmt.Appendf(nil, "f-%d", i))
		}
		c.Compact()
		for i := range 200 {
			c.Add(fmt.Appendf(nil, "%s-%d", tag, i))
		}
		if err := c.LoadChunk(20, bytes.Repeat([]byte{0xAB}, 16)); err != nil {
			t.Fatal(err)
		}
	}
	before := ctEncode(t, orig)
	fork := orig.Fork()
	write(fork, "fork")
	if !bytes.Equal(ctEncode(t, orig), before) {
		t.Fatal("writes to a fork changed the original")
	}
	forked := ctEncode(t, fork)
	write(orig, "orig")
	if !bytes.Equal(ctEncode(t, fork), forked) {
		t.Fatal("writes to the original changed the fork")
	}
	clone := fork.Clone()
	write(fork, "again")
	write(clone, "again")
	if !bytes.Equal(ctEncode(t, fork), ctEncode(t, clone)) {
		t.Fatal("a fork written to differs from a clone given the same writes")
	}
}
