package filters

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var updateHash = flag.Bool("update-hash", false, "rewrite testdata/hash_golden.txt")

const hashGoldenPath = "testdata/hash_golden.txt"

// htInput is one golden hash input.
type htInput struct {
	name string
	data []byte
}

// htInputs are the inputs whose digests testdata/hash_golden.txt pins: murmur3
// processes 16-byte blocks and then a tail of up to 15 bytes in two halves, so the
// lengths straddle 8 and 16 and their multiples.
func htInputs() []htInput {
	seq := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*31 + 7)
		}
		return b
	}
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	in := []htInput{
		{"empty", []byte{}},
		{"a", []byte("a")},
		{"abc", []byte("abc")},
		{"key", []byte("user:1000")},
		{"fox", []byte("The quick brown fox jumps over the lazy dog")},
		{"zero-byte", []byte{0}},
		{"zeros-8", make([]byte, 8)},
		{"ff-16", bytes.Repeat([]byte{0xFF}, 16)},
		{"all-bytes", all},
		{"long-1000", seq(1000)},
		{"long-65537", seq(65537)},
	}
	for _, n := range []int{7, 8, 9, 15, 16, 17, 23, 24, 31, 32, 33} {
		in = append(in, htInput{"seq-" + strconv.Itoa(n), seq(n)})
	}
	return in
}

// htMixInputs are the golden inputs of mix64, which cuckoo filters hash
// fingerprints with.
var htMixInputs = []uint64{0, 1, 2, 0xFF, 0xFFFF, 1 << 32, 0x0123456789ABCDEF, 1 << 63, math.MaxUint64}

// htGoldenLines renders the golden file from the current hash functions.
func htGoldenLines() []string {
	lines := []string{
		"# Digests of murmur3 x64-128, seed 0, the hash every filter position derives from.",
		"# A change here changes every encoding: replicas and old snapshots would disagree.",
		"# Regenerate only with: go test ./filters -run Golden -update-hash",
		"# hash <name> <input hex, or - if empty or longer than 64 bytes> <input length> <H1> <H2>",
		"# mix64 <input> <output>",
	}
	for _, in := range htInputs() {
		d := Hash(in.data)
		shown := hex.EncodeToString(in.data)
		if len(in.data) == 0 || len(in.data) > 64 {
			shown = "-"
		}
		lines = append(lines, fmt.Sprintf("hash %s %s %d %016x %016x", in.name, shown, len(in.data), d.H1, d.H2))
	}
	for _, x := range htMixInputs {
		lines = append(lines, fmt.Sprintf("mix64 %016x %016x", x, mix64(x)))
	}
	return lines
}

func TestHashGolden(t *testing.T) {
	want := htGoldenLines()
	if *updateHash {
		if err := os.MkdirAll(filepath.Dir(hashGoldenPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(hashGoldenPath, []byte(strings.Join(want, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(hashGoldenPath)
	if err != nil {
		t.Fatalf("%v (generate it with -update-hash)", err)
	}
	defer f.Close()
	var got []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		got = append(got, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for i := range max(len(got), len(want)) {
		g, w := "(missing)", "(missing)"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("%s line %d:\n have %s\n now  %s", hashGoldenPath, i+1, g, w)
		}
	}
}

// TestHashIsMurmur3 checks Hash against the published MurmurHash3_x64_128 vector
// of the pangram and against htMurmur3, a transcription of the reference algorithm
// kept here, over every length up to a few blocks: the golden file pins the
// library's output, this checks that output is murmur3's.
func TestHashIsMurmur3(t *testing.T) {
	// The published digest, 6c1b07bc7bbc4be347939ac4a93c437a, is the 16 bytes
	// of the two little-endian halves.
	d := Hash([]byte("The quick brown fox jumps over the lazy dog"))
	if got := fmt.Sprintf("%x", binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, d.H1), d.H2)); got != "6c1b07bc7bbc4be347939ac4a93c437a" {
		t.Errorf("Hash(pangram) = %s, want murmur3's 6c1b07bc7bbc4be347939ac4a93c437a", got)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 200)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for n := range len(data) + 1 {
		h1, h2 := htMurmur3(data[:n])
		if d := Hash(data[:n]); d != (Digest{h1, h2}) {
			t.Fatalf("length %d: Hash = %016x %016x, reference %016x %016x", n, d.H1, d.H2, h1, h2)
		}
		if d := HashString(string(data[:n])); d != (Digest{h1, h2}) {
			t.Fatalf("length %d: HashString differs from Hash", n)
		}
	}
	for _, x := range append(htMixInputs, rng.Uint64(), rng.Uint64()) {
		if mix64(x) != htFmix(x) {
			t.Errorf("mix64(%#x) = %#x, murmur3's fmix64 gives %#x", x, mix64(x), htFmix(x))
		}
	}
}

// htMurmur3 is MurmurHash3_x64_128 with seed 0, written from the algorithm's
// description: 16-byte blocks mixed into two lanes, the tail, then finalisation.
func htMurmur3(data []byte) (uint64, uint64) {
	const c1, c2 = 0x87c37b91114253d5, 0x4cf5ad432745937f
	var h1, h2 uint64
	n := len(data)
	for ; len(data) >= 16; data = data[16:] {
		k1 := binary.LittleEndian.Uint64(data)
		k2 := binary.LittleEndian.Uint64(data[8:])
		h1 ^= bits.RotateLeft64(k1*c1, 31) * c2
		h1 = (bits.RotateLeft64(h1, 27)+h2)*5 + 0x52dce729
		h2 ^= bits.RotateLeft64(k2*c2, 33) * c1
		h2 = (bits.RotateLeft64(h2, 31)+h1)*5 + 0x38495ab5
	}
	var k1, k2 uint64
	for i := len(data) - 1; i >= 0; i-- {
		if i >= 8 {
			k2 = k2<<8 | uint64(data[i])
		} else {
			k1 = k1<<8 | uint64(data[i])
		}
	}
	if len(data) > 8 {
		h2 ^= bits.RotateLeft64(k2*c2, 33) * c1
	}
	if len(data) > 0 {
		h1 ^= bits.RotateLeft64(k1*c1, 31) * c2
	}
	h1 ^= uint64(n)
	h2 ^= uint64(n)
	h1 += h2
	h2 += h1
	h1, h2 = htFmix(h1), htFmix(h2)
	h1 += h2
	h2 += h1
	return h1, h2
}

func htFmix(k uint64) uint64 {
	k = (k ^ k>>33) * 0xff51afd7ed558ccd
	k = (k ^ k>>33) * 0xc4ceb9fe1a85ec53
	return k ^ k>>33
}

func TestProbe(t *testing.T) {
	d := HashString("probe")
	if d.probe(0) != d.H1 {
		t.Errorf("probe(0) = %#x, want H1 %#x", d.probe(0), d.H1)
	}
	for i := uint64(0); i < 100; i++ {
		if d.probe(i+1)-d.probe(i) != d.H2 {
			t.Fatalf("probe(%d) - probe(%d) != H2", i+1, i)
		}
	}
	// Large i wraps modulo 2^64 rather than saturating.
	if got, want := d.probe(1<<63), d.H1+(d.H2<<63); got != want {
		t.Errorf("probe(2^63) = %#x, want %#x", got, want)
	}
}

func TestReduceRange(t *testing.T) {
	xs := []uint64{0, 1, 2, 1 << 32, 1<<63 - 1, 1 << 63, math.MaxUint64 - 1, math.MaxUint64}
	ns := []uint64{1, 2, 3, 7, 1000, 1 << 32, 1<<32 + 1, 1 << 63, math.MaxUint64 - 1, math.MaxUint64}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 64 {
		xs = append(xs, rng.Uint64())
		ns = append(ns, rng.Uint64()|1, rng.Uint64N(1<<20)+1)
	}
	for _, n := range ns {
		for _, x := range xs {
			if r := reduce(x, n); r >= n {
				t.Fatalf("reduce(%#x, %d) = %d, not below n", x, n, r)
			}
		}
		if reduce(math.MaxUint64, n) != n-1 {
			t.Errorf("reduce(max, %d) = %d, want n-1: the top of the range is reached", n, reduce(math.MaxUint64, n))
		}
	}
	// A power of two takes the top bits.
	for s := 1; s < 64; s++ {
		for _, x := range xs {
			if reduce(x, 1<<s) != x>>(64-s) {
				t.Fatalf("reduce(%#x, 2^%d) is not its top %d bits", x, s, s)
			}
		}
	}
}

// TestReduceUniform checks that reduce splits the 64-bit range into n intervals
// whose lengths differ by at most one: value j starts at ceil(j*2^64/n). A uniform
// input therefore gives a uniform output, to within 1/2^64 per value.
func TestReduceUniform(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	ns := []uint64{2, 3, 10, 97, 1000, 1<<32 + 15, math.MaxUint64 / 3, math.MaxUint64}
	for range 32 {
		ns = append(ns, rng.Uint64()|2, rng.Uint64N(1<<40)+2)
	}
	for _, n := range ns {
		lo, _ := bits.Div64(1, 0, n) // floor(2^64 / n): the shorter interval
		js := []uint64{0, 1, n / 2, n - 2, n - 1}
		for range 16 {
			js = append(js, rng.Uint64N(n))
		}
		for _, j := range js {
			start, end := htStart(j, n), htStart(j+1, n) // end is 0 for 2^64
			if reduce(start, n) != j || start > 0 && reduce(start-1, n) != j-1 {
				t.Fatalf("n %d: value %d does not start at %#x", n, j, start)
			}
			if l := end - start; l != lo && l != lo+1 {
				t.Fatalf("n %d: value %d spans %d inputs, want %d or %d", n, j, l, lo, lo+1)
			}
		}
	}
}

// htStart returns ceil(j * 2^64 / n) modulo 2^64, for j <= n: the first input
// reduce(x, n) maps to j.
func htStart(j, n uint64) uint64 {
	if j == n {
		return 0
	}
	q, r := bits.Div64(j, 0, n)
	if r != 0 {
		q++
	}
	return q
}

// TestHashPositionsUniform feeds Digests of distinct keys through probe and reduce,
// as the filters do, and applies a chi-square test to each probe's positions and to
// pairs of consecutive probes (which must be independent for double hashing to act
// like k hash functions). The bound is the chi-square mean plus six standard
// deviations, false alarm odds below 1e-8; a broken hash or reduce (bits ignored,
// probes correlated) exceeds it by orders of magnitude. Too small a statistic,
// below the mean minus six deviations, would mean positions are suspiciously
// regular, which a hash should not produce either.
func TestHashPositionsUniform(t *testing.T) {
	const keys = 200_000
	const n = 997    // single positions: expected about 200 per cell
	const pairN = 31 // pairs: 961 cells, about 208 each
	single := make([][]uint64, 3)
	for i := range single {
		single[i] = make([]uint64, n)
	}
	pairs := make([]uint64, pairN*pairN)
	key := make([]byte, 0, 16)
	for i := range uint64(keys) {
		key = binary.LittleEndian.AppendUint64(append(key[:0], "key:"...), i)
		d := Hash(key)
		for p := range single {
			single[p][reduce(d.probe(uint64(p)), n)]++
		}
		pairs[reduce(d.probe(1), pairN)*pairN+reduce(d.probe(2), pairN)]++
	}
	for p, counts := range single {
		htChiSquare(t, fmt.Sprintf("probe %d over %d cells", p, n), counts, keys)
	}
	htChiSquare(t, "consecutive probe pairs", pairs, keys)
}

func htChiSquare(t *testing.T, what string, counts []uint64, total int) {
	t.Helper()
	exp := float64(total) / float64(len(counts))
	chi := 0.0
	for _, c := range counts {
		d := float64(c) - exp
		chi += d * d / exp
	}
	df := float64(len(counts) - 1)
	sd := math.Sqrt(2 * df)
	if chi > df+6*sd || chi < df-6*sd {
		t.Errorf("%s: chi-square %.1f, want %.0f ± %.0f", what, chi, df, 6*sd)
	}
	t.Logf("%s: chi-square %.1f (df %.0f)", what, chi, df)
}

func TestMix64(t *testing.T) {
	if mix64(0) != 0 {
		t.Errorf("mix64(0) = %#x", mix64(0))
	}
	// A bijection never collides; a flip of any input bit flips about half the
	// output bits (avalanche), which is what makes it a hash of fingerprints.
	seen := make(map[uint64]bool, 1<<16)
	flips := 0
	for x := range uint64(1 << 16) {
		y := mix64(x)
		if seen[y] {
			t.Fatalf("mix64 collides at %#x", x)
		}
		seen[y] = true
		flips += bits.OnesCount64(y ^ mix64(x^1<<(x%64)))
	}
	if avg := float64(flips) / (1 << 16); math.Abs(avg-32) > 0.5 {
		t.Errorf("a one-bit change flips %.2f output bits on average, want about 32", avg)
	}
}
