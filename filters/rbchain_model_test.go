package filters

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// rbModel is RedisBloom's chain written as plainly as possible, to hold RBChain
// to: byte arrays, the header as packed structs through encoding/binary, the
// dump as one stream of bytes. It shares only the hashes and the link sizing
// (rbInit), which have their own vectors, with the code it checks.
type rbModel struct {
	hdr   rbModelChain
	links []rbModelLink
}

// rbModelChain and rbModelLinkHdr are the header's packed structs; binary.Write
// writes them without padding, 20 and 53 bytes.
type rbModelChain struct {
	Size            uint64
	NFilters        uint32
	Options, Growth uint32
}

type rbModelLinkHdr struct {
	Bytes, Bits, Size uint64
	Error, BPE        float64
	Hashes            uint32
	Entries           uint64
	N2                uint8
}

type rbModelLink struct {
	h  rbModelLinkHdr
	bf []byte
}

func newRBModel(header []byte) *rbModel {
	r := bytes.NewReader(header)
	m := &rbModel{}
	binary.Read(r, binary.LittleEndian, &m.hdr)
	for range m.hdr.NFilters {
		var l rbModelLink
		binary.Read(r, binary.LittleEndian, &l.h)
		l.bf = make([]byte, l.h.Bytes)
		m.links = append(m.links, l)
	}
	return m
}

func (m *rbModel) header() []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, m.hdr)
	for _, l := range m.links {
		binary.Write(&b, binary.LittleEndian, l.h)
	}
	return b.Bytes()
}

func (m *rbModel) hash(item []byte) (uint64, uint64) {
	if m.hdr.Options&4 != 0 {
		a := murmurHash64A(item, 0xc6a4a7935bd1e995)
		return a, murmurHash64A(item, a)
	}
	a := murmurHash2(item, 0x9747b28c)
	return uint64(a), uint64(murmurHash2(item, a))
}

// probe reports whether the item's bits are all set in l, setting them if add.
func (l *rbModelLink) probe(a, b uint64, add bool) (all bool) {
	mod := l.h.Bits
	if l.h.N2 > 0 {
		mod = 1 << l.h.N2
	}
	all = true
	for i := uint64(0); i < uint64(l.h.Hashes); i++ {
		x := (a + i*b) % mod
		if l.bf[x/8]&(1<<(x%8)) == 0 {
			all = false
			if !add {
				return false
			}
			l.bf[x/8] |= 1 << (x % 8)
		}
	}
	return all
}

func (m *rbModel) test(item []byte) bool {
	a, b := m.hash(item)
	for i := len(m.links) - 1; i >= 0; i-- {
		if m.links[i].probe(a, b, false) {
			return true
		}
	}
	return false
}

// add returns RedisBloom's SBChain_Add: 1, 0, -2 (full) or -1 (cannot grow).
func (m *rbModel) add(item []byte) int {
	if m.test(item) {
		return 0
	}
	cur := &m.links[len(m.links)-1]
	if cur.h.Size >= cur.h.Entries {
		if m.hdr.Options&8 != 0 {
			return -2
		}
		entries := cur.h.Entries * uint64(m.hdr.Growth)
		if m.hdr.Growth != 0 && entries/uint64(m.hdr.Growth) != cur.h.Entries || len(m.links) >= rbMaxLinks {
			return -1
		}
		s, err := rbInit(entries, cur.h.Error*0.5, m.hdr.Options)
		if err != nil {
			return -1
		}
		m.links = append(m.links, rbModelLink{h: rbModelLinkHdr{Bytes: s.bytes, Bits: s.bytes * 8, Error: s.err,
			BPE: s.bpe, Hashes: s.hashes, Entries: s.entries, N2: s.n2}, bf: make([]byte, s.bytes)})
		m.hdr.NFilters++
		cur = &m.links[len(m.links)-1]
	}
	a, b := m.hash(item)
	if cur.probe(a, b, true) {
		return 0
	}
	cur.h.Size++
	m.hdr.Size++
	return 1
}

// stream is the links' bytes, concatenated, and where each link starts.
func (m *rbModel) locate(pos int64) (*rbModelLink, int64) {
	for i := range m.links {
		if pos < int64(len(m.links[i].bf)) {
			return &m.links[i], pos
		}
		pos -= int64(len(m.links[i].bf))
	}
	return nil, 0
}

func (m *rbModel) scan(iter int64) (int64, []byte) {
	if iter == 0 {
		return 1, m.header()
	}
	if iter < 1 {
		return 0, nil
	}
	l, off := m.locate(iter - 1)
	if l == nil {
		return 0, nil
	}
	chunk := l.bf[off:min(int64(len(l.bf)), off+RBMaxChunkBytes)]
	return iter + int64(len(chunk)), bytes.Clone(chunk)
}

func (m *rbModel) load(iter int64, data []byte) error {
	if iter <= 0 || iter < int64(len(data)) {
		return ErrRBBadData
	}
	start := iter - int64(len(data))
	if start < 1 {
		return ErrRBNoLink
	}
	l, off := m.locate(start - 1)
	if l == nil {
		return ErrRBNoLink
	}
	if int64(len(data)) > int64(len(l.bf))-off {
		return ErrRBTooBig
	}
	copy(l.bf[off:], data)
	return nil
}

func rbAddCode(ok bool, err error) int {
	switch {
	case errors.Is(err, ErrFull):
		return -2
	case err != nil:
		return -1
	case ok:
		return 1
	}
	return 0
}

// TestRBChainModel runs random operations on random chains, of every option
// combination, and on the model alongside: adds, lookups, chunks loaded
// anywhere (valid or not) and scans at any cursor must answer the same, and the
// chains dump the same bytes throughout.
func TestRBChainModel(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 11))
	rates := []float64{0.25, 0.1, 0.01, 0.001, 1e-5}
	for round := range 60 {
		options := [...]uint32{rbOptNoRound | rbOptForce64, rbOptNoRound, rbOptForce64, 0}[round%4]
		if r.IntN(4) == 0 {
			options |= rbOptNoScaling
		}
		c, err := newRBChainOptions(1+r.Uint64N(200), rates[r.IntN(len(rates))], uint32(r.IntN(4)), options)
		if err != nil {
			t.Fatal(err)
		}
		m := newRBModel(c.DumpHeader())
		universe := 1 + r.IntN(3000)
		for op := range 2000 {
			item := fmt.Appendf(nil, "m%d", r.IntN(universe))
			switch k := r.IntN(10); {
			case k < 6:
				got, want := rbAddCode(c.Add(item)), m.add(item)
				if got != want {
					t.Fatalf("round %d op %d: Add(%s) = %d, model %d", round, op, item, got, want)
				}
			case k < 8:
				if c.Test(item) != m.test(item) {
					t.Fatalf("round %d op %d: Test(%s) differs", round, op, item)
				}
			case k < 9:
				total := int64(c.payloadBytes())
				iter := r.Int64N(total+20) - 5
				data := make([]byte, r.IntN(40))
				for i := range data {
					data[i] = byte(r.Uint32() & r.Uint32())
				}
				got, want := c.LoadChunk(iter, data), m.load(iter, data)
				if rbBaseErr(got) != want {
					t.Fatalf("round %d op %d: LoadChunk(%d, %d bytes) = %v, model %v", round, op, iter, len(data), got, want)
				}
			default:
				iter := r.Int64N(int64(c.payloadBytes())+10) - 3
				gn, gc := c.DumpChunk(iter)
				wn, wc := m.scan(iter)
				if gn != wn || !bytes.Equal(gc, wc) {
					t.Fatalf("round %d op %d: DumpChunk(%d) = %d, %d bytes; model %d, %d bytes", round, op, iter, gn, len(gc), wn, len(wc))
				}
			}
		}
		if !bytes.Equal(c.DumpHeader(), m.header()) {
			t.Fatalf("round %d: headers differ", round)
		}
		for iter := int64(1); iter != 0; {
			gn, gc := c.DumpChunk(iter)
			wn, wc := m.scan(iter)
			if gn != wn || !bytes.Equal(gc, wc) {
				t.Fatalf("round %d: dumps differ at cursor %d", round, iter)
			}
			iter = gn
		}
	}
}
