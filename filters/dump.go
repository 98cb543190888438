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
//	                                              CRC-32C of (off as uint64 LE, the bytes)
//	past the end        -> (0, nil)
//
// LOADCHUNK takes each (iterator, data) pair exactly as SCANDUMP returned it: the
// header (iterator 1) creates an empty filter, and every later chunk knows its own
// place, since it ends where its iterator points. Chunks may be loaded in any order.

// DumpChunkBytes is the most payload bytes one SCANDUMP chunk carries.
const DumpChunkBytes = 1 << 20

// Errors returned by the dump functions.
var (
	// ErrBadPosition reports an iterator that names no chunk of this filter.
	ErrBadPosition = errors.New("filters: invalid position")
	// ErrBadChunk reports chunk data that is damaged or does not fit the filter.
	ErrBadChunk = errors.New("filters: bad chunk data")
)

// DumpChunk returns the chunk of f's dump that iter names and the iterator of the
// next chunk; the next iterator is 0 after the last chunk.
func DumpChunk(f Filter, iter int64) (next int64, chunk []byte, err error) {
	segs := f.payload()
	paylen := int64(0)
	for _, s := range segs {
		paylen += int64(len(s)) * 8
	}
	switch {
	case iter == 0:
		return 1, encodeHeader(f.Kind(), f.params(), uint64(paylen)), nil
	case iter < 0 || (iter-1)%8 != 0:
		return 0, nil, ErrBadPosition
	case iter-1 >= paylen:
		return 0, nil, nil
	}
	off := iter - 1
	n := min(paylen-off, DumpChunkBytes)
	chunk = make([]byte, n, n+4)
	forWords(segs, off/8, n/8, func(words []uint64, at int) {
		for i, w := range words {
			binary.LittleEndian.PutUint64(chunk[(at+i)*8:], w)
		}
	})
	chunk = binary.LittleEndian.AppendUint32(chunk, chunkSum(off, chunk))
	return iter + n, chunk, nil
}

// chunkSum is the CRC-32C of a chunk's offset and payload bytes.
func chunkSum(off int64, data []byte) uint32 {
	var o [8]byte
	binary.LittleEndian.PutUint64(o[:], uint64(off))
	return crc32.Update(crc32.Checksum(o[:], castagnoli), castagnoli, data)
}

// forWords calls fn on the n words starting at word index from of the concatenated
// segments, piece by piece; at counts words from the start of the range.
func forWords(segs [][]uint64, from, n int64, fn func(words []uint64, at int)) {
	at := 0
	for _, s := range segs {
		if n == 0 {
			return
		}
		if from >= int64(len(s)) {
			from -= int64(len(s))
			continue
		}
		piece := s[from:min(int64(len(s)), from+n)]
		fn(piece, at)
		at += len(piece)
		n -= int64(len(piece))
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
	return h, nil
}

// LoadHeader creates an empty filter from the first chunk of a dump (iterator 1).
// Its arrays are allocated in full and zeroed; LoadChunk fills them.
func LoadHeader(data []byte) (Filter, error) {
	h, err := parseHeaderChunk(data)
	if err != nil {
		return nil, err
	}
	f, lens, install, err := h.prepare()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadChunk, err)
	}
	segs := make([][]uint64, len(lens))
	for i, n := range lens {
		segs[i] = make([]uint64, n)
	}
	if err := install(segs); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadChunk, err)
	}
	return f, nil
}

// chunkLoader is implemented by kinds that cache something derived from their
// arrays; LoadChunk tells them the arrays changed.
type chunkLoader interface {
	chunkLoaded()
}

// LoadChunk writes one payload chunk, as DumpChunk produced it with iterator iter,
// into f. It checks the chunk's place and checksum first and changes nothing if
// either is wrong.
func LoadChunk(f Filter, iter int64, data []byte) error {
	if len(data) < 4 || (len(data)-4)%8 != 0 || len(data)-4 > DumpChunkBytes {
		return ErrBadChunk
	}
	body := data[:len(data)-4]
	n := int64(len(body))
	off := iter - 1 - n
	segs := f.payload()
	paylen := int64(0)
	for _, s := range segs {
		paylen += int64(len(s)) * 8
	}
	if iter < 1 || off < 0 || off%8 != 0 || off+n > paylen {
		return ErrBadPosition
	}
	if chunkSum(off, body) != binary.LittleEndian.Uint32(data[len(data)-4:]) {
		return ErrBadChunk
	}
	forWords(segs, off/8, n/8, func(words []uint64, at int) {
		for i := range words {
			words[i] = binary.LittleEndian.Uint64(body[(at+i)*8:])
		}
	})
	if cl, ok := f.(chunkLoader); ok {
		cl.chunkLoaded()
	}
	return nil
}
