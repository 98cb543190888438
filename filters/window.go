package filters

import (
	"fmt"
	"math/bits"

	"github.com/rookerydb/rookery/internal/errdetail"
)

// Windowed filters: items age out. A window is either a duration (items added
// more than Window ago answer absent) or a count (the most recent Last
// insertions). Both kinds keep windowGens generations, each a fixed share of
// the window, and retire the oldest as the newest begins; an item lives in the
// generation current when it was added, so it answers present for at least the
// window and at most one generation more: the slack. DESIGN.md ("Windowed
// filters") gives the choice against Age-Partitioned Bloom filters and against
// rotating whole filters.
//
// Nothing here reads a clock. A time window's generations are intervals of
// Period nanoseconds from the Unix epoch, generation g covering [g*P, (g+1)*P),
// and the caller moves the filter to a time with Advance (fsm passes the log's
// clock, the leader's time stamped into each entry, so every replica retires
// the same generation at the same entry). A count window moves by itself, one
// generation every Period insertions.

// windowGens is the number of live generations: the current one and the seven
// before it. An item added in generation g is held until generation g+8
// begins, so the window is 7 periods and the slack one more (wbloom.go keeps
// each generation in one bit of a byte).
const windowGens = 8

const (
	// windowMinTime and windowMaxTime bound a time window: from 7 ns (a period
	// of one) to 2^61 ns, 73 years, so that every time computed stays below
	// 2^63.
	windowMinTime = windowGens - 1
	windowMaxTime = 1 << 61
	// windowMaxCount bounds a count window, as a capacity is bounded.
	windowMaxCount = bloomMaxCapacity
)

// WindowConfig describes a windowed filter: exactly one of Window and Last is
// set.
type WindowConfig struct {
	// Capacity is the most items expected within one window (for a count
	// window, the most distinct items among the last Last insertions).
	Capacity uint64
	// ErrorRate is a windowed Bloom's target false-positive rate over a full
	// window at capacity, in [1e-6, 1).
	ErrorRate float64
	// Window is a time window in nanoseconds, at least 7.
	Window int64
	// Last is a count window: the most recent Last insertions.
	Last uint64
	// MaxIterations is a windowed cuckoo filter's eviction limit per insert,
	// 1..65535, default 500.
	MaxIterations int
}

// genClock is a windowed filter's generations: which is current, and how the
// next begins.
type genClock struct {
	byTime bool
	window uint64 // the window: nanoseconds, or insertions
	period uint64 // one generation: nanoseconds, or insertions
	cur    uint64 // the current generation, an absolute number
	filled uint64 // count windows: insertions into the current generation
}

// newGenClock checks cfg's window and derives the generation period: the
// window divided into windowGens-1 periods, rounded up, so that seven whole
// generations cover at least the window.
func newGenClock(cfg WindowConfig) (genClock, error) {
	c := genClock{}
	switch {
	case (cfg.Window != 0) == (cfg.Last != 0):
		return c, errdetail.New(ErrBadParam, "a windowed filter needs a time window or a count, not both")
	case cfg.Window != 0 && (cfg.Window < windowMinTime || cfg.Window > windowMaxTime):
		return c, errdetail.New(ErrBadParam, "window %d ns out of range [%d, %d]", cfg.Window, windowMinTime, uint64(windowMaxTime))
	case cfg.Last > windowMaxCount:
		return c, errdetail.New(ErrBadParam, "window of %d insertions out of range [1, %d]", cfg.Last, uint64(windowMaxCount))
	}
	c.byTime, c.window = cfg.Window != 0, cfg.Last
	if c.byTime {
		c.window = uint64(cfg.Window)
	}
	c.period = (c.window + windowGens - 2) / (windowGens - 1)
	return c, nil
}

// genOf is the generation holding time now (nanoseconds since the Unix epoch;
// times before it count as the epoch).
func (c *genClock) genOf(now int64) uint64 { return uint64(max(now, 0)) / c.period }

// advance moves a time window's clock to now and returns how many generations
// began, at most the current one's distance from now; a count window, or a
// time before the current generation, moves nothing.
func (c *genClock) advance(now int64) uint64 {
	if !c.byTime {
		return 0
	}
	g := c.genOf(now)
	if g <= c.cur {
		return 0
	}
	steps := g - c.cur
	c.cur = g
	return steps
}

// inserted counts an insertion into a count window and reports whether it
// filled the current generation, which then ends: the next begins.
func (c *genClock) inserted() bool {
	if c.byTime {
		return false
	}
	c.filled++
	if c.filled < c.period {
		return false
	}
	c.filled = 0
	c.cur++
	return true
}

// retireAt is the time generation g retires, when generation g+8 begins;
// the largest int64 if that is beyond it.
func (c *genClock) retireAt(g uint64) int64 {
	hi, lo := bits.Mul64(g+windowGens, c.period)
	if hi != 0 || lo > 1<<63-1 || g+windowGens < g {
		return 1<<63 - 1
	}
	return int64(lo)
}

// perGen is the items one generation must hold for capacity items within a
// window: a seventh, at most the insertions of a count window's generation.
func (c *genClock) perGen(capacity uint64) uint64 {
	if !c.byTime {
		capacity = min(capacity, c.window)
	}
	n := (capacity + windowGens - 2) / (windowGens - 1)
	if !c.byTime {
		n = min(n, c.period)
	}
	return max(n, 1)
}

// write and read encode the clock in a windowed filter's params.
func (c *genClock) write(w *paramWriter) {
	w.bool(c.byTime)
	w.uint(c.window)
	w.uint(c.cur)
	w.uint(c.filled)
}

// readGenClock reads what write wrote, range-checked: the period follows from
// the window, and a count window's current generation is never full.
func readGenClock(r *paramReader) genClock {
	byTime := r.bool()
	window := r.uint()
	cur, filled := r.uint(), r.uint()
	if r.Err() != nil {
		return genClock{period: 1}
	}
	cfg := WindowConfig{Last: window}
	if byTime {
		cfg = WindowConfig{Window: int64(min(window, windowMaxTime+1))}
	}
	c, err := newGenClock(cfg)
	switch {
	case err != nil || window == 0:
		r.Fail(fmt.Sprintf("window %d", window))
	case byTime && filled != 0, !byTime && filled >= c.period:
		r.Fail(fmt.Sprintf("%d insertions into a generation of %d", filled, c.period))
	}
	if r.Err() != nil {
		return genClock{period: 1}
	}
	c.cur, c.filled = cur, filled
	return c
}

// WindowInfo describes a windowed filter's window (BF.INFO and CF.INFO with
// WINDOW).
type WindowInfo struct {
	// ByTime reports a time window; else a count window.
	ByTime bool
	// Window is the window: nanoseconds, or insertions.
	Window uint64
	// Slack is how much longer than the window an item may still answer
	// present: about one generation. A time window holds an item added at t
	// until t+Window at least and t+Window+Slack at most (eight periods); a
	// count window holds it while it is among the last Window insertions at
	// least and the last Window+Slack at most (eight periods less one).
	Slack uint64
	// Generations is the number of live generations (8).
	Generations int
	// Current is the current generation's number: since the Unix epoch in
	// periods of Slack nanoseconds, or since the filter was created.
	Current uint64
	// Items holds each live generation's items, oldest first.
	Items []uint64
}

// info fills the clock's part of a WindowInfo; items is indexed by
// generation modulo windowGens.
func (c *genClock) info(items *[windowGens]uint64) WindowInfo {
	in := WindowInfo{ByTime: c.byTime, Window: c.window, Slack: c.slack(), Generations: windowGens, Current: c.cur}
	for g := c.cur + 1; g <= c.cur+windowGens; g++ {
		in.Items = append(in.Items, items[g%windowGens])
	}
	return in
}

// slack is WindowInfo's Slack: an item lives at most eight periods (of time),
// or while among the last eight periods of insertions less one.
func (c *genClock) slack() uint64 {
	if c.byTime {
		return windowGens*c.period - c.window
	}
	return windowGens*c.period - 1 - c.window
}

// oldestHolding is the oldest live generation whose count in items is not
// zero, and false if there is none.
func (c *genClock) oldestHolding(items *[windowGens]uint64) (uint64, bool) {
	for g := c.cur + 1; g <= c.cur+windowGens; g++ {
		if items[g%windowGens] != 0 {
			return g - windowGens, true
		}
	}
	return 0, false
}
