package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	linvon "github.com/linvon/cuckoo-filter"
	panmari "github.com/panmari/cuckoofilter"
	"github.com/rookerydb/rookery/filters"
)

// The cuckoo family puts Rookery's Cuckoo beside panmari/cuckoofilter v1.0.6 and
// linvon/cuckoo-filter v0.4.0, all with 4-slot buckets of 16-bit fingerprints,
// plus Rookery's default shape (RedisBloom's: 2 slots of 8 bits, 20 evictions)
// and RedisBloom's own layout of it, RBCuckoo.
//
// Each library sizes its own table for n: panmari and linvon round the bucket
// count up to a power of two (doubling it when the load would pass 96%), Rookery
// takes Capacity = n/0.95 slots with no rounding (n/0.5 for the default shape,
// whose inserts start failing at 55-75%). Rounding up leaves panmari's table
// anywhere from 48% to 96% full at n, and inserts into a fuller table cost more
// (more second buckets and evictions), so one more row gives Rookery panmari's
// slot count: the same memory and load. The load at the first failed insert
// fills a second filter, sized the same way, with keys until an insert fails.
// Cuckoo filters do not take p, so the family runs once per n.

func init() { register("cuckoo", runCuckoo) }

// cuckooUnderTest is what the benchmark needs from each implementation.
type cuckooUnderTest struct {
	add    func(item []byte) bool // false when the insert failed
	test   func(item []byte) bool
	delete func(item []byte) bool
	bits   func() float64 // memory in bits, read after the adds
	slots  func() float64 // fingerprint slots
	encode func(w io.Writer) error
	note   string
}

// cuckooRan records the n the family has run for: it runs for the first p only.
var cuckooRan = map[int]bool{}

func runCuckoo(cfg Config, keys *Keys) []Result {
	if cuckooRan[cfg.N] {
		return nil
	}
	cuckooRan[cfg.N] = true
	ref := measureCuckoo("panmari/cuckoofilter v1.0.6 (b=4 f=16)", newPanmari, cfg, keys)
	rows := []Result{ref}
	rows = append(rows, measureCuckoo("linvon/cuckoo-filter v0.4.0 (b=4 f=16)", newLinvon, cfg, keys))
	// panmari's slot count: its bucket count is a power of two, doubled when the
	// load would pass 96%.
	panmariSlots := uint64(4)
	for panmariSlots < uint64(cfg.N) {
		panmariSlots *= 2
	}
	if float64(cfg.N)/float64(panmariSlots) > 0.96 {
		panmariSlots *= 2
	}
	b4f16 := filters.CuckooConfig{BucketSize: 4, FingerprintBits: 16, MaxIterations: 500}
	for _, shape := range []struct {
		name     string
		cfg      filters.CuckooConfig
		capacity uint64
	}{
		{"rookery Cuckoo b=4 f=16 iter=500", b4f16, uint64(float64(cfg.N)/0.95) + 1},
		{"rookery Cuckoo b=4 f=16 iter=500, panmari's slots", b4f16, panmariSlots},
		{"rookery Cuckoo defaults b=2 f=8 iter=20", filters.CuckooConfig{}, uint64(float64(cfg.N)/0.5) + 1},
	} {
		c := shape.cfg
		c.Capacity = shape.capacity
		r := measureCuckoo(shape.name, func(int) cuckooUnderTest { return newRookeryCuckoo(c) }, cfg, keys)
		r.Note += fmt.Sprintf("; vs panmari: add %.2fx, present %.2fx, absent %.2fx, delete %.2fx, bits %.2fx, encode %.3fx",
			r.Add/ref.Add, r.TestPresent/ref.TestPresent, r.TestAbsent/ref.TestAbsent, r.Delete/ref.Delete,
			r.BitsPerItem/ref.BitsPerItem, r.EncodeMs/ref.EncodeMs)
		rows = append(rows, r)
	}
	// RedisBloom's own layout (RBCuckoo), with the default shape's slots asked
	// for: it rounds the bucket count up to a power of two, so it has between
	// one and two times as many.
	def := rows[len(rows)-1]
	rb := measureCuckoo("rookery RBCuckoo (RedisBloom's layout) b=2 f=8 iter=20",
		func(int) cuckooUnderTest { return newRookeryRBCuckoo(uint64(float64(cfg.N)/0.5)+1, 2, 20) }, cfg, keys)
	rb.Note += fmt.Sprintf("; vs rookery Cuckoo defaults: add %.2fx, present %.2fx, absent %.2fx, delete %.2fx, bits %.2fx",
		rb.Add/def.Add, rb.TestPresent/def.TestPresent, rb.TestAbsent/def.TestAbsent, rb.Delete/def.Delete, rb.BitsPerItem/def.BitsPerItem)
	return append(rows, rb)
}

// newRookeryRBCuckoo is RedisBloom's cuckoo filter as CF.RESERVE capacity
// BUCKETSIZE bs MAXITERATIONS iter EXPANSION 0 makes it: one sub-filter, so
// that the load at the first failed insert is its own.
func newRookeryRBCuckoo(capacity uint64, bs, iter uint16) cuckooUnderTest {
	c, err := filters.NewRBCuckoo(capacity, bs, iter, 0)
	if err != nil {
		panic(err)
	}
	return cuckooUnderTest{
		add:    func(item []byte) bool { return c.Add(item) == nil },
		test:   c.Test,
		delete: c.Delete,
		bits:   func() float64 { return float64(8 * c.MemoryBytes()) },
		slots:  func() float64 { return float64(c.Buckets()) * float64(bs) },
		encode: func(w io.Writer) error { _, err := c.WriteTo(w); return err },
		note:   fmt.Sprintf("capacity %d, %d buckets", capacity, c.Buckets()),
	}
}

func newPanmari(n int) cuckooUnderTest {
	f := panmari.NewFilter(uint(n))
	slots := func() float64 { return float64(f.Count()) / f.LoadFactor() }
	return cuckooUnderTest{
		add:    f.Insert,
		test:   f.Lookup,
		delete: f.Delete,
		bits:   func() float64 { return 16 * slots() },
		slots:  slots,
		encode: func(w io.Writer) error { _, err := w.Write(f.Encode()); return err },
	}
}

func newLinvon(n int) cuckooUnderTest {
	f := linvon.NewFilter(4, 16, uint(n), linvon.TableTypeSingle)
	// linvon's Add stashes the fingerprint that found no home in a one-entry
	// victim cache and reports success; the next Add then fails.
	return cuckooUnderTest{
		add:    f.Add,
		test:   f.Contain,
		delete: f.Delete,
		bits:   func() float64 { return 8 * float64(f.SizeInBytes()) },
		slots:  func() float64 { return float64(f.Size()) / f.LoadFactor() },
		encode: func(w io.Writer) error {
			b, err := f.Encode()
			if err == nil {
				_, err = w.Write(b)
			}
			return err
		},
	}
}

func newRookeryCuckoo(cfg filters.CuckooConfig) cuckooUnderTest {
	c, err := filters.NewCuckoo(cfg)
	if err != nil {
		panic(err)
	}
	return cuckooUnderTest{
		add:    func(item []byte) bool { return c.Add(item) == nil },
		test:   c.Test,
		delete: c.Delete,
		bits:   func() float64 { return float64(8 * c.MemoryBytes()) },
		slots:  func() float64 { return float64(c.Slots()) },
		encode: func(w io.Writer) error { _, err := c.WriteTo(w); return err },
		note:   fmt.Sprintf("capacity %d, %d buckets", cfg.Capacity, c.Buckets()),
	}
}

// measureCuckoo fills a filter from mk with the n present keys and measures one
// pass of each operation; deletes come last and remove every key. A second
// filter gives the load at the first failed insert.
func measureCuckoo(impl string, mk func(n int) cuckooUnderTest, cfg Config, keys *Keys) Result {
	n, absent := keys.N(), keys.Absent()
	f := mk(n)
	r := Result{Family: "cuckoo", Impl: impl, N: cfg.N, P: cfg.P, Note: f.note}
	failed := 0
	r.Add = perOp(n, func(i int) {
		if !f.add(keys.P(i)) {
			failed++
		}
	})
	missed := 0
	r.TestPresent = perOp(n, func(i int) {
		if !f.test(keys.P(i)) {
			missed++
		}
	})
	fp := 0
	r.TestAbsent = perOp(absent, func(i int) {
		if f.test(keys.A(i)) {
			fp++
		}
	})
	r.FPP = float64(fp) / float64(absent)
	r.BitsPerItem = f.bits() / float64(n)
	var buf bytes.Buffer
	buf.Grow(int(f.bits()/8) + 1<<20)
	r.EncodeMs = elapsedMs(func() {
		if err := f.encode(&buf); err != nil {
			panic(err)
		}
	})
	refused := 0
	r.Delete = perOp(n, func(i int) {
		if !f.delete(keys.P(i)) {
			refused++
		}
	})
	if failed+missed+refused > 0 {
		r.Note += fmt.Sprintf("; %d ADDS FAILED, %d FALSE NEGATIVES, %d DELETES REFUSED", failed, missed, refused)
	}
	r.LoadAtFailure = loadAtFailure(mk(n), keys)
	return r
}

// loadAtFailure adds keys to f until an insert fails and returns the items it
// held then over its slots: the present keys first, then keys made from a
// counter (distinct from them with overwhelming probability).
func loadAtFailure(f cuckooUnderTest, keys *Keys) float64 {
	var k [16]byte
	for i := 0; ; i++ {
		item := k[:]
		if i < keys.N() {
			item = keys.P(i)
		} else {
			binary.LittleEndian.PutUint64(k[:], uint64(i))
			binary.LittleEndian.PutUint64(k[8:], 0x5eed5eed5eed5eed)
		}
		if !f.add(item) {
			return float64(i) / f.slots()
		}
	}
}
