package fsm

import (
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/filters"
)

// TestMemLimitCodec pins field 17 (the cluster's memory limit): log format 7
// on, must be understood, absent when zero; a node held at format 6 refuses
// it as a newer build's entry; a bad value is damage.
func TestMemLimitCodec(t *testing.T) {
	c := &Command{Op: OpReserve, Family: FamilyBF, Key: "b", Spec: bfSpec(100, 0.01, 2), MemLimit: 64 << 20}
	if MinCodec(c) != CodecV7 {
		t.Fatalf("MinCodec %d, want %d", MinCodec(c), CodecV7)
	}
	data := EncodeCommandVersion(c, CodecV7)
	// [type 1][format 7] op 1, family 1, flags 08 (spec); key "b"; time 0; the
	// spec; no keys, no items; one field: key 0x23 (tag 17, must), 4 bytes,
	// uvarint 64 MiB; then the checksum.
	want := "010701010801620002647b14ae47e17a843f02000000000000012304808080209bc25fe0"
	if got := hex.EncodeToString(data); got != want {
		t.Errorf("encoding\n got %s\nwant %s", got, want)
	}
	_, cs, err := DecodeEntry(data)
	if err != nil || len(cs) != 1 || cs[0].MemLimit != 64<<20 {
		t.Fatalf("decode: %v %+v", err, cs)
	}
	var fe *FormatError
	if _, _, err := decodeEntry(data, CodecV6); !errors.As(err, &fe) || fe.Format != CodecV7 {
		t.Fatalf("format 7 entry on a format 6 node: %v", err)
	}
	c.MemLimit = 0
	if a, b := EncodeCommandVersion(c, CodecV7), EncodeCommandVersion(c, CodecV6); hex.EncodeToString(a[2:len(a)-4]) != hex.EncodeToString(b[2:len(b)-4]) {
		t.Errorf("a command without a limit encodes differently in format 7")
	}
	for _, f := range []field{
		{tag: tagMemLimit, must: true, val: []byte{0}},
		{tag: tagMemLimit, must: true, val: []byte{5, 0}},
		{tag: tagMemLimit, must: false, val: []byte{5}},
	} {
		e := encodeCommandFields(&Command{Op: OpAdd, Family: FamilyBF, Key: "b"}, CodecV7, []field{f})
		if _, _, err := DecodeEntry(e); !errors.Is(err, ErrCorrupt) {
			t.Errorf("field %+v: %v", f, err)
		}
	}
}

// TestMemLimitRefusesCreation: a filter whose counted bytes would pass the
// limit is not created, whether by RESERVE, an add's auto-create or a LOADCHUNK
// header (of either layout), and nothing changes; one that fits is.
func TestMemLimitRefusesCreation(t *testing.T) {
	h := newHarness(t)
	limit := uint64(1 << 20)
	big := reserve(FamilyBF, "big", bfSpec(10_000_000, 0.01, 2))
	big.MemLimit = limit
	if r := h.apply(big); !errors.Is(r.Err, ErrOutOfMemory) {
		t.Fatalf("RESERVE over the limit: %v", r.Err)
	}
	auto := add(FamilyCF, "auto", "x")
	auto.Spec = cfSpec(50_000_000, 4, 1)
	auto.MemLimit = limit
	if r := h.apply(auto); !errors.Is(r.Err, ErrOutOfMemory) {
		t.Fatalf("auto-create over the limit: %v", r.Err)
	}
	// RedisBloom's test_number_of_buckets_does_not_overflow: a header of one
	// sub-filter of 2^32 buckets.
	hdr := []byte("\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x01\x00\x01\x00")
	load := &Command{Op: OpLoadChunk, Family: FamilyCF, Key: "hdr", Iter: 1, Data: hdr, MemLimit: limit}
	if r := h.apply(load); !errors.Is(r.Err, ErrOutOfMemory) {
		t.Fatalf("LOADCHUNK header over the limit: %v", r.Err)
	}
	if h.f.Len() != 0 || h.f.MemoryBytes() != 0 {
		t.Fatalf("refusals left %d filters, %d bytes", h.f.Len(), h.f.MemoryBytes())
	}
	small := reserve(FamilyBF, "small", bfSpec(1000, 0.01, 2))
	small.MemLimit = limit
	h.ok(small)
	if h.f.MemoryBytes() > limit {
		t.Fatalf("counted %d over the limit", h.f.MemoryBytes())
	}
}

// TestMemLimitStopsGrowth: growth inside an add stops at the limit, on every
// growing kind: a cuckoo insert answers -1 for each item that needed it (as
// RedisBloom's CF.INSERT when it cannot allocate), a single cuckoo add and a
// Bloom add answer ErrOutOfMemory; memory never passes the limit, and two
// replicas end byte for byte alike.
func TestMemLimitStopsGrowth(t *testing.T) {
	specs := map[string]struct {
		fam  Family
		spec Spec
	}{
		"scalable": {FamilyBF, bfSpec(100, 0.01, 4)},
		"rbchain":  {FamilyBF, Spec{Kind: filters.KindRBChain, Capacity: 100, ErrorRate: 0.01, Expansion: 4}},
		"cuckoo":   {FamilyCF, cfSpec(64, 1, 4)},
		"rbcuckoo": {FamilyCF, Spec{Kind: filters.KindRBCuckoo, Capacity: 64, BucketSize: 1, MaxIterations: 1, Expansion: 4}},
	}
	for name, s := range specs {
		var replicas [2]*harness
		for i := range replicas {
			h := newHarness(t)
			replicas[i] = h
			h.ok(reserve(s.fam, "k", s.spec))
			limit := h.f.MemoryBytes() + 4000
			var items []string
			for j := range 20000 {
				items = append(items, fmt.Sprint(name, j))
			}
			c := add(s.fam, "k", items...)
			c.Multi, c.MemLimit = true, limit
			r := h.apply(c)
			if h.f.MemoryBytes() > limit {
				t.Fatalf("%s: %d bytes counted, limit %d", name, h.f.MemoryBytes(), limit)
			}
			switch s.fam {
			case FamilyCF:
				if r.Err != nil || len(r.Ints) != len(items) || r.Ints[len(items)-1] != -1 {
					t.Fatalf("%s: insert over the limit: %v, %d outcomes", name, r.Err, len(r.Ints))
				}
				one := add(s.fam, "k", "one-more")
				one.MemLimit = limit
				if r := h.apply(one); !errors.Is(r.Err, ErrOutOfMemory) {
					t.Fatalf("%s: single add over the limit: %v", name, r.Err)
				}
			default:
				if !errors.Is(r.Err, ErrOutOfMemory) || !r.Stopped {
					t.Fatalf("%s: madd over the limit: %+v", name, r)
				}
			}
		}
		if a, b := snapshotBytes(t, replicas[0].f), snapshotBytes(t, replicas[1].f); string(a) != string(b) {
			t.Fatalf("%s: replicas differ", name)
		}
	}
}

// FuzzMemLimit: a LOADCHUNK header of any kind (RedisBloom's Bloom or cuckoo,
// or ours), then inserts that make the filter grow, each command under a
// memory limit: the bytes counted never pass the limit, and no header builds
// a filter the limit does not hold.
func FuzzMemLimit(f *testing.F) {
	rbc, _ := filters.NewRBCuckoo(64, 1, 1, 2)
	rbb, _ := filters.NewRBChain(16, 0.01, 4, false)
	_, rbbHeader := rbb.DumpChunk(0)
	h := newHarness(f)
	h.ok(reserve(FamilyCF, "own", cfSpec(64, 1, 2)))
	_, ownHeader, _ := h.f.ScanDump(FamilyCF, "own", 0)
	overflow := []byte("\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x01\x00\x01\x00")
	seed := func(fam byte, header []byte, counts ...byte) []byte {
		b := []byte{fam, 2, byte(len(header))}
		return append(append(b, header...), counts...)
	}
	f.Add(seed(2, overflow, 10, 10, 200))
	f.Add(seed(2, rbc.DumpHeader(), 200, 200, 200, 200))
	f.Add(seed(1, rbbHeader, 200, 200, 200, 200, 200))
	f.Add(seed(2, ownHeader, 5))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 || int(data[2]) > len(data)-3 {
			return
		}
		fam := FamilyBF
		if data[0]%2 == 0 {
			fam = FamilyCF
		}
		limit := uint64(64<<10) << (data[1] % 8) // 64 KiB to 8 MiB
		header := data[3 : 3+int(data[2])]
		h := newHarness(t)
		check := func(what string) {
			if got := h.f.MemoryBytes(); got > limit {
				t.Fatalf("%s: %d bytes counted, limit %d", what, got, limit)
			}
		}
		h.apply(&Command{Op: OpLoadChunk, Family: fam, Key: "k", Iter: 1, Data: header, MemLimit: limit})
		check("header")
		for i, n := range data[3+int(data[2]):] {
			c := add(fam, "k")
			c.Multi, c.MemLimit = true, limit
			for j := range 8 * int(n) {
				c.Items = append(c.Items, []byte(fmt.Sprint(i, "/", j)))
			}
			h.apply(c)
			check(fmt.Sprint("insert ", i))
		}
	})
}

// BenchmarkBatchMemLimit encodes and applies an entry of 200 adds, with and
// without the memory limit field: what stamping every write costs.
func BenchmarkBatchMemLimit(b *testing.B) {
	for _, lim := range []uint64{0, 1 << 30} {
		var cs []*Command
		for i := range 200 {
			c := add(FamilyBF, "k", fmt.Sprint(i, "item"))
			c.Spec, c.MemLimit, c.Time = bfSpec(100, 0.01, 2), lim, 1e18
			cs = append(cs, c)
		}
		b.Run(fmt.Sprint("limit=", lim != 0), func(b *testing.B) {
			b.ReportAllocs()
			f := New(Options{})
			for i := uint64(1); b.Loop(); i++ {
				f.ApplyBatch([]*raft.Log{{Index: i, Type: raft.LogCommand, Data: EncodeBatchVersion(cs, CodecVersion)}})
			}
		})
	}
}
