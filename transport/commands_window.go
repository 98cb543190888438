package transport

import (
	"fmt"
	"math"

	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
)

// Windowed filters (ours; RedisBloom has none): BF.RESERVE key error_rate
// capacity WINDOW duration | LAST n, and CF.RESERVE key capacity WINDOW
// duration [MAXITERATIONS m]. Items added more than the window ago answer
// absent, give or take the slack; every other BF.* and CF.* command works on
// them unchanged, and BF.INFO / CF.INFO key WINDOW describes the window.

const (
	// windowMinMs and windowMaxMs bound a time window: a millisecond to
	// 3650 days.
	windowMinMs = 1
	windowMaxMs = 3650 * 86_400_000
	// cfWindowMaxIterations is a windowed cuckoo filter's eviction limit
	// when CF.RESERVE names none: its buckets have four slots, filled to 90%
	// at capacity.
	cfWindowMaxIterations = 500
)

// errBadWindow is the answer to a WINDOW duration that does not parse: it
// lists the units, which the bare "ERR bad window" did not (issue 29).
const errBadWindow = "ERR bad window: want a whole number of ms, s, m, h or d, such as 500ms, 90s, 15m, 2h or 7d (a bare number is seconds)"

// durationUnits are the units a WINDOW duration may carry, in milliseconds;
// a bare number is seconds.
var durationUnits = []struct {
	suffix string
	ms     int64
}{{"ms", 1}, {"s", 1000}, {"m", 60_000}, {"h", 3_600_000}, {"d", 86_400_000}}

// parseDuration parses a window: digits, then optionally ms, s, m, h or d
// (any case), in milliseconds. A bare number is seconds.
func parseDuration(b []byte) (int64, bool) {
	unit, digits := int64(1000), b
	for _, u := range durationUnits {
		n := len(b) - len(u.suffix)
		if n > 0 && keyword(b[n:], u.suffix) && b[n-1] >= '0' && b[n-1] <= '9' {
			unit, digits = u.ms, b[:n]
			break
		}
	}
	v, ok := parseInt64(digits)
	if !ok || v < 0 || v > math.MaxInt64/unit {
		return 0, false
	}
	return v * unit, true
}

// windowSpec is what WINDOW or LAST says of a filter to create.
type windowSpec struct {
	window int64  // ns, or 0
	last   uint64 // insertions, or 0
}

// windowArgs finds WINDOW duration or LAST n among args from from on: ok is
// false when neither is there. last says whether LAST is allowed.
func (s *Server) windowArgs(args [][]byte, from int, last bool) (w windowSpec, ok bool, err error) {
	at, lat := argIndex(args, from, "WINDOW"), argIndex(args, from, "LAST")
	switch {
	case at < 0 && lat < 0:
		return w, false, nil
	case at >= 0 && lat >= 0:
		return w, false, redisError("ERR WINDOW and LAST cannot be combined")
	case lat >= 0 && !last:
		return w, false, redisError("ERR a windowed cuckoo filter takes WINDOW duration, not LAST")
	case at >= 0:
		if at+1 == len(args) {
			return w, false, arityError(args[0])
		}
		ms, ok := parseDuration(args[at+1])
		if !ok {
			return w, false, redisError(errBadWindow)
		}
		if ms < windowMinMs || ms > windowMaxMs {
			return w, false, redisError("ERR window must be in the range [1ms, 3650d]")
		}
		return windowSpec{window: ms * 1e6}, true, nil
	}
	if lat+1 == len(args) {
		return w, false, arityError(args[0])
	}
	n, err := intIn(args[lat+1], 1, s.maxCap(), redisError("ERR bad window count"),
		redisError(fmt.Sprintf("ERR window count must be in the range [1, %d]", s.maxCap())))
	return windowSpec{last: uint64(n)}, true, err
}

// bfWindowReserve finishes BF.RESERVE key error_rate capacity WINDOW d | LAST
// n: a windowed filter never grows, so EXPANSION is refused and NONSCALING
// changes nothing.
func bfWindowReserve(args [][]byte, rate float64, capacity int64, w windowSpec) (op, error) {
	if argIndex(args, 4, "EXPANSION") >= 0 {
		return op{}, redisError("ERR windowed filters cannot expand")
	}
	spec := fsm.Spec{Kind: filters.KindWindowBloom, Capacity: uint64(capacity), ErrorRate: rate,
		Window: w.window, Last: w.last}
	if err := checkSpec(spec); err != nil {
		return op{}, err
	}
	cmd := &fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyBF, Key: string(args[1]), Spec: spec}
	return writeOp(cmd, renderOK), nil
}

// cfWindowReserve finishes CF.RESERVE key capacity WINDOW d [MAXITERATIONS
// m]: four slots a bucket, no growth.
func (s *Server) cfWindowReserve(args [][]byte, w windowSpec) (op, error) {
	switch {
	case argIndex(args, 3, "EXPANSION") >= 0:
		return op{}, redisError("ERR windowed filters cannot expand")
	case argIndex(args, 3, "BUCKETSIZE") >= 0:
		return op{}, redisError("ERR windowed cuckoo filters have buckets of 4")
	}
	capacity, err := intIn(args[2], 1, s.maxCap(), redisError("Bad capacity"),
		redisError(fmt.Sprintf("Capacity must be in the range [1, %d]", s.maxCap())))
	if err != nil {
		return op{}, err
	}
	maxIter, err := cfOption(args, "MAXITERATIONS", newIntSetting(cfWindowMaxIterations, 1, cfMaxIterations))
	if err != nil {
		return op{}, err
	}
	spec := fsm.Spec{Kind: filters.KindWindowCuckoo, Capacity: uint64(capacity), MaxIterations: uint16(maxIter),
		Window: w.window}
	if err := checkSpec(spec); err != nil {
		return op{}, err
	}
	cmd := &fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyCF, Key: string(args[1]), Spec: spec}
	return writeOp(cmd, renderOK), nil
}

// windowInfo serves BF.INFO and CF.INFO key WINDOW: the window's type,
// length and slack (milliseconds for a time window, insertions for a count
// window), its generations, the current one's number and each live one's
// items, oldest first. A filter without a window answers an error.
func windowInfo(fam fsm.Family, key string) op {
	return readOp(func(q queries, w *reply) {
		in, err := q.Info(fam, key)
		if err != nil {
			w.fail(err)
			return
		}
		win := in.Window
		if win == nil {
			w.fail(redisError("ERR not a windowed filter"))
			return
		}
		typ, window, slack := "count", win.Window, win.Slack
		if win.ByTime {
			typ, window, slack = "time", win.Window/1e6, (win.Slack+999_999)/1e6
		}
		w.mapHeader(6)
		w.simple("Window type")
		w.simple(typ)
		w.simple("Window")
		w.uint(window)
		w.simple("Slack")
		w.uint(slack)
		w.simple("Generations")
		w.int(int64(win.Generations))
		w.simple("Current generation")
		w.uint(win.Current)
		w.simple("Items per generation")
		w.array(len(win.Items))
		for _, n := range win.Items {
			w.uint(n)
		}
	})
}
