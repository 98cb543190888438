package filters

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// The codec and dump tests run on a kind of their own, registered only in the test
// binary, so that they exercise codec.go and dump.go alone: two arrays whose lengths
// are params, and one param of every type paramReader reads.

// kindTest is a Kind no real filter uses.
const kindTest Kind = 200

const (
	tkParamVersion = 1
	// tkMaxWords bounds each array at maxPayloadBytes: two full arrays exceed it,
	// so a header can pass the kind's own checks and still be refused by prepare.
	tkMaxWords = maxPayloadBytes / 8
	tkMaxName  = 32
)

type tkFilter struct {
	a, b  paged
	tag   uint64
	rate  float64
	flag  bool
	name  []byte
	loads int // chunkLoaded calls

	loadable
}

func init() { registerDecoder(kindTest, decodeTK) }

func (f *tkFilter) Kind() Kind                         { return kindTest }
func (f *tkFilter) MemoryBytes() uint64                { return (f.a.len()+f.b.len())*8 + 64 }
func (f *tkFilter) WriteTo(w io.Writer) (int64, error) { return Encode(w, f) }
func (f *tkFilter) payload() []*paged                  { return []*paged{&f.a, &f.b} }
func (f *tkFilter) Test([]byte) bool                   { return false }
func (f *tkFilter) chunkLoaded()                       { f.loads++ }

func (f *tkFilter) fork() Filter {
	g := *f
	g.a, g.b = f.a.fork(), f.b.fork()
	return &g
}

func (f *tkFilter) params() []byte {
	var w paramWriter
	w.byte(tkParamVersion)
	w.uint(f.a.len())
	w.uint(f.b.len())
	w.uint(f.tag)
	w.float(f.rate)
	w.bool(f.flag)
	w.bytes(f.name)
	return w.bytesOut()
}

func decodeTK(params []byte) (Filter, []int, func([]paged) error, error) {
	r := newParamReader(params)
	if v := r.byte(); r.Err() == nil && v != tkParamVersion {
		return nil, nil, nil, fmt.Errorf("%w: test kind params version %d", ErrVersion, v)
	}
	la := r.uintIn("a words", 0, tkMaxWords)
	lb := r.uintIn("b words", 0, tkMaxWords)
	f := &tkFilter{tag: r.uint(), rate: r.rate(), flag: r.bool()}
	f.name = bytes.Clone(r.bytes(tkMaxName))
	if err := r.done(); err != nil {
		return nil, nil, nil, err
	}
	install := func(segs []paged) error {
		if len(segs) != 2 || segs[0].len() != la || segs[1].len() != lb {
			return fmt.Errorf("%w: test kind arrays", ErrCorrupt)
		}
		f.a, f.b = segs[0], segs[1]
		return nil
	}
	return f, []int{int(la), int(lb)}, install, nil
}

// newTK returns a test filter with arrays of la and lb words of seeded random data.
func newTK(la, lb int, seed uint64) *tkFilter {
	rng := rand.New(rand.NewPCG(seed, 0x7e57))
	f := &tkFilter{
		tag:  rng.Uint64(),
		rate: 0.01,
		flag: seed%2 == 1,
		name: []byte(fmt.Sprintf("tk-%d", seed)),
	}
	a, b := make([]uint64, la), make([]uint64, lb)
	for i := range a {
		a[i] = rng.Uint64()
	}
	for i := range b {
		b[i] = rng.Uint64()
	}
	f.a, f.b = pagedOf(a), pagedOf(b)
	return f
}

func tkEqual(x, y *tkFilter) bool {
	return slices.Equal(x.a.slice(), y.a.slice()) && slices.Equal(x.b.slice(), y.b.slice()) && x.tag == y.tag &&
		math.Float64bits(x.rate) == math.Float64bits(y.rate) && x.flag == y.flag &&
		bytes.Equal(x.name, y.name)
}

// ctEncode returns f's encoding, checking that Encode reports its length.
func ctEncode(t testing.TB, f Filter) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := Encode(&buf, f)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("Encode reported %d bytes, wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

// ctContainer builds an encoding byte by byte from the format documented in
// codec.go, independently of the encoder: hostile inputs need it, and
// TestEncodeLayout checks the encoder against it. A nil payload leaves the body off.
func ctContainer(k Kind, params []byte, paylen uint64, payload []byte) []byte {
	b := []byte("RKYF")
	b = append(b, formatVersion, byte(k))
	b = binary.AppendUvarint(b, uint64(len(params)))
	b = append(b, params...)
	b = binary.LittleEndian.AppendUint64(b, paylen)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	if payload == nil {
		return b
	}
	b = append(b, payload...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(payload, crc32.MakeTable(crc32.Castagnoli)))
}

// tkParams builds test-kind params with arrays of la and lb words.
func tkParams(la, lb uint64) []byte {
	var w paramWriter
	w.byte(tkParamVersion)
	w.uint(la)
	w.uint(lb)
	w.uint(7)
	w.float(0.5)
	w.bool(true)
	w.bytes([]byte("x"))
	return w.bytesOut()
}

func ctWordBytes(segs ...[]uint64) []byte {
	b := []byte{}
	for _, s := range segs {
		for _, w := range s {
			b = binary.LittleEndian.AppendUint64(b, w)
		}
	}
	return b
}

// ctShapes are the array lengths the round-trip tests use: empty arrays, and arrays
// longer than the decoder's first allocation (growStart) and than one write
// (writeChunkWords), not multiples of either.
var ctShapes = [][2]int{{0, 0}, {1, 0}, {0, 3}, {5, 7}, {growStart + 3, writeChunkWords + 1}}

func TestEncodeLayout(t *testing.T) {
	for _, s := range ctShapes[:4] {
		f := newTK(s[0], s[1], 1)
		want := ctContainer(kindTest, f.params(), uint64(s[0]+s[1])*8, ctWordBytes(f.a.slice(), f.b.slice()))
		if got := ctEncode(t, f); !bytes.Equal(got, want) {
			t.Errorf("shape %v: encoding\n%x\nwant the documented layout\n%x", s, got, want)
		}
	}
}

func TestCodecRoundTrip(t *testing.T) {
	for i, s := range ctShapes {
		f := newTK(s[0], s[1], uint64(i))
		enc := ctEncode(t, f)
		var viaWriteTo bytes.Buffer
		if _, err := f.WriteTo(&viaWriteTo); err != nil || !bytes.Equal(viaWriteTo.Bytes(), enc) {
			t.Fatalf("shape %v: WriteTo differs from Encode (err %v)", s, err)
		}
		// A byte reader, a reader without ReadByte, and one that returns a byte
		// at a time all decode the same filter.
		readers := map[string]io.Reader{
			"bytes":    bytes.NewReader(enc),
			"plain":    struct{ io.Reader }{bytes.NewReader(enc)},
			"one-byte": iotest.OneByteReader(bytes.NewReader(enc)),
		}
		for name, r := range readers {
			if name == "one-byte" && len(enc) > 1<<16 {
				continue // a byte at a time through 2 MiB is slow and proves nothing more
			}
			g, err := Decode(r)
			if err != nil {
				t.Fatalf("shape %v, %s reader: Decode: %v", s, name, err)
			}
			tk, ok := g.(*tkFilter)
			if !ok || !tkEqual(tk, f) {
				t.Fatalf("shape %v, %s reader: decoded filter differs", s, name)
			}
			if re := ctEncode(t, tk); !bytes.Equal(re, enc) {
				t.Fatalf("shape %v, %s reader: re-encoding differs", s, name)
			}
		}
	}
}

func TestDecodeInto(t *testing.T) {
	f := newTK(4, 9, 3)
	enc := ctEncode(t, f)
	trailer := []byte{0xAB, 0xCD}
	input := append(slices.Clone(enc), trailer...)

	r := bytes.NewReader(input)
	g, n, err := decodeInto(r, kindTest)
	if err != nil || !tkEqual(g.(*tkFilter), f) {
		t.Fatalf("decodeInto: %v", err)
	}
	if n != int64(len(enc)) || r.Len() != len(trailer) {
		t.Errorf("decodeInto consumed %d bytes and left %d; want %d and %d", n, r.Len(), len(enc), len(trailer))
	}

	// A reader without ReadByte is buffered, but the count is still the encoding's.
	g, n, err = decodeInto(struct{ io.Reader }{bytes.NewReader(input)}, kindTest)
	if err != nil || !tkEqual(g.(*tkFilter), f) || n != int64(len(enc)) {
		t.Errorf("decodeInto of a plain reader: n %d, err %v; want n %d", n, err, len(enc))
	}

	g, n, err = decodeInto(bytes.NewReader(enc), KindBloom)
	if !errors.Is(err, ErrWrongKind) || g != nil {
		t.Errorf("decodeInto as a Bloom: %v, %v; want ErrWrongKind", g, err)
	}
	if n != int64(len(enc)) {
		t.Errorf("decodeInto as a Bloom consumed %d bytes, want %d", n, len(enc))
	}

	_, _, err = decodeInto(bytes.NewReader(enc[:len(enc)-1]), kindTest)
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("decodeInto of a truncated encoding: %v, want ErrCorrupt", err)
	}
}

func TestDecodeReadsExactly(t *testing.T) {
	f1, f2 := newTK(3, 2, 4), newTK(growStart+1, 1, 5)
	stream := append(ctEncode(t, f1), ctEncode(t, f2)...)
	stream = append(stream, 0x5A)
	for name, r := range map[string]interface {
		io.Reader
		io.ByteReader
	}{
		"bytes.Reader": bytes.NewReader(stream),
		"bufio.Reader": bufio.NewReaderSize(bytes.NewReader(stream), 16),
	} {
		for _, want := range []*tkFilter{f1, f2} {
			g, err := Decode(r)
			if err != nil || !tkEqual(g.(*tkFilter), want) {
				t.Fatalf("%s: decoding a stream of two filters: %v", name, err)
			}
		}
		if b, err := r.ReadByte(); err != nil || b != 0x5A {
			t.Errorf("%s: the byte after the encodings reads %#x, %v; want 0x5a", name, b, err)
		}
	}
}

// ctDecodeErr decodes data, which must fail, and returns the error; a panic or a
// success fails the test.
func ctDecodeErr(t *testing.T, what string, data []byte) error {
	t.Helper()
	f, err := Decode(bytes.NewReader(data))
	if err == nil {
		t.Fatalf("%s: Decode succeeded (%v)", what, f.Kind())
	}
	if f != nil {
		t.Errorf("%s: Decode returned a filter with error %v", what, err)
	}
	return err
}

func TestDecodeEveryCorruptByte(t *testing.T) {
	f := newTK(3, 2, 6)
	enc := ctEncode(t, f)
	for i := range enc {
		// Every value in the header; in the payload a few patterns suffice, the
		// CRC treating every byte alike.
		xors := []byte{0x01, 0x80, 0xFF}
		if i < len(enc)-(5*8+4) {
			xors = xors[:0]
			for x := 1; x < 256; x++ {
				xors = append(xors, byte(x))
			}
		}
		for _, x := range xors {
			bad := slices.Clone(enc)
			bad[i] ^= x
			err := ctDecodeErr(t, fmt.Sprintf("byte %d ^ %#x", i, x), bad)
			want := ErrCorrupt
			if i == 4 { // the format version byte
				want = ErrVersion
			}
			if !errors.Is(err, want) {
				t.Fatalf("byte %d ^ %#x: %v, want %v", i, x, err, want)
			}
		}
	}
}

func TestDecodeEveryTruncation(t *testing.T) {
	enc := ctEncode(t, newTK(3, 2, 7))
	for n := range len(enc) {
		for name, r := range map[string]io.Reader{
			"bytes": bytes.NewReader(enc[:n]),
			"plain": struct{ io.Reader }{bytes.NewReader(enc[:n])},
		} {
			if _, err := Decode(r); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s reader, first %d of %d bytes: %v, want ErrCorrupt", name, n, len(enc), err)
			}
		}
	}
}

func TestDecodeReaderError(t *testing.T) {
	enc := ctEncode(t, newTK(3, 2, 8))
	boom := errors.New("disk on fire")
	for n := range len(enc) {
		r := io.MultiReader(bytes.NewReader(enc[:n]), iotest.ErrReader(boom))
		if _, err := Decode(r); err == nil || !errors.Is(err, ErrCorrupt) && !errors.Is(err, boom) {
			t.Fatalf("reader failing after %d bytes: %v", n, err)
		}
	}
}

// ctFailWriter accepts limit bytes, then fails.
type ctFailWriter struct{ limit, n int }

func (w *ctFailWriter) Write(p []byte) (int, error) {
	if w.n+len(p) > w.limit {
		k := w.limit - w.n
		w.n = w.limit
		return k, io.ErrShortWrite
	}
	w.n += len(p)
	return len(p), nil
}

func TestEncodeWriteError(t *testing.T) {
	f := newTK(3, 2, 9)
	size := len(ctEncode(t, f))
	for limit := range size {
		w := &ctFailWriter{limit: limit}
		n, err := Encode(w, f)
		if !errors.Is(err, io.ErrShortWrite) || n != int64(limit) {
			t.Fatalf("writer failing after %d bytes: Encode = %d, %v", limit, n, err)
		}
	}
}

// ctAllocBytes reports the fewest bytes allocated by fn over a few runs; the minimum
// discounts anything the runtime allocates meanwhile.
func ctAllocBytes(fn func()) uint64 {
	best := uint64(math.MaxUint64)
	var before, after runtime.MemStats
	for range 3 {
		runtime.ReadMemStats(&before)
		fn()
		runtime.ReadMemStats(&after)
		best = min(best, after.TotalAlloc-before.TotalAlloc)
	}
	return best
}

func TestDecodeHostileHeader(t *testing.T) {
	const claimed = 1 << 30 // 1 GiB
	hdr := ctContainer(kindTest, tkParams(claimed/8, 0), claimed, nil)
	for _, c := range []struct {
		name string
		hdr  []byte
	}{
		{"1 GiB in one array", hdr},
		{"1 GiB over two arrays", ctContainer(kindTest, tkParams(claimed/16, claimed/16), claimed, nil)},
		{"the 64 GiB maximum", ctContainer(kindTest, tkParams(maxPayloadBytes/8, 0), maxPayloadBytes, nil)},
	} {
		input := append(slices.Clone(c.hdr), make([]byte, 100)...)
		for name, mk := range map[string]func() io.Reader{
			"bytes": func() io.Reader { return bytes.NewReader(input) },
			"plain": func() io.Reader { return struct{ io.Reader }{bytes.NewReader(input)} },
		} {
			var err error
			alloc := ctAllocBytes(func() { _, err = Decode(mk()) })
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s claimed, 100 bytes sent, %s reader: %v, want ErrCorrupt", c.name, name, err)
			}
			// The decoder's first allocation is growStart words (1 MiB) per
			// array; the buffer for a plain reader adds 64 KiB.
			if alloc > 3<<20 {
				t.Errorf("%s claimed, 100 bytes sent, %s reader: Decode allocated %d bytes", c.name, name, alloc)
			}
		}
	}

	var dh DumpHeader
	var err error
	alloc := ctAllocBytes(func() { dh, err = ParseDumpHeader(hdr) })
	if err != nil || dh.PayloadBytes != claimed || dh.Kind != kindTest {
		t.Errorf("ParseDumpHeader of the 1 GiB header: %+v, %v", dh, err)
	}
	if alloc > 64<<10 {
		t.Errorf("ParseDumpHeader allocated %d bytes", alloc)
	}
}

func TestDecodeBadHeaders(t *testing.T) {
	small := tkParams(1, 1)
	okPay := make([]byte, 16)
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrCorrupt},
		{"bad magic", append([]byte("RKYG"), ctContainer(kindTest, small, 16, okPay)[4:]...), ErrCorrupt},
		{"newer format", append([]byte("RKYF\x02"), ctContainer(kindTest, small, 16, okPay)[5:]...), ErrVersion},
		{"format 0", append([]byte("RKYF\x00"), ctContainer(kindTest, small, 16, okPay)[5:]...), ErrVersion},
		{"unknown kind", ctContainer(Kind(199), small, 16, okPay), ErrCorrupt},
		{"paylen short of params", ctContainer(kindTest, small, 8, okPay[:8]), ErrCorrupt},
		{"paylen beyond params", ctContainer(kindTest, small, 24, make([]byte, 24)), ErrCorrupt},
		{"paylen not words", ctContainer(kindTest, tkParams(0, 0), 3, make([]byte, 3)), ErrCorrupt},
		{"payload above maxPayloadBytes", ctContainer(kindTest, tkParams(tkMaxWords, tkMaxWords), 1<<36, nil), ErrCorrupt},
		{"arrays above maxPayloadBytes, paylen 0", ctContainer(kindTest, tkParams(tkMaxWords, tkMaxWords), 0, []byte{}), ErrCorrupt},
		{"params length too long", append([]byte("RKYF\x01\xc8"), binary.AppendUvarint(nil, maxParamsLen+1)...), ErrCorrupt},
		{"params length overflows", append([]byte("RKYF\x01\xc8"), bytes.Repeat([]byte{0xFF}, 11)...), ErrCorrupt},
		{"params length cut", []byte("RKYF\x01\xc8\x80"), ErrCorrupt},
		{"params length not minimal", ctLongPlen(small, 16, okPay), ErrCorrupt},
		{"params cut", append([]byte("RKYF\x01\xc8"), binary.AppendUvarint(nil, maxParamsLen)...), ErrCorrupt},
		{"params version", ctContainer(kindTest, append([]byte{2}, small[1:]...), 16, okPay), ErrVersion},
		{"payload checksum missing", ctContainer(kindTest, small, 16, okPay)[:len(ctContainer(kindTest, small, 16, okPay))-4], ErrCorrupt},
	}
	for _, c := range cases {
		if err := ctDecodeErr(t, c.name, c.data); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// ctLongPlen builds an encoding whose params length takes one byte more than it
// needs, its header checksum computed as if it did not: the checksum covers the
// minimal form, so only rejecting the long form keeps encodings unique.
func ctLongPlen(params []byte, paylen uint64, payload []byte) []byte {
	canon := ctContainer(kindTest, params, paylen, payload)
	n := len(binary.AppendUvarint(nil, uint64(len(params))))
	long := append(slices.Clone(canon[:6+n]), 0)
	long[6+n-1] |= 0x80
	return append(long, canon[6+n:]...)
}

// TestDecodeHostileParams checks that the test kind's range checks, written with
// paramReader, surface from Decode as ErrCorrupt.
func TestDecodeHostileParams(t *testing.T) {
	build := func(la, lb, tag uint64, rate float64, flag byte, name []byte, extra []byte) []byte {
		var w paramWriter
		w.byte(tkParamVersion)
		w.uint(la)
		w.uint(lb)
		w.uint(tag)
		w.float(rate)
		w.byte(flag)
		w.bytes(name)
		return append(w.bytesOut(), extra...)
	}
	cases := map[string][]byte{
		"a too long":      build(tkMaxWords+1, 0, 0, 0.5, 1, nil, nil),
		"rate 0":          build(0, 0, 0, 0, 1, nil, nil),
		"rate 1":          build(0, 0, 0, 1, 1, nil, nil),
		"rate NaN":        build(0, 0, 0, math.NaN(), 1, nil, nil),
		"rate -Inf":       build(0, 0, 0, math.Inf(-1), 1, nil, nil),
		"bool 2":          build(0, 0, 0, 0.5, 2, nil, nil),
		"name too long":   build(0, 0, 0, 0.5, 0, bytes.Repeat([]byte{'n'}, tkMaxName+1), nil),
		"trailing byte":   build(0, 0, 0, 0.5, 0, nil, []byte{0}),
		"cut in the name": build(0, 0, 0, 0.5, 0, []byte("abc"), nil)[:len(build(0, 0, 0, 0.5, 0, []byte("abc"), nil))-1],
		"no params":       {},
	}
	for name, p := range cases {
		data := ctContainer(kindTest, p, 0, []byte{})
		if err := ctDecodeErr(t, name, data); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	ok := build(0, 0, math.MaxUint64, math.SmallestNonzeroFloat64, 0, bytes.Repeat([]byte{'n'}, tkMaxName), nil)
	if _, err := Decode(bytes.NewReader(ctContainer(kindTest, ok, 0, []byte{}))); err != nil {
		t.Errorf("params at the edges of their ranges: %v", err)
	}
}

func TestParamReader(t *testing.T) {
	var w paramWriter
	w.uint(0)
	w.uint(math.MaxUint64)
	w.uint(300)
	w.float(-2.5)
	w.float(0.25)
	w.byte(0xEE)
	w.bool(true)
	w.bool(false)
	w.bytes([]byte("hello"))
	w.bytes(nil)
	r := newParamReader(w.bytesOut())
	if v := r.uint(); v != 0 {
		t.Errorf("uint = %d", v)
	}
	if v := r.uint(); v != math.MaxUint64 {
		t.Errorf("uint = %d", v)
	}
	if v := r.uintIn("x", 300, 300); v != 300 {
		t.Errorf("uintIn = %d", v)
	}
	if v := r.float(); v != -2.5 {
		t.Errorf("float = %v", v)
	}
	if v := r.rate(); v != 0.25 {
		t.Errorf("rate = %v", v)
	}
	if v := r.byte(); v != 0xEE {
		t.Errorf("byte = %#x", v)
	}
	if a, b := r.bool(), r.bool(); !a || b {
		t.Errorf("bools = %v, %v", a, b)
	}
	if v := r.bytes(5); string(v) != "hello" {
		t.Errorf("bytes = %q", v)
	}
	if v := r.bytes(0); len(v) != 0 {
		t.Errorf("empty bytes = %q", v)
	}
	if err := r.done(); err != nil {
		t.Errorf("done: %v", err)
	}
}

func TestParamReaderRejects(t *testing.T) {
	uv := func(v uint64) []byte { return binary.AppendUvarint(nil, v) }
	fl := func(v float64) []byte { return binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)) }
	cases := []struct {
		name string
		in   []byte
		read func(r *paramReader)
	}{
		{"uint of nothing", nil, func(r *paramReader) { r.uint() }},
		{"uint cut", []byte{0x80}, func(r *paramReader) { r.uint() }},
		{"uint overflow", bytes.Repeat([]byte{0xFF}, 10), func(r *paramReader) { r.uint() }},
		{"uintIn below", uv(4), func(r *paramReader) { r.uintIn("v", 5, 9) }},
		{"uintIn above", uv(10), func(r *paramReader) { r.uintIn("v", 5, 9) }},
		{"float short", make([]byte, 7), func(r *paramReader) { r.float() }},
		{"rate 0", fl(0), func(r *paramReader) { r.rate() }},
		{"rate -0", fl(math.Copysign(0, -1)), func(r *paramReader) { r.rate() }},
		{"rate 1", fl(1), func(r *paramReader) { r.rate() }},
		{"rate negative", fl(-0.1), func(r *paramReader) { r.rate() }},
		{"rate NaN", fl(math.NaN()), func(r *paramReader) { r.rate() }},
		{"rate +Inf", fl(math.Inf(1)), func(r *paramReader) { r.rate() }},
		{"byte of nothing", nil, func(r *paramReader) { r.byte() }},
		{"bool 2", []byte{2}, func(r *paramReader) { r.bool() }},
		{"bool 0xFF", []byte{0xFF}, func(r *paramReader) { r.bool() }},
		{"bytes above max", append(uv(4), "abcd"...), func(r *paramReader) { r.bytes(3) }},
		{"bytes beyond input", append(uv(5), "abcd"...), func(r *paramReader) { r.bytes(10) }},
		{"bytes huge length", uv(math.MaxUint64), func(r *paramReader) { r.bytes(math.MaxInt) }},
		{"trailing", []byte{1, 2}, func(r *paramReader) { r.byte() }},
	}
	for _, c := range cases {
		r := newParamReader(c.in)
		c.read(r)
		err := r.done()
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: done() = %v, want ErrCorrupt", c.name, err)
		}
	}
}

// TestParamReaderSticky checks that after the first failure every read returns zero
// and done reports the first failure, so a decoder can read all its params and
// check once.
func TestParamReaderSticky(t *testing.T) {
	var w paramWriter
	w.uint(10) // out of range below
	w.uint(7)
	w.float(0.5)
	w.byte(9)
	w.bytes([]byte("z"))
	r := newParamReader(w.bytesOut())
	r.uintIn("first", 0, 5)
	if v, f, b, s, bl := r.uint(), r.float(), r.byte(), r.bytes(8), r.bool(); v != 0 || f != 0 || b != 0 || s != nil || bl {
		t.Errorf("reads after a failure returned %v %v %v %q %v, want zeroes", v, f, b, s, bl)
	}
	err := r.done()
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "first") {
		t.Errorf("done() = %v, want the first failure", err)
	}
}

func TestKindString(t *testing.T) {
	want := map[Kind]string{
		KindBloom: "bloom", KindScalable: "scalable-bloom", KindCounting: "counting-bloom",
		KindDLeft: "dleft-counting-bloom", KindCuckoo: "cuckoo", kindTest: "kind(200)", 0: "kind(0)",
	}
	for k, s := range want {
		if k.String() != s {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(k), k.String(), s)
		}
	}
}

// BenchmarkEncode and BenchmarkDecode stream an 8 MiB filter through the codec.
func BenchmarkEncode(b *testing.B) {
	f := newTK(1<<20, 0, 1)
	b.SetBytes(8 << 20)
	for b.Loop() {
		if _, err := Encode(io.Discard, f); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	enc := ctEncode(b, newTK(1<<20, 0, 1))
	b.SetBytes(8 << 20)
	for b.Loop() {
		if _, err := Decode(bytes.NewReader(enc)); err != nil {
			b.Fatal(err)
		}
	}
}
