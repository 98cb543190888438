package filters

import (
	"fmt"
	"io"
)

var (
	_ Counter = (*RBCuckoo)(nil)
	_ Deleter = (*RBCuckoo)(nil)
)

// Items returns RedisBloom's numItems, CF.INFO's "Number of items inserted":
// adds minus deletes, or what a loaded header said plus the adds and minus the
// deletes since. It neither wraps below zero nor past the largest uint64.
func (c *RBCuckoo) Items() uint64 { return c.items }

// Deleted returns RedisBloom's numDeletes, CF.INFO's "Number of items
// deleted": the deletes since the last compaction, which resets it.
func (c *RBCuckoo) Deleted() uint64 { return c.deletes }

// Filters returns the number of sub-filters.
func (c *RBCuckoo) Filters() int { return len(c.subs) }

// Buckets returns the bucket count of the first sub-filter, CF.INFO's "Number
// of buckets".
func (c *RBCuckoo) Buckets() uint64 { return c.numBuckets }

// BucketSize returns the slots per bucket.
func (c *RBCuckoo) BucketSize() uint16 { return uint16(c.bucketSize) }

// MaxIterations returns the most evictions one insert tries.
func (c *RBCuckoo) MaxIterations() uint16 { return uint16(c.maxIter) }

// Expansion returns the growth factor of the sub-filters' bucket counts, a
// power of two, or 0 if the filter never grows.
func (c *RBCuckoo) Expansion() uint16 { return uint16(c.expansion) }

// NextGrowthBytes returns the memory the next sub-filter would add: what an Add
// costs when no sub-filter has room. It is 0 when the filter cannot grow, and
// such an Add returns ErrFull or ErrRBCuckooGrow.
func (c *RBCuckoo) NextGrowthBytes() uint64 {
	nb, ok := c.nextSub()
	if !ok {
		return 0
	}
	return rbcSubOverhead + pagedBytes(rbcWords(nb*c.bucketSize))
}

// MemoryBytes returns the memory the filter occupies: its sub-filters' words,
// their page tables and a fixed overhead.
func (c *RBCuckoo) MemoryBytes() uint64 {
	n := uint64(rbcOverhead)
	for i := range c.subs {
		n += rbcSubOverhead + c.subs[i].words.bytes()
	}
	return n
}

// RedisBloomSize returns the memory RedisBloom reports for this filter, CF.INFO's
// "Size" (its CFMemUsage): a 40-byte filter struct, 16 bytes per sub-filter and
// the sub-filters' bytes.
func (c *RBCuckoo) RedisBloomSize() uint64 {
	n := uint64(40 + 16*len(c.subs))
	for i := range c.subs {
		n += c.subs[i].size
	}
	return n
}

// Debug returns CF.DEBUG's reply, as RedisBloom words it.
func (c *RBCuckoo) Debug() string {
	return fmt.Sprintf("bktsize:%d buckets:%d items:%d deletes:%d filters:%d max_iterations:%d expansion:%d",
		c.bucketSize, c.numBuckets, c.items, c.deletes, len(c.subs), c.maxIter, c.expansion)
}

// Clone returns an independent copy of c.
func (c *RBCuckoo) Clone() *RBCuckoo {
	d := *c
	d.subs = make([]rbcSub, len(c.subs))
	for i, s := range c.subs {
		d.subs[i] = rbcSub{words: s.words.clone(), nb: s.nb, size: s.size}
	}
	return &d
}

// Fork returns a copy of c that shares its sub-filters' words, page by page,
// until one of the two writes a page (Fork in fork.go).
func (c *RBCuckoo) Fork() *RBCuckoo {
	d := *c
	d.subs = make([]rbcSub, len(c.subs))
	for i := range c.subs {
		s := &c.subs[i]
		d.subs[i] = rbcSub{words: s.words.fork(), nb: s.nb, size: s.size}
	}
	return &d
}

func (c *RBCuckoo) fork() Filter { return c.Fork() }

// Kind returns KindRBCuckoo.
func (c *RBCuckoo) Kind() Kind { return KindRBCuckoo }

// WriteTo streams the filter's encoding (this package's, for snapshots) to w.
func (c *RBCuckoo) WriteTo(w io.Writer) (int64, error) { return Encode(w, c) }

// ReadFrom replaces the filter with the one encoded in r, which must be an
// RBCuckoo.
func (c *RBCuckoo) ReadFrom(r io.Reader) (int64, error) {
	f, n, err := decodeInto(r, KindRBCuckoo)
	if err != nil {
		return n, err
	}
	*c = *f.(*RBCuckoo)
	return n, nil
}

// rbcParamVersion is the first byte of an RBCuckoo's params.
const rbcParamVersion = 1

// params holds the header's fields; the sub-filters' sizes follow from them.
func (c *RBCuckoo) params() []byte {
	var w paramWriter
	w.byte(rbcParamVersion)
	w.uint(c.numBuckets)
	w.uint(c.bucketSize)
	w.uint(c.maxIter)
	w.uint(c.expansion)
	w.uint(uint64(len(c.subs)))
	w.uint(c.items)
	w.uint(c.deletes)
	return w.bytesOut()
}

// payload returns the sub-filters' words, oldest first.
func (c *RBCuckoo) payload() []*paged {
	segs := make([]*paged, len(c.subs))
	for i := range c.subs {
		segs[i] = &c.subs[i].words
	}
	return segs
}

func init() { registerDecoder(KindRBCuckoo, decodeRBCuckoo) }

// decodeRBCuckoo parses an RBCuckoo's params, checked as a dump header is
// (rbcCheck), except for the counters: LoadChunk may rewrite any byte at any
// time, as RedisBloom's does, so a filter's items need not match its slots
// later on, and any value of either counter is a state the operations reach.
// The payload may hold any bytes but in the padding after a sub-filter's last
// bucket, which is zero (lanesOf) so that one filter has one encoding.
func decodeRBCuckoo(params []byte) (Filter, []int, func([]paged) error, error) {
	r := newParamReader(params)
	if v := r.byte(); r.Err() == nil && v != rbcParamVersion {
		return nil, nil, nil, fmt.Errorf("%w: redisbloom cuckoo params version %d", ErrVersion, v)
	}
	nb, bs, maxIter, expansion, filters := r.uint(), r.uint(), r.uint(), r.uint(), r.uint()
	items, deletes := r.uint(), r.uint()
	if err := r.done(); err != nil {
		return nil, nil, nil, err
	}
	s, err := rbcCheck(bs, maxIter, expansion, nb, filters)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: redisbloom cuckoo params: %v", ErrCorrupt, err)
	}
	// The sub-filters get no words here: install brings them once the payload
	// has arrived, so that a hostile header cannot make the decoder allocate.
	c := s.filter(maxIter)
	c.items, c.deletes = items, deletes
	c.subs = make([]rbcSub, filters)
	lens := make([]int, filters)
	for i := range c.subs {
		nb, _ := s.subBuckets(uint64(i))
		c.subs[i] = rbcSub{nb: nb, size: nb * bs}
		lens[i] = int(rbcWords(nb * bs))
	}
	install := func(segs []paged) error {
		if len(segs) != len(c.subs) {
			return fmt.Errorf("%w: redisbloom cuckoo payload", ErrCorrupt)
		}
		for i := range c.subs {
			if segs[i].len() != uint64(lens[i]) {
				return fmt.Errorf("%w: redisbloom cuckoo sub-filter %d length", ErrCorrupt, i)
			}
			c.subs[i].words = segs[i]
		}
		return nil
	}
	return c, lens, install, nil
}

// lanesOf: a sub-filter's bytes, counted a word at a time, then zero padding
// to the end of its last word. Decode and this package's own chunk loads refuse
// a payload that sets a padding byte; LoadChunk writes only inside buckets.
func (c *RBCuckoo) lanesOf(seg int) lanes {
	s := &c.subs[seg]
	return lanes{width: 64, n: rbcWords(s.size), used: s.size * 8, class: byteWords}
}

// verify accepts any bytes: CF.LOADCHUNK may write any byte of any bucket at
// any time, in RedisBloom and here, so no rule ties the counters to the slots
// once a filter exists (a header is held to its slots when it arrives).
func (c *RBCuckoo) verify([]tally) error { return nil }

func (c *RBCuckoo) settle([]tally) {}
