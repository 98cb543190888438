package fsm

import (
	"reflect"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/rookerydb/rookery/filters"
)

// entry is one named filter. Its kind never changes: replacing a filter by
// another (LOADCHUNK's header) installs a new entry.
//
// Locking: mu guards f. The apply goroutine takes mu for writing around each
// mutation; readers take it for reading around each read. gen and mem are
// touched only by the apply goroutine.
type entry struct {
	key  string
	kind filters.Kind
	hash uint64 // SCAN order

	mu sync.RWMutex
	f  filters.Filter

	// exp is the key's deadline, nil when it has none (expire.go). Readers
	// on any goroutine load it; only the apply goroutine stores it.
	exp atomic.Pointer[expiry]

	// gen is the snapshot generation f was created in. A snapshot taken since
	// (one whose generation is >= gen and that is not yet released) may be
	// streaming f, so the next mutation works on a copy (copy-on-write).
	gen uint64
	mem uint64 // e.bytes() as last accounted
	// ver is the index of the last entry that created or changed the key
	// (tx.go: what WATCH compares). Apply goroutine only.
	ver uint64
	// ret is a windowed filter's place in the retirement index (window.go),
	// nil when it has none. Apply goroutine only.
	ret *retirement
}

// bytes is what the key takes, as --max-memory counts it: entryBytes, and its
// place in the deadline index when it has a deadline. Apply goroutine only.
func (e *entry) bytes() uint64 {
	n := entryBytes(e.key, e.f)
	if e.exp.Load() != nil {
		n += expiryBytes
	}
	return n
}

// keyOverhead is what a key costs besides its filter's arrays, its filter's
// struct and its name: the entry, its map slot and its SCAN-order slot with
// their growth slack, allocation rounding included. Measured with
// bench/keybench (100,000 small filters of each kind).
const keyOverhead = 96

// entryBytes is the memory a key and its filter take, as --max-memory counts
// it: a node of many small filters is mostly this overhead.
func entryBytes(key string, flt filters.Filter) uint64 {
	return flt.MemoryBytes() + keyOverhead + uint64(len(key)+7)&^7 + uint64(reflect.TypeOf(flt).Elem().Size())
}

// KeyBytes estimates what a new key costs besides its filter's arrays, for
// admission before the filter exists: entryBytes less the arrays, with a
// filter struct of the largest kind.
func KeyBytes(key string) uint64 { return keyOverhead + uint64(len(key)+7)&^7 + maxFilterStruct }

// maxFilterStruct is the size of the largest filter struct (a windowed
// cuckoo filter's, 184 bytes).
const maxFilterStruct = 192

// registry maps names to entries and keeps them in SCAN order.
//
// Only the apply goroutine changes it, under mu's write lock; it reads without
// the lock. Readers take mu's read lock just long enough to find an entry.
type registry struct {
	mu    sync.RWMutex
	byKey map[string]*entry
	order []*entry // sorted by (hash, key)
}

func newRegistry() *registry {
	return &registry{byKey: make(map[string]*entry)}
}

// get finds an entry; safe from any goroutine.
func (r *registry) get(key string) *entry {
	r.mu.RLock()
	e := r.byKey[key]
	r.mu.RUnlock()
	return e
}

func scanHash(key string) uint64 { return filters.HashString(key).H1 }

// ScanPosition is where key comes in Scan's order: every state machine
// orders keys alike, so shards' scans merge by it.
func ScanPosition(key string) uint64 { return scanHash(key) }

func entryLess(a *entry, h uint64, key string) bool {
	if a.hash != h {
		return a.hash < h
	}
	return a.key < key
}

// put installs e, replacing any entry of the same key. Apply goroutine only.
func (r *registry) put(e *entry) {
	e.hash = scanHash(e.key)
	r.mu.Lock()
	defer r.mu.Unlock()
	i := sort.Search(len(r.order), func(i int) bool { return !entryLess(r.order[i], e.hash, e.key) })
	if old := r.byKey[e.key]; old != nil {
		r.order[i] = e
	} else {
		r.order = append(r.order, nil)
		copy(r.order[i+1:], r.order[i:])
		r.order[i] = e
	}
	r.byKey[e.key] = e
}

// remove deletes key. Apply goroutine only.
func (r *registry) remove(e *entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := sort.Search(len(r.order), func(i int) bool { return !entryLess(r.order[i], e.hash, e.key) })
	if i < len(r.order) && r.order[i] == e {
		r.order = append(r.order[:i], r.order[i+1:]...)
	}
	delete(r.byKey, e.key)
}

// scan examines up to count entries whose hash is at least cursor, in order, and
// returns those match accepts with the cursor that continues after them (0 when
// done). Entries sharing a hash are never split across calls, so a cursor always
// moves forward.
func (r *registry) scan(cursor uint64, count int, match func(key string, k filters.Kind) bool) (uint64, []string) {
	count = max(count, 1)
	r.mu.RLock()
	defer r.mu.RUnlock()
	i := sort.Search(len(r.order), func(i int) bool { return r.order[i].hash >= cursor })
	var keys []string
	for seen := 0; i < len(r.order); i++ {
		e := r.order[i]
		if seen >= count && e.hash != r.order[i-1].hash {
			break
		}
		seen++
		if match == nil || match(e.key, e.kind) {
			keys = append(keys, e.key)
		}
	}
	if i == len(r.order) {
		return 0, keys
	}
	// At least one entry was examined and hashes ascend, so next > 0.
	return r.order[i].hash, keys
}
