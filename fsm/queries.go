package fsm

import (
	"errors"
	"sort"

	"github.com/rookerydb/rookery/filters"
)

// The read side. Each query finds its entry under the registry's read lock,
// releases it, and reads the filter under the entry's own read lock, so reads
// of different filters never wait for each other and a read waits only for a
// mutation of its own filter.

// read runs fn on key's filter under its read lock.
func (f *FSM) read(fam Family, key string, fn func(flt filters.Filter)) error {
	e := f.reg.get(key)
	switch {
	case e == nil:
		return ErrNotFound
	case fam != FamilyNone && familyOf(e.kind) != fam:
		return ErrWrongType
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	fn(e.f)
	return nil
}

// Exists reports, per item, whether key's filter may hold it. A missing key, or
// one of another family, answers false for every item.
func (f *FSM) Exists(fam Family, key string, items [][]byte) []bool {
	out := make([]bool, len(items))
	_ = f.read(fam, key, func(flt filters.Filter) {
		for i, it := range items {
			out[i] = testItem(flt, it)
		}
	})
	return out
}

func testItem(flt filters.Filter, item []byte) bool { return flt.Test(item) }

// Count returns an upper bound of how many copies of item key's filter holds
// (CF.COUNT, CBF.COUNT); 0 for a missing key or one of another family.
func (f *FSM) Count(fam Family, key string, item []byte) uint64 {
	var n uint64
	_ = f.read(fam, key, func(flt filters.Filter) {
		if c, ok := flt.(filters.Counter); ok {
			n = c.Count(item)
		} else {
			n = uint64(b2i(flt.Test(item)))
		}
	})
	return n
}

// Card returns the items a Bloom filter has taken (BF.CARD): 0 for a missing
// key, ErrWrongType for a key of another family.
func (f *FSM) Card(key string) (uint64, error) {
	var n uint64
	err := f.read(FamilyBF, key, func(flt filters.Filter) { n = infoOf(key, flt).Items })
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	return n, err
}

// Info describes key's filter: ErrNotFound if missing, ErrWrongType if of
// another family.
func (f *FSM) Info(fam Family, key string) (Info, error) {
	var in Info
	err := f.read(fam, key, func(flt filters.Filter) { in = infoOf(key, flt) })
	return in, err
}

func infoOf(key string, flt filters.Filter) Info {
	in := Info{Key: key, Kind: flt.Kind(), Size: flt.MemoryBytes(), Filters: 1}
	if k, ok := kinds[flt.Kind()]; ok {
		k.info(flt, &in)
	}
	return in
}

// ScanDump returns the chunk of key's dump that iter names (SCANDUMP): the
// next iterator and the data, (0, nil) after the last chunk.
func (f *FSM) ScanDump(fam Family, key string, iter int64) (int64, []byte, error) {
	var next int64
	var data []byte
	var derr error
	err := f.read(fam, key, func(flt filters.Filter) {
		if d, ok := flt.(rbDumper); ok {
			// RedisBloom's layouts dump in RedisBloom's own format.
			next, data = d.DumpChunk(iter)
			return
		}
		next, data, derr = filters.DumpChunk(flt, iter)
	})
	if err != nil {
		return 0, nil, err
	}
	if derr != nil {
		return 0, nil, ErrBadPosition
	}
	return next, data, nil
}

// rbDumper is a filter of one of RedisBloom's layouts: SCANDUMP and LOADCHUNK
// speak RedisBloom's own dump format for it, cursors and all.
type rbDumper interface {
	DumpChunk(iter int64) (next int64, chunk []byte)
	LoadChunk(iter int64, data []byte) error
}

var (
	_ rbDumper = (*filters.RBChain)(nil)
	_ rbDumper = (*filters.RBCuckoo)(nil)
)

// CheckLoadChunk reports the refusal applying c, a LOADCHUNK of a chunk into
// an existing filter of one of RedisBloom's layouts, or of a chunk larger than
// any of our own format (MaxOwnChunkBytes), would meet now, or nil. A chunk
// too big for one log entry is logged in pieces, each applied on its own; the
// node checks the whole chunk first, so that a chunk RedisBloom would refuse
// is not written in part, and one larger than its filter could take anywhere
// is not logged at all.
func (f *FSM) CheckLoadChunk(c *Command) error {
	return f.CheckChunkSize(c.Family, c.Key, c.Iter, uint64(len(c.Data)))
}

// CheckChunkSize is CheckLoadChunk for a chunk known by its length n alone
// (the request reader asks before reading it): for a chunk into a filter of
// one of RedisBloom's layouts, or one larger than MaxOwnChunkBytes, it says
// what applying it would, and when the chunk is larger than its filter could
// take anywhere (ChunkLimit), it says so with both sizes (ChunkSizeError).
// Our own chunks up to MaxOwnChunkBytes are checked when they apply.
func (f *FSM) CheckChunkSize(fam Family, key string, iter int64, n uint64) error {
	var err error
	loading := false
	switch {
	case iter == 1 && n > MaxOwnChunkBytes:
		// No header of any format is this long.
		err = ErrBadData
		if fam == FamilyCF {
			err = ErrBadHeader
		}
	default:
		rerr := f.read(fam, key, func(flt filters.Filter) {
			if ck, ok := flt.(interface{ CheckChunk(int64, uint64) error }); ok {
				err = rbChunkErr(ck.CheckChunk(iter, n))
				return
			}
			loading = filters.Loading(flt)
			if n > MaxOwnChunkBytes {
				// No chunk of our own format is this big: LoadChunk refuses it.
				err = ownChunkErr(filters.CheckBigChunk(flt, iter, int(min(n, 1<<62))))
			}
		})
		if rerr != nil {
			return rerr
		}
	}
	if n > MaxOwnChunkBytes {
		if lim, known := f.ChunkLimit(fam, key, iter); known && n > lim {
			if err == nil {
				err = ErrChunkTooBig
			}
			return &ChunkSizeError{Key: key, Got: n, Max: lim, Err: err, Named: loading}
		}
	}
	return err
}

// MaxOwnChunkBytes is the largest chunk of this package's own dump format
// (filters.DumpChunkBytes and its checksum), and more than the first chunk
// (header) of any format holds: a longer LOADCHUNK chunk is only ever taken
// by a filter of one of RedisBloom's layouts.
const MaxOwnChunkBytes = filters.DumpChunkBytes + 4

// ChunkLimit is the most bytes a LOADCHUNK chunk at iterator iter into key
// could hold and still be taken, judged from this replica's state alone: a
// filter of one of RedisBloom's layouts of family fam takes at most its
// largest link (or sub-filter); any other existing key, and a first chunk, at
// most MaxOwnChunkBytes. known is false for a chunk after the first into a key
// this replica does not hold, which a lagging replica cannot judge (the header
// may have applied on the leader only).
func (f *FSM) ChunkLimit(fam Family, key string, iter int64) (limit uint64, known bool) {
	if iter == 1 {
		return MaxOwnChunkBytes, true
	}
	e := f.reg.get(key)
	if e == nil {
		return 0, false
	}
	limit = MaxOwnChunkBytes
	if familyOf(e.kind) != fam {
		return limit, true // refused whatever its size: WRONGTYPE
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if m, ok := e.f.(interface{ MaxChunkBytes() uint64 }); ok {
		limit = max(limit, m.MaxChunkBytes())
	}
	return limit, true
}

// KindOf reports the kind of key's filter and whether it exists.
func (f *FSM) KindOf(key string) (filters.Kind, bool) {
	e := f.reg.get(key)
	if e == nil {
		return 0, false
	}
	return e.kind, true
}

// MemoryUsage is what key costs as the node counts it against its memory
// limit (MEMORY USAGE): its filter's arrays and struct, its name and its
// entry, the amount MemoryBytes sums; false for a missing key.
func (f *FSM) MemoryUsage(key string) (uint64, bool) {
	e := f.reg.get(key)
	if e == nil {
		return 0, false
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	return entryBytes(e.key, e.f), true
}

// Scan walks the keys in a fixed order (by a hash of the name), examining about
// count of them from cursor on, and returns those match accepts (every key if
// match is nil) and the cursor to continue from, 0 at the end. As with Redis's
// SCAN, a key present for the whole walk is returned at least once.
func (f *FSM) Scan(cursor uint64, count int, match func(key string, k filters.Kind) bool) (uint64, []string) {
	return f.reg.scan(cursor, count, match)
}

// List describes every filter, sorted by key.
func (f *FSM) List() []Info {
	f.reg.mu.RLock()
	es := make([]*entry, 0, len(f.reg.byKey))
	for _, e := range f.reg.byKey {
		es = append(es, e)
	}
	f.reg.mu.RUnlock()
	sort.Slice(es, func(i, j int) bool { return es[i].key < es[j].key })
	out := make([]Info, len(es))
	for i, e := range es {
		e.mu.RLock()
		out[i] = infoOf(e.key, e.f)
		e.mu.RUnlock()
	}
	return out
}

// GrowthBytes is the memory that adding n items to key's filter could add to it:
// the next sub-filter of a scalable Bloom whose newest sub-filter could fill up,
// or of a cuckoo filter that could run out of room; 0 when the items surely fit
// or the filter cannot grow. The leader uses it to refuse, before proposing, an
// add that could take the node past its memory limit.
func (f *FSM) GrowthBytes(key string, n int) uint64 {
	var b uint64
	_ = f.read(FamilyNone, key, func(flt filters.Filter) {
		if k, ok := kinds[flt.Kind()]; ok && k.growth != nil {
			b = k.growth(flt, n)
		}
	})
	return b
}

// NeedBytes is the memory applying c could add, as the leader estimates it
// before proposing c, to refuse what would take the node past its memory
// limit: a new filter's size and its key's, an existing filter's next
// sub-filter if the items could fill it, a LOADCHUNK header's payload. It is 0
// where nothing grows, and for a command the state machine will refuse anyway
// (a bad spec or chunk), which is answered with the refusal.
func (f *FSM) NeedBytes(c *Command) uint64 {
	switch c.Op {
	case OpExec:
		var b uint64
		for _, sub := range c.Subs {
			b += f.NeedBytes(sub)
		}
		return b
	case OpReserve:
		b, err := EstimateBytes(c.Spec)
		if err != nil {
			return 0
		}
		return b + KeyBytes(c.Key)
	case OpAdd:
		if _, ok := f.KindOf(c.Key); ok {
			return f.GrowthBytes(c.Key, len(c.Items))
		}
		if c.NoCreate {
			return 0
		}
		b, err := EstimateBytes(c.Spec)
		if err != nil {
			return 0
		}
		return b + KeyBytes(c.Key)
	case OpLoadChunk:
		if c.Iter != 1 {
			return 0
		}
		return headerBytes(c)
	}
	return 0
}

// headerBytes is what the filter a LOADCHUNK header describes is counted as,
// from the header alone; 0 for no header or a bad one, which loading refuses.
func headerBytes(c *Command) uint64 {
	var n uint64
	var err error
	switch {
	case filters.IsDumpHeader(c.Data):
		var h filters.DumpHeader
		h, err = filters.ParseDumpHeader(c.Data)
		n = h.PayloadBytes
	case c.Family == FamilyBF:
		n, err = filters.ParseRBChainHeader(c.Data)
	case c.Family == FamilyCF:
		n, err = filters.ParseRBCuckooHeader(c.Data)
	}
	if err != nil {
		return 0
	}
	return n
}
