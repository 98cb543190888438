package main

import (
	"slices"
	"sync"
	"time"
)

// kind is what an operation of the history did. A batch command (BF.MADD,
// CF.INSERT) is recorded as one operation per item, all with the batch's call
// and return times, so each item's history is checked on its own.
type kind string

const (
	bfAdd     kind = "BF.ADD"
	bfMAdd    kind = "BF.MADD"
	bfExists  kind = "BF.EXISTS"
	cfAdd     kind = "CF.ADD"
	cfInsert  kind = "CF.INSERT"
	cfDel     kind = "CF.DEL"
	cfExists  kind = "CF.EXISTS"
	cfCount   kind = "CF.COUNT"
	cbfAdd    kind = "CBF.ADD"
	cbfDel    kind = "CBF.DEL"
	cbfExists kind = "CBF.EXISTS"
	cbfCount  kind = "CBF.COUNT"
	// On the short-lived keys, whose whole state is checked per key.
	keyReserve kind = "BF.RESERVE"
	keyDel     kind = "DEL"
	keyExists  kind = "EXISTS"
	keyLoad    kind = "BF.LOADCHUNK" // a whole SCANDUMP→LOADCHUNK round into a fresh key
	// roExists is a BF.EXISTS on a READONLY connection: checked against the
	// weaker promise of such reads, not for linearizability.
	roExists kind = "BF.EXISTS/READONLY"
)

func (k kind) write() bool {
	switch k {
	case bfAdd, bfMAdd, cfAdd, cfInsert, cfDel, cbfAdd, cbfDel, keyReserve, keyDel, keyLoad, wbfAdd, wcfAdd, wcfDel:
		return true
	}
	return false
}

// perKey says whether the operations of k are checked per key (the
// short-lived keys, whose DEL and re-creation touch every item) rather than
// per item.
func (k kind) perKey() bool {
	switch k {
	case keyReserve, keyDel, keyExists, keyLoad:
		return true
	}
	return false
}

// op is one completed operation, as a client saw it. Failed operations (writes
// that surely did not happen, reads that got no answer) are recorded for the
// artifacts but never checked.
type op struct {
	client  int
	conn    int // the connection of a READONLY read
	kind    kind
	key     string
	item    string
	items   []string // keyLoad: the items the dumped filter held
	call    int64    // ns since the run began
	ret     int64    // ns since the run began; closed moves an unknown write's to the run's end
	out     bool     // the answer of EXISTS, DEL, and of adds that say whether the item was new
	n       int64    // the answer of COUNT
	unknown bool     // a write whose outcome the client could not learn
	failed  bool     // surely not applied (a write) or not answered (a read)
	err     string
}

// outcome is how the client saw the operation end: ok, fail or unknown.
func (o op) outcome() string {
	switch {
	case o.failed:
		return "fail"
	case o.unknown:
		return "unknown"
	}
	return "ok"
}

// history collects operations from every worker.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []op
}

func newHistory() *history { return &history{start: time.Now()} }

func (h *history) now() int64 { return int64(time.Since(h.start)) }

func (h *history) add(o ...op) {
	h.mu.Lock()
	h.ops = append(h.ops, o...)
	h.mu.Unlock()
}

// all returns every operation recorded, failed ones included, as the clients
// saw them.
func (h *history) all() []op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

// closed returns the operations to check, with unknown writes returning at
// end: they may take effect at any moment after their call, or never. Failed
// ones are left out.
func closed(ops []op, end int64) []op {
	var out []op
	for _, o := range ops {
		if o.failed {
			continue
		}
		if o.unknown {
			o.ret = end
		}
		out = append(out, o)
	}
	return out
}
