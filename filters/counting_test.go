package filters

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var updateCounting = flag.Bool("update-counting", false, "rewrite testdata/golden/counting.hex")

// countingKind is what the counting tests need from Counting and DLeft alike.
type countingKind interface {
	Filter
	AddDigest(d Digest) bool
	DeleteDigest(d Digest) bool
	TestDigest(d Digest) bool
	CountDigest(d Digest) uint64
	Items() uint64
	CounterBits() uint8
}

// cbKey returns a distinct test key for every (tag, i).
func cbKey(tag byte, i uint64) []byte {
	var b [9]byte
	b[0] = tag
	binary.LittleEndian.PutUint64(b[1:], i)
	return b[:]
}

// cbContainer wraps params and payload words in a valid encoding container, with
// correct lengths and checksums, so that tests and fuzzers reach the kind's decoder.
func cbContainer(k Kind, params []byte, words []uint64) []byte {
	out := encodeHeader(k, params, uint64(len(words))*8)
	var buf bytes.Buffer
	crc, _, _ := writeWords(&buf, words, 0, nil)
	out = append(out, buf.Bytes()...)
	return binary.LittleEndian.AppendUint32(out, crc)
}

func mustNewCounting(t testing.TB, capacity uint64, p float64, bits uint8) *Counting {
	t.Helper()
	c, err := NewCounting(capacity, p, bits)
	if err != nil {
		t.Fatalf("NewCounting(%d, %v, %d): %v", capacity, p, bits, err)
	}
	return c
}

// checkCountingModel runs a random sequence of adds and deletes against f and an
// exact model of multiplicities. Present items are always deleted through the
// model; absent items are deleted only when f itself reports them absent, since
// deleting a false positive is a caller error that a counting filter cannot detect.
func checkCountingModel(t *testing.T, f countingKind, seed uint64, universe, ops int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	model := make(map[uint64]uint64)
	var total uint64
	max := uint64(1)<<f.CounterBits() - 1
	for op := range ops {
		i := rng.Uint64N(uint64(universe))
		d := Hash(cbKey('u', i))
		switch {
		case rng.IntN(3) < 2: // add, twice as often as delete so the filter fills
			before := f.TestDigest(d)
			if added := f.AddDigest(d); added == before {
				t.Fatalf("op %d: Add returned %v for an item Test called %v", op, added, before)
			}
			model[i]++
			total++
		case model[i] > 0:
			if !f.DeleteDigest(d) {
				t.Fatalf("op %d: Delete of present item %d (multiplicity %d) refused", op, i, model[i])
			}
			model[i]--
			total--
		case !f.TestDigest(d):
			before := encodeOf(t, f)
			if f.DeleteDigest(d) {
				t.Fatalf("op %d: Delete of absent item %d succeeded", op, i)
			}
			if !bytes.Equal(before, encodeOf(t, f)) {
				t.Fatalf("op %d: refused Delete changed the filter", op)
			}
		}
		if f.Items() != total {
			t.Fatalf("op %d: Items = %d, model holds %d", op, f.Items(), total)
		}
		if op%97 == 0 || op == ops-1 {
			checkCountingAgainst(t, f, model, max, op)
		}
	}
	// Drain: delete every remaining occurrence, in key order. A filter that lost
	// count of a shared counter (say, by decrementing a saturated one) refuses a
	// delete of a present item here, or shows a false negative on the way.
	for i := range uint64(universe) {
		for ; model[i] > 0; model[i]-- {
			if !f.DeleteDigest(Hash(cbKey('u', i))) {
				t.Fatalf("drain: Delete of present item %d (multiplicity %d) refused", i, model[i])
			}
			total--
		}
		if i%16 == 0 {
			checkCountingAgainst(t, f, model, max, ops)
		}
	}
	if f.Items() != 0 || total != 0 {
		t.Fatalf("drained: Items = %d", f.Items())
	}
}

// checkCountingAgainst checks that every item of the model tests present and counts
// at least its multiplicity (or the saturated value).
func checkCountingAgainst(t *testing.T, f countingKind, model map[uint64]uint64, max uint64, op int) {
	t.Helper()
	for j, n := range model {
		d := Hash(cbKey('u', j))
		if n > 0 && !f.TestDigest(d) {
			t.Fatalf("op %d: false negative for item %d (multiplicity %d)", op, j, n)
		}
		if got := f.CountDigest(d); got < min(n, max) {
			t.Fatalf("op %d: Count(%d) = %d below multiplicity %d", op, j, got, n)
		}
	}
}

func TestCountingModel(t *testing.T) {
	for _, bits := range []uint8{4, 8} {
		for seed := range uint64(4) {
			// 300 slots for a universe of 400 keys with multiplicities up to a few
			// dozen: counters saturate and the filter runs well past capacity.
			c := mustNewCounting(t, 300, 0.02, bits)
			checkCountingModel(t, c, seed, 400, 6000)
		}
	}
}

func TestCountingParams(t *testing.T) {
	bad := []struct {
		n    uint64
		p    float64
		bits uint8
	}{
		{0, 0.01, 4}, {countingMaxCapacity + 1, 0.01, 4}, {100, 0, 4}, {100, 1, 4},
		{100, -0.5, 4}, {100, math.NaN(), 4}, {100, 0.01, 0}, {100, 0.01, 5}, {100, 0.01, 16},
		{countingMaxCapacity, 1e-300, 4},
	}
	for _, b := range bad {
		if _, err := NewCounting(b.n, b.p, b.bits); !errors.Is(err, ErrBadParam) {
			t.Errorf("NewCounting(%d, %v, %d) error %v, want ErrBadParam", b.n, b.p, b.bits, err)
		}
		if _, err := CountingBytes(b.n, b.p, b.bits); !errors.Is(err, ErrBadParam) {
			t.Errorf("CountingBytes(%d, %v, %d) error %v, want ErrBadParam", b.n, b.p, b.bits, err)
		}
	}
	for _, g := range []struct {
		n     uint64
		p     float64
		bits  uint8
		m     uint64
		k     int
		words int
	}{
		// m = ceil(n ln(1/p) / ln(2)^2), k = round(m/n ln 2)
		{1000, 0.01, 4, 9586, 7, 600},
		{1000, 0.01, 8, 9586, 7, 1199},
		{1, 0.5, 4, 2, 1, 1},
		{100, 0.0001, 4, 1918, 13, 120},
	} {
		c := mustNewCounting(t, g.n, g.p, g.bits)
		if c.Counters() != g.m || c.Hashes() != g.k || c.counters.len() != uint64(g.words) {
			t.Errorf("NewCounting(%d, %v, %d): m=%d k=%d words=%d, want %d %d %d",
				g.n, g.p, g.bits, c.Counters(), c.Hashes(), c.counters.len(), g.m, g.k, g.words)
		}
		if sz, err := CountingBytes(g.n, g.p, g.bits); err != nil || sz != c.MemoryBytes() {
			t.Errorf("CountingBytes = %d, %v; MemoryBytes = %d", sz, err, c.MemoryBytes())
		}
		if c.Capacity() != g.n || c.ErrorRate() != g.p || c.CounterBits() != g.bits || c.Kind() != KindCounting {
			t.Errorf("accessors disagree with the constructor's arguments")
		}
	}
}

// cbFPRTrials returns how many absent keys to test so that about want false
// positives are expected at rate p.
func cbFPRTrials(p float64, want float64) uint64 {
	return uint64(math.Ceil(want / p))
}

func TestCountingFalsePositiveRate(t *testing.T) {
	// 2000 expected false positives (500 under -short) give a relative standard
	// deviation of 2.2% (4.5%). The sizing rounds k to an integer, which moves the
	// theoretical rate (1-e^(-kn/m))^k up to 2.5% above p at these rates. Accepting
	// measured <= 1.15p is therefore more than 5 (2.8) standard deviations above
	// where a correct filter lands, while a filter with one hash too few, or counters
	// that alias, exceeds it by far. Below 0.7p the test itself is broken (keys
	// repeated, lookups not reaching the counters).
	want := 2000.0
	n := uint64(50000)
	if testing.Short() {
		want, n = 500, 20000
	}
	for _, p := range []float64{0.1, 0.01, 0.001, 0.0001} {
		c := mustNewCounting(t, n, p, 4)
		for i := range n {
			c.Add(cbKey('p', i))
		}
		trials := cbFPRTrials(p, want)
		fp := 0
		for i := range trials {
			if c.Test(cbKey('a', i)) {
				fp++
			}
		}
		rate := float64(fp) / float64(trials)
		t.Logf("p=%v n=%d m=%d k=%d: %d/%d false positives, rate %.3g (%.3f p)", p, n, c.m, c.k, fp, trials, rate, rate/p)
		if rate > 1.15*p || rate < 0.7*p {
			t.Errorf("p=%v: measured false-positive rate %.4g outside [0.7p, 1.15p]", p, rate)
		}
		for i := range n {
			if !c.Test(cbKey('p', i)) {
				t.Fatalf("p=%v: false negative for key %d", p, i)
			}
		}
	}
}

func TestCountingSaturation(t *testing.T) {
	for _, bits := range []uint8{4, 8} {
		c := mustNewCounting(t, 1000, 0.01, bits)
		max := uint64(1)<<bits - 1
		hot, other := []byte("hot"), []byte("other")
		c.Add(other)
		for i := range max + 5 {
			if got := c.Add(hot); got != (i == 0) {
				t.Fatalf("bits %d: add %d of one item returned %v", bits, i, got)
			}
		}
		if got := c.Count(hot); got != max {
			t.Fatalf("bits %d: Count after %d adds = %d, want saturated %d", bits, max+5, got, max)
		}
		for i := range max + 5 {
			if !c.Delete(hot) {
				t.Fatalf("bits %d: delete %d of a saturated item refused", bits, i)
			}
		}
		// The item's counters saturated, so they never come down: it stays a
		// (false) positive rather than risk zeroing a counter another item needs.
		if !c.Test(hot) || c.Count(hot) != max || !c.Test(other) || c.Items() != 1 {
			t.Fatalf("bits %d: after deleting every add: Test=%v Count=%d Items=%d", bits, c.Test(hot), c.Count(hot), c.Items())
		}
		if !c.Delete(other) || c.Items() != 0 {
			t.Fatalf("bits %d: deleting the last item failed", bits)
		}
		if c.Delete(hot) || c.Items() != 0 {
			t.Fatalf("bits %d: Delete on an empty filter succeeded", bits)
		}
	}
}

func TestCountingAddDeleteCount(t *testing.T) {
	c := mustNewCounting(t, 1000, 0.001, 4)
	a := []byte("a")
	if c.Test(a) || c.Count(a) != 0 || c.Delete(a) {
		t.Fatal("empty filter reports an item")
	}
	if !c.Add(a) || c.Add(a) || c.Count(a) != 2 || c.Items() != 2 {
		t.Fatalf("two adds: Count=%d Items=%d", c.Count(a), c.Items())
	}
	if !c.Delete(a) || c.Count(a) != 1 || !c.Delete(a) || c.Test(a) || c.Items() != 0 {
		t.Fatalf("two deletes: Test=%v Count=%d Items=%d", c.Test(a), c.Count(a), c.Items())
	}
	for i, w := range c.counters.slice() {
		if w != 0 {
			t.Fatalf("word %d = %#x after deleting everything", i, w)
		}
	}
}

// cbOps applies a fixed pseudo-random sequence of adds and deletes.
func cbOps(f countingKind, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, 99))
	for range ops {
		d := Hash(cbKey('g', rng.Uint64N(uint64(ops/2+1))))
		if rng.IntN(4) == 0 {
			f.DeleteDigest(d)
		} else {
			f.AddDigest(d)
		}
	}
}

func TestCountingDeterminism(t *testing.T) {
	a := mustNewCounting(t, 5000, 0.01, 4)
	b := mustNewCounting(t, 5000, 0.01, 4)
	cbOps(a, 3, 8000)
	cbOps(b, 3, 8000)
	if !bytes.Equal(encodeOf(t, a), encodeOf(t, b)) {
		t.Fatal("the same operations gave different encodings")
	}
	cl := a.Clone()
	cl.Add([]byte("only in the clone"))
	if bytes.Equal(encodeOf(t, a), encodeOf(t, cl)) || !bytes.Equal(encodeOf(t, a), encodeOf(t, b)) {
		t.Fatal("Clone shares state with the original")
	}
}

// cbCheckGolden compares enc with the hex file name under testdata/golden, rewriting
// it when update is set.
func cbCheckGolden(t *testing.T, name string, enc []byte, update bool) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	text := hex.EncodeToString(enc)
	var lines []string
	for len(text) > 0 {
		n := min(len(text), 64)
		lines = append(lines, text[:n])
		text = text[n:]
	}
	got := strings.Join(lines, "\n") + "\n"
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./filters -run Golden -update-... to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("encoding differs from %s: the format, hash or sizing changed, and old snapshots would decode differently", path)
	}
}

func TestCountingGolden(t *testing.T) {
	c := mustNewCounting(t, 60, 0.01, 4)
	cbOps(c, 11, 120)
	c.Add([]byte("golden"))
	cbCheckGolden(t, "counting.hex", encodeOf(t, c), *updateCounting)
}

func TestCountingRoundTrip(t *testing.T) {
	for _, bits := range []uint8{4, 8} {
		// 4.8M counters: the 4-bit filter spans three dump chunks, the 8-bit one five.
		c := mustNewCounting(t, 500000, 0.01, bits)
		cbOps(c, 5, 20000)
		enc := encodeOf(t, c)

		f, err := Decode(bytes.NewReader(enc))
		if err != nil || !reflect.DeepEqual(f, owned(c)) {
			t.Fatalf("bits %d: Decode = %v; equal %v", bits, err, reflect.DeepEqual(f, owned(c)))
		}
		var r Counting
		if n, err := r.ReadFrom(bytes.NewReader(enc)); err != nil || n != int64(len(enc)) || !reflect.DeepEqual(&r, owned(c)) {
			t.Fatalf("bits %d: ReadFrom = %d, %v (encoding is %d bytes)", bits, n, err, len(enc))
		}
		dumpRoundTrip(t, c)
	}
}

func TestCountingDecodeErrors(t *testing.T) {
	c := mustNewCounting(t, 100, 0.01, 4)
	c.Add([]byte("x"))
	good := c.params()
	words := c.counters.slice()
	hostile := func(mod func(w *paramWriter)) []byte {
		var w paramWriter
		mod(&w)
		return w.bytesOut()
	}
	base := func(w *paramWriter, m, k uint64, bits byte) {
		w.byte(countingParamVersion)
		w.uint(100)
		w.float(0.01)
		w.byte(bits)
		w.uint(m)
		w.uint(k)
		w.uint(1)
	}
	cases := []struct {
		name   string
		params []byte
		words  []uint64
		want   error
	}{
		{"good", good, words, nil},
		{"version", append([]byte{2}, good[1:]...), words, ErrVersion},
		{"trailing", append(append([]byte{}, good...), 0), words, ErrCorrupt},
		{"short", good[:len(good)-1], words, ErrCorrupt},
		{"huge m", hostile(func(w *paramWriter) { base(w, 1<<50, 7, 4) }), words, ErrCorrupt},
		{"m 0", hostile(func(w *paramWriter) { base(w, 0, 7, 4) }), nil, ErrCorrupt},
		{"k 0", hostile(func(w *paramWriter) { base(w, c.m, 0, 4) }), words, ErrCorrupt},
		{"k huge", hostile(func(w *paramWriter) { base(w, c.m, 1<<40, 4) }), words, ErrCorrupt},
		{"bits 5", hostile(func(w *paramWriter) { base(w, c.m, 7, 5) }), words, ErrCorrupt},
		{"payload short", good, words[:len(words)-1], ErrCorrupt},
		// 2^36 bytes of counters announced, none sent: refused before allocating.
		{"payload missing", hostile(func(w *paramWriter) { base(w, 1<<37, 7, 4) }), nil, ErrCorrupt},
	}
	for _, tc := range cases {
		_, err := Decode(bytes.NewReader(cbContainer(KindCounting, tc.params, tc.words)))
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: Decode error %v, want %v", tc.name, err, tc.want)
		}
	}
	enc := encodeOf(t, c)
	for _, n := range []int{0, 5, 20, len(enc) - 9, len(enc) - 1} {
		if _, err := Decode(bytes.NewReader(enc[:n])); !errors.Is(err, ErrCorrupt) {
			t.Errorf("truncated to %d bytes: error %v, want ErrCorrupt", n, err)
		}
	}
}

// cbCheckDecodeAny decodes data, and if that succeeds, checks the filter re-encodes to
// something that decodes to the same encoding again.
func cbCheckDecodeAny(t *testing.T, data []byte) {
	f, err := Decode(bytes.NewReader(data))
	if err != nil {
		if f != nil {
			t.Fatal("Decode returned a filter with an error")
		}
		return
	}
	enc := encodeOf(t, f)
	g, err := Decode(bytes.NewReader(enc))
	if err != nil {
		t.Fatalf("re-encoding of a decoded filter does not decode: %v", err)
	}
	if !bytes.Equal(enc, encodeOf(t, g)) {
		t.Fatal("decode, encode, decode, encode is not stable")
	}
}

// cbFuzzSplit turns fuzz bytes into params and payload words for a kind's decoder.
func cbFuzzSplit(payload []byte) []uint64 {
	words := make([]uint64, min(len(payload)/8, 4096))
	for i := range words {
		words[i] = binary.LittleEndian.Uint64(payload[i*8:])
	}
	return words
}

func FuzzDecodeCounting(f *testing.F) {
	c := mustNewCounting(f, 40, 0.05, 4)
	cbOps(c, 1, 60)
	c8 := mustNewCounting(f, 10, 0.2, 8)
	cbOps(c8, 2, 20)
	for _, src := range []*Counting{c, c8} {
		enc := encodeOf(f, src)
		pay := make([]byte, 0, src.counters.len()*8)
		for _, w := range src.counters.slice() {
			pay = binary.LittleEndian.AppendUint64(pay, w)
		}
		f.Add(enc, src.params(), pay)
		f.Add(enc[:len(enc)/2], src.params()[:3], pay[:8])
		flipped := append([]byte(nil), enc...)
		flipped[len(flipped)-7] ^= 0x10
		f.Add(flipped, append([]byte{1}, src.params()...), pay[8:])
	}
	f.Fuzz(func(t *testing.T, raw, params, payload []byte) {
		cbCheckDecodeAny(t, raw)
		cbCheckDecodeAny(t, cbContainer(KindCounting, params, cbFuzzSplit(payload)))
	})
}

func BenchmarkCountingAdd(b *testing.B) {
	c := mustNewCounting(b, 1<<20, 0.01, 4)
	for i := 0; b.Loop(); i++ {
		c.Add(cbKey('b', uint64(i)&(1<<20-1)))
	}
}

func BenchmarkCountingTest(b *testing.B) {
	c := mustNewCounting(b, 1<<20, 0.01, 4)
	for i := range uint64(1 << 20) {
		c.Add(cbKey('b', i))
	}
	for i := 0; b.Loop(); i++ {
		c.Test(cbKey('b', uint64(i)&(1<<21-1)))
	}
}
