package filters

import (
	"fmt"
	"slices"
)

// A filter being loaded.
//
// LoadHeader creates a filter whose arrays are zero and whose counters are the
// header's; LoadChunk fills the arrays. Until the last chunk is in, the filter is
// being loaded: it answers lookups from what has arrived (as RedisBloom's does),
// its counters are the header's, unchecked, and it refuses nothing but chunks
// that do not belong to it. Callers keep other writes away from it (Loading),
// since the counters are only checked against the arrays, and so only trusted,
// once every chunk is in: LoadChunk keeps running totals of the arrays (check.go)
// and refuses the last chunk if the totals contradict the counters. The filter
// then stays as it was, still being loaded, and another last chunk may complete
// it.
//
// The state of a load is part of the filter: a copy-on-write snapshot taken in
// the middle of a load encodes it (kindLoading), so a replica restored from that
// snapshot accepts and refuses exactly the chunks every other replica does.

// loadable is embedded in every kind; ld is nil once the filter is complete.
type loadable struct{ ld *loadState }

func (l *loadable) tracker() *loadable { return l }

// Loading reports whether f was created by LoadHeader and still waits for chunks.
// Its counters are not yet checked against its arrays: callers refuse other writes
// to it.
func Loading(f Filter) bool { return f.tracker().ld != nil }

// loadState is never changed once made: LoadChunk builds the next one, so that a
// clone of a filter being loaded may share it.
type loadState struct {
	id      uint64   // dumpID of the filter's dump header: every chunk's checksum covers it
	paylen  int64    // payload bytes
	loaded  []uint64 // bit i set: chunk i is in
	missing int64    // chunks not in yet, at least 1
	// totals is the tally of each segment of the payload as it stands, for kinds
	// that check their payload; nil for others.
	totals []tally
}

// chunks returns the number of chunks of a payload of paylen bytes.
func chunks(paylen int64) int64 { return (paylen + DumpChunkBytes - 1) / DumpChunkBytes }

// startLoad marks f, whose arrays are zero, as being loaded. A filter without a
// payload has no chunk to wait for: it is checked and complete at once.
func startLoad(f Filter) error {
	segs := f.payload()
	paylen := payloadBytes(segs)
	c, checks := f.(checked)
	// Zero arrays tally to zero in every kind: no bit, counter or fingerprint.
	totals := make([]tally, len(segs))
	if paylen == 0 {
		if checks {
			if err := c.verify(totals); err != nil {
				return err
			}
			c.settle(totals)
		}
		return nil
	}
	n := chunks(paylen)
	ld := &loadState{id: dumpID(dumpHeader(f, paylen)), paylen: paylen,
		loaded: make([]uint64, (n+63)/64), missing: n}
	if checks {
		ld.totals = totals
		c.settle(totals)
	}
	f.tracker().ld = ld
	return nil
}

// load checks the chunk body at payload offset off, whose place and checksum are
// already checked, against f without writing it. It returns the load state once
// the chunk is written (nil if it completes the filter) and the totals of the
// payload with it.
func (ld *loadState) load(f Filter, off int64, body []byte) (*loadState, []tally, error) {
	next := *ld
	i := off / DumpChunkBytes
	fresh := ld.loaded[i/64]>>(i%64)&1 == 0
	if fresh {
		next.loaded = slices.Clone(ld.loaded)
		next.loaded[i/64] |= 1 << (i % 64)
		next.missing--
	}
	c, checks := f.(checked)
	if !checks {
		if next.missing == 0 {
			return nil, nil, nil
		}
		return &next, nil, nil
	}
	segs := f.payload()
	next.totals = slices.Clone(ld.totals)
	forPieces(segs, off/8, int64(len(body))/8, func(seg int, lo, hi uint64, at int) {
		l := c.lanesOf(seg)
		var before, after tally
		if old := (&segView{seg: segs[seg]}); fresh && hi-lo > 2 {
			// A chunk not in yet is zero, and zero lanes tally to nothing: only
			// the lanes reaching into its neighbours may hold something. (A lane
			// spans at most two words, so none reaches both ends.)
			tallyRange(l, old, lo, lo+1, &before)
			tallyRange(l, old, hi-1, hi, &before)
		} else {
			tallyRange(l, old, lo, hi, &before)
		}
		tallyRange(l, &segView{seg: segs[seg], lo: lo, n: hi - lo, chunk: body[at*8:]}, lo, hi, &after)
		next.totals[seg].sub(before)
		next.totals[seg].add(after)
	})
	pad, odd := sumBad(next.totals)
	if pad != 0 {
		return nil, nil, fmt.Errorf("%w: bits set past the end of an array", ErrBadChunk)
	}
	if next.missing > 0 {
		return &next, next.totals, nil
	}
	if odd != 0 {
		return nil, nil, fmt.Errorf("%w: %d values the filter never holds", ErrBadChunk, odd)
	}
	if err := c.verify(next.totals); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrBadChunk, err)
	}
	return nil, next.totals, nil
}

// kindLoading is the kind in the encoding of a filter being loaded. It is not a
// filter kind: Decode returns a filter of the kind inside, still being loaded.
// Its params:
//
//	version  1 byte (loadingParamVersion)
//	kind     1 byte, the filter's kind
//	params   uvarint length, then the filter's params
//	loaded   uvarint length, then one bit per chunk, chunk 0 the lowest bit of
//	         the first byte: the chunks that are in
//
// and its payload is the filter's. The chunks not in are zero.
const kindLoading Kind = 6

const loadingParamVersion = 1

// encodingOf returns the kind and params f encodes with.
func encodingOf(f Filter) (Kind, []byte) {
	ld := f.tracker().ld
	if ld == nil {
		return f.Kind(), f.params()
	}
	var w paramWriter
	w.byte(loadingParamVersion)
	w.byte(byte(f.Kind()))
	w.bytes(f.params())
	n := chunks(ld.paylen)
	bitmap := make([]byte, (n+7)/8)
	for i := range n {
		bitmap[i/8] |= byte(ld.loaded[i/64]>>(i%64)&1) << (i % 8)
	}
	w.bytes(bitmap)
	return kindLoading, w.bytesOut()
}

func init() { registerDecoder(kindLoading, decodeLoading) }

// decodeLoading parses the params of a filter being loaded. Its install checks
// that the chunks not in are zero and marks the filter as being loaded; Decode
// then tallies the payload (checkDecoded).
func decodeLoading(params []byte) (Filter, []int, func([]paged) error, error) {
	r := newParamReader(params)
	if v := r.byte(); r.Err() == nil && v != loadingParamVersion {
		return nil, nil, nil, fmt.Errorf("%w: loading params version %d", ErrVersion, v)
	}
	kind := Kind(r.byte())
	inner := r.bytes(maxParamsLen)
	bitmap := r.bytes(maxParamsLen)
	if err := r.done(); err != nil {
		return nil, nil, nil, err
	}
	dec, ok := decoders[kind]
	if !ok || kind == kindLoading {
		return nil, nil, nil, fmt.Errorf("%w: loading a filter of kind %d", ErrCorrupt, uint8(kind))
	}
	f, lens, install, err := dec(inner)
	if err != nil {
		return nil, nil, nil, err
	}
	words := int64(0)
	for _, n := range lens {
		if n < 0 || int64(n) > maxPayloadBytes/8-words {
			return nil, nil, nil, fmt.Errorf("%w: payload too large", ErrCorrupt)
		}
		words += int64(n)
	}
	n := chunks(words * 8)
	ld := &loadState{paylen: words * 8, loaded: make([]uint64, (n+63)/64), missing: n}
	if int64(len(bitmap)) != (n+7)/8 {
		return nil, nil, nil, fmt.Errorf("%w: loading bitmap of %d bytes for %d chunks", ErrCorrupt, len(bitmap), n)
	}
	for i := range n {
		if bitmap[i/8]>>(i%8)&1 != 0 {
			ld.loaded[i/64] |= 1 << (i % 64)
			ld.missing--
		}
	}
	if n > 0 && bitmap[len(bitmap)-1]>>(8-(8*int64(len(bitmap))-n)) != 0 {
		return nil, nil, nil, fmt.Errorf("%w: loading bitmap names chunks past the end", ErrCorrupt)
	}
	if ld.missing == 0 {
		return nil, nil, nil, fmt.Errorf("%w: a filter being loaded with every chunk in", ErrCorrupt)
	}
	wrapped := func(segs []paged) error {
		if err := install(segs); err != nil {
			return err
		}
		for i := range n {
			if ld.loaded[i/64]>>(i%64)&1 != 0 {
				continue
			}
			zero := true
			ptrs := make([]*paged, len(segs))
			for j := range segs {
				ptrs[j] = &segs[j]
			}
			forPieces(ptrs, i*DumpChunkBytes/8, min(DumpChunkBytes, ld.paylen-i*DumpChunkBytes)/8,
				func(seg int, lo, hi uint64, _ int) {
					v := segView{seg: ptrs[seg]}
					for w := lo; w < hi && zero; w++ {
						zero = v.word(w) == 0
					}
				})
			if !zero {
				return fmt.Errorf("%w: chunk %d is not in, but not zero", ErrCorrupt, i)
			}
		}
		ld.id = dumpID(dumpHeader(f, ld.paylen))
		f.tracker().ld = ld
		return nil
	}
	return f, lens, wrapped, nil
}

// checkDecoded checks a decoded filter's payload against its counters, which
// its decoder has range-checked on their own, and sets its caches. A filter
// being loaded has only its padding checked, as a load in progress does.
func checkDecoded(f Filter) error {
	c, ok := f.(checked)
	if !ok {
		return nil
	}
	totals := tallyAll(c)
	pad, odd := sumBad(totals)
	if pad != 0 {
		return fmt.Errorf("%w: bits set past the end of an array", ErrCorrupt)
	}
	if ld := f.tracker().ld; ld != nil {
		ld.totals = totals // made by decodeLoading, not shared yet
	} else {
		if odd != 0 {
			return fmt.Errorf("%w: %d values the filter never holds", ErrCorrupt, odd)
		}
		if err := c.verify(totals); err != nil {
			return err
		}
	}
	c.settle(totals)
	return nil
}
