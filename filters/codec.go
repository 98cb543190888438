package filters

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"unsafe"

	"github.com/rookerydb/rookery/internal/wire"
)

// The encoding of one filter, shared by every kind (WriteTo, snapshots, SCANDUMP):
//
//	magic    "RKYF"
//	format   1 byte, the container version (formatVersion)
//	kind     1 byte, a Kind
//	plen     uvarint, length of params (at most maxParamsLen)
//	params   plen bytes, the kind's own parameters; their first byte is the kind's
//	         parameter version
//	paylen   uint64 little-endian, payload length in bytes, a multiple of 8
//	hcrc     uint32 little-endian, CRC-32C of every byte above
//	payload  the filter's arrays of uint64 words, little-endian, in the kind's order
//	pcrc     uint32 little-endian, CRC-32C of the payload
//
// The params fix the length of every array, so a decoder checks paylen against them
// before reading a single payload byte, and grows its arrays only as payload bytes
// actually arrive: a short hostile input cannot make it allocate gigabytes.

const (
	formatVersion = 1
	maxParamsLen  = 1 << 16
	// maxPayloadBytes bounds any one filter: 64 GiB, far above what a node's memory
	// limit admits, and small enough that lengths never overflow.
	maxPayloadBytes = 1 << 36
	// growStart is how many words a decoder allocates before payload arrives; it
	// doubles as the payload comes in.
	growStart = 1 << 17
)

var encMagic = [4]byte{'R', 'K', 'Y', 'F'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Kind identifies a filter kind in encodings. Values are never renumbered.
type Kind uint8

// Filter kinds.
const (
	KindBloom    Kind = 1 // a single Bloom filter
	KindScalable Kind = 2 // a scalable Bloom filter: a chain of Blooms
	KindCounting Kind = 3 // a counting Bloom filter, standard layout
	KindDLeft    Kind = 4 // a d-left counting Bloom filter
	KindCuckoo   Kind = 5 // a (scalable) cuckoo filter
	// 6 is kindLoading (load.go).
	KindRBChain  Kind = 7 // RedisBloom's scalable Bloom chain, bit for bit (rbchain.go)
	KindRBCuckoo Kind = 8 // RedisBloom's cuckoo filter, bit for bit (rbcuckoo.go)
	// KindWindowBloom is a Bloom filter over a sliding window of time or
	// insertions (wbloom.go).
	KindWindowBloom Kind = 9
	// KindWindowCuckoo is a cuckoo filter over a sliding window of time
	// (wcuckoo.go).
	KindWindowCuckoo Kind = 10
)

// String returns the kind's name.
func (k Kind) String() string {
	switch k {
	case KindBloom:
		return "bloom"
	case KindScalable:
		return "scalable-bloom"
	case KindCounting:
		return "counting-bloom"
	case KindDLeft:
		return "dleft-counting-bloom"
	case KindCuckoo:
		return "cuckoo"
	case KindRBChain:
		return "redisbloom-bloom"
	case KindRBCuckoo:
		return "redisbloom-cuckoo"
	case KindWindowBloom:
		return "windowed-bloom"
	case KindWindowCuckoo:
		return "windowed-cuckoo"
	case kindLoading:
		return "loading"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Errors returned by decoders and constructors.
var (
	// ErrCorrupt reports an encoding that is damaged: a bad magic, checksum or
	// length, or parameters that do not describe a valid filter.
	ErrCorrupt = errors.New("filters: corrupt encoding")
	// ErrVersion reports an encoding written by a newer format than this build reads.
	ErrVersion = errors.New("filters: unsupported encoding version")
	// ErrWrongKind reports decoding one kind of filter into another.
	ErrWrongKind = errors.New("filters: wrong filter kind")
	// ErrBadParam reports a constructor argument out of range.
	ErrBadParam = errors.New("filters: bad parameter")
	// ErrIncompatible reports Union of filters with different geometry.
	ErrIncompatible = errors.New("filters: incompatible filters")
	// ErrFull reports an insert that found no room and could not grow the filter.
	ErrFull = errors.New("filters: filter is full")
)

// Filter is implemented by every kind in this package. The unexported methods give
// the shared encoder the kind's parameters and arrays.
type Filter interface {
	// Kind reports the filter's kind.
	Kind() Kind
	// MemoryBytes reports the memory the filter's arrays occupy.
	MemoryBytes() uint64
	// WriteTo streams the filter's encoding to w.
	WriteTo(w io.Writer) (int64, error)
	// Test reports whether item may be in the filter; false means it surely
	// is not.
	Test(item []byte) bool

	// params returns the kind's parameters, counters included.
	params() []byte
	// payload returns the filter's arrays in encoding order. The encoder only
	// reads them; chunk loading writes into them.
	payload() []*paged
	// tracker returns the state of a load in progress (load.go).
	tracker() *loadable
	// fork returns the kind's Fork as a Filter.
	fork() Filter
}

// Counter is a filter that counts copies of an item: an upper bound, exact
// unless another item collides with it (cuckoo, counting Bloom, d-left).
type Counter interface {
	Filter
	Count(item []byte) uint64
}

// Deleter is a filter that deletes a copy of an item, reporting whether it
// found one (cuckoo, counting Bloom, d-left). Deleting an item that was never
// added may remove another item's trace.
type Deleter interface {
	Filter
	Delete(item []byte) bool
}

var (
	_ Counter = (*Cuckoo)(nil)
	_ Counter = (*Counting)(nil)
	_ Counter = (*DLeft)(nil)
	_ Deleter = (*Cuckoo)(nil)
	_ Deleter = (*Counting)(nil)
	_ Deleter = (*DLeft)(nil)
)

// decoder builds an empty filter of one kind from its params, and reports the
// length in words of each array its payload holds. install then receives the arrays,
// filled, and checks whatever invariant ties them to the params.
type decoder func(params []byte) (f Filter, lens []int, install func([]paged) error, err error)

// decoders is indexed by Kind; it is read-only after package initialisation.
var decoders = map[Kind]decoder{}

// registerDecoder is called from the init function of each kind's file.
func registerDecoder(k Kind, d decoder) { decoders[k] = d }

// Encode writes f's encoding to w.
func Encode(w io.Writer, f Filter) (int64, error) {
	segs := f.payload()
	paylen := uint64(payloadBytes(segs))
	kind, params := encodingOf(f)
	hdr := encodeHeader(kind, params, paylen)
	cw := &wire.CountWriter{W: w}
	if _, err := cw.Write(hdr); err != nil {
		return cw.N, err
	}
	crc := uint32(0)
	var buf []byte
	for _, s := range segs {
		for _, pg := range s.pages {
			var err error
			if crc, buf, err = writeWords(cw, pg.w, crc, buf); err != nil {
				return cw.N, err
			}
		}
	}
	var tail [4]byte
	binary.LittleEndian.PutUint32(tail[:], crc)
	_, err := cw.Write(tail[:])
	return cw.N, err
}

func encodeHeader(k Kind, params []byte, paylen uint64) []byte {
	hdr := make([]byte, 0, 4+2+binary.MaxVarintLen64+len(params)+12)
	hdr = append(hdr, encMagic[:]...)
	hdr = append(hdr, formatVersion, byte(k))
	hdr = binary.AppendUvarint(hdr, uint64(len(params)))
	hdr = append(hdr, params...)
	hdr = binary.LittleEndian.AppendUint64(hdr, paylen)
	return binary.LittleEndian.AppendUint32(hdr, crc32.Checksum(hdr, castagnoli))
}

// littleEndian reports whether uint64 words are stored little-endian in memory, in
// which case the payload is written straight from the arrays without conversion.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// writeChunkWords is how many words writeWords hands to w at once.
const writeChunkWords = 1 << 16

// writeWords writes words little-endian to w, updating crc. buf is scratch space
// reused across calls on big-endian hosts.
func writeWords(w io.Writer, words []uint64, crc uint32, buf []byte) (uint32, []byte, error) {
	for len(words) > 0 {
		n := min(len(words), writeChunkWords)
		var b []byte
		if littleEndian {
			b = unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n*8)
		} else {
			if buf == nil {
				buf = make([]byte, writeChunkWords*8)
			}
			b = buf[:n*8]
			for i, x := range words[:n] {
				binary.LittleEndian.PutUint64(b[i*8:], x)
			}
		}
		crc = crc32.Update(crc, castagnoli, b)
		if _, err := w.Write(b); err != nil {
			return crc, buf, err
		}
		words = words[n:]
	}
	return crc, buf, nil
}

// header is a decoded encoding header.
type header struct {
	kind   Kind
	params []byte
	paylen uint64
	size   int // bytes the header occupied
}

// readHeader reads and verifies an encoding header.
func readHeader(r io.ByteReader, rd io.Reader) (header, error) {
	var h header
	var fixed [6]byte
	if _, err := io.ReadFull(rd, fixed[:]); err != nil {
		return h, fmt.Errorf("%w: header: %v", ErrCorrupt, noEOF(err))
	}
	if [4]byte(fixed[:4]) != encMagic {
		return h, fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	if fixed[4] != formatVersion {
		return h, fmt.Errorf("%w: format %d", ErrVersion, fixed[4])
	}
	h.kind = Kind(fixed[5])
	vr := &countByteReader{r: r}
	plen, err := binary.ReadUvarint(vr)
	if err != nil || plen > maxParamsLen {
		return h, fmt.Errorf("%w: params length", ErrCorrupt)
	}
	raw := make([]byte, 0, 6+binary.MaxVarintLen64+int(plen)+8)
	raw = append(raw, fixed[:]...)
	raw = binary.AppendUvarint(raw, plen)
	start := len(raw)
	// The checksum is computed over plen as the encoder writes it, in the fewest
	// bytes; a longer form (0x85 0x00 for 5) would pass unchecked and give one
	// filter a second encoding.
	if vr.n != start-len(fixed) {
		return h, fmt.Errorf("%w: params length not minimally encoded", ErrCorrupt)
	}
	raw = raw[:start+int(plen)+8]
	if _, err := io.ReadFull(rd, raw[start:]); err != nil {
		return h, fmt.Errorf("%w: header: %v", ErrCorrupt, noEOF(err))
	}
	var sum [4]byte
	if _, err := io.ReadFull(rd, sum[:]); err != nil {
		return h, fmt.Errorf("%w: header: %v", ErrCorrupt, noEOF(err))
	}
	if crc32.Checksum(raw, castagnoli) != binary.LittleEndian.Uint32(sum[:]) {
		return h, fmt.Errorf("%w: header checksum", ErrCorrupt)
	}
	h.params = raw[start : start+int(plen)]
	h.paylen = binary.LittleEndian.Uint64(raw[start+int(plen):])
	h.size = len(raw) + 4
	return h, nil
}

// countByteReader counts the bytes read through it.
type countByteReader struct {
	r io.ByteReader
	n int
}

func (c *countByteReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// noEOF turns a bare EOF inside an encoding into ErrUnexpectedEOF: the input ended
// early, it is not an empty stream.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// prepare decodes params into an empty filter and checks paylen against them.
func (h header) prepare() (Filter, []int, func([]paged) error, error) {
	dec, ok := decoders[h.kind]
	if !ok {
		return nil, nil, nil, fmt.Errorf("%w: unknown kind %d", ErrCorrupt, uint8(h.kind))
	}
	f, lens, install, err := dec(h.params)
	if err != nil {
		return nil, nil, nil, err
	}
	var words uint64
	for _, n := range lens {
		if n < 0 {
			return nil, nil, nil, fmt.Errorf("%w: negative array length", ErrCorrupt)
		}
		words += uint64(n)
		if words > maxPayloadBytes/8 {
			return nil, nil, nil, fmt.Errorf("%w: payload too large", ErrCorrupt)
		}
	}
	if h.paylen != words*8 {
		return nil, nil, nil, fmt.Errorf("%w: payload length %d, params need %d", ErrCorrupt, h.paylen, words*8)
	}
	return f, lens, install, nil
}

// Decode reads one filter's encoding from r and returns the filter, of whatever
// kind it is. It reads exactly the encoding's bytes when r is an io.ByteReader;
// otherwise it may buffer beyond them. A payload that contradicts the counters in
// the header is ErrCorrupt (check.go), and the encoding of a filter that was being
// loaded gives it back still being loaded (load.go).
func Decode(r io.Reader) (Filter, error) {
	br, ok := r.(byteReader)
	if !ok {
		br = bufio.NewReaderSize(r, 64<<10)
	}
	h, err := readHeader(br, br)
	if err != nil {
		return nil, err
	}
	f, lens, install, err := h.prepare()
	if err != nil {
		return nil, err
	}
	segs := make([]paged, len(lens))
	crc := uint32(0)
	for i, n := range lens {
		if segs[i], crc, err = readWords(br, uint64(n), crc); err != nil {
			return nil, err
		}
	}
	var sum [4]byte
	if _, err := io.ReadFull(br, sum[:]); err != nil {
		return nil, fmt.Errorf("%w: payload checksum: %v", ErrCorrupt, noEOF(err))
	}
	if binary.LittleEndian.Uint32(sum[:]) != crc {
		return nil, fmt.Errorf("%w: payload checksum", ErrCorrupt)
	}
	if err := install(segs); err != nil {
		return nil, err
	}
	if err := checkDecoded(f); err != nil {
		return nil, err
	}
	return f, nil
}

type byteReader interface {
	io.Reader
	io.ByteReader
}

// readWords reads n little-endian words into a paged array, a page at a time:
// pages, and the page table, are allocated only as input arrives, so that a
// short input never causes a large allocation.
func readWords(r io.Reader, n uint64, crc uint32) (paged, uint32, error) {
	a := paged{pages: make([]page, 0, min(pageCount(n), growStart/pageWords))}
	var buf []byte
	for left := n; left > 0; {
		pg := make([]uint64, min(left, pageWords))
		var b []byte
		if littleEndian {
			b = unsafe.Slice((*byte)(unsafe.Pointer(&pg[0])), len(pg)*8)
		} else {
			if buf == nil {
				buf = make([]byte, pageWords*8)
			}
			b = buf[:len(pg)*8]
		}
		if _, err := io.ReadFull(r, b); err != nil {
			return paged{}, crc, fmt.Errorf("%w: payload: %v", ErrCorrupt, noEOF(err))
		}
		crc = crc32.Update(crc, castagnoli, b)
		if !littleEndian {
			for i := range pg {
				pg[i] = binary.LittleEndian.Uint64(b[i*8:])
			}
		}
		a.pages = append(a.pages, page{w: pg})
		left -= uint64(len(pg))
	}
	return a, crc, nil
}

// decodeInto decodes r into a filter that must be of kind want. It reports the bytes
// it consumed from r; like Decode it reads no further than the encoding when r is an
// io.ByteReader.
func decodeInto(r io.Reader, want Kind) (Filter, int64, error) {
	br, ok := r.(byteReader)
	if !ok {
		br = bufio.NewReaderSize(r, 64<<10)
	}
	cr := &wire.CountReader{R: br}
	f, err := Decode(cr)
	if err != nil {
		return nil, cr.N, err
	}
	if f.Kind() != want {
		return nil, cr.N, fmt.Errorf("%w: have %v, want %v", ErrWrongKind, f.Kind(), want)
	}
	return f, cr.N, nil
}

// params encoding: a tiny append-only builder and a reader with a sticky error.

type paramWriter struct{ b []byte }

func (w *paramWriter) uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *paramWriter) float(v float64) {
	w.b = binary.LittleEndian.AppendUint64(w.b, math.Float64bits(v))
}
func (w *paramWriter) byte(v byte)      { w.b = append(w.b, v) }
func (w *paramWriter) bool(v bool)      { w.b = append(w.b, boolByte(v)) }
func (w *paramWriter) bytes(v []byte)   { w.uint(uint64(len(v))); w.b = append(w.b, v...) }
func (w *paramWriter) bytesOut() []byte { return w.b }
func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// paramReader reads params with a sticky error (wire.Reader) that wraps
// ErrCorrupt.
type paramReader struct{ wire.Reader }

func newParamReader(b []byte) *paramReader {
	return &paramReader{wire.Reader{B: b, Corrupt: ErrCorrupt, Prefix: "params: "}}
}

func (r *paramReader) uint() uint64 { return r.Uvarint() }

// uintIn reads an unsigned value and checks it lies in [lo, hi].
func (r *paramReader) uintIn(what string, lo, hi uint64) uint64 {
	v := r.uint()
	if r.Err() == nil && (v < lo || v > hi) {
		r.Fail(fmt.Sprintf("%s %d out of range [%d, %d]", what, v, lo, hi))
	}
	return v
}

func (r *paramReader) float() float64 { return r.Float64() }

// rate reads an error rate and checks it lies in (0, 1).
func (r *paramReader) rate() float64 {
	v := r.float()
	if r.Err() == nil && !(v > 0 && v < 1) {
		r.Fail("error rate out of range")
	}
	return v
}

func (r *paramReader) byte() byte { return r.Byte() }

func (r *paramReader) bool() bool {
	switch r.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	r.Fail("bad bool")
	return false
}

func (r *paramReader) bytes(max int) []byte {
	n := r.uint()
	if r.Err() != nil {
		return nil
	}
	if n > uint64(max) || n > uint64(len(r.B)) {
		r.Fail("bad byte string length")
		return nil
	}
	v := r.B[:n]
	r.B = r.B[n:]
	return v
}

// done reports the sticky error, or an error if bytes are left over.
func (r *paramReader) done() error {
	if r.Err() == nil && len(r.B) != 0 {
		r.Fail("trailing bytes")
	}
	return r.Err()
}
