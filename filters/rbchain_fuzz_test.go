package filters

import (
	"bytes"
	"errors"
	"testing"
)

// rbFuzzMaxBytes bounds the chains the fuzzers build from a header: a server
// checks ParseRBChainHeader's size against its memory limit the same way.
const rbFuzzMaxBytes = 1 << 22

// FuzzRBChainHeader: any header either fails with ErrRBBadData from both entry
// points, or gives a chain whose every method works (rbExercise), and
// ParseRBChainHeader's size is the chain's.
func FuzzRBChainHeader(f *testing.F) {
	for _, hc := range rbHeaderCases(f) {
		f.Add(hc.header)
	}
	for _, g := range rbGoldens() {
		f.Add(g.build(f).DumpHeader())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := ParseRBChainHeader(data)
		if err != nil {
			if !errors.Is(err, ErrRBBadData) {
				t.Fatalf("ParseRBChainHeader: %v, not ErrRBBadData", err)
			}
			if _, err2 := NewRBChainFromHeader(data); !errors.Is(err2, ErrRBBadData) {
				t.Fatalf("ParseRBChainHeader refuses (%v), NewRBChainFromHeader: %v", err, err2)
			}
			return
		}
		if n > rbFuzzMaxBytes {
			return
		}
		c, err := NewRBChainFromHeader(data)
		if err != nil || c.payloadBytes() != n {
			t.Fatalf("ParseRBChainHeader accepts %d bytes, NewRBChainFromHeader: %v", n, err)
		}
		rbExercise(t, c, data)
	})
}

// rbFuzzChain is the header of the chain FuzzRBChainLoadChunk loads into: links
// of 144 and 312 bytes, one of 64 bytes whose bits are taken modulo 2^7, and one
// of 3 bytes.
func rbFuzzChain(t testing.TB) []byte {
	c := mustNewRBChain(t, 100, 0.01, 2, false)
	rbAddN(t, c, "fz:", 150)
	h := c.DumpHeader()
	tail := rbHeaderSet(rbHeaderSet(rbHeaderSet(h, 1, "bytes", 3), 1, "bits", 24), 1, "size", 0)
	tail = rbHeaderSet(rbHeaderSet(rbHeaderSet(tail, 0, "bytes", 64), 0, "bits", 512), 0, "n2", 7)
	h = append(h, tail[rbChainHeaderBytes:]...)
	h = rbHeaderSet(h, -1, "nfilters", 4)
	return rbHeaderSet(h, -1, "size", c.Count()+c.links[0].size)
}

// FuzzRBChainLoadChunk holds LoadChunk and DumpChunk at any cursor, with any
// data, to the model: the same verdict, the same bytes after, and the same
// lookups.
func FuzzRBChainLoadChunk(f *testing.F) {
	header := rbFuzzChain(f)
	f.Add(int64(145), bytes.Repeat([]byte{0xff}, 144), int64(1))
	f.Add(int64(146), []byte{1}, int64(145))
	f.Add(int64(1+144+312+64), bytes.Repeat([]byte{0x55}, 64), int64(1+144+312))
	f.Add(int64(1+144+312+64+3), []byte{7, 7, 7}, int64(1+144+312+64))
	f.Add(int64(0), []byte{}, int64(-1))
	f.Add(int64(600), []byte{1, 2}, int64(524))
	f.Fuzz(func(t *testing.T, iter int64, data []byte, scan int64) {
		c, err := NewRBChainFromHeader(header)
		if err != nil {
			t.Fatal(err)
		}
		m := newRBModel(header)
		if got, want := c.LoadChunk(iter, data), m.load(iter, data); rbBaseErr(got) != want {
			t.Fatalf("LoadChunk(%d, %d bytes) = %v, model %v", iter, len(data), got, want)
		}
		gn, gc := c.DumpChunk(scan)
		wn, wc := m.scan(scan)
		if gn != wn || !bytes.Equal(gc, wc) {
			t.Fatalf("DumpChunk(%d) = %d, %d bytes; model %d, %d bytes", scan, gn, len(gc), wn, len(wc))
		}
		for _, it := range rbItems("fz:", 0, 200) {
			if c.Test(it) != m.test(it) {
				t.Fatalf("Test(%s) differs from the model", it)
			}
		}
	})
}

// FuzzDecodeRBChain feeds Decode raw encodings and, through bfContainer,
// arbitrary params and payloads behind valid checksums: it never panics, and a
// chain it returns works (rbExercise).
func FuzzDecodeRBChain(f *testing.F) {
	for _, c := range []*RBChain{rbGoldens()[0].build(f), rbGoldens()[8].build(f)} {
		enc := ctEncode(f, c)
		var pay []byte
		for _, w := range c.payload() {
			pay = append(pay, bfBytes(w.slice())...)
		}
		f.Add(enc, c.params(), pay)
		f.Add(enc[:len(enc)/2], c.params()[:30], pay[:8])
	}
	odd, err := NewRBChainFromHeader(rbFuzzChain(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ctEncode(f, odd), odd.params(), make([]byte, 8*(18+39+1+8)))
	f.Fuzz(func(t *testing.T, raw, params, payload []byte) {
		if len(raw) > 5 && Kind(raw[5]) != KindRBChain {
			return // other kinds have their own fuzzers
		}
		for _, data := range [][]byte{raw, bfContainer(KindRBChain, params, bfWords(payload))} {
			g, err := Decode(bytes.NewReader(data))
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
					t.Fatalf("Decode: %v, neither ErrCorrupt nor ErrVersion", err)
				}
				continue
			}
			if c, ok := g.(*RBChain); ok && !Loading(c) {
				rbExercise(t, c, c.DumpHeader())
			}
		}
	})
}
