package filters

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// SCANDUMP / LOADCHUNK move a filter in pieces small enough for one RESP reply.
//
//	iterator 0          -> (1, header)            the encoding header: kind, params, length
//	iterator 1 + off    -> (1 + off + n, chunk)   n payload bytes from byte off, then a
//	                                              CRC-32C of (id, off, the bytes)
//	past the end        -> (0, nil)
//
// Chunks start at multiples of DumpChunkBytes and are full but for the last. As
// in RedisBloom, an iterator is a position in the dump, not a token: any
// iterator inside the payload answers the chunk that holds that byte (and the
// iterator after it), so a client that scans from an iterator it made up gets
// the dump from there on; a negative one, like one past the end, answers
// (0, nil). id
// identifies the dump: a hash of its header (kind, params and counters, length),
// so a chunk of another filter, of another kind or of the same filter after it
// changed fails its checksum where it is loaded. A dump taken while its filter is
// written to is refused in the same way, where RedisBloom would load a mixture.
//
// LOADCHUNK takes each (iterator, data) pair exactly as SCANDUMP returned it: the
// header (iterator 1) creates an empty filter that is being loaded (load.go), and
// every later chunk knows its own place, since it ends where its iterator points.
// Chunks may be loaded in any order, and again until the last one is in; the
// filter is checked as a whole when the last one lands.

// DumpChunkBytes is the most payload bytes one SCANDUMP chunk carries.
const DumpChunkBytes = 1 << 20

// Errors returned by the dump functions.
var (
	// ErrBadPosition reports an iterator that names no chunk of this filter.
	ErrBadPosition = errors.New("filters: invalid position")
	// ErrBadChunk reports chunk data that is damaged, belongs to another dump or
	// filter, or would leave the filter inconsistent.
	ErrBadChunk = errors.New("filters: bad chunk data")
	// ErrChunkOutside reports a chunk whose iterator places it past the end of
	// the filter's arrays (RedisBloom: "invalid offset - no link found").
	ErrChunkOutside = errors.New("filters: chunk starts past the end of the filter")
	// ErrChunkTooBig reports a chunk that starts inside the filter's arrays but
	// runs past their end (RedisBloom: "invalid chunk - Too big for current
	// filter").
	ErrChunkTooBig = errors.New("filters: chunk runs past the end of the filter")
)

// DumpChunk returns the chunk of f's dump that iter names and the iterator of the
// next chunk; the next iterator is 0 after the last chunk.
func DumpChunk(f Filter, iter int64) (next int64, chunk []byte, err error) {
	segs := f.payload()
	paylen := payloadBytes(segs)
	switch {
	case iter == 0:
		return 1, dumpHeader(f, paylen), nil
	case iter < 0 || iter-1 >= paylen:
		return 0, nil, nil // the iterator after the last chunk, or past it
	}
	off := iter - 1
	off -= off % DumpChunkBytes
	n := min(paylen-off, DumpChunkBytes)
	chunk = make([]byte, n, n+4)
	forPieces(segs, off/8, n/8, func(seg int, lo, hi uint64, at int) {
		segs[seg].putLE(chunk[at*8:], lo, hi)
	})
	id := dumpID(dumpHeader(f, paylen))
	chunk = binary.LittleEndian.AppendUint32(chunk, chunkSum(id, off, chunk))
	return 1 + off + n, chunk, nil
}

// dumpHeader is the first chunk of f's dump: the header of its encoding as a
// complete filter, even while it is itself being loaded.
func dumpHeader(f Filter, paylen int64) []byte {
	return encodeHeader(f.Kind(), f.params(), uint64(paylen))
}

// dumpID identifies the dump whose header chunk is header.
func dumpID(header []byte) uint64 { return Hash(header).H1 }

// chunkSum is the CRC-32C of a chunk's dump id, offset and payload bytes.
func chunkSum(id uint64, off int64, data []byte) uint32 {
	var pre [16]byte
	binary.LittleEndian.PutUint64(pre[:8], id)
	binary.LittleEndian.PutUint64(pre[8:], uint64(off))
	return crc32.Update(crc32.Checksum(pre[:], castagnoli), castagnoli, data)
}

// payloadBytes is the length of a payload made of segs.
func payloadBytes(segs []*paged) int64 {
	n := int64(0)
	for _, s := range segs {
		n += int64(s.len()) * 8
	}
	return n
}

// forPieces calls fn for each segment that the n words starting at word index
// from of the concatenated segments touch, with the range [lo, hi) of that
// segment's words and at, the range's first word counted from from.
func forPieces(segs []*paged, from, n int64, fn func(seg int, lo, hi uint64, at int)) {
	at := 0
	for i, s := range segs {
		if n == 0 {
			return
		}
		if from >= int64(s.len()) {
			from -= int64(s.len())
			continue
		}
		hi := min(int64(s.len()), from+n)
		fn(i, uint64(from), uint64(hi), at)
		at += int(hi - from)
		n -= hi - from
		from = 0
	}
}

// DumpHeader describes a filter from the first chunk of its dump.
type DumpHeader struct {
	Kind Kind
	// PayloadBytes is the size of the filter's arrays: the memory that loading it
	// will allocate.
	PayloadBytes uint64
}

// ParseDumpHeader verifies the first chunk of a dump and describes the filter it
// creates, without allocating the filter: a server checks its memory limit first.
func ParseDumpHeader(data []byte) (DumpHeader, error) {
	h, err := parseHeaderChunk(data)
	if err != nil {
		return DumpHeader{}, err
	}
	if _, _, _, err := h.prepare(); err != nil {
		return DumpHeader{}, fmt.Errorf("%w: %v", ErrBadChunk, err)
	}
	return DumpHeader{Kind: h.kind, PayloadBytes: h.paylen}, nil
}

func parseHeaderChunk(data []byte) (header, error) {
	rd := bytes.NewReader(data)
	h, err := readHeader(rd, rd)
	if err != nil {
		return h, fmt.Errorf("%w: %v", ErrBadChunk, err)
	}
	if rd.Len() != 0 {
		return h, fmt.Errorf("%w: trailing bytes after header", ErrBadChunk)
	}
	if h.kind == kindLoading {
		// SCANDUMP hands out the header of the filter being loaded, never this.
		return h, fmt.Errorf("%w: the header of a filter being loaded", ErrBadChunk)
	}
	return h, nil
}

// IsDumpHeader reports whether data begins as the first chunk of one of our own
// dumps does (RedisBloom's dumps begin otherwise).
func IsDumpHeader(data []byte) bool { return bytes.HasPrefix(data, encMagic[:]) }

// LoadHeader creates an empty filter from the first chunk of a dump (iterator 1).
// Its arrays are allocated in full and zeroed, and it is being loaded (Loading)
// until LoadChunk has filled them; its counters are those of the header, and are
// checked against its arrays when the last chunk lands.
func LoadHeader(data []byte) (Filter, error) {
	h, err := parseHeaderChunk(data)
	if err != nil {
		return nil, err
	}
	f, lens, install, err := h.prepare()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadChunk, err)
	}
	segs := make([]paged, len(lens))
	for i, n := range lens {
		segs[i] = newPaged(uint64(n))
	}
	if err := install(segs); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadChunk, err)
	}
	if err := startLoad(f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadChunk, err)
	}
	return f, nil
}

// chunkLoader is implemented by kinds without payload checks that cache
// something derived from their arrays; LoadChunk tells them the arrays changed.
type chunkLoader interface {
	chunkLoaded()
}

// CheckBigChunk reports what LoadChunk answers a chunk of n bytes, checksum
// included, that is larger than any chunk DumpChunk makes (DumpChunkBytes and
// its checksum): it is always refused, and this says how without the bytes.
func CheckBigChunk(f Filter, iter int64, n int) error {
	if f.tracker().ld != nil {
		return ErrBadChunk
	}
	paylen, body := payloadBytes(f.payload()), int64(n)-4
	switch off := iter - 1 - body; {
	case body > 0 && off >= paylen:
		return ErrChunkOutside
	case body > 0 && off >= 0 && body > paylen-off:
		return ErrChunkTooBig
	}
	return fmt.Errorf("%w: the filter is not being loaded", ErrBadChunk)
}

// LoadChunk writes one payload chunk, as DumpChunk produced it with iterator iter,
// into f, which LoadHeader created and which is still being loaded. It checks the
// chunk's place (ErrBadPosition) and checksum, the values it holds, and, if it is
// the last chunk missing, the whole filter against its counters (ErrBadChunk); it
// changes nothing when it refuses a chunk. A chunk may be loaded again, replacing
// itself, until the last one is in; after that the filter is complete and
// refuses chunks.
func LoadChunk(f Filter, iter int64, data []byte) error {
	ld := f.tracker().ld
	if ld == nil {
		// A complete filter takes no chunk; one aimed outside it is told so,
		// as RedisBloom tells it.
		paylen, n := payloadBytes(f.payload()), int64(len(data))-4
		switch off := iter - 1 - n; {
		case n > 0 && off >= paylen:
			return ErrChunkOutside
		case n > 0 && off >= 0 && n > paylen-off:
			return ErrChunkTooBig
		}
		return fmt.Errorf("%w: the filter is not being loaded", ErrBadChunk)
	}
	if len(data) <= 4 || (len(data)-4)%8 != 0 || len(data)-4 > DumpChunkBytes {
		return ErrBadChunk
	}
	body := data[:len(data)-4]
	n := int64(len(body))
	off := iter - 1 - n
	if iter < 1 || off < 0 {
		return fmt.Errorf("%w: the iterator %d is before the chunk's own length", ErrBadChunk, iter)
	}
	// The checksum first: a chunk of another dump is bad data wherever it
	// claims to go, and this one's own chunk sent to another place fails it too,
	// since the offset is in it.
	if chunkSum(ld.id, off, body) != binary.LittleEndian.Uint32(data[len(body):]) {
		return ErrBadChunk
	}
	switch {
	case off >= ld.paylen:
		return ErrChunkOutside
	case n > ld.paylen-off:
		return ErrChunkTooBig
	case off%DumpChunkBytes != 0 || n != min(DumpChunkBytes, ld.paylen-off):
		return ErrBadPosition
	}
	next, totals, err := ld.load(f, off, body)
	if err != nil {
		return err
	}
	segs := f.payload()
	forPieces(segs, off/8, n/8, func(seg int, lo, hi uint64, at int) {
		segs[seg].setLE(lo, hi, body[at*8:])
	})
	f.tracker().ld = next
	if c, ok := f.(checked); ok {
		c.settle(totals)
	} else if cl, ok := f.(chunkLoader); ok {
		cl.chunkLoaded()
	}
	return nil
}
