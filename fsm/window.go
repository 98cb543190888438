package fsm

import (
	"container/heap"
	"fmt"

	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/internal/mutant"
)

// Windowed filters (filters.WindowBloom, filters.WindowCuckoo): items age out
// by the log's clock, the largest Command.Time applied, never by a replica's
// own. Before each command applies, and after the keys whose deadline passed
// are gone, every windowed filter whose oldest generation holding items is due
// to retire is moved to the log's clock, earliest first and by key among equal
// times; and a filter is moved to the clock before every write to it. So after
// any command every windowed filter has retired what the log's clock retires,
// every replica retires the same generation at the same entry, and a restored
// snapshot or a node catching up ages identically. NextDeadline includes the
// next retirement, so the leader proposes a tick when nothing is written and
// reads stop seeing a generation about one commit round after it ends.
//
// A count window (BF.RESERVE ... LAST n) moves by its own insertions and never
// waits for the clock.

// windowed is what the state machine needs of a windowed filter.
type windowed interface {
	Advance(now int64)
	NextRetire() (int64, bool)
	Window() filters.WindowInfo
}

var (
	_ windowed = (*filters.WindowBloom)(nil)
	_ windowed = (*filters.WindowCuckoo)(nil)
)

// retirement is a windowed filter's place in the retirement index: the time
// (Unix ns) its oldest generation holding items retires. It belongs to the
// apply goroutine.
type retirement struct {
	at int64
	e  *entry
	i  int // position in FSM.retires
}

// retireHeap orders retirements by (time, key), a total order, so filters due
// together age in the same order on every replica.
type retireHeap []*retirement

func (h retireHeap) Len() int { return len(h) }

func (h retireHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].e.key < h[j].e.key
}

func (h retireHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].i, h[j].i = i, j
}

func (h *retireHeap) Push(x any) {
	x.(*retirement).i = len(*h)
	*h = append(*h, x.(*retirement))
}

func (h *retireHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return x
}

// ageDue moves every windowed filter whose retirement the log's clock has
// reached to the clock.
func (f *FSM) ageDue() {
	for len(f.retires) > 0 && f.retires[0].at <= f.sessions.now {
		f.age(f.retires[0].e)
	}
}

// age moves e's windowed filter to the log's clock, if it is windowed and
// complete, and files its next retirement. A filter being loaded keeps the
// clock of its dump's header until its last chunk is in: its chunks are
// checked against that header.
func (f *FSM) age(e *entry) {
	if _, ok := e.f.(windowed); !ok || filters.Loading(e.f) {
		f.dropRetirement(e)
		return
	}
	f.mutate(e, func(flt filters.Filter) { w := flt.(windowed); w.Advance(f.clockFor(w)) })
	f.fileRetirement(e)
}

// clockFor is the time a windowed filter ages to: the log's clock.
func (f *FSM) clockFor(w windowed) int64 {
	now := f.sessions.now
	if mutant.On(mutant.WindowEarly) && w.Window().ByTime {
		now *= 2 // (every item then leaves halfway through its window)
	}
	return now
}

// fileRetirement puts e's next retirement in the index, or takes it out when
// no generation holds items.
func (f *FSM) fileRetirement(e *entry) {
	w, ok := e.f.(windowed)
	if !ok || filters.Loading(e.f) {
		f.dropRetirement(e)
		return
	}
	at, due := w.NextRetire()
	switch {
	case !due:
		f.dropRetirement(e)
		return
	case e.ret != nil:
		e.ret.at = at
		heap.Fix(&f.retires, e.ret.i)
	default:
		e.ret = &retirement{at: at, e: e}
		heap.Push(&f.retires, e.ret)
	}
	f.noteDeadlines()
}

// dropRetirement takes e out of the retirement index.
func (f *FSM) dropRetirement(e *entry) {
	if e.ret == nil {
		return
	}
	heap.Remove(&f.retires, e.ret.i)
	e.ret = nil
	f.noteDeadlines()
}

// nextRetirement is the earliest retirement in Unix milliseconds, rounded up
// so that a tick stamped at that millisecond has reached it; 0 if none.
func (f *FSM) nextRetirement() int64 {
	if len(f.retires) == 0 {
		return 0
	}
	return (f.retires[0].at + 999_999) / 1_000_000
}

// rebuildRetirements files every windowed filter of the registry (Restore).
func (f *FSM) rebuildRetirements() {
	f.retires = nil
	for _, e := range f.reg.order {
		e.ret = nil
		f.fileRetirement(e)
	}
	f.noteDeadlines()
}

// windowConfig is the filters' configuration a windowed Spec describes.
func windowConfig(s Spec) filters.WindowConfig {
	return filters.WindowConfig{Capacity: s.Capacity, ErrorRate: s.ErrorRate, Window: s.Window, Last: s.Last,
		MaxIterations: int(s.MaxIterations)}
}

// IsWindowed reports whether k is a windowed kind: its Spec carries a window
// (Window or Last), and creating one needs log format 6.
func IsWindowed(k filters.Kind) bool {
	return k == filters.KindWindowBloom || k == filters.KindWindowCuckoo
}

// The rows of kinds.go for the windowed kinds: their info.

func infoWindowBloom(flt filters.Filter, in *Info) {
	v := flt.(*filters.WindowBloom)
	// Expansion 0, not non-scaling: BF.INFO then answers 0 where a
	// non-scaling filter answers nil, which go-redis's BFInfo cannot read.
	in.Capacity, in.Items = v.Capacity(), v.Count()
	in.ErrorRate, in.EstimatedFPP = v.ErrorRate(), v.EstimatedFPP()
	w := v.Window()
	in.Window = &w
	bytes := v.Superblocks() * 512
	in.ReportedSize = rbChainStruct + rbLinkStruct + bytes
	in.Debug = windowDebug(v.Count(), w)
	in.Debug = append(in.Debug, fmt.Sprintf("bytes:%d superblocks:%d hashes:%d capacity:%d ratio:%s",
		bytes, v.Superblocks(), v.Hashes(), v.Capacity(), formatRate(v.ErrorRate())))
}

func infoWindowCuckoo(flt filters.Filter, in *Info) {
	v := flt.(*filters.WindowCuckoo)
	in.Capacity, in.Items, in.Deleted = v.Slots(), v.Items(), v.Deleted()
	in.Filters, in.Buckets, in.BucketSize = 1, v.Buckets(), uint64(v.BucketSize())
	in.MaxIter, in.EstimatedFPP = uint64(v.MaxIterations()), v.EstimatedFPP()
	in.ReportedSize = rbCuckooStruct + rbSubCFStruct + v.Buckets()*8
	w := v.Window()
	in.Window = &w
	in.Debug = []string{fmt.Sprintf("bktsize:%d buckets:%d items:%d deletes:%d filters:1 max_iterations:%d expansion:0 %s",
		v.BucketSize(), v.Buckets(), v.Items(), v.Deleted(), v.MaxIterations(), windowLine(w))}
}

// windowDebug is BF.DEBUG's reply for a windowed Bloom filter: the items,
// the window, then one line per live generation, oldest first.
func windowDebug(items uint64, w filters.WindowInfo) []string {
	out := []string{fmt.Sprintf("size:%d", items), windowLine(w)}
	for i, n := range w.Items {
		out = append(out, fmt.Sprintf("generation:%d items:%d", w.Current-uint64(len(w.Items)-1-i), n))
	}
	return out
}

// windowLine describes a window in one line: "window:604800s slack:86400s
// generations:8" (a count window in insertions: "window:1000 ...").
func windowLine(w filters.WindowInfo) string {
	if w.ByTime {
		return fmt.Sprintf("window:%s slack:%s generations:%d", seconds(w.Window), seconds(w.Slack), w.Generations)
	}
	return fmt.Sprintf("window:%d slack:%d generations:%d", w.Window, w.Slack, w.Generations)
}

// seconds formats nanoseconds as seconds, "604800s" or "0.5s".
func seconds(ns uint64) string {
	return fmt.Sprintf("%gs", float64(ns)/1e9)
}

// formatRate formats an error rate as RedisBloom's BF.DEBUG does (%g).
func formatRate(p float64) string { return fmt.Sprintf("%g", p) }

// addWindowCuckoo adds a copy of item to a windowed cuckoo filter, or with nx
// only if no live copy may be there. No room fails the item alone in a
// multi-item command (-1), as CF.INSERT does; a single add answers "Filter is
// full". The filter never grows.
func addWindowCuckoo(flt filters.Filter, item []byte, nx, multi bool) (int64, error, bool) {
	v := flt.(*filters.WindowCuckoo)
	added, err := true, error(nil)
	if nx {
		added, err = v.AddNX(item)
	} else {
		err = v.Add(item)
	}
	if err != nil {
		if multi {
			return -1, nil, false
		}
		return 0, ErrFull, false
	}
	return b2i(added), nil, false
}
