// Package gcpace keeps the garbage a node's heap may hold in proportion to what
// it is for, not to the filters it holds.
//
// Go's collector lets the heap grow by GOGC percent of the live heap (100% by
// default) before it collects. A node's live heap is mostly filter pages that
// live as long as their keys, so with 1 GB of filters the heap may reach 2 GB
// before a collection: the RSS of a node doubles under a steady write load,
// and more so during a snapshot, when the pages writes copy add to the garbage.
//
// Pace sets Go's soft memory limit a little above the live heap, again after
// every change of it: the garbage allowed is then min(GOGC's, a fraction of the
// live heap plus a floor). A small heap collects as GOGC says; a large one
// collects once its garbage reaches the fraction. Since the limit always sits
// above the live heap by at least the floor, the collector never runs without
// pause the way it does when a fixed limit falls below the live heap.
package gcpace

import (
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Defaults for Pace: garbage up to an eighth of the live heap plus 64 MiB.
const (
	DefaultFraction = 0.125
	DefaultFloor    = 64 << 20
)

const liveMetric = "/gc/heap/live:bytes"

// Limit is the soft memory limit Pace sets for a live heap of live bytes.
func Limit(live uint64, fraction float64, floor uint64) int64 {
	l := float64(live)*(1+fraction) + float64(floor)
	if l >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(l)
}

// Pace sets the soft memory limit from the live heap every interval until stop
// is called, which restores the limit it found. It does nothing, and says so,
// when GOMEMLIMIT is set: an operator's limit wins.
func Pace(interval time.Duration, fraction float64, floor uint64) (stop func(), active bool) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return func() {}, false
	}
	prev := debug.SetMemoryLimit(-1)
	sample := []metrics.Sample{{Name: liveMetric}}
	set := func() {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			debug.SetMemoryLimit(Limit(sample[0].Value.Uint64(), fraction, floor))
		}
	}
	set()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				set()
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		debug.SetMemoryLimit(prev)
	}, true
}
