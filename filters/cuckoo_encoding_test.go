package filters

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var updateCuckoo = flag.Bool("update-cuckoo", false, "rewrite testdata/golden/cuckoo.hex")

// ckOps applies a fixed mix of adds and deletes of items drawn from i in [0, n).
func ckOps(t testing.TB, c *Cuckoo, tag byte, n uint64) {
	t.Helper()
	for i := range n {
		err := c.Add(ckItem(tag, i))
		if err != nil && !errors.Is(err, ErrFull) {
			t.Fatal(err)
		}
		if err == nil && i%3 == 0 && !c.Delete(ckItem(tag, i)) {
			t.Fatalf("delete of item %d failed", i)
		}
		if i%5 == 0 {
			if _, err := c.AddNX(ckItem(tag, i/2)); err != nil && !errors.Is(err, ErrFull) {
				t.Fatal(err)
			}
		}
	}
}

// ckContainer wraps params and payload words in a valid container (lengths and
// checksums right), so that tests and the fuzzer reach the cuckoo decoder itself.
func ckContainer(params []byte, words []uint64) []byte {
	out := encodeHeader(KindCuckoo, params, uint64(len(words))*8)
	var buf bytes.Buffer
	crc, _, _ := writeWords(&buf, words, 0, nil)
	out = append(out, buf.Bytes()...)
	return binary.LittleEndian.AppendUint32(out, crc)
}

// ckGoldenFilters are the filters of testdata/golden/cuckoo.hex: the default
// shape filled past its first failure with growth, a 16-bit one with SWAR words,
// a 12-bit one whose buckets straddle words, and a fixed one that refused adds.
func ckGoldenFilters(t testing.TB) (labels []string, fs []*Cuckoo) {
	add := func(label string, cfg CuckooConfig, n uint64) {
		c := mustNewCuckoo(t, cfg)
		ckOps(t, c, 6, n)
		labels = append(labels, label)
		fs = append(fs, c)
	}
	add("# Capacity 20, defaults, Expansion 2; ckOps 0..99", CuckooConfig{Capacity: 20, Expansion: 2}, 100)
	add("# Capacity 30, b=4, f=16, 500 iterations; ckOps 0..39", CuckooConfig{Capacity: 30, BucketSize: 4, FingerprintBits: 16, MaxIterations: 500}, 40)
	add("# Capacity 25, b=3, f=12, Expansion 1; ckOps 0..59", CuckooConfig{Capacity: 25, BucketSize: 3, FingerprintBits: 12, Expansion: 1}, 60)
	add("# Capacity 10, b=1, 3 iterations, fixed; ckOps 0..29", CuckooConfig{Capacity: 10, BucketSize: 1, MaxIterations: 3}, 30)
	return labels, fs
}

func TestCuckooGolden(t *testing.T) {
	labels, fs := ckGoldenFilters(t)
	if fs[0].Filters() < 3 || fs[2].Filters() < 2 {
		t.Fatalf("golden filters did not grow: %d, %d sub-filters", fs[0].Filters(), fs[2].Filters())
	}
	var lines []string
	for i, c := range fs {
		lines = append(lines, labels[i])
		text := hex.EncodeToString(encodeOf(t, c))
		for len(text) > 0 {
			n := min(len(text), 64)
			lines = append(lines, text[:n])
			text = text[n:]
		}
	}
	got := strings.Join(lines, "\n") + "\n"
	path := filepath.Join("testdata", "golden", "cuckoo.hex")
	if *updateCuckoo {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./filters -run Golden -update-cuckoo creates it)", err)
	}
	if got != string(want) {
		t.Fatalf("encoding differs from %s: the format, hash, sizing, bucket choice or eviction order changed, so replicas and old snapshots would disagree", path)
	}
}

func TestCuckooRoundTrip(t *testing.T) {
	// About 1.6 MB in two sub-filters: the dump spans two chunks and a chunk
	// boundary falls inside the second sub-filter.
	big := mustNewCuckoo(t, CuckooConfig{Capacity: 300_000, BucketSize: 4, FingerprintBits: 16, Expansion: 2})
	for i := range uint64(400_000) {
		if err := big.Add(ckItem(7, i)); err != nil {
			t.Fatal(err)
		}
	}
	if big.Filters() != 2 {
		t.Fatalf("%d sub-filters", big.Filters())
	}
	_, fs := ckGoldenFilters(t)
	for _, c := range append(fs, big, mustNewCuckoo(t, CuckooConfig{Capacity: 1})) {
		enc := encodeOf(t, c)
		f, err := Decode(bytes.NewReader(enc))
		if err != nil || !reflect.DeepEqual(f, owned(c)) {
			t.Fatalf("Decode = %v; equal %v", err, reflect.DeepEqual(f, owned(c)))
		}
		var r Cuckoo
		if n, err := r.ReadFrom(bytes.NewReader(enc)); err != nil || n != int64(len(enc)) || !reflect.DeepEqual(&r, owned(c)) {
			t.Fatalf("ReadFrom = %d, %v (encoding is %d bytes)", n, err, len(enc))
		}
		g := dumpRoundTrip(t, c).(*Cuckoo)
		if !reflect.DeepEqual(g, owned(c)) || !bytes.Equal(encodeOf(t, g), enc) {
			t.Fatal("filter loaded from dump chunks differs from the original")
		}
		// The loaded filter works: same answers, and it takes adds as the
		// original does.
		if err, err2 := g.Add([]byte("after")), c.Add([]byte("after")); (err == nil) != (err2 == nil) ||
			!bytes.Equal(encodeOf(t, g), encodeOf(t, c)) {
			t.Fatal("the loaded filter and the original diverge")
		}
	}
	var r Cuckoo
	if _, err := r.ReadFrom(bytes.NewReader(encodeOf(t, mustNewScalable(t, 10, 0.1, 2, false)))); !errors.Is(err, ErrWrongKind) {
		t.Fatalf("ReadFrom of a Scalable: %v, want ErrWrongKind", err)
	}
}

// ckParams builds cuckoo params field by field.
func ckParams(version byte, capacity, b, f, iter, exp, nf, items, deleted uint64) []byte {
	var w paramWriter
	w.byte(version)
	for _, v := range []uint64{capacity, b, f, iter, exp, nf, items, deleted} {
		w.uint(v)
	}
	return w.bytesOut()
}

func TestCuckooDecodeErrors(t *testing.T) {
	c := mustNewCuckoo(t, CuckooConfig{Capacity: 20, Expansion: 2})
	ckOps(t, c, 8, 100)
	if c.Filters() != 3 {
		t.Fatalf("%d sub-filters", c.Filters())
	}
	var all []uint64
	for _, s := range c.payload() {
		all = append(all, s.slice()...)
	}
	n := c.Items()
	cases := []struct {
		name   string
		params []byte
		words  []uint64
		want   error
	}{
		{"good", c.params(), all, nil},
		{"good rebuilt", ckParams(1, 20, 2, 8, 20, 2, 3, n, c.Deleted()), all, nil},
		{"version", ckParams(2, 20, 2, 8, 20, 2, 3, n, 0), all, ErrVersion},
		{"capacity 0", ckParams(1, 0, 2, 8, 20, 2, 3, n, 0), all, ErrCorrupt},
		{"capacity huge", ckParams(1, 1<<62, 2, 8, 20, 2, 1, 0, 0), nil, ErrCorrupt},
		{"bucket size 0", ckParams(1, 20, 0, 8, 20, 2, 3, n, 0), all, ErrCorrupt},
		{"bucket size 256", ckParams(1, 20, 256, 8, 20, 2, 3, n, 0), all, ErrCorrupt},
		{"fingerprint 9", ckParams(1, 20, 2, 9, 20, 2, 3, n, 0), all, ErrCorrupt},
		{"fingerprint 0", ckParams(1, 20, 2, 0, 20, 2, 3, n, 0), all, ErrCorrupt},
		{"iterations 0", ckParams(1, 20, 2, 8, 0, 2, 3, n, 0), all, ErrCorrupt},
		{"iterations 65536", ckParams(1, 20, 2, 8, 65536, 2, 3, n, 0), all, ErrCorrupt},
		{"expansion 3", ckParams(1, 20, 2, 8, 20, 3, 3, n, 0), all, ErrCorrupt},
		{"expansion 65536", ckParams(1, 20, 2, 8, 20, 65536, 3, n, 0), all, ErrCorrupt},
		{"fixed but grown", ckParams(1, 20, 2, 8, 20, 0, 3, n, 0), all, ErrCorrupt},
		{"no sub-filters", ckParams(1, 20, 2, 8, 20, 2, 0, 0, 0), nil, ErrCorrupt},
		{"33 sub-filters", ckParams(1, 20, 2, 8, 20, 1, 33, 0, 0), nil, ErrCorrupt},
		// 32 sub-filters of 2^31 buckets each would be far above the size limit.
		{"growth too large", ckParams(1, 1<<32, 2, 8, 20, 32768, 32, 0, 0), nil, ErrCorrupt},
		{"items above slots", ckParams(1, 20, 2, 8, 20, 2, 3, 141, 0), all, ErrCorrupt},
		{"sub-filter count short", ckParams(1, 20, 2, 8, 20, 2, 2, n, 0), all, ErrCorrupt},
		{"trailing", append(c.params(), 0), all, ErrCorrupt},
		{"short", c.params()[:5], all, ErrCorrupt},
		{"payload short", c.params(), all[:len(all)-1], ErrCorrupt},
	}
	for _, tc := range cases {
		f, err := Decode(bytes.NewReader(ckContainer(tc.params, tc.words)))
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: Decode error %v, want %v", tc.name, err, tc.want)
		}
		if err == nil {
			if f.(*Cuckoo).Add([]byte("usable")) != nil {
				t.Errorf("%s: decoded filter refuses an add", tc.name)
			}
		}
	}
	enc := encodeOf(t, c)
	for n := range len(enc) {
		if _, err := Decode(bytes.NewReader(enc[:n])); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: error %v, want ErrCorrupt", n, err)
		}
	}
}

// ckDecodeAny decodes data and, if that succeeds, checks the filter works and
// re-encodes to something that decodes to an equal filter.
func ckDecodeAny(t *testing.T, data []byte) {
	f, err := Decode(bytes.NewReader(data))
	if err != nil {
		return
	}
	c, ok := f.(*Cuckoo)
	if !ok {
		return
	}
	c.Test([]byte("x"))
	c.Count([]byte("x"))
	enc := encodeOf(t, c)
	g, err := Decode(bytes.NewReader(enc))
	if err != nil || !reflect.DeepEqual(g, owned(c)) {
		t.Fatalf("re-encoding of a decoded filter: %v", err)
	}
	// Slots may hold anything; operations must still not panic.
	c.Add([]byte("x"))
	c.Delete([]byte("x"))
	c.Add([]byte("y"))
}

// FuzzDecodeCuckoo feeds the decoder raw encodings and, through ckContainer,
// arbitrary params and payloads behind valid checksums.
func FuzzDecodeCuckoo(f *testing.F) {
	labels, fs := ckGoldenFilters(f)
	_ = labels
	for _, c := range fs {
		enc := encodeOf(f, c)
		var pay []byte
		for _, s := range c.payload() {
			for _, w := range s.slice() {
				pay = binary.LittleEndian.AppendUint64(pay, w)
			}
		}
		f.Add(enc, c.params(), pay)
		f.Add(enc[:len(enc)/2], c.params()[:4], pay[:8])
		flipped := append([]byte(nil), enc...)
		flipped[len(flipped)-7] ^= 0x10
		f.Add(flipped, append([]byte{1}, c.params()...), pay[8:])
	}
	f.Fuzz(func(t *testing.T, raw, params, payload []byte) {
		if len(raw) > 5 && Kind(raw[5]) != KindCuckoo {
			return // other kinds have their own fuzzers
		}
		ckDecodeAny(t, raw)
		words := make([]uint64, len(payload)/8)
		for i := range words {
			words[i] = binary.LittleEndian.Uint64(payload[i*8:])
		}
		ckDecodeAny(t, ckContainer(params, words))
	})
}
