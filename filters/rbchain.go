package filters

import (
	"errors"
	"fmt"
	"io"
	"math/bits"

	"github.com/rookerydb/rookery/internal/errdetail"
)

// RBChain is RedisBloom's scalable Bloom filter reproduced bit for bit: a chain
// of classic Bloom filters ("links") with RedisBloom's hash, sizing, bit layout,
// growth and dump format, so that a BF.SCANDUMP taken from RedisBloom loads into
// it (NewRBChainFromHeader, LoadChunk) and answers every lookup as RedisBloom
// would, and its own dump (DumpHeader, DumpChunk) loads back into RedisBloom.
// It exists for migration; Scalable is faster and smaller (DESIGN.md).
//
// An item is hashed once for the whole chain: with MurmurHash64A, seed
// 0xc6a4a7935bd1e995, to a and then, seeded with a, to b (chains with the FORCE64
// option, every chain RedisBloom makes today), or with the 32-bit MurmurHash2,
// seeds 0x9747b28c and a, in chains written before that option existed. A link
// of m bits and k hashes sets bits (a + i*b) mod m for i < k, in 64-bit unsigned
// arithmetic; m is the link's bit count, or 2^n2 for links sized to a power of
// two. Bit x is bit x&7 of byte x>>3, which is bit x&63 of little-endian word
// x>>6: the words here hold exactly RedisBloom's bytes.
//
// An Add tests every link, newest first, and adds nothing if any holds the item;
// else it sets the item's bits in the newest link, first adding a link if that
// one holds its capacity of items: capacity times the expansion, at half the
// error rate. Every field of every link's header is kept exactly as it was
// given, so a chain dumps to the bytes it was loaded from.
type RBChain struct {
	links   []rbLink // oldest first; never empty
	size    uint64   // items inserted: the sum of the links' sizes
	options uint32   // RedisBloom's rbOpt flags
	growth  uint32   // expansion factor

	loadable
	growable
}

// rbLink is one Bloom filter of a chain, with every field of its dump header.
// Its bits are bytes*8, a header rule.
type rbLink struct {
	bytes   uint64
	size    uint64 // items inserted into this link
	err     float64
	bpe     float64
	hashes  uint32
	entries uint64 // capacity
	n2      uint8
	bits    paged // ceil(bytes/8) words; the bytes past bytes are zero
}

// Limits on what a chain may hold, beyond RedisBloom's own rules. Each is above
// anything RedisBloom builds, and keeps a hostile dump header from costing more
// than a legitimate one could.
const (
	// rbMaxLinks bounds the links of a chain. Each link halves the error rate,
	// and RedisBloom refuses a rate of zero, which a float64 below 1 reaches
	// within 1075 halvings: no chain it grows passes about 1076 links (most
	// stay under 40). A lookup costs at most rbMaxLinks*rbMaxHashes bit
	// probes, what such a chain costs anyway, and the header fits an
	// encoding's params.
	rbMaxLinks = 1100
	// rbMaxHashes bounds a link's hashes. bloom_init gives at most 1075, for
	// the smallest positive error rate; a header claiming 7e8 (bpe 1e9) is
	// refused rather than looped over on every lookup.
	rbMaxHashes = 1100
	// rbMaxGrowth is RedisBloom's largest expansion factor.
	rbMaxGrowth = 32768
	// RBMaxErrorRate is the largest error rate RedisBloom creates a chain with:
	// from version 8.1 on, BF.RESERVE, BF.ADD and BF.INSERT take any larger
	// rate as this one.
	RBMaxErrorRate = 0.25
	// rbChainOverhead and rbLinkOverhead are the memory MemoryBytes counts for
	// the chain and for each link besides their bits, about their structs'.
	rbChainOverhead = 64
	rbLinkOverhead  = 96
	// rbParamVersion is the first byte of an RBChain's params.
	rbParamVersion = 1
)

// ErrGrowth reports an Add that needed a new link and could not make one: the
// chain's expansion is 0, the link would be too large, its error rate
// underflows, or the chain has rbMaxLinks links. RedisBloom answers this case
// (bloom_init failing) "ERR problem inserting into filter".
var ErrGrowth = errors.New("filters: problem inserting into filter")

// NewRBChain returns an empty chain as RedisBloom's BF.RESERVE creates it: one
// link of capacity items at errorRate/2 (errorRate if non-scaling), hashing
// with MurmurHash64A, sized to the bit. An errorRate above RBMaxErrorRate is
// taken as RBMaxErrorRate, as RedisBloom does from 8.1 on. expansion (at most
// 32768) multiplies each new link's capacity; expansion 0 makes the chain
// non-scaling, as nonScaling does.
func NewRBChain(capacity uint64, errorRate float64, expansion uint32, nonScaling bool) (*RBChain, error) {
	options, rate, err := rbReserve(capacity, errorRate, expansion, nonScaling)
	if err != nil {
		return nil, err
	}
	return newRBChainOptions(capacity, rate, expansion, options)
}

// RBChainBytes reports the MemoryBytes of a new RBChain with these parameters
// without allocating it. It returns the same errors as NewRBChain.
func RBChainBytes(capacity uint64, errorRate float64, expansion uint32, nonScaling bool) (uint64, error) {
	options, rate, err := rbReserve(capacity, errorRate, expansion, nonScaling)
	if err != nil {
		return 0, err
	}
	s, err := rbInit(capacity, rbFirstRate(rate, options), options)
	if err != nil {
		return 0, err
	}
	return rbChainOverhead + s.memoryBytes(), nil
}

// rbReserve checks NewRBChain's arguments and returns the chain's options and
// error rate.
func rbReserve(capacity uint64, errorRate float64, expansion uint32, nonScaling bool) (uint32, float64, error) {
	switch {
	case capacity < 1 || capacity > rbMaxEntries:
		return 0, 0, errdetail.New(ErrBadParam, "capacity %d out of range [1, %d]", capacity, uint64(rbMaxEntries))
	case !(errorRate > 0 && errorRate < 1):
		return 0, 0, errdetail.New(ErrBadParam, "error rate %v must lie in (0, 1)", errorRate)
	case expansion > rbMaxGrowth:
		return 0, 0, errdetail.New(ErrBadParam, "expansion %d out of range [0, %d]", expansion, rbMaxGrowth)
	}
	options := uint32(rbOptForce64 | rbOptNoRound)
	if nonScaling || expansion == 0 {
		options |= rbOptNoScaling
	}
	return options, min(errorRate, RBMaxErrorRate), nil
}

// rbFirstRate is the first link's error rate for a chain created at rate p.
func rbFirstRate(p float64, options uint32) float64 {
	if options&rbOptNoScaling != 0 {
		return p
	}
	return p * rbTightening
}

// newRBChainOptions creates a chain with any of RedisBloom's options, as its
// SB_NewChain does; tests use it to build chains of older formats.
func newRBChainOptions(capacity uint64, p float64, growth, options uint32) (*RBChain, error) {
	s, err := rbInit(capacity, rbFirstRate(p, options), options)
	if err != nil {
		return nil, err
	}
	return &RBChain{links: []rbLink{s.link()}, options: options, growth: growth}, nil
}

// link returns an empty link of shape s.
func (s rbShape) link() rbLink {
	return rbLink{bytes: s.bytes, err: s.err, bpe: s.bpe, hashes: s.hashes, entries: s.entries, n2: s.n2,
		bits: newPaged(rbWords(s.bytes))}
}

// memoryBytes is what a link of shape s takes (MemoryBytes).
func (s rbShape) memoryBytes() uint64 { return rbLinkOverhead + pagedBytes(rbWords(s.bytes)) }

// rbWords is the number of words that hold n bytes.
func rbWords(n uint64) uint64 { return (n + 7) / 8 }

// rbHash hashes item as the chain's options say.
func (c *RBChain) rbHash(item []byte) (a, b uint64) {
	if c.options&rbOptForce64 != 0 {
		a = murmurHash64A(item, murmur2M64)
		return a, murmurHash64A(item, a)
	}
	a32 := murmurHash2(item, 0x9747b28c)
	return uint64(a32), uint64(murmurHash2(item, a32))
}

// test reports whether every one of the item's bits is set.
func (l *rbLink) test(a, b uint64) bool {
	if l.n2 > 0 {
		mask := uint64(1)<<l.n2 - 1
		for i := range uint64(l.hashes) {
			x := (a + i*b) & mask
			if l.bits.at(x>>6)&(1<<(x&63)) == 0 {
				return false
			}
		}
		return true
	}
	m := l.bytes * 8
	for i := range uint64(l.hashes) {
		x := (a + i*b) % m
		if l.bits.at(x>>6)&(1<<(x&63)) == 0 {
			return false
		}
	}
	return true
}

// add sets the item's bits and reports whether any was clear.
func (l *rbLink) add(a, b uint64) bool {
	m, mask := l.bytes*8, uint64(0)
	if l.n2 > 0 {
		mask = uint64(1)<<l.n2 - 1
	}
	set := false
	for i := range uint64(l.hashes) {
		x := a + i*b
		if mask != 0 {
			x &= mask
		} else {
			x %= m
		}
		if w, bit := x>>6, uint64(1)<<(x&63); l.bits.at(w)&bit == 0 {
			*l.bits.ref(w) |= bit
			set = true
		}
	}
	return set
}

// Add inserts item as RedisBloom's BF.ADD does. It reports false, changing
// nothing, if any link may already hold it. Otherwise, if the newest link holds
// its capacity of items, the chain first grows by a link; a non-scaling chain
// returns ErrFull instead, and a chain that cannot grow ErrGrowth, changing
// nothing.
func (c *RBChain) Add(item []byte) (bool, error) {
	a, b := c.rbHash(item)
	if c.testHash(a, b) {
		return false, nil
	}
	cur := &c.links[len(c.links)-1]
	if cur.size >= cur.entries {
		if c.options&rbOptNoScaling != 0 {
			return false, ErrFull
		}
		s, err := c.next()
		if err != nil {
			return false, err
		}
		if !c.take(s.memoryBytes()) {
			return false, ErrGrowthBudget
		}
		c.links = append(c.links, s.link())
		cur = &c.links[len(c.links)-1]
	}
	if !cur.add(a, b) {
		return false, nil // no hashes: the link holds every item
	}
	// cur.size < cur.entries <= rbMaxEntries, and the chain's size is the
	// sum of its links': neither can overflow.
	cur.size++
	c.size++
	return true, nil
}

// next sizes the link the chain would add next: the newest link's capacity
// times the expansion, at half its error rate, with the chain's options.
func (c *RBChain) next() (rbShape, error) {
	if len(c.links) >= rbMaxLinks {
		return rbShape{}, fmt.Errorf("%w: the chain has %d links", ErrGrowth, len(c.links))
	}
	cur := &c.links[len(c.links)-1]
	hi, entries := bits.Mul64(cur.entries, uint64(c.growth))
	if hi != 0 || entries > rbMaxEntries {
		return rbShape{}, fmt.Errorf("%w: next link's capacity overflows", ErrGrowth)
	}
	s, err := rbInit(entries, cur.err*rbTightening, c.options)
	if err != nil {
		return rbShape{}, fmt.Errorf("%w: %v", ErrGrowth, err)
	}
	if s.bytes > maxPayloadBytes-c.payloadBytes() {
		return rbShape{}, fmt.Errorf("%w: %v", ErrGrowth, &SizeError{Need: float64(s.bytes), Max: maxPayloadBytes})
	}
	return s, nil
}

// payloadBytes is the sum of the links' bytes.
func (c *RBChain) payloadBytes() uint64 {
	n := uint64(0)
	for i := range c.links {
		n += c.links[i].bytes
	}
	return n
}

// Test reports whether item may be in the chain, as RedisBloom's BF.EXISTS
// answers. False means it was never added.
func (c *RBChain) Test(item []byte) bool {
	a, b := c.rbHash(item)
	return c.testHash(a, b)
}

// testHash tests the links newest first, where most items are.
func (c *RBChain) testHash(a, b uint64) bool {
	for i := len(c.links) - 1; i >= 0; i-- {
		if c.links[i].test(a, b) {
			return true
		}
	}
	return false
}

// Count returns the number of items inserted (BF.CARD, BF.INFO's "Number of
// items inserted").
func (c *RBChain) Count() uint64 { return c.size }

// Capacity returns the sum of the links' capacities, as BF.INFO reports it.
func (c *RBChain) Capacity() uint64 {
	n := uint64(0)
	for i := range c.links {
		n += c.links[i].entries
	}
	return n
}

// Filters returns the number of links.
func (c *RBChain) Filters() int { return len(c.links) }

// Expansion returns the chain's expansion factor, as its header holds it (BF.INFO
// reports it unless the chain is non-scaling).
func (c *RBChain) Expansion() uint32 { return c.growth }

// NonScaling reports whether the chain refuses to grow.
func (c *RBChain) NonScaling() bool { return c.options&rbOptNoScaling != 0 }

// ErrorRate returns the error rate the chain was created with: the first link's,
// doubled unless the chain is non-scaling.
func (c *RBChain) ErrorRate() float64 {
	if c.NonScaling() {
		return c.links[0].err
	}
	return c.links[0].err / rbTightening
}

// NextGrowthBytes returns the memory the next link would take: what an Add of a
// new item costs when the newest link is full. It is 0 for a non-scaling chain
// and for one that cannot grow, whose Add then fails.
func (c *RBChain) NextGrowthBytes() uint64 {
	if c.NonScaling() {
		return 0
	}
	s, err := c.next()
	if err != nil {
		return 0
	}
	return s.memoryBytes()
}

// RedisBloomSize returns the size RedisBloom reports for this chain in BF.INFO
// (its BFMemUsage): 32 bytes for the chain, 64 for each link and the links' bits.
func (c *RBChain) RedisBloomSize() uint64 { return 32 + 64*uint64(len(c.links)) + c.payloadBytes() }

// Clone returns an independent copy of c.
func (c *RBChain) Clone() *RBChain {
	d := *c
	d.links = make([]rbLink, len(c.links))
	for i, l := range c.links {
		l.bits = l.bits.clone()
		d.links[i] = l
	}
	return &d
}

// Fork returns a copy of c whose links share their bits with c's, page by page,
// until one of the two writes a page (Fork in fork.go).
func (c *RBChain) Fork() *RBChain {
	d := *c
	d.links = make([]rbLink, len(c.links))
	for i := range c.links {
		d.links[i] = c.links[i]
		d.links[i].bits = c.links[i].bits.fork()
	}
	return &d
}

func (c *RBChain) fork() Filter { return c.Fork() }

// Kind returns KindRBChain.
func (c *RBChain) Kind() Kind { return KindRBChain }

// MemoryBytes returns the memory the chain occupies: every link's bits, their
// page tables and a fixed overhead per link and for the chain.
func (c *RBChain) MemoryBytes() uint64 {
	n := uint64(rbChainOverhead)
	for i := range c.links {
		n += rbLinkOverhead + c.links[i].bits.bytes()
	}
	return n
}

// WriteTo streams the chain's encoding to w.
func (c *RBChain) WriteTo(w io.Writer) (int64, error) { return Encode(w, c) }

// ReadFrom replaces the chain with the one encoded in r, which must be an RBChain.
func (c *RBChain) ReadFrom(r io.Reader) (int64, error) {
	f, n, err := decodeInto(r, KindRBChain)
	if err != nil {
		return n, err
	}
	*c = *f.(*RBChain)
	return n, nil
}

// params are the version and the chain's RedisBloom dump header, which holds
// every field of the chain and its links.
func (c *RBChain) params() []byte {
	return append([]byte{rbParamVersion}, c.DumpHeader()...)
}

// payload returns the links' bits, oldest first.
func (c *RBChain) payload() []*paged {
	segs := make([]*paged, len(c.links))
	for i := range c.links {
		segs[i] = &c.links[i].bits
	}
	return segs
}

// lanesOf: a link's bits, then zero padding up to the word when its bytes are
// not a multiple of 8.
func (c *RBChain) lanesOf(seg int) lanes {
	l := &c.links[seg]
	return lanes{width: 64, n: l.bits.len(), used: l.bytes * 8, class: bitWords}
}

// verify: RedisBloom ties no counter to the bits (LOADCHUNK writes any bytes
// into a link, and a dump taken during writes mixes states), so a chain's
// payload is any bits; the counters were checked with the header.
func (c *RBChain) verify([]tally) error { return nil }

func (c *RBChain) settle([]tally) {}

func init() { registerDecoder(KindRBChain, decodeRBChain) }

// decodeRBChain parses an RBChain's params: the version, then a dump header,
// held to every rule NewRBChainFromHeader holds one to.
func decodeRBChain(params []byte) (Filter, []int, func([]paged) error, error) {
	if len(params) < 1 || params[0] != rbParamVersion {
		if len(params) < 1 {
			return nil, nil, nil, fmt.Errorf("%w: empty redisbloom chain params", ErrCorrupt)
		}
		return nil, nil, nil, fmt.Errorf("%w: redisbloom chain params version %d", ErrVersion, params[0])
	}
	c, err := parseRBHeader(params[1:])
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	lens := make([]int, len(c.links))
	for i := range c.links {
		lens[i] = int(rbWords(c.links[i].bytes))
	}
	install := func(segs []paged) error {
		if len(segs) != len(c.links) {
			return fmt.Errorf("%w: redisbloom chain payload", ErrCorrupt)
		}
		for i := range segs {
			if segs[i].len() != uint64(lens[i]) {
				return fmt.Errorf("%w: redisbloom link %d payload length", ErrCorrupt, i)
			}
			c.links[i].bits = segs[i]
		}
		return nil
	}
	return c, lens, install, nil
}
