package filters

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func mustNewRBChain(t testing.TB, capacity uint64, p float64, expansion uint32, nonScaling bool) *RBChain {
	t.Helper()
	c, err := NewRBChain(capacity, p, expansion, nonScaling)
	if err != nil {
		t.Fatalf("NewRBChain(%d, %v, %d, %v): %v", capacity, p, expansion, nonScaling, err)
	}
	return c
}

// rbAddN adds items prefix0 .. prefix(n-1), failing the test on an error.
func rbAddN(t testing.TB, c *RBChain, prefix string, n int) (added int) {
	t.Helper()
	for _, it := range rbItems(prefix, 0, n) {
		ok, err := c.Add(it)
		if err != nil {
			t.Fatalf("Add(%q): %v", it, err)
		}
		if ok {
			added++
		}
	}
	return added
}

// TestRBChainBPEVectors holds the sizing's logarithm to C's: bits per entry and
// hashes as RedisBloom computes them with glibc, for common error rates and 63
// halvings of each (every link a chain grows from them).
func TestRBChainBPEVectors(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "redisbloom", "bpe.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		var pb, lb, bb uint64
		var k uint32
		if _, err := fmt.Sscanf(sc.Text(), "%x %x %x %d", &pb, &lb, &bb, &k); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		p := math.Float64frombits(pb)
		if got := math.Float64bits(rbLn(p)); got != lb {
			t.Errorf("ln(%v) = %x, C %x", p, got, lb)
		}
		s, err := rbInit(100, p, rbOptNoRound|rbOptForce64)
		if err != nil || math.Float64bits(s.bpe) != bb || s.hashes != k {
			t.Errorf("rbInit(100, %v) = bpe %x, %d hashes, %v; C %x, %d", p, math.Float64bits(s.bpe), s.hashes, err, bb, k)
		}
		n++
	}
	if n != 19*64 {
		t.Fatalf("%d vectors", n)
	}
}

// TestRBLnCorrectlyRounded: rbLn is correctly rounded. glibc's log, within 0.52
// ulp, rounds these three the other way (checked with Python's decimal at 80
// digits: the exact logarithm lies 0.4997, 0.4997 and 0.4999 ulp from ours).
// Elsewhere rbLn is within one ulp of math.Log, for normal numbers.
func TestRBLnCorrectlyRounded(t *testing.T) {
	for _, v := range []struct {
		x    float64
		want uint64
	}{
		{0.9858484186980231, 0xbf8d3080f4551ef3},
		{0.16689924318199345, 0xbffca555c0964401},
		{0.374187926947984, 0xbfef74b6654c929e},
		{1, 0}, {2, 0x3fe62e42fefa39ef}, {0.5, 0xbfe62e42fefa39ef},
		{math.SmallestNonzeroFloat64, 0xc0874385446d71c3},
		{1.81784611785612e-309, 0xc0863735899d8536}, // subnormal: Go's math.Log gives -709.01
	} {
		if got := math.Float64bits(rbLn(v.x)); got != v.want {
			t.Errorf("rbLn(%v) = %x, want %x", v.x, got, v.want)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		x := math.Float64frombits(r.Uint64() >> 1)
		if x < 0x1p-1022 || math.IsInf(x, 0) || math.IsNaN(x) {
			continue
		}
		got, ref := rbLn(x), math.Log(x)
		if d := math.Float64bits(got) - math.Float64bits(ref); got != ref && d != 1 && d != ^uint64(0) {
			t.Fatalf("rbLn(%v) = %v, math.Log %v", x, got, ref)
		}
	}
	for _, x := range []float64{0, -1, math.Inf(1), math.NaN()} {
		if !math.IsNaN(rbLn(x)) {
			t.Errorf("rbLn(%v) = %v, want NaN", x, rbLn(x))
		}
	}
}

// TestRBChainReserve pins what BF.RESERVE makes in RedisBloom: BF.INFO Size 240
// for the defaults and 104 for capacity 3 NONSCALING (issue 12), and BF.DEBUG's
// line for the defaults, as RedisBloom 2.6.28 answers.
func TestRBChainReserve(t *testing.T) {
	c := mustNewRBChain(t, 100, 0.01, 2, false)
	if c.RedisBloomSize() != 240 || c.Capacity() != 100 || c.Filters() != 1 || c.Count() != 0 ||
		c.Expansion() != 2 || c.NonScaling() || c.ErrorRate() != 0.01 {
		t.Errorf("defaults: size %d, capacity %d, filters %d, count %d, expansion %d, nonscaling %v, rate %v",
			c.RedisBloomSize(), c.Capacity(), c.Filters(), c.Count(), c.Expansion(), c.NonScaling(), c.ErrorRate())
	}
	want := []string{"size:0", "bytes:144 bits:1152 hashes:8 hashwidth:64 capacity:100 size:0 ratio:0.005"}
	if !reflect.DeepEqual(c.Debug(), want) {
		t.Errorf("Debug() = %q, want %q", c.Debug(), want)
	}
	if n := mustNewRBChain(t, 3, 0.01, 2, true); n.RedisBloomSize() != 104 || !n.NonScaling() || n.ErrorRate() != 0.01 {
		t.Errorf("capacity 3 NONSCALING: size %d, nonscaling %v, rate %v", n.RedisBloomSize(), n.NonScaling(), n.ErrorRate())
	}
	if z := mustNewRBChain(t, 10, 0.01, 0, false); !z.NonScaling() || z.Expansion() != 0 {
		t.Error("expansion 0 does not make the chain non-scaling")
	}
	if capped := mustNewRBChain(t, 10, 0.9, 2, false); capped.ErrorRate() != RBMaxErrorRate {
		t.Errorf("error rate 0.9 gives %v, want it capped at %v", capped.ErrorRate(), RBMaxErrorRate)
	}
	for _, bad := range []struct {
		capacity  uint64
		p         float64
		expansion uint32
	}{
		{0, 0.01, 2}, {rbMaxEntries + 1, 0.01, 2}, {10, 0, 2}, {10, 1, 2}, {10, math.NaN(), 2}, {10, -0.1, 2},
		{10, 0.01, rbMaxGrowth + 1},
	} {
		if _, err := NewRBChain(bad.capacity, bad.p, bad.expansion, false); !errors.Is(err, ErrBadParam) {
			t.Errorf("NewRBChain(%d, %v, %d): %v, want ErrBadParam", bad.capacity, bad.p, bad.expansion, err)
		}
		if _, err := RBChainBytes(bad.capacity, bad.p, bad.expansion, false); !errors.Is(err, ErrBadParam) {
			t.Errorf("RBChainBytes(%d, %v, %d): %v, want ErrBadParam", bad.capacity, bad.p, bad.expansion, err)
		}
	}
	// A chain too large for one filter is a *SizeError, found without allocating.
	var se *SizeError
	if _, err := RBChainBytes(rbMaxEntries, 1e-9, 2, false); !errors.As(err, &se) || se.Need < maxPayloadBytes {
		t.Errorf("RBChainBytes(2^53, 1e-9): %v, want a SizeError", err)
	}
	for _, p := range []float64{0.25, 0.01, 1e-6} {
		for _, n := range []uint64{1, 100, 123457} {
			want, err := RBChainBytes(n, p, 2, n == 1)
			if c := mustNewRBChain(t, n, p, 2, n == 1); err != nil || want != c.MemoryBytes() {
				t.Errorf("RBChainBytes(%d, %v) = %d, %v; MemoryBytes %d", n, p, want, err, c.MemoryBytes())
			}
		}
	}
}

// TestRBChainGrowth follows RedisBloom's rules add by add: an item any link holds
// is not added; the chain grows on the add that finds the newest link holding
// its capacity, by a link of expansion times the capacity at half the error
// rate; NextGrowthBytes is what growing costs.
func TestRBChainGrowth(t *testing.T) {
	for _, expansion := range []uint32{1, 2, 5} {
		c := mustNewRBChain(t, 20, 0.05, expansion, false)
		trues := uint64(0)
		for i, it := range rbItems("g:", 0, 1500) {
			cur := c.links[len(c.links)-1]
			held, mem, next, links := c.Test(it), c.MemoryBytes(), c.NextGrowthBytes(), c.Filters()
			ok, err := c.Add(it)
			if err != nil || ok == held {
				t.Fatalf("x%d item %d: Add = %v, %v; it tested %v", expansion, i, ok, err, held)
			}
			if !c.Test(it) {
				t.Fatalf("x%d item %d: false negative", expansion, i)
			}
			grew := c.Filters() != links
			if grew != (ok && cur.size >= cur.entries) {
				t.Fatalf("x%d item %d: grew %v, newest held %d of %d", expansion, i, grew, cur.size, cur.entries)
			}
			if grew {
				l := c.links[len(c.links)-1]
				if l.entries != cur.entries*uint64(expansion) || l.err != cur.err/2 || c.MemoryBytes()-mem != next {
					t.Fatalf("x%d: new link capacity %d at %v, %d bytes; want %d at %v, %d bytes",
						expansion, l.entries, l.err, c.MemoryBytes()-mem, cur.entries*uint64(expansion), cur.err/2, next)
				}
			}
			if ok {
				trues++
			}
		}
		var sizes uint64
		for _, l := range c.Links() {
			sizes += l.Size
		}
		if c.Count() != trues || sizes != trues {
			t.Errorf("x%d: Count %d, links' sizes %d, adds that returned true %d", expansion, c.Count(), sizes, trues)
		}
		t.Logf("expansion %d: %d links, %d items", expansion, c.Filters(), c.Count())
	}
}

// TestRBChainNonScalingFull: a full non-scaling chain refuses new items with
// ErrFull and changes nothing, while items it holds still add as "there".
func TestRBChainNonScalingFull(t *testing.T) {
	c := mustNewRBChain(t, 50, 0.01, 2, true)
	full := 0
	for _, it := range rbItems("f:", 0, 200) {
		before := c.DumpHeader()
		ok, err := c.Add(it)
		if errors.Is(err, ErrFull) {
			full++
			if ok || !bytes.Equal(before, c.DumpHeader()) || c.Test(it) {
				t.Fatal("a refused add changed the chain")
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if full == 0 || c.Count() != 50 || c.Filters() != 1 || c.NextGrowthBytes() != 0 {
		t.Errorf("%d refused, count %d, %d links, next growth %d", full, c.Count(), c.Filters(), c.NextGrowthBytes())
	}
	if ok, err := c.Add([]byte("f:3")); ok || err != nil {
		t.Errorf("adding a held item to a full chain: %v, %v; want false, nil", ok, err)
	}
}

// rbHeaderSet rewrites a field of a dump header: link -1 is the chain's own.
func rbHeaderSet(h []byte, link int, field string, v uint64) []byte {
	h = bytes.Clone(h)
	offs := map[string][2]int{"size": {0, 8}, "nfilters": {8, 4}, "options": {12, 4}, "growth": {16, 4}}
	base := 0
	if link >= 0 {
		base = rbChainHeaderBytes + link*rbLinkHeaderBytes
		offs = map[string][2]int{"bytes": {0, 8}, "bits": {8, 8}, "size": {16, 8}, "error": {24, 8}, "bpe": {32, 8},
			"hashes": {40, 4}, "entries": {44, 8}, "n2": {52, 1}}
	}
	o, ok := offs[field]
	if !ok {
		panic("no header field " + field)
	}
	for i := range o[1] {
		h[base+o[0]+i] = byte(v >> (8 * i))
	}
	return h
}

// TestRBChainCannotGrow: an Add that needs a link the chain cannot make fails
// with ErrGrowth and changes nothing, where RedisBloom answers "problem
// inserting into filter".
func TestRBChainCannotGrow(t *testing.T) {
	one, err := newRBChainOptions(2, 0.01, 2, rbOptNoRound|rbOptForce64)
	if err != nil {
		t.Fatal(err)
	}
	h := one.DumpHeader()
	// full sets the only link's capacity and size, and the chain's size, to n.
	full := func(h []byte, n uint64) []byte {
		return rbHeaderSet(rbHeaderSet(rbHeaderSet(h, 0, "entries", n), 0, "size", n), -1, "size", n)
	}
	for name, hdr := range map[string][]byte{
		"expansion 0":           rbHeaderSet(full(h, 2), -1, "growth", 0),
		"capacity overflows":    full(h, rbMaxEntries),
		"capacity 0":            rbHeaderSet(full(h, 0), -1, "growth", 3),
		"too large":             full(h, 1<<40),
		"error rate underflows": rbHeaderSet(full(h, 2), 0, "error", math.Float64bits(math.SmallestNonzeroFloat64)),
	} {
		c, err := NewRBChainFromHeader(hdr)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		before := rbEncoding(t, c)
		ok, err := c.Add([]byte("new item"))
		if ok || !errors.Is(err, ErrGrowth) || !bytes.Equal(rbEncoding(t, c), before) {
			t.Errorf("%s: Add = %v, %v (changed %v); want ErrGrowth, no change", name, ok, err, !bytes.Equal(rbEncoding(t, c), before))
		}
		if c.NextGrowthBytes() != 0 {
			t.Errorf("%s: NextGrowthBytes %d for a chain that cannot grow", name, c.NextGrowthBytes())
		}
	}
}

// readAll returns the link's bytes.
func (l *rbLink) readAll() []byte {
	b := make([]byte, l.bytes)
	l.readBytes(0, b)
	return b
}

func rbEncoding(t testing.TB, c Filter) []byte { return ctEncode(t, c) }

// TestRBChainErrorUnderflow: a chain that adds a link per item halves its error
// rate each time until it reaches zero, which RedisBloom refuses too: some 1075
// links, below rbMaxLinks, with at most 1075 hashes each.
func TestRBChainErrorUnderflow(t *testing.T) {
	c := mustNewRBChain(t, 1, 0.25, 1, false)
	var err error
	for i := 0; err == nil; i++ {
		_, err = c.Add(fmt.Appendf(nil, "%d", i))
	}
	last := c.links[len(c.links)-1]
	if !errors.Is(err, ErrGrowth) || c.Filters() < 1070 || c.Filters() > 1076 || last.err*0.5 != 0 || last.hashes > 1075 {
		t.Fatalf("%v at %d links, the last at %v with %d hashes", err, c.Filters(), last.err, last.hashes)
	}
	if _, err := ParseRBChainHeader(c.DumpHeader()); err != nil {
		t.Fatalf("the header of a chain of %d links: %v", c.Filters(), err)
	}
}

// rbTinyLinks returns the header of a chain of n links of 8 bytes, each holding
// its capacity of one item.
func rbTinyLinks(n int) []byte {
	c := &RBChain{options: rbOptNoRound | rbOptForce64, growth: 2, size: uint64(n)}
	s, _ := rbInit(1, 0.1, c.options)
	for range n {
		l := s.link()
		l.size = 1
		c.links = append(c.links, l)
	}
	return c.DumpHeader()
}

// TestRBChainMaxLinks: a header of rbMaxLinks links is taken, one more is not,
// and a chain of rbMaxLinks links does not grow.
func TestRBChainMaxLinks(t *testing.T) {
	if _, err := ParseRBChainHeader(rbTinyLinks(rbMaxLinks + 1)); !errors.Is(err, ErrRBBadData) {
		t.Fatalf("%d links: %v, want ErrRBBadData", rbMaxLinks+1, err)
	}
	c, err := NewRBChainFromHeader(rbTinyLinks(rbMaxLinks))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Add([]byte("x")); ok || !errors.Is(err, ErrGrowth) || c.Filters() != rbMaxLinks {
		t.Fatalf("add to a full chain of %d links: %v, %v, %d links", rbMaxLinks, ok, err, c.Filters())
	}
}

// TestRBChainDebugFormat holds BF.DEBUG's %g to C's printf.
func TestRBChainDebugFormat(t *testing.T) {
	for _, v := range []struct {
		x    float64
		want string
	}{
		{0.005, "0.005"}, {0.0025, "0.0025"}, {0.00125, "0.00125"}, {0.000625, "0.000625"},
		{0.0003125, "0.0003125"}, {0.00015625, "0.00015625"}, {7.8125e-05, "7.8125e-05"}, {1e-05, "1e-05"},
		{0.000123456789, "0.000123457"}, {0.25, "0.25"}, {0.125, "0.125"}, {0.1, "0.1"}, {0.5, "0.5"},
		{0.05, "0.05"}, {0.0005, "0.0005"}, {3.0517578125e-05, "3.05176e-05"}, {1.5e-10, "1.5e-10"},
		{0.0123456, "0.0123456"}, {0.999999, "0.999999"}, {0.9999995, "1"}, {1e-300, "1e-300"},
		{4.9406564584124654e-324, "4.94066e-324"}, {100000, "100000"}, {1234567, "1.23457e+06"},
		{0.3333333333, "0.333333"},
	} {
		if got := cFormatG(v.x); got != v.want {
			t.Errorf("cFormatG(%v) = %q, C's %%g %q", v.x, got, v.want)
		}
	}
}

// TestRBChainDumpCursors: SCANDUMP's cursor is a position in the dump. Every
// cursor inside a link gives the rest of that link, at most RBMaxChunkBytes; any
// cursor outside gives nothing and 0.
func TestRBChainDumpCursors(t *testing.T) {
	c := mustNewRBChain(t, 100, 0.01, 2, false)
	rbAddN(t, c, "d:", 1000)
	var stream []byte
	for _, l := range c.links {
		stream = append(stream, l.readAll()...)
	}
	ends := []uint64{}
	for e, i := uint64(0), 0; i < len(c.links); i++ {
		e += c.links[i].bytes
		ends = append(ends, e)
	}
	for iter := int64(-3); iter <= int64(len(stream))+3; iter++ {
		next, chunk := c.DumpChunk(iter)
		switch {
		case iter == 0:
			if next != 1 || !bytes.Equal(chunk, c.DumpHeader()) {
				t.Fatalf("cursor 0: %d, %d bytes", next, len(chunk))
			}
		case iter < 1 || iter > int64(len(stream)):
			if next != 0 || len(chunk) != 0 {
				t.Fatalf("cursor %d: %d, %d bytes; want 0 and nothing", iter, next, len(chunk))
			}
		default:
			pos := uint64(iter - 1)
			end := ends[0]
			for _, e := range ends {
				if pos < e {
					end = e
					break
				}
			}
			if next != iter+int64(end-pos) || !bytes.Equal(chunk, stream[pos:end]) {
				t.Fatalf("cursor %d: next %d, %d bytes; want %d, %d", iter, next, len(chunk), iter+int64(end-pos), end-pos)
			}
		}
	}
	if next, chunk := c.DumpChunk(math.MaxInt64); next != 0 || chunk != nil {
		t.Fatal("cursor MaxInt64")
	}
}

// TestRBChainLargeLink: a link of more than RBMaxChunkBytes dumps in full
// chunks and a rest, and loads back.
func TestRBChainLargeLink(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 40 MB")
	}
	c := mustNewRBChain(t, 15_000_000, 0.01, 2, false)
	rbAddN(t, c, "big:", 20000)
	dump := ourDump(c)
	if len(dump) != 3 || len(dump[1].data) != RBMaxChunkBytes || dump[2].iter != 1+int64(c.links[0].bytes) {
		t.Fatalf("%d chunks for %d bytes", len(dump), c.links[0].bytes)
	}
	loaded := rbLoadDump(t, dump)
	if !bytes.Equal(rbEncoding(t, loaded), rbEncoding(t, c)) {
		t.Fatal("the loaded chain differs")
	}
}

// TestRBChainLoadChunk: LOADCHUNK's checks, in RedisBloom's order, each refusing
// without a change; and chunks at any byte offset, of any length inside a link,
// landing exactly where SCANDUMP reads them.
func TestRBChainLoadChunk(t *testing.T) {
	c := mustNewRBChain(t, 100, 0.01, 2, false)
	rbAddN(t, c, "l:", 300) // links of 144 and 312 bytes
	total := int64(c.payloadBytes())
	for _, bad := range []struct {
		iter int64
		n    int
		want error
	}{
		{0, 0, ErrRBBadData}, {-1, 1, ErrRBBadData}, {3, 4, ErrRBBadData}, {math.MinInt64, 0, ErrRBBadData},
		{4, 4, ErrRBNoLink}, {1, 1, ErrRBNoLink}, {total + 2, 1, ErrRBNoLink}, {total + 5, 0, ErrRBNoLink},
		{146, 145, ErrRBTooBig}, {144 + 3, 4, ErrRBTooBig}, {total + 2, 10, ErrRBTooBig}, {1 + 144 + 313, 313, ErrRBTooBig},
	} {
		before := rbEncoding(t, c)
		if err := c.LoadChunk(bad.iter, make([]byte, bad.n)); !errors.Is(err, bad.want) {
			t.Errorf("LoadChunk(%d, %d bytes) = %v, want %v", bad.iter, bad.n, err, bad.want)
		}
		if !bytes.Equal(rbEncoding(t, c), before) {
			t.Fatalf("a refused LoadChunk(%d, %d bytes) changed the chain", bad.iter, bad.n)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 500 {
		link := r.IntN(2)
		l := &c.links[link]
		off := r.Uint64N(l.bytes)
		data := make([]byte, r.Uint64N(l.bytes-off+1))
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		start := int64(off) + 1
		if link == 1 {
			start += int64(c.links[0].bytes)
		}
		if err := c.LoadChunk(start+int64(len(data)), data); err != nil {
			t.Fatalf("LoadChunk of %d bytes at %d: %v", len(data), start, err)
		}
		got := make([]byte, len(data))
		l.readBytes(off, got)
		if !bytes.Equal(got, data) {
			t.Fatalf("bytes %d..%d of link %d read back differently", off, off+uint64(len(data)), link)
		}
		if len(data) > 0 {
			if _, chunk := c.DumpChunk(start); !bytes.Equal(chunk[:len(data)], data) {
				t.Fatalf("SCANDUMP at %d does not return the chunk loaded there", start)
			}
		}
	}
}

// TestRBChainEncoding: Decode gives back the chain, header fields and bits, and
// refuses params that are not a valid header and set padding bytes.
func TestRBChainEncoding(t *testing.T) {
	odd, err := newRBChainOptions(1, 0.01, 2, rbOptNoRound)
	if err != nil {
		t.Fatal(err)
	}
	// A link of 3 bytes, which RedisBloom accepts though it never makes one.
	odd, err = NewRBChainFromHeader(rbHeaderSet(rbHeaderSet(odd.DumpHeader(), 0, "bytes", 3), 0, "bits", 24))
	if err != nil {
		t.Fatal(err)
	}
	odd.LoadChunk(4, []byte{0xff, 0x0f, 0x80})
	var chains []*RBChain
	for _, g := range rbGoldens() {
		chains = append(chains, g.build(t))
	}
	for i, c := range append(chains, odd) {
		enc := rbEncoding(t, c)
		f, err := Decode(bytes.NewReader(enc))
		if err != nil {
			t.Fatalf("chain %d: %v", i, err)
		}
		d := f.(*RBChain)
		if !bytes.Equal(rbEncoding(t, d), enc) || !reflect.DeepEqual(d.Debug(), c.Debug()) ||
			!bytes.Equal(d.DumpHeader(), c.DumpHeader()) {
			t.Fatalf("chain %d decodes differently", i)
		}
		var e RBChain
		if n, err := e.ReadFrom(bytes.NewReader(enc)); err != nil || n != int64(len(enc)) || !bytes.Equal(rbEncoding(t, &e), enc) {
			t.Fatalf("chain %d: ReadFrom = %d, %v", i, n, err)
		}
	}
	// Padding after a 3-byte link is zero, refused otherwise.
	words := []uint64{odd.links[0].bits.at(0) | 0xff<<24}
	if _, err := Decode(bytes.NewReader(bfContainer(KindRBChain, odd.params(), words))); !errors.Is(err, ErrCorrupt) {
		t.Errorf("padding set: %v, want ErrCorrupt", err)
	}
	for name, params := range map[string][]byte{
		"empty":       nil,
		"version 2":   append([]byte{2}, odd.DumpHeader()...),
		"bad header":  append([]byte{rbParamVersion}, rbHeaderSet(odd.DumpHeader(), -1, "size", 7)...),
		"short":       []byte{rbParamVersion, 1, 2},
		"extra bytes": append(odd.params(), 0),
	} {
		_, err := Decode(bytes.NewReader(bfContainer(KindRBChain, params, []uint64{0})))
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
			t.Errorf("%s: %v, want ErrCorrupt or ErrVersion", name, err)
		}
	}
}

// TestRBChainDeterminism: the same operations on two chains leave identical
// encodings and dumps.
func TestRBChainDeterminism(t *testing.T) {
	run := func() *RBChain {
		c := mustNewRBChain(t, 30, 0.02, 3, false)
		r := rand.New(rand.NewPCG(7, 8))
		for i := range 3000 {
			c.Add(strconv.AppendUint(nil, r.Uint64N(2500), 10))
			if i%500 == 0 {
				c.LoadChunk(2+int64(i%40), []byte{byte(i), 1})
			}
		}
		return c
	}
	a, b := run(), run()
	if !bytes.Equal(rbEncoding(t, a), rbEncoding(t, b)) || sameDump(ourDump(a), ourDump(b)) != nil {
		t.Fatal("two runs of the same operations differ")
	}
}

// TestRBChainFork: writes to a fork, adds and chunks alike, leave the original's
// dump as it was, and the other way round.
func TestRBChainFork(t *testing.T) {
	c := mustNewRBChain(t, 500, 0.01, 2, false)
	rbAddN(t, c, "a:", 400)
	orig := ourDump(c)
	f := c.Fork()
	rbAddN(t, f, "b:", 2000) // grows the fork
	f.LoadChunk(9, bytes.Repeat([]byte{0xff}, 8))
	if err := sameDump(ourDump(c), orig); err != nil {
		t.Fatalf("writes to a fork changed the original: %v", err)
	}
	forked := ourDump(f)
	rbAddN(t, c, "c:", 300)
	c.LoadChunk(17, bytes.Repeat([]byte{0xaa}, 16))
	if err := sameDump(ourDump(f), forked); err != nil {
		t.Fatalf("writes to the original changed the fork: %v", err)
	}
	if f.Filters() <= c.Filters() || !f.Test([]byte("b:7")) {
		t.Fatal("the fork lost its own writes")
	}
}
