package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"

	"github.com/rookerydb/rookery/filters"
)

// rbDump returns the dump of a RedisBloom-layout filter as RedisBloom's
// SCANDUMP hands it out: (iterator, data) pairs, the header first.
func rbDump(d rbDumper) (iters []int64, chunks [][]byte) {
	for iter := int64(0); ; {
		next, data := d.DumpChunk(iter)
		if next == 0 {
			return iters, chunks
		}
		iters, chunks = append(iters, next), append(chunks, data)
		iter = next
	}
}

// TestLoadRedisBloomDumps: LOADCHUNK of a dump in RedisBloom's format creates a
// filter of RedisBloom's layout, whatever the family's usual kind, that answers
// as the dumped filter, dumps the same bytes, travels in snapshots, and costs
// what admission was told.
func TestLoadRedisBloomDumps(t *testing.T) {
	chain, _ := filters.NewRBChain(300, 0.01, 2, false)
	cf, _ := filters.NewRBCuckoo(600, 2, 20, 1)
	for i := 0; i < 1500; i++ {
		chain.Add([]byte(fmt.Sprint("i", i)))
		if i < 400 {
			cf.Add([]byte(fmt.Sprint("i", i)))
		}
	}
	h := newHarness(t)
	for _, src := range []struct {
		fam  Family
		key  string
		d    rbDumper
		kind filters.Kind
	}{{FamilyBF, "b", chain, filters.KindRBChain}, {FamilyCF, "c", cf, filters.KindRBCuckoo}} {
		iters, chunks := rbDump(src.d)
		hdr := &Command{Op: OpLoadChunk, Family: src.fam, Key: src.key, Iter: iters[0], Data: chunks[0]}
		if need := h.f.NeedBytes(hdr); need == 0 {
			t.Errorf("%s: admission is told the header needs nothing", src.key)
		}
		for i := range iters {
			h.ok(&Command{Op: OpLoadChunk, Family: src.fam, Key: src.key, Iter: iters[i], Data: chunks[i]})
		}
		if k, _ := h.f.KindOf(src.key); k != src.kind {
			t.Fatalf("%s: kind %v, want %v", src.key, k, src.kind)
		}
		gotIters, gotChunks := []int64{}, [][]byte{}
		for iter := int64(0); ; {
			next, data, err := h.f.ScanDump(src.fam, src.key, iter)
			if err != nil {
				t.Fatal(err)
			}
			if next == 0 {
				break
			}
			gotIters, gotChunks = append(gotIters, next), append(gotChunks, data)
			iter = next
		}
		if !reflect.DeepEqual(gotIters, iters) || !reflect.DeepEqual(gotChunks, chunks) {
			t.Errorf("%s: the node's dump differs from the loaded one", src.key)
		}
	}
	for i := 0; i < 5000; i++ {
		it := []byte(fmt.Sprint("i", i))
		if got := h.f.Exists(FamilyBF, "b", [][]byte{it})[0]; got != chain.Test(it) {
			t.Fatalf("BF.EXISTS %s = %v, the chain says %v", it, got, chain.Test(it))
		}
		if got := h.f.Count(FamilyCF, "c", it); got != cf.Count(it) {
			t.Fatalf("CF.COUNT %s = %d, the filter says %d", it, got, cf.Count(it))
		}
	}
	b := restored(t, snapshotBytes(t, h.f))
	for _, k := range []struct {
		fam Family
		key string
	}{{FamilyBF, "b"}, {FamilyCF, "c"}} {
		x, _ := h.f.Info(k.fam, k.key)
		y, _ := b.Info(k.fam, k.key)
		if !reflect.DeepEqual(x, y) {
			t.Errorf("%s after a snapshot: %+v, was %+v", k.key, y, x)
		}
	}
	// Chunks into a loaded filter, as RedisBloom takes them: anywhere inside a link.
	r := h.apply(&Command{Op: OpLoadChunk, Family: FamilyBF, Key: "b", Iter: 1 << 40, Data: []byte("x")})
	if r.Err != ErrChunkOutside {
		t.Errorf("chunk past the end: %v", r.Err)
	}
}

// FuzzApplyRedisBloomLoad: whatever a client sends as a RedisBloom header and
// chunks, and whatever it adds, deletes and compacts afterwards, nothing panics,
// a refused header creates nothing, and a replica restored from a snapshot
// taken after the load answers and ends exactly as the one that applied it.
func FuzzApplyRedisBloomLoad(f *testing.F) {
	chain, _ := filters.NewRBChain(20, 0.1, 2, false)
	cf, _ := filters.NewRBCuckoo(16, 2, 5, 2)
	for i := 0; i < 60; i++ {
		chain.Add([]byte(fmt.Sprint(i)))
		cf.Add([]byte(fmt.Sprint(i)))
	}
	for _, d := range []rbDumper{chain, cf} {
		_, chunks := rbDump(d)
		fam := uint8(0)
		if d == rbDumper(cf) {
			fam = 1
		}
		f.Add(fam, chunks[0], bytes.Join(chunks[1:], nil), []byte{1, 2, 0x81, 0x42, 0xC3})
	}
	f.Add(uint8(0), make([]byte, 73), []byte{0xff}, []byte{0})
	f.Add(uint8(1), make([]byte, 38), []byte{0xff, 1}, []byte{0x80})
	f.Fuzz(func(t *testing.T, which uint8, header, body, ops []byte) {
		fam := FamilyBF
		if which%2 == 1 {
			fam = FamilyCF
		}
		a := newHarness(t)
		hdr := &Command{Op: OpLoadChunk, Family: fam, Key: "k", Iter: 1, Data: header}
		if a.f.NeedBytes(hdr) > 64<<20 {
			return // the leader's memory admission refuses it before the log (--max-memory)
		}
		if r := a.apply(hdr); r.Err != nil {
			if a.f.Len() != 0 {
				t.Fatal("a refused header created a key")
			}
			return
		}
		// The body goes in pieces whose places come from the fuzzer.
		for p := body; len(p) > 0; {
			n := min(len(p), 1+int(p[0])%64)
			iter := int64(binary.LittleEndian.Uint16(append(p[:min(2, len(p))], 0, 0)))
			a.apply(&Command{Op: OpLoadChunk, Family: fam, Key: "k", Iter: iter, Data: p[:n]})
			p = p[n:]
		}
		b := &harness{t: t, f: restored(t, snapshotBytes(t, a.f)), index: a.index, now: a.now}
		for i, op := range ops[:min(len(ops), 100)] {
			item := fmt.Sprint(op & 0x3F)
			c := add(fam, "k", item)
			switch {
			case fam == FamilyCF && op&0xC0 == 0x80:
				c = del(fam, "k", item)
			case fam == FamilyCF && op&0xC0 == 0xC0:
				c = &Command{Op: OpCompact, Family: FamilyCF, Key: "k"}
			}
			ra, rb := a.apply(c), b.apply(c)
			if !reflect.DeepEqual(ra, rb) {
				t.Fatalf("op %d: the replicas answered %+v and %+v", i, ra, rb)
			}
			a.f.Info(fam, "k")
			a.f.ScanDump(fam, "k", int64(op))
		}
		if string(a.encoding(fam, "k")) != string(b.encoding(fam, "k")) {
			t.Fatal("the replicas ended apart")
		}
	})
}
