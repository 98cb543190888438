package filters

import (
	"encoding/binary"
	"sync/atomic"
)

// Paged arrays: where every kind keeps its state.
//
// A filter's arrays are held in pages of pageWords words rather than in one
// slice, so that Fork can give a copy of a filter that shares every page with
// its origin and copies a page only when one of the two first writes to it. A
// snapshot of a large filter under a steady write load then costs the pages the
// writes touch while it streams, not a copy of the whole filter on the apply
// goroutine (fsm/DESIGN.md, "Copy-on-write snapshots").
//
// Reads index the page table with a shift and a mask: one more load than a flat
// slice, from a table of 24 bytes per page that stays in cache for any filter
// the cache could hold. A write first checks that the page is its array's own
// (one byte, one branch), copying it the first time. Every unit the kinds read
// as a whole sits inside one page where it can: a page holds a whole number of
// Bloom blocks (8 words) and of cuckoo buckets that are a word wide. Bit-packed
// lanes that straddle two words (d-left cells, 12-bit fingerprints, buckets
// wider than a word) may straddle two pages, and read and write each word
// through at and ref, which is always right and rarely a second page.
//
// The last page is only as long as its array needs, so a small filter does not
// pay for a whole page.
//
// A new array's pages are all one shared page of zeros, owned by no array, so
// each is allocated by its first write (the copy-on-write path): memory follows
// what is written. MemoryBytes still counts every page, so what a filter may
// allocate is what the state machine counted, never more.

const (
	// pageShift is log2 of pageWords. A page is 4 KiB: with random writes a
	// snapshot copies one page per distinct page written while it streams, and
	// at 64 KiB a few thousand writes to a 1 GB filter copied hundreds of MB
	// (filters/DESIGN.md, "Pages"). The page table of a 1 GB array is 6 MB.
	pageShift = 9
	pageWords = 1 << pageShift
	pageMask  = pageWords - 1
)

// paged is an array of words in pages of pageWords words, the last one as
// long as needed. A page that is not its array's own is copied before its
// first write. The zero value is an empty array.
//
// Ownership is an epoch: a page may be written in place when its owner equals
// its array's epoch. Fork gives both arrays fresh epochs, so that neither owns
// any page any more, without writing the page table that a snapshot may be
// reading at that moment.
type paged struct {
	pages []page
	epoch uint64
}

// page is one page and the epoch of the array it belongs to alone. An owner
// that matches no array is always safe: at worst a page is copied once more
// than it needed to be.
type page struct {
	w     []uint64
	owner uint64
}

// epochs hands out the epochs forks take; 0 is every new array's.
var epochs atomic.Uint64

// zeroPage is every page no write has reached yet: never written, since its
// owner, noOwner, is no array's epoch (epochs never gets there).
var zeroPage [pageWords]uint64

const noOwner = ^uint64(0)

// pageBytes is what a page costs besides its words: its entry in the page
// table.
const pageBytes = 32

// pageCount is the number of pages an array of n words takes.
func pageCount(n uint64) uint64 { return (n + pageMask) >> pageShift }

// pagedBytes is the memory an array of n words takes: its words and its page
// table (0.8% of the words for a large array, 32 bytes for a small one).
func pagedBytes(n uint64) uint64 { return n*8 + pageCount(n)*pageBytes }

// newPaged returns an array of n zero words. Its pages are the shared zero
// page until written.
func newPaged(n uint64) paged {
	a := paged{pages: make([]page, pageCount(n))}
	for p := range a.pages {
		a.pages[p] = page{w: zeroPage[:min(pageWords, n-uint64(p)*pageWords)], owner: noOwner}
	}
	return a
}

// len returns the number of words.
func (a *paged) len() uint64 {
	k := len(a.pages)
	if k == 0 {
		return 0
	}
	return uint64(k-1)*pageWords + uint64(len(a.pages[k-1].w))
}

// bytes is the memory the array takes (pagedBytes).
func (a *paged) bytes() uint64 { return pagedBytes(a.len()) }

// at returns word i.
func (a *paged) at(i uint64) uint64 { return a.pages[i>>pageShift].w[i&pageMask] }

// ref returns word i for writing, copying its page first if it is shared.
func (a *paged) ref(i uint64) *uint64 {
	pg := &a.pages[i>>pageShift]
	if pg.owner != a.epoch {
		a.unshare(pg)
	}
	return &pg.w[i&pageMask]
}

// set stores v in word i.
func (a *paged) set(i, v uint64) { *a.ref(i) = v }

// page returns page p for writing, copying it first if it is shared.
func (a *paged) page(p uint64) []uint64 {
	pg := &a.pages[p]
	if pg.owner != a.epoch {
		a.unshare(pg)
	}
	return pg.w
}

// unshare gives pg a copy of its words. It is kept out of line so that the
// write paths that call page stay small enough to inline.
//
//go:noinline
func (a *paged) unshare(pg *page) {
	w := make([]uint64, len(pg.w))
	copy(w, pg.w)
	*pg = page{w: w, owner: a.epoch}
}

// block returns the blockWords words from i, a multiple of blockWords, for
// reading: a page holds a whole number of blocks, so they never straddle two.
func (a *paged) block(i uint64) *[blockWords]uint64 {
	pg, o := a.pages[i>>pageShift].w, i&pageMask
	return (*[blockWords]uint64)(pg[o : o+blockWords])
}

// wblock is block for writing.
func (a *paged) wblock(i uint64) *[blockWords]uint64 {
	pg, o := a.page(i>>pageShift), i&pageMask
	return (*[blockWords]uint64)(pg[o : o+blockWords])
}

// fork returns an array sharing every page with a. Both take new epochs, so
// neither owns a page any more: whichever writes a page first copies it, and
// the other still sees the page as it was. It copies the page table only, 32
// bytes per page, reads no word and writes nothing that readers of a read.
func (a *paged) fork() paged {
	f := paged{pages: make([]page, len(a.pages)), epoch: epochs.Add(1)}
	copy(f.pages, a.pages)
	a.epoch = epochs.Add(1)
	return f
}

// clone returns an independent copy of a, every page its own.
func (a *paged) clone() paged {
	c := paged{pages: make([]page, len(a.pages))}
	for p, pg := range a.pages {
		c.pages[p] = page{w: append([]uint64(nil), pg.w...)}
	}
	return c
}

// slice returns a copy of the words as one slice.
func (a *paged) slice() []uint64 {
	s := make([]uint64, 0, a.len())
	for _, pg := range a.pages {
		s = append(s, pg.w...)
	}
	return s
}

// putLE stores words [lo, hi) little-endian in dst.
func (a *paged) putLE(dst []byte, lo, hi uint64) {
	for i := lo; i < hi; {
		pg, o := a.pages[i>>pageShift].w, i&pageMask
		run := pg[o:min(uint64(len(pg)), o+hi-i)]
		for j, x := range run {
			binary.LittleEndian.PutUint64(dst[(i-lo+uint64(j))*8:], x)
		}
		i += uint64(len(run))
	}
}

// setLE stores the little-endian words of src in words [lo, hi).
func (a *paged) setLE(lo, hi uint64, src []byte) {
	for i := lo; i < hi; {
		pg, o := a.page(i>>pageShift), i&pageMask
		run := pg[o:min(uint64(len(pg)), o+hi-i)]
		for j := range run {
			run[j] = binary.LittleEndian.Uint64(src[(i-lo+uint64(j))*8:])
		}
		i += uint64(len(run))
	}
}

// popcount returns the number of set bits.
func (a *paged) popcount() uint64 {
	n := uint64(0)
	for _, pg := range a.pages {
		n += popcount(pg.w)
	}
	return n
}
