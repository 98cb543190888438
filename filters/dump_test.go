package filters

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"
)

// dtChunk is one (iterator, data) pair of a dump, as LOADCHUNK receives it: the
// iterator SCANDUMP returned with the data.
type dtChunk struct {
	iter int64
	data []byte
}

// dtDump runs SCANDUMP over f from iterator 0 and returns the header and the payload
// chunks, checking the iteration protocol on the way: first (1, header), then
// chunks whose iterators advance by their payload size, then (0, nil).
func dtDump(t testing.TB, f Filter) (header []byte, chunks []dtChunk) {
	t.Helper()
	next, header, err := DumpChunk(f, 0)
	if err != nil || next != 1 {
		t.Fatalf("DumpChunk(0) = %d, %v; want iterator 1", next, err)
	}
	for iter := next; ; {
		next, data, err := DumpChunk(f, iter)
		if err != nil {
			t.Fatalf("DumpChunk(%d): %v", iter, err)
		}
		if next == 0 {
			if data != nil {
				t.Fatalf("DumpChunk(%d) ended with %d bytes of data", iter, len(data))
			}
			return header, chunks
		}
		if n := int64(len(data)) - 4; n <= 0 || n%8 != 0 || n > DumpChunkBytes || next != iter+n {
			t.Fatalf("DumpChunk(%d) = %d with %d bytes", iter, next, len(data))
		}
		// LOADCHUNK is given the iterator SCANDUMP returned with the chunk.
		chunks = append(chunks, dtChunk{next, data})
		iter = next
	}
}

// dtLoad builds a filter from a dump, loading the chunks in the order given.
func dtLoad(t testing.TB, header []byte, chunks []dtChunk) Filter {
	t.Helper()
	g, err := LoadHeader(header)
	if err != nil {
		t.Fatalf("LoadHeader: %v", err)
	}
	for _, c := range chunks {
		if err := LoadChunk(g, c.iter, c.data); err != nil {
			t.Fatalf("LoadChunk(%d): %v", c.iter, err)
		}
	}
	return g
}

// dumpRoundTrip moves f through DumpChunk, LoadHeader and LoadChunk, loading
// the chunks in reverse order, checks that the result encodes exactly like f
// and has the same derived state, and returns it.
func dumpRoundTrip(t testing.TB, f Filter) Filter {
	t.Helper()
	header, chunks := dtDump(t, f)
	slices.Reverse(chunks)
	g := dtLoad(t, header, chunks)
	if !bytes.Equal(encodeOf(t, f), encodeOf(t, g)) {
		t.Fatal("filter loaded from dump chunks differs from the original")
	}
	if !reflect.DeepEqual(f, g) {
		t.Fatal("filter loaded from dump chunks has different derived state")
	}
	return g
}

// encodeOf returns f's encoding, checking that WriteTo reports its length.
func encodeOf(t testing.TB, f Filter) []byte {
	t.Helper()
	var buf bytes.Buffer
	if n, err := f.WriteTo(&buf); err != nil || n != int64(buf.Len()) {
		t.Fatalf("WriteTo = %d, %v; wrote %d bytes", n, err, buf.Len())
	}
	return buf.Bytes()
}

// dtBig is a test filter of several MiB, its arrays not multiples of a chunk, so
// chunks straddle the boundary between its arrays.
func dtBig() *tkFilter { return newTK(500_000, 250_003, 11) }

func TestDumpChunkIteration(t *testing.T) {
	for _, f := range []*tkFilter{newTK(0, 0, 1), newTK(3, 2, 2), newTK(1, 0, 3), dtBig()} {
		enc := ctEncode(t, f)
		header, chunks := dtDump(t, f)
		paylen := int64(f.a.len()+f.b.len()) * 8

		// The header chunk is the encoding's header.
		if !bytes.HasPrefix(enc, header) || int64(len(enc)-len(header)) != paylen+4 {
			t.Fatalf("header chunk of %d bytes is not the encoding's header", len(header))
		}
		// Every chunk but the last is full.
		wantChunks := int((paylen + DumpChunkBytes - 1) / DumpChunkBytes)
		if len(chunks) != wantChunks {
			t.Fatalf("%d payload bytes gave %d chunks, want %d", paylen, len(chunks), wantChunks)
		}
		for i, c := range chunks[:max(0, len(chunks)-1)] {
			if len(c.data) != DumpChunkBytes+4 {
				t.Fatalf("chunk %d of %d has %d bytes", i, len(chunks), len(c.data))
			}
		}
		// The chunks' payload bytes, in order, are the encoding's payload, and
		// each carries the CRC-32C of the dump's id (a hash of the header), its
		// offset and its bytes.
		var body []byte
		for _, c := range chunks {
			n := len(c.data) - 4
			var pre [16]byte
			binary.LittleEndian.PutUint64(pre[:8], Hash(header).H1)
			binary.LittleEndian.PutUint64(pre[8:], uint64(len(body)))
			sum := crc32.Checksum(append(pre[:], c.data[:n]...), crc32.MakeTable(crc32.Castagnoli))
			if binary.LittleEndian.Uint32(c.data[n:]) != sum {
				t.Fatalf("chunk at offset %d: bad checksum", len(body))
			}
			body = append(body, c.data[:n]...)
		}
		if !bytes.Equal(body, enc[len(header):len(enc)-4]) {
			t.Fatalf("chunks do not concatenate to the payload")
		}
	}
}

func TestDumpChunkAnyIterator(t *testing.T) {
	f := newTK(3, 2, 4)
	first, want, err := DumpChunk(f, 1)
	if err != nil || first == 0 {
		t.Fatalf("DumpChunk(1) = %d, %v", first, err)
	}
	// As in RedisBloom, an iterator is a position: one inside the payload that
	// SCANDUMP never handed out answers the chunk holding that byte.
	for _, iter := range []int64{2, 5, 8, 9, 10, 17, 18, 33, 40} {
		next, data, err := DumpChunk(f, iter)
		if err != nil || next != first || !bytes.Equal(data, want) {
			t.Errorf("DumpChunk(%d) = %d, %d bytes, %v; want the chunk holding it (%d, %d bytes)",
				iter, next, len(data), err, first, len(want))
		}
	}
	// Negative iterators, like those past the end, end the dump.
	for _, iter := range []int64{-1, -8, -7, math.MinInt64} {
		if next, data, err := DumpChunk(f, iter); next != 0 || data != nil || err != nil {
			t.Errorf("DumpChunk(%d) = %d, %d bytes, %v; want the end", iter, next, len(data), err)
		}
	}
	// Past the end is the end of the dump, whatever the iterator.
	for _, iter := range []int64{41, 49, 1 + 8*1000, 1 + DumpChunkBytes, math.MaxInt64 - 6, math.MaxInt64} {
		if next, data, err := DumpChunk(f, iter); next != 0 || data != nil || err != nil {
			t.Errorf("DumpChunk(%d) = %d, %d bytes, %v; want the end", iter, next, len(data), err)
		}
	}
}

func TestParseDumpHeader(t *testing.T) {
	f := newTK(7, 4, 5)
	header, chunks := dtDump(t, f)
	dh, err := ParseDumpHeader(header)
	if err != nil || dh.Kind != kindTest || dh.PayloadBytes != 11*8 {
		t.Fatalf("ParseDumpHeader = %+v, %v; want kind %v, 88 bytes", dh, err, kindTest)
	}
	bad := map[string][]byte{
		"empty":           nil,
		"truncated":       header[:len(header)-1],
		"trailing byte":   append(slices.Clone(header), 0),
		"a payload chunk": chunks[0].data,
		"whole encoding":  ctEncode(t, f),
		"unknown kind":    ctContainer(Kind(199), f.params(), 88, nil),
		"wrong paylen":    ctContainer(kindTest, f.params(), 80, nil),
		"bad params":      ctContainer(kindTest, tkParams(tkMaxWords+1, 0), 8*(tkMaxWords+1), nil),
		"too large":       ctContainer(kindTest, tkParams(tkMaxWords, tkMaxWords), 0, nil),
	}
	for i := range header {
		b := slices.Clone(header)
		b[i] ^= 0x10
		bad["byte "+strconv.Itoa(i)+" damaged"] = b
	}
	for name, data := range bad {
		if dh, err := ParseDumpHeader(data); !errors.Is(err, ErrBadChunk) {
			t.Errorf("ParseDumpHeader(%s) = %+v, %v; want ErrBadChunk", name, dh, err)
		}
		if g, err := LoadHeader(data); !errors.Is(err, ErrBadChunk) || g != nil {
			t.Errorf("LoadHeader(%s) = %v; want ErrBadChunk", name, err)
		}
	}
}

func TestLoadHeaderIsEmpty(t *testing.T) {
	f := newTK(7, 4, 6)
	header, _ := dtDump(t, f)
	g, err := LoadHeader(header)
	if err != nil {
		t.Fatal(err)
	}
	tk := g.(*tkFilter)
	if tk.a.len() != 7 || tk.b.len() != 4 || slices.ContainsFunc(append(tk.a.slice(), tk.b.slice()...), func(w uint64) bool { return w != 0 }) {
		t.Errorf("LoadHeader gave arrays %v %v, want 7 and 4 zero words", tk.a.slice(), tk.b.slice())
	}
	if tk.tag != f.tag || !bytes.Equal(tk.name, f.name) {
		t.Errorf("LoadHeader lost the params")
	}
}

func TestLoadChunkReassembles(t *testing.T) {
	for _, f := range []*tkFilter{newTK(0, 0, 1), newTK(3, 2, 2), dtBig()} {
		want := ctEncode(t, f)
		header, chunks := dtDump(t, f)

		g := dtLoad(t, header, chunks)
		if !bytes.Equal(ctEncode(t, g), want) {
			t.Fatalf("%d chunks loaded in order: encoding differs", len(chunks))
		}
		if g.(*tkFilter).loads != len(chunks) {
			t.Errorf("chunkLoaded called %d times for %d chunks", g.(*tkFilter).loads, len(chunks))
		}

		// Chunks may arrive in any order, and a chunk sent twice before the last
		// one is in does no harm.
		rng := rand.New(rand.NewPCG(7, 7))
		shuffled := slices.Clone(chunks)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		reversed := slices.Clone(chunks)
		slices.Reverse(reversed)
		repeated := slices.Clone(shuffled)
		if n := len(shuffled); n > 1 {
			repeated = append(append(slices.Clone(shuffled[:n-1]), shuffled[:n-1]...), shuffled[n-1])
		}
		for name, order := range map[string][]dtChunk{
			"reversed": reversed,
			"shuffled": shuffled,
			"repeated": repeated,
		} {
			if g := dtLoad(t, header, order); !bytes.Equal(ctEncode(t, g), want) || Loading(g) {
				t.Fatalf("%d chunks loaded %s: encoding differs, or still loading", len(chunks), name)
			}
		}
		// Once the last chunk is in, the filter is complete and takes no more.
		if len(chunks) > 0 {
			g := dtLoad(t, header, chunks)
			if err := LoadChunk(g, chunks[0].iter, chunks[0].data); !errors.Is(err, ErrBadChunk) {
				t.Fatalf("a chunk after the last: %v, want ErrBadChunk", err)
			}
		}
	}
}

// dtRejected loads one bad chunk into g, expecting one of the errors in want and no
// change at all to g.
func dtRejected(t *testing.T, what string, g *tkFilter, iter int64, data []byte, want ...error) {
	t.Helper()
	before, loads := ctEncode(t, g), g.loads
	err := LoadChunk(g, iter, data)
	if !slices.ContainsFunc(want, func(w error) bool { return errors.Is(err, w) }) {
		t.Fatalf("%s: LoadChunk(%d, %d bytes) = %v, want one of %v", what, iter, len(data), err, want)
	}
	if !bytes.Equal(ctEncode(t, g), before) || g.loads != loads {
		t.Fatalf("%s: a rejected chunk changed the filter", what)
	}
}

func TestLoadChunkRejects(t *testing.T) {
	f := newTK(20, 13, 8)
	header, chunks := dtDump(t, f)
	c := chunks[0]
	g := dtLoad(t, header, nil).(*tkFilter)
	n := int64(len(c.data) - 4)

	// Every damaged byte of the chunk is caught by its checksum.
	for i := range c.data {
		for _, x := range []byte{0x01, 0x80, 0xFF} {
			bad := slices.Clone(c.data)
			bad[i] ^= x
			dtRejected(t, "damaged", g, c.iter, bad, ErrBadChunk)
		}
	}
	// An iterator that points elsewhere: the chunk's offset is in its checksum,
	// so an aligned place inside the filter is as wrong as one outside it.
	for _, iter := range []int64{c.iter - 8, c.iter + 8, c.iter - 1, c.iter + 1, c.iter + 1<<20,
		0, 1, -1, n, n + 1 + 8*40, math.MinInt64, math.MaxInt64} {
		dtRejected(t, "wrong iterator", g, iter, c.data, ErrBadPosition, ErrBadChunk)
	}
	// A shorter or longer chunk at the right iterator, and malformed lengths.
	dtRejected(t, "cut", g, c.iter, append(slices.Clone(c.data[:n-8]), c.data[n:]...), ErrBadChunk, ErrBadPosition)
	dtRejected(t, "extended", g, c.iter, append(append(slices.Clone(c.data[:n]), make([]byte, 8)...), c.data[n:]...), ErrBadChunk, ErrBadPosition)
	dtRejected(t, "not words", g, c.iter, c.data[1:], ErrBadChunk)
	dtRejected(t, "no checksum", g, c.iter, c.data[:3], ErrBadChunk)
	dtRejected(t, "empty", g, c.iter, nil, ErrBadChunk)
	dtRejected(t, "the header", g, 1, header, ErrBadChunk, ErrBadPosition)
	bigTK := newTK(DumpChunkBytes/8+1, 0, 1)
	bigG := dtLoad(t, dtHeaderOf(t, bigTK), nil).(*tkFilter)
	big := make([]byte, DumpChunkBytes+8+4)
	binary.LittleEndian.PutUint32(big[len(big)-4:], chunkSum(dumpID(dtHeaderOf(t, bigTK)), 0, big[:len(big)-4]))
	dtRejected(t, "above DumpChunkBytes", bigG, int64(len(big)-4)+1, big, ErrBadChunk)

	// A chunk that runs past the end of a smaller filter of the same kind.
	small := dtLoad(t, dtHeaderOf(t, newTK(2, 1, 8)), nil).(*tkFilter)
	dtRejected(t, "past the end", small, c.iter, c.data, ErrBadPosition, ErrBadChunk)
	dtRejected(t, "past the end, sealed for it", small, c.iter, dtSeal(small, c.iter, c.data[:n]), ErrChunkTooBig)

	// The good chunk still loads.
	if err := LoadChunk(g, c.iter, c.data); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ctEncode(t, g), ctEncode(t, f)) {
		t.Error("after the rejects, the good chunk did not rebuild the filter")
	}
}

func dtHeaderOf(t *testing.T, f Filter) []byte {
	t.Helper()
	_, header, err := DumpChunk(f, 0)
	if err != nil {
		t.Fatal(err)
	}
	return header
}

// TestLoadChunkOtherDump: a chunk's checksum covers the dump it belongs to, so a
// chunk of another filter of the same shape, or of the same filter once it has
// changed, is refused, and a filter that is not being loaded takes no chunk.
func TestLoadChunkOtherDump(t *testing.T) {
	f1, f2 := newTK(3, 2, 1), newTK(3, 2, 2)
	h1, c1 := dtDump(t, f1)
	_, c2 := dtDump(t, f2)
	g := dtLoad(t, h1, nil).(*tkFilter)
	dtRejected(t, "another filter's chunk", g, c2[0].iter, c2[0].data, ErrBadChunk)
	f1.tag++ // a counter changed between SCANDUMP calls
	_, changed := dtDump(t, f1)
	dtRejected(t, "a chunk of the filter after it changed", g, changed[0].iter, changed[0].data, ErrBadChunk)
	dtRejected(t, "a complete filter", f2, c2[0].iter, c2[0].data, ErrBadChunk)
	if err := LoadChunk(g, c1[0].iter, c1[0].data); err != nil {
		t.Fatalf("the dump's own chunk: %v", err)
	}
}

// dtFuzzMaxPayload is the largest filter FuzzLoadChunk creates: LoadHeader
// allocates the whole payload, as a server does only after checking the size that
// ParseDumpHeader reports.
const dtFuzzMaxPayload = 1 << 20

// FuzzLoadChunk loads a header and then one chunk with an arbitrary iterator and
// data. With reseal the header's checksum is rewritten, and the chunk's checksum
// is computed for the dump and the place its iterator names, so that arbitrary
// words reach the kinds' checks. Nothing panics; ParseDumpHeader and LoadHeader
// agree; a rejected chunk changes nothing; an accepted one lands where its
// iterator says and nowhere else, and the filter it leaves, complete or still
// being loaded, encodes, decodes and re-encodes identically.
func FuzzLoadChunk(f *testing.F) {
	filters := []Filter{newTK(0, 0, 1), newTK(3, 2, 2), newTK(1, 0, 3)}
	for _, enc := range ktSeedEncodings(f) {
		g, err := Decode(bytes.NewReader(enc))
		if err != nil {
			f.Fatal(err)
		}
		filters = append(filters, g)
	}
	for _, g := range filters {
		header, chunks := dtDump(f, g)
		f.Add(header, int64(1), []byte{}, false)
		for _, c := range chunks {
			f.Add(header, c.iter, c.data, false)
			f.Add(header, c.iter-8, c.data, true)
			f.Add(header, c.iter, c.data[8:], true)
		}
	}
	f.Fuzz(func(t *testing.T, header []byte, iter int64, data []byte, reseal bool) {
		if reseal {
			header = dtResealHeader(header)
		}
		dh, perr := ParseDumpHeader(header)
		if perr == nil && dh.PayloadBytes > dtFuzzMaxPayload {
			return
		}
		g, err := LoadHeader(header)
		if (err == nil) != (perr == nil) {
			t.Fatalf("ParseDumpHeader: %v, but LoadHeader: %v", perr, err)
		}
		if err != nil {
			if !errors.Is(err, ErrBadChunk) {
				t.Fatalf("LoadHeader failed with %v, not ErrBadChunk", err)
			}
			return
		}
		if reseal && len(data) >= 4 && Loading(g) {
			data = dtSeal(g, iter, data[:len(data)-4])
		}
		before, words := ctEncode(t, g), dtWords(g)
		if err := LoadChunk(g, iter, data); err != nil {
			if !errors.Is(err, ErrBadChunk) && !errors.Is(err, ErrBadPosition) &&
				!errors.Is(err, ErrChunkOutside) && !errors.Is(err, ErrChunkTooBig) {
				t.Fatalf("LoadChunk failed with %v", err)
			}
			if !bytes.Equal(ctEncode(t, g), before) {
				t.Fatalf("a rejected chunk changed the filter")
			}
			return
		}
		n := int64(len(data) - 4)
		off := iter - 1 - n
		for i, w := range dtWords(g) {
			want := words[i]
			if at := int64(i)*8 - off; at >= 0 && at < n {
				want = binary.LittleEndian.Uint64(data[at:])
			}
			if w != want {
				t.Fatalf("chunk of %d bytes at iterator %d did not land in its place alone (word %d)", n, iter, i)
			}
		}
		after := ctEncode(t, g)
		h, err := Decode(bytes.NewReader(after))
		if err != nil {
			t.Fatalf("a %v after LoadChunk does not decode: %v", g.Kind(), err)
		}
		if !bytes.Equal(ctEncode(t, h), after) || Loading(h) != Loading(g) {
			t.Fatalf("a %v after LoadChunk re-encodes differently", g.Kind())
		}
	})
}

// dtSeal returns body followed by the checksum that makes it the chunk of g's
// dump that iter names.
func dtSeal(g Filter, iter int64, body []byte) []byte {
	data := slices.Clone(body)
	return binary.LittleEndian.AppendUint32(data, chunkSum(g.tracker().ld.id, iter-1-int64(len(body)), body))
}

// dtWords returns f's payload as one array.
func dtWords(f Filter) []uint64 {
	var words []uint64
	for _, s := range f.payload() {
		words = append(words, s.slice()...)
	}
	return words
}

// dtResealHeader rewrites the checksum at the end of a header chunk.
func dtResealHeader(header []byte) []byte {
	if len(header) < 4 {
		return header
	}
	header = slices.Clone(header)
	n := len(header) - 4
	binary.LittleEndian.PutUint32(header[n:], crc32.Checksum(header[:n], castagnoli))
	return header
}

// kindBroken is a second test-only kind whose decoder misbehaves as its one param
// byte says, to check that Decode and LoadHeader pass a kind's refusals on.
const kindBroken Kind = 201

func init() {
	registerDecoder(kindBroken, func(params []byte) (Filter, []int, func([]paged) error, error) {
		f := &tkFilter{rate: 0.5}
		if len(params) != 1 {
			return nil, nil, nil, ErrCorrupt
		}
		refuse := func([]paged) error { return fmt.Errorf("%w: install refuses", ErrCorrupt) }
		if params[0] == 0 {
			return f, []int{4, -1}, refuse, nil // a length that went negative in a conversion
		}
		return f, []int{1}, refuse, nil
	})
}

func TestDecoderMisbehaves(t *testing.T) {
	for _, c := range []struct {
		name   string
		params []byte
		paylen uint64
	}{
		{"negative length", []byte{0}, 24},
		{"install refuses", []byte{1}, 8},
	} {
		enc := ctContainer(kindBroken, c.params, c.paylen, make([]byte, c.paylen))
		if err := ctDecodeErr(t, c.name, enc); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decode: %v, want ErrCorrupt", c.name, err)
		}
		header := enc[:len(enc)-int(c.paylen)-4]
		if g, err := LoadHeader(header); !errors.Is(err, ErrBadChunk) || g != nil {
			t.Errorf("%s: LoadHeader: %v, want ErrBadChunk", c.name, err)
		}
	}
}

// TestLoadChunkIntoCompleteFilter: a complete filter takes no chunk; one aimed
// past its end, or running past it, is told so as RedisBloom tells it.
func TestLoadChunkIntoCompleteFilter(t *testing.T) {
	f := newTK(3, 2, 4)
	next, data, err := DumpChunk(f, 1)
	if err != nil || next == 0 {
		t.Fatal(next, err)
	}
	paylen := next - 1
	for _, c := range []struct {
		iter int64
		data []byte
		want error
	}{
		{next, data, ErrBadChunk},
		{paylen + 100, make([]byte, 12), ErrChunkOutside},
		{paylen + 5, make([]byte, 16), ErrChunkTooBig},
		{-3, make([]byte, 12), ErrBadChunk},
	} {
		if err := LoadChunk(f, c.iter, c.data); !errors.Is(err, c.want) {
			t.Errorf("LoadChunk(%d, %d bytes) = %v, want %v", c.iter, len(c.data), err, c.want)
		}
	}
}
