package filters

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"testing"
)

// The tests here hold every kind to the contract of DESIGN.md through the Filter
// interface, one table row per kind and parameter set, so a new kind gets them by
// adding rows.

// ktCase is one kind with one set of constructor parameters.
type ktCase struct {
	name  string
	kind  Kind
	items int // how many items fill the filter in the tests
	// build constructs an empty filter; size is the kind's sizing function for
	// the same parameters.
	build func() (Filter, error)
	size  func() (uint64, error)
	// add inserts an item; an error is the kind's own (ErrFull), and the item
	// is then not in the filter.
	add   func(f Filter, item []byte) error
	test  func(f Filter, item []byte) bool
	clone func(f Filter) Filter
	// describe renders every accessor, so states can be compared beyond their
	// encodings (caches a kind derives from its arrays included).
	describe func(f Filter) string
}

func ktBloom(capacity uint64, p float64, items int) ktCase {
	return ktCase{
		name: fmt.Sprintf("bloom/%d/%g", capacity, p), kind: KindBloom, items: items,
		build: func() (Filter, error) { return NewBloom(capacity, p) },
		size:  func() (uint64, error) { return BloomBytes(capacity, p) },
		add:   func(f Filter, item []byte) error { f.(*Bloom).Add(item); return nil },
		test:  func(f Filter, item []byte) bool { return f.(*Bloom).Test(item) },
		clone: func(f Filter) Filter { return f.(*Bloom).Clone() },
		describe: func(f Filter) string {
			b := f.(*Bloom)
			return fmt.Sprint(b.Count(), b.ApproxCount(), b.EstimatedFPP(), b.Capacity(), b.ErrorRate(),
				b.Bits(), b.Hashes(), b.Blocked())
		},
	}
}

func ktScalable(capacity uint64, p float64, expansion uint32, nonScaling bool, items int) ktCase {
	return ktCase{
		name: fmt.Sprintf("scalable/%d/%g/x%d/%v", capacity, p, expansion, nonScaling), kind: KindScalable, items: items,
		build: func() (Filter, error) { return NewScalable(capacity, p, expansion, nonScaling) },
		size:  func() (uint64, error) { return ScalableBytes(capacity, p, expansion, nonScaling) },
		add:   func(f Filter, item []byte) error { _, err := f.(*Scalable).Add(item); return err },
		test:  func(f Filter, item []byte) bool { return f.(*Scalable).Test(item) },
		clone: func(f Filter) Filter { return f.(*Scalable).Clone() },
		describe: func(f Filter) string {
			s := f.(*Scalable)
			return fmt.Sprint(s.Count(), s.Capacity(), s.Filters(), s.Expansion(), s.NonScaling(),
				s.ErrorRate(), s.NextGrowthBytes())
		},
	}
}

func ktCounting(capacity uint64, p float64, bits uint8, items int) ktCase {
	return ktCase{
		name: fmt.Sprintf("counting/%d/%g/%d", capacity, p, bits), kind: KindCounting, items: items,
		build: func() (Filter, error) { return NewCounting(capacity, p, bits) },
		size:  func() (uint64, error) { return CountingBytes(capacity, p, bits) },
		add:   func(f Filter, item []byte) error { f.(*Counting).Add(item); return nil },
		test:  func(f Filter, item []byte) bool { return f.(*Counting).Test(item) },
		clone: func(f Filter) Filter { return f.(*Counting).Clone() },
		describe: func(f Filter) string {
			c := f.(*Counting)
			return fmt.Sprint(c.Items(), c.Capacity(), c.ErrorRate(), c.CounterBits(), c.Counters(), c.Hashes())
		},
	}
}

func ktDLeft(capacity uint64, p float64, bits uint8, items int) ktCase {
	return ktCase{
		name: fmt.Sprintf("dleft/%d/%g/%d", capacity, p, bits), kind: KindDLeft, items: items,
		build: func() (Filter, error) { return NewDLeft(capacity, p, bits) },
		size:  func() (uint64, error) { return DLeftBytes(capacity, p, bits) },
		add:   func(f Filter, item []byte) error { f.(*DLeft).Add(item); return nil },
		test:  func(f Filter, item []byte) bool { return f.(*DLeft).Test(item) },
		clone: func(f Filter) Filter { return f.(*DLeft).Clone() },
		describe: func(f Filter) string {
			d := f.(*DLeft)
			return fmt.Sprint(d.Items(), d.Capacity(), d.ErrorRate(), d.CounterBits(), d.RemainderBits(),
				d.Tables(), d.Buckets(), d.CellsPerBucket(), d.Overflowed())
		},
	}
}

func ktCuckoo(cfg CuckooConfig, items int) ktCase {
	return ktCase{
		name: fmt.Sprintf("cuckoo/%d/b%d/f%d/i%d/x%d", cfg.Capacity, cfg.BucketSize, cfg.FingerprintBits, cfg.MaxIterations, cfg.Expansion),
		kind: KindCuckoo, items: items,
		build: func() (Filter, error) { return NewCuckoo(cfg) },
		size:  func() (uint64, error) { return CuckooBytes(cfg) },
		add:   func(f Filter, item []byte) error { return f.(*Cuckoo).Add(item) },
		test:  func(f Filter, item []byte) bool { return f.(*Cuckoo).Test(item) },
		clone: func(f Filter) Filter { return f.(*Cuckoo).Clone() },
		describe: func(f Filter) string {
			c := f.(*Cuckoo)
			return fmt.Sprint(c.Items(), c.Deleted(), c.Buckets(), c.Filters(), c.BucketSize(), c.FingerprintBits(),
				c.MaxIterations(), c.Expansion(), c.Capacity(), c.NextGrowthBytes())
		},
	}
}

func ktRBChain(capacity uint64, p float64, expansion uint32, nonScaling bool, items int) ktCase {
	return ktCase{
		name: fmt.Sprintf("rbchain/%d/%g/x%d/%v", capacity, p, expansion, nonScaling), kind: KindRBChain, items: items,
		build: func() (Filter, error) { return NewRBChain(capacity, p, expansion, nonScaling) },
		size:  func() (uint64, error) { return RBChainBytes(capacity, p, expansion, nonScaling) },
		add:   func(f Filter, item []byte) error { _, err := f.(*RBChain).Add(item); return err },
		test:  func(f Filter, item []byte) bool { return f.(*RBChain).Test(item) },
		clone: func(f Filter) Filter { return f.(*RBChain).Clone() },
		describe: func(f Filter) string {
			c := f.(*RBChain)
			return fmt.Sprint(c.Count(), c.Capacity(), c.Filters(), c.Expansion(), c.NonScaling(), c.ErrorRate(),
				c.NextGrowthBytes(), c.RedisBloomSize(), c.Debug(), c.Links())
		},
	}
}

func ktRBCuckoo(capacity uint64, bs, maxIter, exp uint16, items int) ktCase {
	return ktCase{
		name: fmt.Sprintf("rbcuckoo/%d/b%d/i%d/x%d", capacity, bs, maxIter, exp), kind: KindRBCuckoo, items: items,
		build: func() (Filter, error) { return NewRBCuckoo(capacity, bs, maxIter, exp) },
		size:  func() (uint64, error) { return RBCuckooBytes(capacity, bs, maxIter, exp) },
		add:   func(f Filter, item []byte) error { return f.(*RBCuckoo).Add(item) },
		test:  func(f Filter, item []byte) bool { return f.(*RBCuckoo).Test(item) },
		clone: func(f Filter) Filter { return f.(*RBCuckoo).Clone() },
		describe: func(f Filter) string {
			c := f.(*RBCuckoo)
			return fmt.Sprint(c.Debug(), c.Buckets(), c.NextGrowthBytes(), c.RedisBloomSize(), c.DumpHeader())
		},
	}
}

func ktWindowBloom(cfg WindowConfig, items int) ktCase {
	return ktCase{
		name: fmt.Sprintf("wbloom/%d/%g/w%d/l%d", cfg.Capacity, cfg.ErrorRate, cfg.Window, cfg.Last), kind: KindWindowBloom,
		items: items,
		build: func() (Filter, error) { return NewWindowBloom(cfg) },
		size:  func() (uint64, error) { return WindowBloomBytes(cfg) },
		add:   func(f Filter, item []byte) error { f.(*WindowBloom).Add(item); return nil },
		test:  func(f Filter, item []byte) bool { return f.(*WindowBloom).Test(item) },
		clone: func(f Filter) Filter { return f.(*WindowBloom).Clone() },
		describe: func(f Filter) string {
			w := f.(*WindowBloom)
			next, ok := w.NextRetire()
			return fmt.Sprint(w.Count(), w.Window(), w.EstimatedFPP(), w.Capacity(), w.ErrorRate(), w.Hashes(),
				w.Superblocks(), next, ok)
		},
	}
}

func ktWindowCuckoo(cfg WindowConfig, items int) ktCase {
	return ktCase{
		name:  fmt.Sprintf("wcuckoo/%d/w%d/l%d/i%d", cfg.Capacity, cfg.Window, cfg.Last, cfg.MaxIterations),
		kind:  KindWindowCuckoo,
		items: items,
		build: func() (Filter, error) { return NewWindowCuckoo(cfg) },
		size:  func() (uint64, error) { return WindowCuckooBytes(cfg) },
		add:   func(f Filter, item []byte) error { return f.(*WindowCuckoo).Add(item) },
		test:  func(f Filter, item []byte) bool { return f.(*WindowCuckoo).Test(item) },
		clone: func(f Filter) Filter { return f.(*WindowCuckoo).Clone() },
		describe: func(f Filter) string {
			c := f.(*WindowCuckoo)
			next, ok := c.NextRetire()
			return fmt.Sprint(c.Items(), c.Deleted(), c.Window(), c.Buckets(), c.MaxIterations(), c.Capacity(),
				c.EstimatedFPP(), next, ok)
		},
	}
}

// ktCases lists every kind; the first row of each kind is small, and serves as a
// fuzz seed too.
func ktCases() []ktCase {
	return []ktCase{
		ktBloom(20, 0.1, 15),
		ktBloom(1, 0.5, 1),
		ktBloom(5000, 0.01, 4000),
		ktBloom(2000, 1e-7, 1500),
		ktScalable(8, 0.1, 2, false, 60),
		ktScalable(1000, 0.01, 1, false, 3500),
		ktScalable(500, 0.001, 4, true, 600),
		ktCounting(20, 0.1, 4, 15),
		ktCounting(3000, 0.01, 4, 2000),
		ktCounting(1000, 0.001, 8, 800),
		ktDLeft(20, 0.1, 4, 15),
		ktDLeft(3000, 0.01, 4, 2000),
		ktDLeft(1000, 0.001, 8, 800),
		ktCuckoo(CuckooConfig{Capacity: 20, Expansion: 1}, 15),
		ktCuckoo(CuckooConfig{Capacity: 1000, BucketSize: 4, FingerprintBits: 12, MaxIterations: 500, Expansion: 2}, 3000),
		ktCuckoo(CuckooConfig{Capacity: 1000, BucketSize: 1, FingerprintBits: 16, Expansion: 0}, 1200),
		ktCuckoo(CuckooConfig{Capacity: 301, BucketSize: 3, FingerprintBits: 8, MaxIterations: 1, Expansion: 3}, 1000),
		ktCuckoo(CuckooConfig{Capacity: 1, Expansion: 1}, 100), // grows to MaxCuckooFilters, then is full
		ktRBChain(8, 0.1, 2, false, 60),
		ktRBChain(1000, 0.01, 1, false, 3500),
		ktRBChain(500, 0.001, 4, true, 600),
		ktRBCuckoo(100, 2, 20, 1, 80),
		ktRBCuckoo(1000, 4, 50, 2, 3000),
		ktRBCuckoo(256, 1, 20, 0, 400),
		ktRBCuckoo(510, 255, 10, 4, 1000),
		ktRBCuckoo(4, 2, 2, 1, 400), // grows to RBCuckooMaxFilters, then is full
		ktWindowBloom(WindowConfig{Capacity: 20, ErrorRate: 0.1, Window: 7_000_000}, 15),
		ktWindowBloom(WindowConfig{Capacity: 3000, ErrorRate: 0.01, Last: 6000}, 5000),
		ktWindowBloom(WindowConfig{Capacity: 1000, ErrorRate: 0.001, Window: 1 << 40}, 800),
		ktWindowCuckoo(WindowConfig{Capacity: 20, Window: 7_000_000}, 15),
		ktWindowCuckoo(WindowConfig{Capacity: 1000, Last: 100_000, MaxIterations: 20}, 3000), // fills
		ktWindowCuckoo(WindowConfig{Capacity: 3000, Window: 1 << 40}, 2500),
	}
}

func ktItem(i int) []byte { return fmt.Appendf(nil, "kt-item-%d", i) }

// ktFill builds c's filter and adds its items, returning the filter and the items
// it took.
func ktFill(t testing.TB, c ktCase) (Filter, [][]byte) {
	t.Helper()
	f, err := c.build()
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	var in [][]byte
	for i := range c.items {
		switch err := c.add(f, ktItem(i)); {
		case err == nil:
			in = append(in, ktItem(i))
		case !errors.Is(err, ErrFull):
			t.Fatalf("%s: add %d: %v", c.name, i, err)
		}
	}
	return f, in
}

// ktSeedEncodings returns the encoding of the small filter of every kind.
func ktSeedEncodings(t testing.TB) [][]byte {
	var encs [][]byte
	seen := map[Kind]bool{}
	for _, c := range ktCases() {
		if seen[c.kind] {
			continue
		}
		seen[c.kind] = true
		f, _ := ktFill(t, c)
		encs = append(encs, ctEncode(t, f))
	}
	return encs
}

func TestKinds(t *testing.T) {
	for _, c := range ktCases() {
		t.Run(c.name, func(t *testing.T) {
			ktCheckSize(t, c)
			f, in := ktFill(t, c)
			ktCheckInterface(t, c, f, in)
			ktCheckRoundTrip(t, c, f, in)
			ktCheckReadFrom(t, c, f)
			ktCheckClone(t, c, f)
			ktCheckFork(t, c, f)
		})
	}
}

// ktCheckSize checks that the sizing function predicts a new filter's MemoryBytes,
// and MemoryBytes is the payload plus a small overhead.
func ktCheckSize(t *testing.T, c ktCase) {
	f, err := c.build()
	if err != nil {
		t.Fatal(err)
	}
	size, err := c.size()
	if err != nil || size != f.MemoryBytes() {
		t.Errorf("sizing function = %d, %v; a new filter's MemoryBytes is %d", size, err, f.MemoryBytes())
	}
}

func ktPayloadBytes(f Filter) uint64 {
	n := uint64(0)
	for _, s := range f.payload() {
		n += s.len() * 8
	}
	return n
}

func ktCheckInterface(t *testing.T, c ktCase, f Filter, in [][]byte) {
	if f.Kind() != c.kind {
		t.Errorf("Kind() = %v, want %v", f.Kind(), c.kind)
	}
	if len(in) == 0 {
		t.Fatal("the filter took no items")
	}
	for _, item := range in {
		if !c.test(f, item) {
			t.Fatalf("false negative for %q", item)
		}
	}
	// MemoryBytes counts the arrays and a fixed overhead per struct: at most
	// 1 KiB, 256 bytes per array (a sub-filter) and 1% here.
	pay, arrays := ktPayloadBytes(f), uint64(len(f.payload()))
	if mb := f.MemoryBytes(); mb < pay || mb > pay+pay/100+1024+256*arrays {
		t.Errorf("MemoryBytes() = %d for %d payload bytes in %d arrays", mb, pay, arrays)
	}
	var buf bytes.Buffer
	n, err := f.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("WriteTo = %d, %v; wrote %d bytes", n, err, buf.Len())
	}
	if !bytes.Equal(buf.Bytes(), ctEncode(t, f)) {
		t.Error("WriteTo differs from Encode")
	}
	// The encoding's header is a valid dump header for this kind and size.
	_, header, err := DumpChunk(f, 0)
	if err != nil {
		t.Fatal(err)
	}
	if dh, err := ParseDumpHeader(header); err != nil || dh.Kind != c.kind || dh.PayloadBytes != pay {
		t.Errorf("ParseDumpHeader = %+v, %v; want %v, %d bytes", dh, err, c.kind, pay)
	}
	if p := f.params(); len(p) == 0 || p[0] == 0 {
		t.Errorf("params() = %x: the first byte is the kind's params version", p)
	}
}

// ktCheckRoundTrip checks that Decode and a chunked dump both rebuild the filter:
// the same encoding, the same accessors and no item lost.
func ktCheckRoundTrip(t *testing.T, c ktCase, f Filter, in [][]byte) {
	enc := ctEncode(t, f)
	r := bytes.NewReader(append(enc, 0xEE))
	g, err := Decode(r)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if r.Len() != 1 {
		t.Errorf("Decode left %d bytes, want the 1 after the encoding", r.Len())
	}
	header, chunks := dtDump(t, f)
	loaded := dtLoad(t, header, chunks)
	for name, h := range map[string]Filter{"decoded": g, "loaded": loaded} {
		if !bytes.Equal(ctEncode(t, h), enc) {
			t.Errorf("%s: encoding differs", name)
		}
		if h.MemoryBytes() != f.MemoryBytes() || c.describe(h) != c.describe(f) {
			t.Errorf("%s: %d bytes, %s; original %d bytes, %s", name, h.MemoryBytes(), c.describe(h), f.MemoryBytes(), c.describe(f))
		}
		for _, item := range in {
			if !c.test(h, item) {
				t.Fatalf("%s: false negative for %q", name, item)
			}
		}
	}
}

// ktCheckReadFrom checks ReadFrom into a filter of the same kind that holds
// something else, and that a failed ReadFrom leaves the receiver as it was.
func ktCheckReadFrom(t *testing.T, c ktCase, f Filter) {
	enc := ctEncode(t, f)
	other, err := c.build()
	if err != nil {
		t.Fatal(err)
	}
	c.add(other, []byte("something else"))
	otherEnc := ctEncode(t, other)
	rf, ok := other.(io.ReaderFrom)
	if !ok {
		t.Fatalf("%T has no ReadFrom", other)
	}
	bad := map[string][]byte{
		"another kind": ctEncode(t, newTK(1, 1, 1)),
		"truncated":    enc[:len(enc)-1],
		"empty":        nil,
	}
	for name, data := range bad {
		n, err := rf.ReadFrom(bytes.NewReader(data))
		if err == nil {
			t.Fatalf("ReadFrom(%s) succeeded", name)
		}
		if name == "another kind" && (!errors.Is(err, ErrWrongKind) || n != int64(len(data))) {
			t.Errorf("ReadFrom(%s) = %d, %v; want %d, ErrWrongKind", name, n, err, len(data))
		}
		if !bytes.Equal(ctEncode(t, other), otherEnc) {
			t.Fatalf("a failed ReadFrom(%s) changed the receiver", name)
		}
	}
	n, err := rf.ReadFrom(bytes.NewReader(enc))
	if err != nil || n != int64(len(enc)) {
		t.Fatalf("ReadFrom = %d, %v; want %d", n, err, len(enc))
	}
	if !bytes.Equal(ctEncode(t, other), enc) || c.describe(other) != c.describe(f) {
		t.Error("ReadFrom did not replace the receiver's contents")
	}
}

// ktCheckClone checks that a clone starts equal and that neither it nor the
// original sees the other's later changes.
func ktCheckClone(t *testing.T, c ktCase, f Filter) {
	orig := ctEncode(t, f)
	g := c.clone(f)
	if !bytes.Equal(ctEncode(t, g), orig) || c.describe(g) != c.describe(f) {
		t.Fatal("a clone differs from its original")
	}
	for i := range 200 {
		c.add(g, fmt.Appendf(nil, "clone-only-%d", i))
	}
	if !bytes.Equal(ctEncode(t, f), orig) {
		t.Fatal("adding to a clone changed the original")
	}
	cloned := ctEncode(t, g)
	for i := range 200 {
		c.add(f, fmt.Appendf(nil, "original-only-%d", i))
	}
	if !bytes.Equal(ctEncode(t, g), cloned) {
		t.Fatal("adding to the original changed the clone")
	}
}

// ktCheckFork checks that Fork shares pages instead of copying them, and that
// after it each of the two filters, and a fork of the fork, sees only its own
// writes: what a snapshot streaming the original relies on.
func ktCheckFork(t *testing.T, c ktCase, f Filter) {
	orig := ctEncode(t, f)
	desc := c.describe(f)
	g := Fork(f)
	if !bytes.Equal(ctEncode(t, g), orig) || c.describe(g) != desc {
		t.Fatal("a fork differs from its original")
	}
	if shared, total := ktSharedPages(f, g); shared != total {
		t.Fatalf("a fork shares %d of %d pages with its original", shared, total)
	}
	var added [][]byte
	for i := range 200 {
		item := fmt.Appendf(nil, "fork-only-%d", i)
		if c.add(g, item) == nil {
			added = append(added, item)
		}
	}
	if !bytes.Equal(ctEncode(t, f), orig) || c.describe(f) != desc {
		t.Fatal("adding to a fork changed the original")
	}
	for _, item := range added {
		if !c.test(g, item) {
			t.Fatalf("a fork lost item %q added to it", item)
		}
	}
	forked := ctEncode(t, g)
	h := Fork(g)
	for i := range 200 {
		c.add(f, fmt.Appendf(nil, "original-only-%d", i))
		c.add(h, fmt.Appendf(nil, "second-fork-only-%d", i))
	}
	if !bytes.Equal(ctEncode(t, g), forked) {
		t.Fatal("adding to the original or to a fork of the fork changed the fork")
	}
	// A filter written after its fork still reads as one that was never forked.
	want := c.clone(g)
	for i := range 50 {
		c.add(g, fmt.Appendf(nil, "after-%d", i))
		c.add(want, fmt.Appendf(nil, "after-%d", i))
	}
	if !bytes.Equal(ctEncode(t, g), ctEncode(t, want)) || c.describe(g) != c.describe(want) {
		t.Fatal("writes to a fork differ from the same writes to a copy")
	}
}

// ktSharedPages counts the pages of f whose words are g's too, page for page.
func ktSharedPages(f, g Filter) (shared, total int) {
	fs, gs := f.payload(), g.payload()
	for i := range min(len(fs), len(gs)) {
		for p := range min(len(fs[i].pages), len(gs[i].pages)) {
			a, b := fs[i].pages[p].w, gs[i].pages[p].w
			if len(a) > 0 && len(b) > 0 && &a[0] == &b[0] {
				shared++
			}
		}
	}
	for _, s := range fs {
		total += len(s.pages)
	}
	return shared, total
}

// ktGrower is a kind that grows by adding sub-filters.
type ktGrower interface {
	Filter
	Filters() int
	NextGrowthBytes() uint64
}

// TestKindsGrowth checks NextGrowthBytes against the memory a growing kind actually
// takes when it adds a sub-filter: a node admits a write that grows a filter by it.
func TestKindsGrowth(t *testing.T) {
	for _, c := range ktCases() {
		f, err := c.build()
		if err != nil {
			t.Fatal(err)
		}
		g, ok := f.(ktGrower)
		if !ok {
			continue
		}
		grown, full := 0, false
		for i := 0; i < 10*c.items+1000 && !full; i++ {
			before, nfilters, next := g.MemoryBytes(), g.Filters(), g.NextGrowthBytes()
			if err := c.add(g, ktItem(i)); errors.Is(err, ErrFull) {
				full = true
				if next != 0 {
					t.Errorf("%s: full, but NextGrowthBytes() = %d", c.name, next)
				}
				continue
			}
			if g.Filters() != nfilters {
				grown++
				if got := g.MemoryBytes() - before; got != next {
					t.Errorf("%s: growing to %d sub-filters took %d bytes, NextGrowthBytes said %d", c.name, g.Filters(), got, next)
				}
			}
		}
		if grown < 3 && !full {
			t.Errorf("%s: grew %d times in %d adds", c.name, grown, 10*c.items+1000)
		}
		t.Logf("%s: grew %d times, full %v", c.name, grown, full)
	}
}

// ctReseal rewrites the two checksums of data, where its header lengths let them
// be found, so that the fuzzer's mutations of params and payload reach the kinds'
// decoders instead of stopping at a checksum.
func ctReseal(data []byte) []byte {
	data = slices.Clone(data)
	if len(data) < 6 {
		return data
	}
	plen, n := binary.Uvarint(data[6:])
	if n <= 0 || plen > maxParamsLen || uint64(len(data)) < uint64(6+n)+plen+12 {
		return data
	}
	hdrEnd := 6 + n + int(plen) + 8
	binary.LittleEndian.PutUint32(data[hdrEnd:], crc32.Checksum(data[:hdrEnd], castagnoli))
	paylen := binary.LittleEndian.Uint64(data[hdrEnd-8:])
	body := data[hdrEnd+4:]
	if uint64(len(body)) >= 4 && paylen <= uint64(len(body))-4 {
		binary.LittleEndian.PutUint32(body[paylen:], crc32.Checksum(body[:paylen], castagnoli))
	}
	return data
}

// FuzzDecode decodes arbitrary bytes, resealed or not, as any kind: Decode never
// panics, fails only with ErrCorrupt or ErrVersion, and a filter it returns
// re-encodes to an encoding that decodes to the same encoding again, directly and
// through a chunked dump.
func FuzzDecode(f *testing.F) {
	seeds := [][]byte{ctEncode(f, newTK(0, 0, 1)), ctEncode(f, newTK(3, 2, 2)), ctEncode(f, newTK(1, 0, 3))}
	seeds = append(seeds, ktSeedEncodings(f)...)
	for _, s := range seeds {
		f.Add(s, false)
		f.Add(s[:len(s)/2], false)
		bad := slices.Clone(s)
		bad[len(bad)/3] ^= 0x40
		f.Add(bad, true)
		bad = slices.Clone(s)
		bad[len(bad)-5] ^= 0x01
		f.Add(bad, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, reseal bool) {
		if reseal {
			data = ctReseal(data)
		}
		r := bytes.NewReader(data)
		g, err := Decode(r)
		if err != nil {
			if g != nil {
				t.Fatalf("Decode returned a filter and %v", err)
			}
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("Decode failed with %v, neither ErrCorrupt nor ErrVersion", err)
			}
			return
		}
		enc := ctEncode(t, g)
		h, err := Decode(bytes.NewReader(enc))
		if err != nil {
			t.Fatalf("the re-encoding of a decoded %v does not decode: %v", g.Kind(), err)
		}
		if h.Kind() != g.Kind() || h.MemoryBytes() != g.MemoryBytes() || !bytes.Equal(ctEncode(t, h), enc) {
			t.Fatalf("decoding the re-encoding of a %v changed it", g.Kind())
		}
		header, chunks := dtDump(t, g)
		if !bytes.Equal(ctEncode(t, dtLoad(t, header, chunks)), enc) {
			t.Fatalf("a chunked dump of a decoded %v does not rebuild it", g.Kind())
		}
	})
}
