package filters

import (
	"math/rand/v2"
	"testing"
)

// ckShapes covers every access path of cuckooTable: aligned SWAR buckets (b*f
// of 8, 16, 32 and 64 bits), buckets of at most 64 bits that straddle words (all
// of f = 12, and b = 3, 5, 6, 7 with 8 bits), and buckets wider than 64 bits,
// searched slot by slot.
var ckShapes = []struct{ b, f uint64 }{
	{1, 8}, {2, 8}, {4, 8}, {8, 8}, {3, 8}, {5, 8}, {7, 8}, {9, 8}, {255, 8},
	{1, 12}, {2, 12}, {3, 12}, {4, 12}, {5, 12}, {6, 12}, {255, 12},
	{1, 16}, {2, 16}, {4, 16}, {3, 16}, {5, 16}, {255, 16},
}

// ckSlots returns every slot of t, read one lane at a time.
func ckSlots(t *cuckooTable) []uint64 {
	out := make([]uint64, 0, t.m*t.b)
	for p := uint64(0); p < t.m*t.w; p += t.f {
		out = append(out, t.laneAt(p))
	}
	return out
}

// ckCheckSearch checks the searches of bucket i of tb for v against the model's
// slots of that bucket.
func ckCheckSearch(t *testing.T, tb *cuckooTable, bucket []uint64, i, v uint64) {
	t.Helper()
	want := uint64(0)
	for _, x := range bucket {
		if x == v {
			want++
		}
	}
	if got := tb.countIn(i, v); got != want {
		t.Fatalf("b=%d f=%d: countIn(%d, %#x) = %d, want %d", tb.b, tb.f, i, v, got, want)
	}
	found := false
	if tb.wide {
		found = tb.wideFind(i, v)
	} else {
		x := tb.load(i)
		found = tb.hasLane2(x, x, v)
	}
	if found != (want > 0) {
		t.Fatalf("b=%d f=%d: bucket %d found %#x: %v, model holds %d", tb.b, tb.f, i, v, found, want)
	}
}

// TestCuckooTableBuckets checks the bucket operations of every access path
// against a plain slice of slots: each operation must change exactly the slot the
// slice model changes, and searches must agree with a scan of the model.
func TestCuckooTableBuckets(t *testing.T) {
	for _, sh := range ckShapes {
		r := rand.New(rand.NewPCG(sh.b, sh.f))
		m := uint64(7) // odd, so buckets start at every offset within a word
		if sh.b > 64 {
			m = 3
		}
		tb := newCuckooTable(m, 0, sh.b, sh.f)
		if tb.wide != (sh.b*sh.f > 64) {
			t.Fatalf("b=%d f=%d: wide %v", sh.b, sh.f, tb.wide)
		}
		model := make([]uint64, m*sh.b)
		// Few distinct values, so buckets hold duplicates and searches hit.
		vals := []uint64{1, 2, tb.fmask, tb.fmask - 1, 1 << (sh.f - 1), 0x55 & tb.fmask}
		for op := range 20000 {
			i := r.Uint64N(m)
			v := vals[r.IntN(len(vals))]
			bucket := model[i*sh.b : (i+1)*sh.b]
			ckCheckSearch(t, &tb, bucket, i, v)
			from, to := uint64(0), v // insert
			if r.IntN(2) == 0 {
				from, to = v, 0 // delete
			}
			ok := tb.replaceIn(i, from, to)
			modelOK := false
			for s, x := range bucket {
				if x == from {
					bucket[s] = to
					modelOK = true
					break
				}
			}
			if ok != modelOK {
				t.Fatalf("b=%d f=%d op %d: replaceIn(%d, %d, %d) = %v, want %v", sh.b, sh.f, op, i, from, to, ok, modelOK)
			}
			if op%97 == 0 || sh.b*sh.f > 64 {
				got := ckSlots(&tb)
				for s := range model {
					if got[s] != model[s] {
						t.Fatalf("b=%d f=%d op %d: slot %d = %#x, want %#x", sh.b, sh.f, op, s, got[s], model[s])
					}
				}
			}
		}
		// Bits past the last slot stay zero: the encoding holds nothing but slots.
		if tail := tb.m * tb.w; tail%64 != 0 && tb.words.at(tb.words.len()-1)>>(tail%64) != 0 {
			t.Fatalf("b=%d f=%d: bits past the last slot were written", sh.b, sh.f)
		}
	}
}

// TestCuckooAltIndex checks that altIndex is its own inverse for any bucket count,
// and that a newer sub-filter's pairs shrink onto an older one's: dropping the
// low bits of both buckets of a pair gives the pair the older sub-filter computes.
// Deleting newest first is safe only because of the second property.
func TestCuckooAltIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, m0 := range []uint64{1, 2, 3, 7, 64, 1000, 1 << 20, 1<<20 + 1, 999999937} {
		for _, shift := range []uint64{0, 1, 3, 15, 30} {
			big := cuckooTableShape(m0, shift, 2, 8)
			for range 2000 {
				fp := 1 + r.Uint64N(255)
				k := newCuckooKey(r.Uint64(), 0, fp, m0, 8)
				i1, i2 := big.indexes(&k)
				if i1 >= big.m || i2 >= big.m || big.altIndex(i2, k.fp) != i1 {
					t.Fatalf("m0=%d shift=%d: pair (%d, %d) of %d buckets is not an involution", m0, shift, i1, i2, big.m)
				}
				for older := uint64(0); older < shift; older += 1 + shift/3 {
					small := cuckooTableShape(m0, older, 2, 8)
					j1, j2 := small.indexes(&k)
					d := shift - older
					if i1>>d != j1 || i2>>d != j2 {
						t.Fatalf("m0=%d shift %d -> %d: pair (%d, %d) shrinks to (%d, %d), older pair is (%d, %d)",
							m0, shift, older, i1, i2, i1>>d, i2>>d, j1, j2)
					}
				}
			}
		}
	}
}

// TestCuckooKickUndo runs kickInsert on full tables with every access path and
// checks that a failed walk restores every word.
func TestCuckooKickUndo(t *testing.T) {
	for _, sh := range ckShapes {
		r := rand.New(rand.NewPCG(sh.b, 99))
		for _, m := range []uint64{1, 2, 5, 33} {
			tb := newCuckooTable(m, 0, sh.b, sh.f)
			for p := uint64(0); p < m*tb.w; p += tb.f {
				tb.setLaneAt(p, 1+r.Uint64N(tb.fmask))
			}
			before := tb.words.slice()
			for _, iters := range []int{1, 2, 7, 100} {
				fp := 1 + r.Uint64N(tb.fmask)
				k := newCuckooKey(r.Uint64(), r.Uint64(), fp, m, sh.f)
				if tb.kickInsert(&k, iters) {
					t.Fatalf("b=%d f=%d m=%d: kickInsert into a full table succeeded", sh.b, sh.f, m)
				}
				for i := range before {
					if tb.words.at(uint64(i)) != before[i] {
						t.Fatalf("b=%d f=%d m=%d iters=%d: word %d changed by a failed insert", sh.b, sh.f, m, iters, i)
					}
				}
			}
		}
	}
}
