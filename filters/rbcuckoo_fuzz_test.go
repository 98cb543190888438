package filters

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

// rbcFuzzMaxBytes bounds the filters the fuzz targets build: a header may
// describe 64 GiB, which ParseRBCuckooHeader reports without allocating.
const rbcFuzzMaxBytes = 1 << 20

// rbcSeedHeaders returns the dump headers of a few filters, and hostile ones.
func rbcSeedHeaders(t testing.TB) [][]byte {
	var hs [][]byte
	for _, c := range []*RBCuckoo{mustNewRBCuckoo(t, 100, 2, 20, 1), rbcGrownTB(t), mustNewRBCuckoo(t, 510, 255, 3, 0)} {
		c.Add([]byte("seed"))
		hs = append(hs, c.DumpHeader())
	}
	h := hs[0]
	for _, mut := range []struct {
		off int
		v   uint64
		n   int
	}{{0, ^uint64(0), 8}, {8, 1 << 56, 8}, {16, 1<<63 - 1, 8}, {24, 65, 8}, {24, 1<<16 + 1, 8}, {32, 0, 2}, {34, 0, 2}, {36, 3, 2}} {
		b := bytes.Clone(h)
		if mut.n == 8 {
			binary.LittleEndian.PutUint64(b[mut.off:], mut.v)
		} else {
			binary.LittleEndian.PutUint16(b[mut.off:], uint16(mut.v))
		}
		hs = append(hs, b)
	}
	return hs
}

// rbcGrownTB returns a filter of expansion 2 grown to three sub-filters of
// 64, 128 and 256 bytes.
func rbcGrownTB(t testing.TB) *RBCuckoo {
	c := mustNewRBCuckoo(t, 64, 2, 20, 2)
	for i := 0; c.Filters() < 3; i++ {
		if err := c.Add(fmt.Appendf(nil, "grown-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// rbcExercise runs every method of c, checking that none panics, that its
// counters move only as the operations say (no wrap), that its dump loads back
// into the same filter and that its encoding decodes to the same encoding.
func rbcExercise(t *testing.T, c *RBCuckoo, ops []byte) {
	items, deleted := c.Items(), c.Deleted()
	adds, dels := uint64(0), uint64(0)
	for i, op := range ops {
		item := []byte{op, byte(i)}
		switch op % 7 {
		case 0, 1:
			if c.Add(item) == nil {
				adds++
			}
		case 2:
			if ok, err := c.AddNX(item); ok && err == nil {
				adds++
			}
		case 3, 4:
			if c.Delete(item) {
				dels++
			}
		case 5:
			c.Compact()
		default:
			if c.Count(item) > 0 != c.Test(item) {
				t.Fatalf("Count and Test disagree on %x", item)
			}
		}
	}
	if c.Items() > items+adds || c.Items()+dels < items || c.Deleted() > deleted+dels {
		t.Fatalf("items %d -> %d after %d adds and %d deletes; deleted %d -> %d",
			items, c.Items(), adds, dels, deleted, c.Deleted())
	}
	_ = c.Debug()
	if c.RedisBloomSize() > c.MemoryBytes() || c.Filters() < 1 || c.Filters() > RBCuckooMaxFilters {
		t.Fatalf("RedisBloomSize %d, MemoryBytes %d, %d sub-filters", c.RedisBloomSize(), c.MemoryBytes(), c.Filters())
	}
	if dump := rbcDump(c); len(dump) > 0 {
		d, err := rbcLoad(dump)
		switch {
		case err != nil && errors.Is(err, ErrRBCuckooCreate) && c.Items() > c.shape().slots():
			// Adds into slots a lying header left empty took Items past the
			// slots; a header saying so is refused (RedisBloom takes it).
		case err != nil:
			t.Fatalf("its own dump does not load: %v", err)
		case !rbcSameDump(rbcDump(d), dump) || d.Debug() != c.Debug():
			t.Fatal("its dump loads into another filter")
		}
	} else if c.Items() != 0 {
		t.Fatal("no dump of a filter with items")
	}
	enc := ctEncode(t, c)
	g, err := Decode(bytes.NewReader(enc))
	if err != nil {
		t.Fatalf("its encoding does not decode: %v", err)
	}
	if !bytes.Equal(ctEncode(t, g), enc) {
		t.Fatal("decoding its encoding changed it")
	}
}

// FuzzRBCuckooHeader parses arbitrary headers: ParseRBCuckooHeader never
// panics nor allocates, fails only with RedisBloom's two errors, agrees with
// NewRBCuckooFromHeader, and a filter made from an accepted header dumps the
// same header and takes every operation.
func FuzzRBCuckooHeader(f *testing.F) {
	for _, h := range rbcSeedHeaders(f) {
		f.Add(h, []byte{0, 1, 2, 3, 4, 5, 6, 0, 3})
	}
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, h, ops []byte) {
		mb, err := ParseRBCuckooHeader(h)
		if err != nil {
			if !errors.Is(err, ErrRBCuckooHeader) && !errors.Is(err, ErrRBCuckooCreate) {
				t.Fatalf("ParseRBCuckooHeader: %v", err)
			}
			return
		}
		if mb > rbcFuzzMaxBytes {
			return
		}
		c, err := NewRBCuckooFromHeader(h)
		if err != nil || c.MemoryBytes() != mb {
			t.Fatalf("ParseRBCuckooHeader accepted, NewRBCuckooFromHeader: %v, %d bytes for %d", err, c.MemoryBytes(), mb)
		}
		if !bytes.Equal(c.DumpHeader(), h) {
			t.Fatalf("header %x dumps as %x", h, c.DumpHeader())
		}
		rbcExercise(t, c, ops)
	})
}

// FuzzRBCuckooLoadChunk loads arbitrary chunks at arbitrary positions into
// filters made from the seed headers: LoadChunk never panics, refuses with
// ErrRBCuckooChunk only and then changes nothing, and the filter takes every
// operation afterwards.
func FuzzRBCuckooLoadChunk(f *testing.F) {
	for i, h := range rbcSeedHeaders(f)[:3] {
		f.Add(h, int64(1+i), []byte{1, 2, 3}, []byte{0, 3, 5, 1})
		f.Add(h, int64(65), bytes.Repeat([]byte{0xff}, 64), []byte{3, 3, 3, 5})
		f.Add(h, int64(1<<40), []byte{7}, []byte{})
	}
	f.Fuzz(func(t *testing.T, h []byte, pos int64, data, ops []byte) {
		if mb, err := ParseRBCuckooHeader(h); err != nil || mb > rbcFuzzMaxBytes {
			return
		}
		c, err := NewRBCuckooFromHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		before := ctEncode(t, c)
		if err := c.LoadChunk(pos, data); err != nil {
			if !errors.Is(err, ErrRBCuckooChunk) {
				t.Fatalf("LoadChunk: %v", err)
			}
			if !bytes.Equal(ctEncode(t, c), before) {
				t.Fatal("a refused chunk changed the filter")
			}
		}
		rbcExercise(t, c, ops)
	})
}

// FuzzDecodeRBCuckoo decodes arbitrary encodings, resealed or not: Decode
// never panics, and an RBCuckoo it returns takes every operation.
func FuzzDecodeRBCuckoo(f *testing.F) {
	for _, c := range []*RBCuckoo{mustNewRBCuckoo(f, 100, 2, 20, 1), rbcGrownTB(f), mustNewRBCuckoo(f, 20, 5, 3, 0)} {
		c.Add([]byte("seed"))
		enc := ctEncode(f, c)
		f.Add(enc, false, []byte{0, 3, 5})
		bad := bytes.Clone(enc)
		bad[12] ^= 0x04
		f.Add(bad, true, []byte{1, 4})
	}
	f.Fuzz(func(t *testing.T, data []byte, reseal bool, ops []byte) {
		if reseal {
			data = ctReseal(data)
		}
		g, err := Decode(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("Decode: %v", err)
			}
			return
		}
		c, ok := g.(*RBCuckoo)
		if !ok || c.MemoryBytes() > rbcFuzzMaxBytes || Loading(c) {
			return
		}
		rbcExercise(t, c, ops)
	})
}
