package filters

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// RedisBloom's dump of a chain, as BF.SCANDUMP hands it out and BF.LOADCHUNK
// takes it. The first piece (cursor 0 answers it, with next cursor 1) is the
// header, packed little-endian structs:
//
//	chain  size u64 (items), nfilters u32, options u32, growth u32      20 bytes
//	link   bytes u64, bits u64, size u64, error f64, bpe f64,           53 bytes each
//	       hashes u32, entries u64 (capacity), n2 u8
//
// The rest is the links' bytes, oldest link first, as one stream: a cursor
// c >= 1 names byte c-1 of it. SCANDUMP at cursor c returns the bytes from there
// to the end of that link, at most RBMaxChunkBytes of them, and c plus their
// number as the next cursor; a cursor outside the stream returns nothing and
// next cursor 0. A chunk never spans two links. LOADCHUNK(c, data) writes data
// where SCANDUMP(c - len(data)) read it: anywhere inside one link, in any order,
// any number of times.

const (
	rbChainHeaderBytes = 20
	rbLinkHeaderBytes  = 53
	// RBMaxChunkBytes is the most bytes one BF.SCANDUMP chunk carries
	// (RedisBloom's MAX_SCANDUMP_SIZE).
	RBMaxChunkBytes = 16 << 20
)

// Errors of RedisBloom-format loads. Their texts are RedisBloom's replies
// without the leading "ERR "; errors.Is finds them in the wrapped errors
// returned, which also say what was wrong.
var (
	// ErrRBBadData reports a header RedisBloom (or a limit of ours) refuses, or
	// a chunk whose cursor is shorter than its data: "ERR received bad data".
	ErrRBBadData = errors.New("received bad data")
	// ErrRBNoLink reports a chunk that would start outside every link: "ERR
	// invalid offset - no link found".
	ErrRBNoLink = errors.New("invalid offset - no link found")
	// ErrRBTooBig reports a chunk running past the end of its link: "ERR
	// invalid chunk - Too big for current filter".
	ErrRBTooBig = errors.New("invalid chunk - Too big for current filter")
)

// DumpHeader returns the chain's RedisBloom dump header, the first chunk of its
// BF.SCANDUMP.
func (c *RBChain) DumpHeader() []byte {
	h := make([]byte, 0, rbChainHeaderBytes+rbLinkHeaderBytes*len(c.links))
	h = binary.LittleEndian.AppendUint64(h, c.size)
	h = binary.LittleEndian.AppendUint32(h, uint32(len(c.links)))
	h = binary.LittleEndian.AppendUint32(h, c.options)
	h = binary.LittleEndian.AppendUint32(h, c.growth)
	for i := range c.links {
		l := &c.links[i]
		h = binary.LittleEndian.AppendUint64(h, l.bytes)
		h = binary.LittleEndian.AppendUint64(h, l.bytes*8)
		h = binary.LittleEndian.AppendUint64(h, l.size)
		h = binary.LittleEndian.AppendUint64(h, math.Float64bits(l.err))
		h = binary.LittleEndian.AppendUint64(h, math.Float64bits(l.bpe))
		h = binary.LittleEndian.AppendUint32(h, l.hashes)
		h = binary.LittleEndian.AppendUint64(h, l.entries)
		h = append(h, l.n2)
	}
	return h
}

// DumpChunk returns the piece of the chain's RedisBloom dump that cursor iter
// names and the cursor of the next, exactly as BF.SCANDUMP: cursor 0 gives the
// header and next cursor 1; a cursor inside the links' bytes gives the bytes
// from there to the end of its link (at most RBMaxChunkBytes) and the cursor
// after them; any other cursor gives no bytes and next cursor 0.
func (c *RBChain) DumpChunk(iter int64) (next int64, chunk []byte) {
	if iter == 0 {
		return 1, c.DumpHeader()
	}
	l, off := c.linkAt(iter)
	if l == nil {
		return 0, nil
	}
	n := min(l.bytes-off, RBMaxChunkBytes)
	chunk = make([]byte, n)
	l.readBytes(off, chunk)
	return iter + int64(n), chunk
}

// linkAt returns the link holding byte iter-1 of the dump's stream of link
// bytes and that byte's offset in it; nil if iter names no byte.
func (c *RBChain) linkAt(iter int64) (*rbLink, uint64) {
	if iter < 1 {
		return nil, 0
	}
	pos := uint64(iter - 1)
	for i := range c.links {
		l := &c.links[i]
		if pos < l.bytes {
			return l, pos
		}
		pos -= l.bytes
	}
	return nil, 0
}

// LoadChunk writes one chunk of a RedisBloom dump, as DumpChunk (or RedisBloom's
// BF.SCANDUMP) returned it with next cursor iter, into the chain, as
// BF.LOADCHUNK does into an existing filter: the data goes where the cursor
// iter - len(data) points, and must lie inside one link. It refuses
// (ErrRBBadData, ErrRBNoLink, ErrRBTooBig, RedisBloom's checks in its order)
// without changing anything. Nothing ties a link's bits to its counters, so
// any bytes are taken.
func (c *RBChain) LoadChunk(iter int64, data []byte) error {
	l, off, err := c.chunkPlace(iter, uint64(len(data)))
	if err != nil {
		return err
	}
	l.writeBytes(off, data)
	return nil
}

// CheckChunk reports what LoadChunk would say of a chunk of n bytes with
// cursor iter, changing nothing: a chunk loaded in pieces is checked whole
// first.
func (c *RBChain) CheckChunk(iter int64, n uint64) error {
	_, _, err := c.chunkPlace(iter, n)
	return err
}

// chunkPlace is where a chunk of n bytes with cursor iter goes, or why it
// goes nowhere.
func (c *RBChain) chunkPlace(iter int64, n uint64) (*rbLink, uint64, error) {
	if c.ld != nil {
		return nil, 0, fmt.Errorf("%w: the filter is being loaded from a Rookery dump", ErrRBBadData)
	}
	if iter <= 0 || uint64(iter) < n {
		return nil, 0, fmt.Errorf("%w: cursor %d for a chunk of %d bytes", ErrRBBadData, iter, n)
	}
	l, off := c.linkAt(iter - int64(n))
	if l == nil {
		return nil, 0, ErrRBNoLink
	}
	if n > l.bytes-off {
		return nil, 0, ErrRBTooBig
	}
	return l, off, nil
}

// readBytes copies the link's bytes from off into dst; they lie inside the link.
func (l *rbLink) readBytes(off uint64, dst []byte) {
	i := uint64(0)
	for ; i < uint64(len(dst)) && (off+i)%8 != 0; i++ {
		dst[i] = l.byteAt(off + i)
	}
	if w := (uint64(len(dst)) - i) / 8; w > 0 {
		lo := (off + i) / 8
		l.bits.putLE(dst[i:], lo, lo+w)
		i += w * 8
	}
	for ; i < uint64(len(dst)); i++ {
		dst[i] = l.byteAt(off + i)
	}
}

// writeBytes stores src in the link's bytes from off; they lie inside the link.
func (l *rbLink) writeBytes(off uint64, src []byte) {
	i := uint64(0)
	for ; i < uint64(len(src)) && (off+i)%8 != 0; i++ {
		l.setByte(off+i, src[i])
	}
	if w := (uint64(len(src)) - i) / 8; w > 0 {
		lo := (off + i) / 8
		l.bits.setLE(lo, lo+w, src[i:])
		i += w * 8
	}
	for ; i < uint64(len(src)); i++ {
		l.setByte(off+i, src[i])
	}
}

func (l *rbLink) byteAt(x uint64) byte { return byte(l.bits.at(x/8) >> (x % 8 * 8)) }

func (l *rbLink) setByte(x uint64, v byte) {
	w, s := l.bits.ref(x/8), x%8*8
	*w = *w&^(0xff<<s) | uint64(v)<<s
}

// ParseRBChainHeader checks a RedisBloom dump header (the data of LOADCHUNK at
// cursor 1) as NewRBChainFromHeader does and returns the bytes the chain's
// links take, allocating nothing: a server checks its memory limit with it
// before creating the chain. Errors wrap ErrRBBadData.
func ParseRBChainHeader(data []byte) (payloadBytes uint64, err error) {
	if err := walkRBHeader(data, func(l rbLink) { payloadBytes += l.bytes }); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrRBBadData, err)
	}
	return payloadBytes, nil
}

// NewRBChainFromHeader creates a chain from a RedisBloom dump header, as
// BF.LOADCHUNK at cursor 1 creates one, with zero bits that LoadChunk then
// fills. It holds the header to RedisBloom's rules and to this package's limits
// (errors wrap ErrRBBadData) and allocates every link's bits at once: a caller
// checks ParseRBChainHeader's size against its memory limit first.
func NewRBChainFromHeader(data []byte) (*RBChain, error) {
	c, err := parseRBHeader(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRBBadData, err)
	}
	for i := range c.links {
		c.links[i].bits = newPaged(rbWords(c.links[i].bytes))
	}
	return c, nil
}

// parseRBHeader checks a dump header and returns its chain, without bits.
func parseRBHeader(data []byte) (*RBChain, error) {
	var links []rbLink
	if err := walkRBHeader(data, func(l rbLink) { links = append(links, l) }); err != nil {
		return nil, err
	}
	return &RBChain{links: links, size: binary.LittleEndian.Uint64(data),
		options: binary.LittleEndian.Uint32(data[12:]), growth: binary.LittleEndian.Uint32(data[16:])}, nil
}

// walkRBHeader checks a dump header and calls fn with each of its links. The
// rules, RedisBloom's (SB_NewChainFromHeader, bloom_validate_integrity,
// SB_ValidateIntegrity) then ours:
//
//   - the length is 20 + 53 bytes per link, and there is at least one link
//   - a link's error rate lies in (0, 1), n2 <= 63, bits == bytes*8 != 0, and
//     bits >= 2^n2 when n2 > 0
//   - its hashes are (int)ceil(0.693147180559945 * bpe), compared as C does
//   - the options are known flags, and the links' sizes sum to the chain's
//   - ours: at most rbMaxLinks links, rbMaxHashes hashes and rbMaxEntries
//     capacity and items per link, bytes summing to at most maxPayloadBytes,
//     and an expansion of at most 32768. A NaN error rate, which RedisBloom's
//     comparisons let through, is refused.
func walkRBHeader(data []byte, fn func(rbLink)) error {
	if len(data) < rbChainHeaderBytes {
		return fmt.Errorf("header of %d bytes", len(data))
	}
	nf := uint64(binary.LittleEndian.Uint32(data[8:]))
	options := binary.LittleEndian.Uint32(data[12:])
	growth := binary.LittleEndian.Uint32(data[16:])
	switch {
	case nf == 0:
		return errors.New("no links")
	case uint64(len(data)) != rbChainHeaderBytes+rbLinkHeaderBytes*nf:
		return fmt.Errorf("header of %d bytes for %d links", len(data), nf)
	case nf > rbMaxLinks:
		return fmt.Errorf("%d links, more than %d", nf, rbMaxLinks)
	case options&^rbOptAll != 0:
		return fmt.Errorf("unknown options %#x", options)
	case growth > rbMaxGrowth:
		return fmt.Errorf("expansion %d out of range [0, %d]", growth, rbMaxGrowth)
	}
	var sizes, total uint64
	for i := range nf {
		l, bits := readRBLink(data[rbChainHeaderBytes+i*rbLinkHeaderBytes:])
		if err := l.check(bits); err != nil {
			return fmt.Errorf("link %d: %w", i, err)
		}
		// Both sums are bounded by the checks: no overflow.
		sizes += l.size
		if total += l.bytes; total > maxPayloadBytes {
			return fmt.Errorf("links of more than %d bytes", uint64(maxPayloadBytes))
		}
		fn(l)
	}
	if size := binary.LittleEndian.Uint64(data); size != sizes {
		return fmt.Errorf("chain of %d items, links of %d", size, sizes)
	}
	return nil
}

// readRBLink reads one link's header fields; bits is returned apart, since the
// link keeps only bytes.
func readRBLink(b []byte) (l rbLink, bits uint64) {
	l.bytes = binary.LittleEndian.Uint64(b)
	bits = binary.LittleEndian.Uint64(b[8:])
	l.size = binary.LittleEndian.Uint64(b[16:])
	l.err = math.Float64frombits(binary.LittleEndian.Uint64(b[24:]))
	l.bpe = math.Float64frombits(binary.LittleEndian.Uint64(b[32:]))
	l.hashes = binary.LittleEndian.Uint32(b[40:])
	l.entries = binary.LittleEndian.Uint64(b[44:])
	l.n2 = b[52]
	return l, bits
}

// check holds a link's header to the rules of walkRBHeader.
func (l *rbLink) check(bits uint64) error {
	// C's (int)ceil(...) compared with the unsigned hashes: within our bound,
	// the ceiling is a whole number in [0, rbMaxHashes] (-0 for bpe in
	// (-1/ln 2, 0]) and converts exactly.
	k := math.Ceil(float64(rbLn2 * l.bpe))
	switch {
	case !(l.err > 0 && l.err < 1):
		return fmt.Errorf("error rate %v", l.err)
	case l.n2 > 63:
		return fmt.Errorf("n2 %d", l.n2)
	case l.bytes == 0 || l.bytes > maxPayloadBytes || bits != l.bytes*8:
		return fmt.Errorf("%d bytes, %d bits", l.bytes, bits)
	case l.n2 > 0 && (l.n2 > rbMaxN2 || bits < 1<<l.n2):
		return fmt.Errorf("%d bits, n2 %d", bits, l.n2)
	case l.hashes > rbMaxHashes:
		return fmt.Errorf("%d hashes, more than %d", l.hashes, rbMaxHashes)
	case !(k >= 0 && k <= rbMaxHashes) || uint32(k) != l.hashes:
		return fmt.Errorf("%d hashes for %v bits per entry", l.hashes, l.bpe)
	case l.entries > rbMaxEntries || l.size > rbMaxEntries:
		return fmt.Errorf("capacity %d, size %d, more than %d", l.entries, l.size, uint64(rbMaxEntries))
	}
	return nil
}

// RBLink describes one link of an RBChain, with what BF.DEBUG shows of it.
type RBLink struct {
	Bytes        uint64  // bytes of bits
	Bits         uint64  // Bytes*8
	Hashes       uint32  // bits set per item
	HashWidth    int     // 64 (MurmurHash64A) or 32 (MurmurHash2)
	Capacity     uint64  // items the link takes before the chain grows
	Size         uint64  // items inserted into the link
	ErrorRate    float64 // the link's error rate ("ratio")
	BitsPerEntry float64
	N2           uint8 // 0, or bit positions are taken modulo 2^N2
}

// Links returns the chain's links, oldest first.
func (c *RBChain) Links() []RBLink {
	width := 32
	if c.options&rbOptForce64 != 0 {
		width = 64
	}
	out := make([]RBLink, len(c.links))
	for i := range c.links {
		l := &c.links[i]
		out[i] = RBLink{Bytes: l.bytes, Bits: l.bytes * 8, Hashes: l.hashes, HashWidth: width, Capacity: l.entries,
			Size: l.size, ErrorRate: l.err, BitsPerEntry: l.bpe, N2: l.n2}
	}
	return out
}

// Debug returns RedisBloom's BF.DEBUG reply for the chain, line by line:
// "size:N", then one line per link, oldest first.
func (c *RBChain) Debug() []string {
	out := []string{"size:" + strconv.FormatUint(c.size, 10)}
	for _, l := range c.Links() {
		out = append(out, fmt.Sprintf("bytes:%d bits:%d hashes:%d hashwidth:%d capacity:%d size:%d ratio:%s",
			l.Bytes, l.Bits, l.Hashes, l.HashWidth, l.Capacity, l.Size, cFormatG(l.ErrorRate)))
	}
	return out
}

// cFormatG formats x as C's printf("%g") does: six significant digits,
// exponent form below 1e-4 or from 1e6 on, trailing zeros dropped.
func cFormatG(x float64) string {
	return strconv.FormatFloat(x, 'g', 6, 64)
}

// MaxChunkBytes is the largest chunk LoadChunk could take anywhere in the
// chain: its largest link's bytes. A chunk is written inside one link.
func (c *RBChain) MaxChunkBytes() uint64 {
	var m uint64
	for i := range c.links {
		m = max(m, c.links[i].bytes)
	}
	return m
}
