package filters

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
)

func mustNewRBCuckoo(t testing.TB, capacity uint64, bs, maxIter, exp uint16) *RBCuckoo {
	t.Helper()
	c, err := NewRBCuckoo(capacity, bs, maxIter, exp)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRBCuckooReference pins what RedisBloom 2.6.28, 8.0.8 and 8.8.0 answer
// after CF.RESERVE c 100; CF.ADD c x (their replies, recorded with redis-cli):
// a 64-bucket filter whose dump is this header and 128 bytes holding x's
// fingerprint 0x0f at offset 82.
func TestRBCuckooReference(t *testing.T) {
	c := mustNewRBCuckoo(t, 100, 2, 20, 1)
	if err := c.Add([]byte("x")); err != nil {
		t.Fatal(err)
	}
	wantHeader := "0100000000000000" + "4000000000000000" + "0000000000000000" + "0100000000000000" + "0200" + "1400" + "0100"
	next, h := c.DumpChunk(0)
	if next != 1 || hex.EncodeToString(h) != wantHeader {
		t.Fatalf("SCANDUMP 0 = %d, %x; want 1, %s", next, h, wantHeader)
	}
	next, body := c.DumpChunk(1)
	want := make([]byte, 128)
	want[82] = 0x0f
	if next != 129 || !bytes.Equal(body, want) {
		t.Fatalf("SCANDUMP 1 = %d, %x", next, body)
	}
	if next, body := c.DumpChunk(129); next != 0 || body != nil {
		t.Fatalf("SCANDUMP 129 = %d, %x; want 0, nil", next, body)
	}
	if got := c.Debug(); got != "bktsize:2 buckets:64 items:1 deletes:0 filters:1 max_iterations:20 expansion:1" {
		t.Errorf("CF.DEBUG = %q", got)
	}
	c.Compact()
	if got := c.Debug(); got != "bktsize:2 buckets:64 items:1 deletes:0 filters:1 max_iterations:20 expansion:1" {
		t.Errorf("CF.DEBUG after CF.COMPACT = %q", got)
	}
}

// TestRBCuckooReserve checks CF.RESERVE's rounding and CF.INFO's Size.
func TestRBCuckooReserve(t *testing.T) {
	for _, v := range []struct {
		capacity       uint64
		bs, exp        uint16
		buckets, size  uint64
		wantExpansion  uint16
		wantBadParam   bool
		wantTooLargeGB bool
	}{
		{capacity: 1000, bs: 2, exp: 1, buckets: 512, size: 1080, wantExpansion: 1},
		{capacity: 1024, bs: 2, exp: 1, buckets: 512, size: 1080, wantExpansion: 1},
		{capacity: 1025, bs: 2, exp: 1, buckets: 512, size: 1080, wantExpansion: 1},
		{capacity: 1026, bs: 2, exp: 1, buckets: 1024, size: 2104, wantExpansion: 1},
		{capacity: 4, bs: 2, exp: 0, buckets: 2, size: 60, wantExpansion: 0},
		{capacity: 1000, bs: 4, exp: 3, buckets: 256, size: 1080, wantExpansion: 4},
		{capacity: 1000, bs: 3, exp: 32768, buckets: 512, size: 56 + 1536, wantExpansion: 32768},
		{capacity: 510, bs: 255, exp: 5, buckets: 2, size: 56 + 510, wantExpansion: 8},
		{capacity: 1 << 30, bs: 1, exp: 2, buckets: 1 << 30, size: 56 + 1<<30, wantExpansion: 2},
		{capacity: 3, bs: 2, wantBadParam: true},
		{capacity: 100, bs: 0, wantBadParam: true},
		{capacity: 1000, bs: 256, wantBadParam: true},
		{capacity: 1000, bs: 2, exp: 32769, wantBadParam: true},
		{capacity: 1 << 40, bs: 1, wantTooLargeGB: true},
		{capacity: ^uint64(0), bs: 1, wantTooLargeGB: true},
	} {
		name := fmt.Sprintf("%d/%d/%d", v.capacity, v.bs, v.exp)
		mb, err := RBCuckooBytes(v.capacity, v.bs, 20, v.exp)
		if v.wantBadParam || v.wantTooLargeGB {
			var se *SizeError
			if !errors.Is(err, ErrBadParam) || errors.As(err, &se) != v.wantTooLargeGB {
				t.Errorf("%s: RBCuckooBytes error %v", name, err)
			}
			if _, err2 := NewRBCuckoo(v.capacity, v.bs, 20, v.exp); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("%s: NewRBCuckoo error %v, RBCuckooBytes %v", name, err2, err)
			}
			continue
		}
		if v.capacity >= 1<<30 {
			if mb < 1<<30 || mb > 1<<30+1<<30/100 {
				t.Errorf("%s: RBCuckooBytes = %d", name, mb)
			}
			continue // not allocated here
		}
		c := mustNewRBCuckoo(t, v.capacity, v.bs, 20, v.exp)
		if c.Buckets() != v.buckets || c.RedisBloomSize() != v.size || c.Expansion() != v.wantExpansion ||
			c.Filters() != 1 || c.Items() != 0 || mb != c.MemoryBytes() {
			t.Errorf("%s: buckets %d size %d expansion %d filters %d; bytes %d/%d", name, c.Buckets(),
				c.RedisBloomSize(), c.Expansion(), c.Filters(), mb, c.MemoryBytes())
		}
	}
	if _, err := NewRBCuckoo(100, 2, 0, 1); !errors.Is(err, ErrBadParam) {
		t.Errorf("max iterations 0: %v", err)
	}
}

func TestRBCNextPow2(t *testing.T) {
	for n, want := range map[uint64]uint64{0: 0, 1: 1, 2: 2, 3: 4, 500: 512, 512: 512, 513: 1024,
		1<<63 - 1: 1 << 63, 1 << 63: 1 << 63, 1<<63 + 1: 0, ^uint64(0): 0} {
		if got := rbcNextPow2(n); got != want {
			t.Errorf("rbcNextPow2(%d) = %d, want %d", n, got, want)
		}
	}
}

// TestRBCuckooIndexTruncation checks RedisBloom's 32-bit bucket offsets: in a
// sub-filter of more than 4 GiB, lookups wrap to the low 4 GiB.
func TestRBCuckooIndexTruncation(t *testing.T) {
	s := rbcSub{nb: 1 << 30, size: 5 << 30} // 5 GiB of 5-slot buckets, not allocated
	for _, v := range []struct{ h, want uint64 }{
		{0, 0},
		{1, 5},
		{1<<30 + 7, 35},                   // h mod nb
		{858993459, 4294967295 - 0},       // 858993459*5 = 4294967295, just below 2^32
		{858993460, 4294967300 - 1<<32},   // 4294967300 wraps to 4
		{1<<30 - 1, (1<<30-1)*5 - 1<<32},  // the last bucket wraps too
		{^uint64(0), (1<<30-1)*5 - 1<<32}, // high bits of h are dropped first
		{1 << 62, 0},
	} {
		if got := s.index(v.h, 5); got != v.want {
			t.Errorf("index(%d) = %d, want %d", v.h, got, v.want)
		}
		if got := s.index(v.h, 5); got+5 > s.size {
			t.Errorf("index(%d) = %d leaves no bucket", v.h, got)
		}
	}
}

// TestRBCSubSearch checks the word-at-a-time bucket search against a loop over
// bytes, for every bucket size up to 20 and buckets at every alignment.
func TestRBCSubSearch(t *testing.T) {
	for bs := uint64(1); bs <= 20; bs++ {
		nb := uint64(16)
		s := newRBCSub(nb, bs)
		raw := make([]byte, nb*bs)
		for i := range raw {
			raw[i] = byte([]int{0, 7, 7, 0x80, 0xff, 1, 0, 7}[(i*5+int(bs))%8])
		}
		s.write(0, raw)
		if got := s.read(0, s.size); !bytes.Equal(got, raw) {
			t.Fatalf("bs %d: read back %x, wrote %x", bs, got, raw)
		}
		for b := uint64(0); b < nb; b++ {
			for _, v := range []uint64{0, 7, 0x80, 0xff, 1, 2} {
				wantAt, wantN := -1, uint64(0)
				for i := b * bs; i < (b+1)*bs; i++ {
					if uint64(raw[i]) == v {
						wantN++
						if wantAt < 0 {
							wantAt = int(i)
						}
					}
				}
				at, ok := s.find(b*bs, bs, v)
				if ok != (wantAt >= 0) || ok && int(at) != wantAt || s.count(b*bs, bs, v) != wantN {
					t.Fatalf("bs %d bucket %d value %d: find %d %v count %d; want %d, %d", bs, b, v, at, ok,
						s.count(b*bs, bs, v), wantAt, wantN)
				}
			}
		}
		// Writes at odd offsets leave their neighbours alone.
		s.write(3, []byte{9, 8, 7, 6, 5, 4, 3, 2, 1, 9, 8, 7}[:min(12, nb*bs-3)])
		copy(raw[3:], []byte{9, 8, 7, 6, 5, 4, 3, 2, 1, 9, 8, 7})
		if got := s.read(0, s.size); !bytes.Equal(got, raw) {
			t.Fatalf("bs %d: after an unaligned write, read %x, want %x", bs, got, raw)
		}
	}
}

// TestRBCuckooKickRollback fills a filter that cannot grow until an insert
// fails, and checks the failed insert left every byte as it was.
func TestRBCuckooKickRollback(t *testing.T) {
	for _, bs := range []uint16{1, 2, 3, 4} {
		c := mustNewRBCuckoo(t, 64, bs, 30, 0)
		fails := 0
		for i := 0; fails < 20 && i < 10000; i++ {
			before := rbcBytes(c)
			items := c.Items()
			err := c.Add(fmt.Appendf(nil, "rb-%d", i))
			if err == nil {
				continue
			}
			if !errors.Is(err, ErrFull) || errors.Is(err, ErrRBCuckooGrow) {
				t.Fatalf("bs %d: Add = %v, want ErrFull", bs, err)
			}
			fails++
			if c.Items() != items || !bytes.Equal(bytes.Join(before, nil), bytes.Join(rbcBytes(c), nil)) {
				t.Fatalf("bs %d: a failed insert changed the filter", bs)
			}
		}
		if fails < 20 {
			t.Fatalf("bs %d: only %d failed inserts", bs, fails)
		}
		if c.NextGrowthBytes() != 0 {
			t.Errorf("bs %d: NextGrowthBytes = %d with expansion 0", bs, c.NextGrowthBytes())
		}
	}
}

// TestRBCuckooGrowthLimit grows a filter of tiny sub-filters to
// RBCuckooMaxFilters and checks that the next growth fails as RedisBloom's
// failed allocation does, that CheckExpansions refuses from 32 sub-filters on,
// and that NextGrowthBytes predicts every growth.
func TestRBCuckooGrowthLimit(t *testing.T) {
	c := mustNewRBCuckoo(t, 4, 2, 5, 1)
	var growErr error
	for i := 0; growErr == nil; i++ {
		if c.Filters() < RBCuckooMaxExpansions {
			if err := c.CheckExpansions(RBCuckooMaxExpansions); err != nil {
				t.Fatalf("%d sub-filters: %v", c.Filters(), err)
			}
		} else if err := c.CheckExpansions(RBCuckooMaxExpansions); !errors.Is(err, ErrRBCuckooMaxExpansions) {
			t.Fatalf("%d sub-filters: CheckExpansions = %v", c.Filters(), err)
		}
		before, n, next := c.MemoryBytes(), c.Filters(), c.NextGrowthBytes()
		err := c.Add(fmt.Appendf(nil, "g-%d", i))
		if err != nil {
			growErr = err
			break
		}
		if c.Filters() != n && c.MemoryBytes()-before != next {
			t.Fatalf("growing to %d took %d bytes, NextGrowthBytes said %d", c.Filters(), c.MemoryBytes()-before, next)
		}
	}
	if !errors.Is(growErr, ErrRBCuckooGrow) || !errors.Is(growErr, ErrFull) || c.Filters() != RBCuckooMaxFilters {
		t.Fatalf("Add = %v at %d sub-filters", growErr, c.Filters())
	}
	if c.NextGrowthBytes() != 0 {
		t.Errorf("NextGrowthBytes = %d at the limit", c.NextGrowthBytes())
	}
	if got := c.RedisBloomSize(); got != uint64(40+16*RBCuckooMaxFilters+4*RBCuckooMaxFilters) {
		t.Errorf("RedisBloomSize = %d", got)
	}
}

// TestRBCuckooExpansionSizes checks sub-filter i has Buckets()*Expansion()^i
// buckets.
func TestRBCuckooExpansionSizes(t *testing.T) {
	c := mustNewRBCuckoo(t, 16, 2, 5, 4)
	for i := 0; c.Filters() < 5; i++ {
		if err := c.Add(fmt.Appendf(nil, "e-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range c.subs {
		if want := uint64(8) << (2 * i); c.subs[i].nb != want || c.subs[i].size != 2*want {
			t.Errorf("sub-filter %d: %d buckets, %d bytes; want %d buckets", i, c.subs[i].nb, c.subs[i].size, want)
		}
	}
}

// TestRBCuckooDeleteSaturates loads a header that claims no items over slots
// that hold some: deletes find them, and Items stays at 0 where RedisBloom's
// counter wraps.
func TestRBCuckooDeleteSaturates(t *testing.T) {
	src := mustNewRBCuckoo(t, 100, 2, 20, 1)
	for i := range 10 {
		if err := src.Add(fmt.Appendf(nil, "s-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	h := src.DumpHeader()
	binary.LittleEndian.PutUint64(h, 0) // numItems
	c, err := NewRBCuckooFromHeader(h)
	if err != nil {
		t.Fatal(err)
	}
	next, chunk := src.DumpChunk(1)
	if err := c.LoadChunk(next, chunk); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if !c.Delete(fmt.Appendf(nil, "s-%d", i)) {
			t.Fatalf("s-%d not found", i)
		}
		if c.Items() != 0 || c.Deleted() != uint64(i+1) {
			t.Fatalf("after %d deletes: items %d deleted %d", i+1, c.Items(), c.Deleted())
		}
	}
	if next, chunk := c.DumpChunk(0); next != 0 || chunk != nil {
		t.Errorf("SCANDUMP 0 of a filter with no items = %d, %x", next, chunk)
	}
}

// TestRBCuckooCountsCopies checks that Count counts copies, and a bucket that
// is both of an item's buckets twice, as RedisBloom does.
func TestRBCuckooCountsCopies(t *testing.T) {
	c := mustNewRBCuckoo(t, 1000, 4, 20, 1)
	for n := range 5 {
		for i := range 50 {
			item := fmt.Appendf(nil, "copy-%d", i)
			if got := c.Count(item); got < uint64(n) {
				t.Fatalf("%s: Count %d after %d adds", item, got, n)
			}
			if err := c.Add(item); err != nil {
				t.Fatal(err)
			}
		}
	}
	// With two buckets, an item with an even fingerprint has its two buckets
	// the same (the multiplier is odd).
	two := mustNewRBCuckoo(t, 16, 8, 20, 0)
	item := []byte("same-0")
	for i := 1; (murmurHash64A(item, 0)%255+1)%2 != 0; i++ {
		item = fmt.Appendf(nil, "same-%d", i)
	}
	for range 3 {
		if err := two.Add(item); err != nil {
			t.Fatal(err)
		}
	}
	if got := two.Count(item); got != 6 {
		t.Errorf("Count = %d, want 6 (its bucket counted twice)", got)
	}
	fp := murmurHash64A(item, 0)%255 + 1
	if got := two.subs[0].count(0, 8, fp) + two.subs[0].count(8, 8, fp); got != 3 {
		t.Errorf("the filter holds %d copies, want 3", got)
	}
}

// TestRBCuckooDumpCursors pins CF.SCANDUMP's cursor rules (RedisBloom answers
// the same: TestRBCuckooRedisBloom compares every cursor).
func TestRBCuckooDumpCursors(t *testing.T) {
	c := rbcGrownTB(t)
	subs := rbcBytes(c)
	for _, v := range []struct {
		pos, next int64
		want      []byte
	}{
		{-1, 0, nil},
		{1, 65, subs[0]},
		{2, 66, subs[0]},       // inside a small sub-filter: all of it, from its start
		{64, 128, subs[0]},     // its last byte: the same
		{65, 193, subs[1]},     // the next one
		{100, 228, subs[1]},    // and the quirk again
		{193, 449, subs[2]},    // the last one
		{448, 704, subs[2]},    // its last byte
		{449, 0, nil},          // past the end
		{1 << 62, 0, nil},      // far past it
		{0, 1, c.DumpHeader()}, // the header
	} {
		next, chunk := c.DumpChunk(v.pos)
		if next != v.next || !bytes.Equal(chunk, v.want) || (chunk == nil) != (v.want == nil) {
			t.Errorf("DumpChunk(%d) = %d, %d bytes; want %d, %d bytes", v.pos, next, len(chunk), v.next, len(v.want))
		}
	}
	// A filter with no items answers (0, nil) at every cursor, header included.
	empty := mustNewRBCuckoo(t, 64, 2, 20, 2)
	for _, pos := range []int64{0, 1, 2, 1000} {
		if next, chunk := empty.DumpChunk(pos); next != 0 || chunk != nil {
			t.Errorf("empty filter: DumpChunk(%d) = %d, %x", pos, next, chunk)
		}
	}
}

// TestRBCuckooLoadChunkRules pins CF.LOADCHUNK's placement rules, quirks
// included, on a loaded filter of three sub-filters of 64, 128 and 256 bytes.
func TestRBCuckooLoadChunkRules(t *testing.T) {
	src := rbcGrownTB(t)
	fill := func(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }
	for _, v := range []struct {
		name string
		pos  int64
		data []byte
		ok   bool
		sub  int // where it lands
		at   uint64
	}{
		{"a whole sub-filter", 65, fill(64, 1), true, 0, 0},
		{"a piece inside one", 11, fill(5, 2), true, 0, 5},
		{"the second sub-filter", 193, fill(128, 3), true, 1, 0},
		{"the end of the last", 449, fill(6, 4), true, 2, 250},
		{"across two sub-filters", 70, fill(10, 5), false, 0, 0},
		{"past the last one's end", 450, fill(6, 6), false, 0, 0},
		{"past the end, wrapped into the last", 448 + 1 + 30 + 4, fill(4, 7), true, 2, 30},
		{"far past the end", 1 << 40, fill(4, 8), false, 0, 0},
		{"empty data", 10, nil, false, 0, 0},
		{"pos 0", 0, fill(1, 9), false, 0, 0},
		{"negative pos", -5, fill(1, 9), false, 0, 0},
		{"pos before the data's start", 3, fill(3, 9), false, 0, 0},
		{"pos 1 (the header's)", 1, fill(1, 9), false, 0, 0},
	} {
		c, err := NewRBCuckooFromHeader(src.DumpHeader())
		if err != nil {
			t.Fatal(err)
		}
		err = c.LoadChunk(v.pos, v.data)
		if (err == nil) != v.ok || err != nil && !errors.Is(err, ErrRBCuckooChunk) {
			t.Errorf("%s: LoadChunk(%d, %d bytes) = %v", v.name, v.pos, len(v.data), err)
			continue
		}
		want := make([][]byte, 3)
		for i := range want {
			want[i] = make([]byte, 64<<i)
		}
		if v.ok {
			copy(want[v.sub][v.at:], v.data)
		}
		if got := rbcBytes(c); !bytes.Equal(bytes.Join(got, nil), bytes.Join(want, nil)) {
			t.Errorf("%s: the filter holds the wrong bytes", v.name)
		}
		if c.Items() != src.Items() || c.Deleted() != src.Deleted() {
			t.Errorf("%s: a chunk changed the counters", v.name)
		}
	}
}

// TestRBCuckooHeaders checks the header bounds, RedisBloom's and ours.
func TestRBCuckooHeaders(t *testing.T) {
	header := func(items, nb, deletes, filters uint64, bs, iter, exp uint16) []byte {
		h := binary.LittleEndian.AppendUint64(nil, items)
		h = binary.LittleEndian.AppendUint64(h, nb)
		h = binary.LittleEndian.AppendUint64(h, deletes)
		h = binary.LittleEndian.AppendUint64(h, filters)
		h = binary.LittleEndian.AppendUint16(h, bs)
		h = binary.LittleEndian.AppendUint16(h, iter)
		return binary.LittleEndian.AppendUint16(h, exp)
	}
	for _, v := range []struct {
		name string
		h    []byte
		want error
	}{
		{"defaults", header(0, 512, 0, 1, 2, 20, 1), nil},
		{"extremes", header(255*7, 1, 1<<63-1, 3, 255, 65535, 2), nil},
		{"2^63 deletes", header(0, 512, 1<<63, 1, 2, 20, 1), ErrRBCuckooCreate},
		{"items fill every slot", header(128, 64, 0, 1, 2, 20, 0), nil},
		{"64 sub-filters", header(0, 1, 0, RBCuckooMaxFilters, 1, 1, 1), nil},
		{"37 bytes", header(0, 512, 0, 1, 2, 20, 1)[:37], ErrRBCuckooHeader},
		{"39 bytes", append(header(0, 512, 0, 1, 2, 20, 1), 0), ErrRBCuckooHeader},
		{"no bytes", nil, ErrRBCuckooHeader},
		{"bucket size 0", header(0, 512, 0, 1, 0, 20, 1), ErrRBCuckooCreate},
		{"bucket size 256", header(0, 512, 0, 1, 256, 20, 1), ErrRBCuckooCreate},
		{"max iterations 0", header(0, 512, 0, 1, 2, 0, 1), ErrRBCuckooCreate},
		{"expansion 32769", header(0, 512, 0, 1, 2, 20, 32769), ErrRBCuckooCreate},
		{"expansion 3", header(0, 512, 0, 1, 2, 20, 3), ErrRBCuckooCreate},
		{"no sub-filters", header(0, 512, 0, 0, 2, 20, 1), ErrRBCuckooCreate},
		{"65 sub-filters", header(0, 1, 0, RBCuckooMaxFilters+1, 1, 1, 1), ErrRBCuckooCreate},
		{"2^16+1 sub-filters", header(0, 1, 0, 1<<16+1, 1, 1, 1), ErrRBCuckooCreate},
		{"growth with expansion 0", header(0, 512, 0, 2, 2, 20, 0), ErrRBCuckooCreate},
		{"0 buckets", header(0, 0, 0, 1, 2, 20, 1), ErrRBCuckooCreate},
		{"48 buckets", header(0, 48, 0, 1, 2, 20, 1), ErrRBCuckooCreate},
		{"2^56 buckets", header(0, 1<<56, 0, 1, 1, 20, 1), ErrRBCuckooCreate},
		{"96 GiB", header(0, 1<<35, 0, 1, 3, 20, 1), ErrRBCuckooCreate},
		{"grows past 64 GiB", header(0, 1<<20, 0, 3, 4, 20, 32768), ErrRBCuckooCreate},
		{"shift past 64 bits", header(0, 1, 0, 6, 1, 20, 32768), ErrRBCuckooCreate},
		{"more items than slots", header(129, 64, 0, 1, 2, 20, 0), ErrRBCuckooCreate},
	} {
		mb, perr := ParseRBCuckooHeader(v.h)
		c, err := NewRBCuckooFromHeader(v.h)
		if !errors.Is(err, v.want) || (err == nil) != (v.want == nil) || !errors.Is(perr, v.want) || (perr == nil) != (err == nil) {
			t.Errorf("%s: NewRBCuckooFromHeader = %v, ParseRBCuckooHeader = %v; want %v", v.name, err, perr, v.want)
			continue
		}
		if err != nil {
			continue
		}
		if mb != c.MemoryBytes() || !bytes.Equal(c.DumpHeader(), v.h) && c.Items() > 0 {
			t.Errorf("%s: ParseRBCuckooHeader says %d bytes, the filter takes %d; header %x", v.name, mb, c.MemoryBytes(), c.DumpHeader())
		}
	}
}
