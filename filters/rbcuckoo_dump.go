package filters

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// RedisBloom's CF.SCANDUMP and CF.LOADCHUNK, byte for byte.
//
// A dump is a header and the sub-filters' bytes, oldest first, as one stream;
// a cursor is a position in it, counted from 1 at its first byte:
//
//	CF.SCANDUMP key 0    -> [1, header]          the 38 bytes of RBCuckooHeaderBytes
//	CF.SCANDUMP key pos  -> [pos + n, n bytes]   the bytes of the sub-filter that
//	                                             holds position pos (see DumpChunk)
//	past the end         -> [0, nil]
//	no items             -> [0, nil]             whatever the cursor
//
// CF.LOADCHUNK key 1 header creates the filter (NewRBCuckooFromHeader); then
// CF.LOADCHUNK key pos data writes data so that it ends just before position
// pos: the cursor SCANDUMP returned with it (LoadChunk). RedisBloom keeps no
// state between chunks: each is written where it says, at any time, into a
// filter that is in use all along. So does this.
//
// The header, little-endian and packed as RedisBloom's CFHeader:
//
//	numItems       uint64
//	numBuckets     uint64   buckets of the first sub-filter
//	numDeletes     uint64
//	numFilters     uint64
//	bucketSize     uint16
//	maxIterations  uint16
//	expansion      uint16

// RBCuckooHeaderBytes is the length of a dump header.
const RBCuckooHeaderBytes = 38

// Errors of RedisBloom-format dumps, each with the reply RedisBloom gives.
var (
	// ErrRBCuckooHeader reports a header chunk that is not 38 bytes:
	// "Invalid header".
	ErrRBCuckooHeader = errors.New("filters: invalid redisbloom cuckoo header")
	// ErrRBCuckooCreate reports a header that describes no filter RedisBloom,
	// or this package, creates: "Couldn't create filter!".
	ErrRBCuckooCreate = errors.New("filters: cannot create a redisbloom cuckoo filter from the header")
	// ErrRBCuckooChunk reports a chunk that fits nowhere in the filter:
	// "Couldn't load chunk!".
	ErrRBCuckooChunk = errors.New("filters: cannot load the redisbloom cuckoo chunk")
)

// DumpHeader returns the header of the filter's dump, CF.SCANDUMP's first chunk.
func (c *RBCuckoo) DumpHeader() []byte {
	h := make([]byte, 0, RBCuckooHeaderBytes)
	h = binary.LittleEndian.AppendUint64(h, c.items)
	h = binary.LittleEndian.AppendUint64(h, c.numBuckets)
	h = binary.LittleEndian.AppendUint64(h, c.deletes)
	h = binary.LittleEndian.AppendUint64(h, uint64(len(c.subs)))
	h = binary.LittleEndian.AppendUint16(h, uint16(c.bucketSize))
	h = binary.LittleEndian.AppendUint16(h, uint16(c.maxIter))
	return binary.LittleEndian.AppendUint16(h, uint16(c.expansion))
}

// DumpChunk returns what CF.SCANDUMP key pos answers: the next cursor and the
// chunk, or (0, nil) for RedisBloom's [0, nil].
//
//   - A filter with no items (Items() == 0) answers (0, nil) for every pos,
//     even one that holds fingerprints (a loaded one whose header said 0).
//   - pos 0 answers (1, DumpHeader()).
//   - Otherwise pos-1 is an offset into the sub-filters' bytes, oldest first.
//     The sub-filter it falls in is returned whole if it has at most 16 MiB,
//     whatever the offset within it (RedisBloom's quirk: a cursor into the
//     middle of a small sub-filter gives that sub-filter from its start, and
//     the next cursor is pos plus its size, not its end); a larger one gives
//     the 16 MiB from the offset, or the rest of it if less. The next cursor
//     is pos plus the chunk's length.
//   - An offset past the last sub-filter answers (0, nil).
//
// A negative pos also answers (0, nil); RedisBloom refuses it before it looks
// at the filter, with "Invalid position", and so should a server.
func (c *RBCuckoo) DumpChunk(pos int64) (next int64, chunk []byte) {
	if c.items == 0 || pos < 0 {
		return 0, nil
	}
	if pos == 0 {
		return 1, c.DumpHeader()
	}
	off := uint64(pos - 1)
	for i := range c.subs {
		s := &c.subs[i]
		if off >= s.size {
			off -= s.size
			continue
		}
		if s.size <= rbcScanDumpBytes {
			return pos + int64(s.size), s.read(0, s.size)
		}
		n := min(s.size-off, rbcScanDumpBytes)
		return pos + int64(n), s.read(off, n)
	}
	return 0, nil
}

// rbcHeader is a decoded dump header.
type rbcHeader struct {
	items, numBuckets, deletes, filters uint64
	bucketSize, maxIter, expansion      uint16
}

// parseRBCHeader decodes and validates a header: RedisBloom's checks
// (CuckooFilter_ValidateIntegrity and CFHeader_Load) and this package's
// bounds. It returns the filter's shape.
func parseRBCHeader(data []byte) (rbcHeader, rbcShape, error) {
	var h rbcHeader
	if len(data) != RBCuckooHeaderBytes {
		return h, rbcShape{}, ErrRBCuckooHeader
	}
	le := binary.LittleEndian
	h = rbcHeader{items: le.Uint64(data), numBuckets: le.Uint64(data[8:]), deletes: le.Uint64(data[16:]),
		filters: le.Uint64(data[24:]), bucketSize: le.Uint16(data[32:]), maxIter: le.Uint16(data[34:]),
		expansion: le.Uint16(data[36:])}
	s, err := rbcCheck(uint64(h.bucketSize), uint64(h.maxIter), uint64(h.expansion), h.numBuckets, h.filters)
	if err != nil {
		return h, s, fmt.Errorf("%w: %v", ErrRBCuckooCreate, err)
	}
	if slots := s.slots(); h.items > slots {
		return h, s, fmt.Errorf("%w: %d items in %d slots", ErrRBCuckooCreate, h.items, slots)
	}
	if h.deletes > math.MaxInt64 {
		return h, s, fmt.Errorf("%w: %d deletes", ErrRBCuckooCreate, h.deletes)
	}
	return h, s, nil
}

// rbcCheck validates a filter's geometry, from a header or a snapshot.
//
// RedisBloom's bounds: bucket size in [1, 255], max iterations in [1, 65535],
// expansion in [0, 32768] (cf-bucket-size, cf-max-iterations and
// cf-expansion-factor's ranges), expansion 0 only with one sub-filter, at
// least one sub-filter, the first sub-filter's bucket count a power of two
// below 2^56.
//
// Ours, tighter: at most RBCuckooMaxFilters sub-filters (RedisBloom takes up
// to 65535, and would take 65536 to 2^64-1 too, truncated to 16 bits); an
// expansion that is 0 or a power of two, as every filter RedisBloom creates has
// (CF.RESERVE rounds it up), since other values would give sub-filters whose
// bucket counts are not powers of two, where RedisBloom's alternate index is no
// longer its own inverse and its eviction rollback scrambles the filter; and
// all sub-filters together within the 64 GiB any one filter may take, where
// RedisBloom's bound is what it can allocate.
func rbcCheck(bs, maxIter, expansion, nb, filters uint64) (rbcShape, error) {
	s := rbcShape{nb: nb, bs: bs, expansion: expansion, filters: filters}
	switch {
	case bs < 1 || bs > rbcMaxBucketSize:
		return s, fmt.Errorf("bucket size %d out of range [1, %d]", bs, rbcMaxBucketSize)
	case maxIter < 1 || maxIter > rbcMaxIter:
		return s, fmt.Errorf("max iterations %d out of range [1, %d]", maxIter, rbcMaxIter)
	case expansion > rbcMaxExpansion || expansion&(expansion-1) != 0:
		return s, fmt.Errorf("expansion %d is not 0 or a power of two up to %d", expansion, rbcMaxExpansion)
	case filters < 1 || filters > RBCuckooMaxFilters:
		return s, fmt.Errorf("%d sub-filters, out of range [1, %d]", filters, RBCuckooMaxFilters)
	case expansion == 0 && filters > 1:
		return s, fmt.Errorf("%d sub-filters with expansion 0", filters)
	case nb == 0 || nb > rbcMaxNumBuckets || nb&(nb-1) != 0:
		return s, fmt.Errorf("bucket count %d is not a power of two below 2^56", nb)
	}
	if _, ok := s.words(); !ok {
		return s, fmt.Errorf("%d sub-filters of %d buckets and expansion %d exceed %d bytes",
			filters, nb, expansion, uint64(maxPayloadBytes))
	}
	return s, nil
}

// slots returns the slots of all sub-filters; the shape is valid.
func (s rbcShape) slots() uint64 {
	n := uint64(0)
	for i := range s.filters {
		nb, _ := s.subBuckets(i)
		n += nb * s.bs
	}
	return n
}

// ParseRBCuckooHeader validates a dump header, CF.LOADCHUNK's chunk at
// position 1, without allocating anything, and returns the MemoryBytes of the
// filter NewRBCuckooFromHeader would make of it, so that a server can check its
// memory limit first. Its errors are NewRBCuckooFromHeader's.
func ParseRBCuckooHeader(data []byte) (memoryBytes uint64, err error) {
	_, s, err := parseRBCHeader(data)
	if err != nil {
		return 0, err
	}
	return s.memoryBytes(), nil
}

// NewRBCuckooFromHeader makes the empty filter that a dump header describes, as
// CF.LOADCHUNK key 1 does: its counters and geometry are the header's, its
// slots all empty until LoadChunk fills them. A header that is not 38 bytes is
// ErrRBCuckooHeader; one that fails RedisBloom's checks or this package's
// bounds (rbcCheck), or claims more items than the filter has slots, is
// ErrRBCuckooCreate.
//
// A header that claims more items than the slots hold is refused although
// RedisBloom takes it: no filter holds more fingerprints than slots. (One
// loaded from a header that claimed fewer than its chunks brought, or whose
// chunks never came, can take adds into slots its items already count, and
// then dumps such a header.)
//
// The deletes counter counts deletes since the last compaction, which in a
// filter of one sub-filter nothing triggers, so no bound ties it to the slots;
// it must be below 2^63 (RedisBloom replies with it as a signed integer, and
// no filter sees that many deletes), and from there it only grows, stopping
// at the largest uint64.
func NewRBCuckooFromHeader(data []byte) (*RBCuckoo, error) {
	h, s, err := parseRBCHeader(data)
	if err != nil {
		return nil, err
	}
	c := s.filter(uint64(h.maxIter))
	c.items, c.deletes = h.items, h.deletes
	c.subs = make([]rbcSub, s.filters)
	for i := range c.subs {
		nb, _ := s.subBuckets(uint64(i))
		c.subs[i] = newRBCSub(nb, s.bs)
	}
	return c, nil
}

// LoadChunk writes a chunk of a dump into the filter, as CF.LOADCHUNK key pos
// data does once the filter exists: data ends just before position pos, so it
// starts at offset pos-1-len(data) of the sub-filters' bytes. The sub-filter
// holding that offset must hold all of data, which then replaces what is there;
// nothing else changes (the counters stay the header's). RedisBloom's rules,
// quirks included:
//
//   - empty data, pos <= 0, or pos-1 < len(data): ErrRBCuckooChunk. (pos 0 is
//     "Invalid position" and pos 1 the header in CF.LOADCHUNK, before this.)
//   - an offset past the last sub-filter is reduced by every sub-filter's size
//     and taken as an offset into the last one: a chunk there is written if it
//     fits, where RedisBloom writes it too.
//   - a chunk that runs past the end of its sub-filter: ErrRBCuckooChunk.
//
// A filter being loaded from this package's own dump format (Loading) takes no
// RedisBloom chunk: ErrRBCuckooChunk.
func (c *RBCuckoo) LoadChunk(pos int64, data []byte) error {
	s, off, err := c.chunkPlace(pos, uint64(len(data)))
	if err != nil {
		return err
	}
	s.write(off, data)
	return nil
}

// CheckChunk reports what LoadChunk would say of a chunk of n bytes at pos,
// changing nothing: a chunk loaded in pieces is checked whole first.
func (c *RBCuckoo) CheckChunk(pos int64, n uint64) error {
	_, _, err := c.chunkPlace(pos, n)
	return err
}

// chunkPlace is the sub-filter and offset a chunk of n bytes at pos goes to,
// or ErrRBCuckooChunk.
func (c *RBCuckoo) chunkPlace(pos int64, n uint64) (*rbcSub, uint64, error) {
	if c.ld != nil || n == 0 || pos <= 0 || uint64(pos-1) < n {
		return nil, 0, ErrRBCuckooChunk
	}
	off := uint64(pos-1) - n
	s := &c.subs[len(c.subs)-1]
	for i := range c.subs {
		if off < c.subs[i].size {
			s = &c.subs[i]
			break
		}
		off -= c.subs[i].size
	}
	if off+n > s.size {
		return nil, 0, ErrRBCuckooChunk
	}
	return s, off, nil
}

// MaxChunkBytes is the largest chunk LoadChunk could take anywhere in the
// filter: its largest sub-filter's bytes. A chunk is written inside one.
func (c *RBCuckoo) MaxChunkBytes() uint64 {
	var m uint64
	for i := range c.subs {
		m = max(m, c.subs[i].size)
	}
	return m
}
