// Command filterbench measures Rookery's filters side by side with well-known Go
// filter libraries, on the same random 16-byte keys in one process, and prints a
// Markdown table: ns/op for add, lookups of present and absent keys and delete,
// memory in bits per item, the measured false-positive rate, the load factor at the
// first failed insert, and the time to encode the filter.
//
//	cd bench && go run ./filterbench -n 1000000,10000000 -p 0.01,0.001
//
// Every figure comes from one pass over n keys, after a GC; compare rows from the
// same run, not across runs or machines.
package main

import (
	"cmp"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Keys holds n present keys and a set of absent ones, 16 random bytes each.
type Keys struct {
	present []byte
	absent  []byte
}

// N returns the number of present keys.
func (k *Keys) N() int { return len(k.present) / 16 }

// Absent returns the number of absent keys.
func (k *Keys) Absent() int { return len(k.absent) / 16 }

// P returns the i-th present key.
func (k *Keys) P(i int) []byte { return k.present[i*16 : i*16+16 : i*16+16] }

// A returns the i-th absent key.
func (k *Keys) A(i int) []byte { return k.absent[i*16 : i*16+16 : i*16+16] }

func newKeys(n, absent int, seed uint64) *Keys {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	fill := func(b []byte) {
		for i := 0; i+8 <= len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], r.Uint64())
		}
	}
	k := &Keys{present: make([]byte, n*16), absent: make([]byte, absent*16)}
	fill(k.present)
	fill(k.absent)
	return k
}

// Config is one cell of the benchmark grid.
type Config struct {
	N int     // items inserted
	P float64 // target false-positive rate (Bloom kinds)
}

// Result is one row of the table. NaN marks a figure that does not apply.
type Result struct {
	Family, Impl  string
	N             int
	P             float64
	Add           float64 // ns/op
	TestPresent   float64 // ns/op
	TestAbsent    float64 // ns/op
	Delete        float64 // ns/op
	BitsPerItem   float64
	FPP           float64 // measured on the absent keys
	LoadAtFailure float64 // fraction of slots used at the first failed insert
	EncodeMs      float64 // encoding the filter holding N items to memory
	Note          string
}

// na marks a figure that does not apply.
var na = math.NaN()

type family struct {
	name string
	run  func(cfg Config, keys *Keys) []Result
}

var families []family

// register adds a family of benchmarks; each family's file calls it from init.
func register(name string, run func(cfg Config, keys *Keys) []Result) {
	families = append(families, family{name, run})
}

// perOp runs fn for i in [0, n) once and returns the mean nanoseconds per call.
func perOp(n int, fn func(i int)) float64 {
	runtime.GC()
	start := time.Now()
	for i := range n {
		fn(i)
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n)
}

// elapsedMs runs fn once and returns its wall time in milliseconds.
func elapsedMs(fn func()) float64 {
	runtime.GC()
	start := time.Now()
	fn()
	return float64(time.Since(start).Microseconds()) / 1000
}

// sink keeps lookups from being optimised away.
var sink int

func main() {
	ns := flag.String("n", "1000000,10000000", "comma-separated item counts")
	ps := flag.String("p", "0.01,0.001", "comma-separated target false-positive rates")
	only := flag.String("only", "", "comma-separated families to run (default all)")
	absent := flag.Int("absent", 1000000, "absent keys used to measure the false-positive rate")
	seed := flag.Uint64("seed", 1, "key generator seed")
	flag.Parse()

	slices.SortFunc(families, func(a, b family) int { return cmp.Compare(a.name, b.name) })
	var results []Result
	for _, n := range parseInts(*ns) {
		keys := newKeys(n, *absent, *seed)
		for _, p := range parseFloats(*ps) {
			for _, fam := range families {
				if *only != "" && !slices.Contains(strings.Split(*only, ","), fam.name) {
					continue
				}
				fmt.Fprintf(os.Stderr, "n=%d p=%g %s...\n", n, p, fam.name)
				results = append(results, fam.run(Config{N: n, P: p}, keys)...)
			}
		}
	}
	printTable(results)
}

func printTable(rs []Result) {
	fmt.Println("| family | implementation | n | p | add ns | test present ns | test absent ns | delete ns | bits/item | measured FPP | load at 1st failure | encode ms | note |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range rs {
		fmt.Printf("| %s | %s | %d | %g | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Family, r.Impl, r.N, r.P, num(r.Add, 1), num(r.TestPresent, 1), num(r.TestAbsent, 1),
			num(r.Delete, 1), num(r.BitsPerItem, 2), pct(r.FPP), pct(r.LoadAtFailure), num(r.EncodeMs, 1), r.Note)
	}
}

func num(v float64, prec int) string {
	if math.IsNaN(v) {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return strconv.FormatFloat(100*v, 'f', 3, 64) + "%"
}

func parseInts(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v <= 0 {
			fmt.Fprintf(os.Stderr, "bad count %q\n", f)
			os.Exit(2)
		}
		out = append(out, v)
	}
	return out
}

func parseFloats(s string) []float64 {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 || v >= 1 {
			fmt.Fprintf(os.Stderr, "bad rate %q\n", f)
			os.Exit(2)
		}
		out = append(out, v)
	}
	return out
}
