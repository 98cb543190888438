package main

import (
	"sync"
	"time"
)

// kind is what an operation of the history did.
type kind string

const (
	bfAdd    kind = "BF.ADD"
	bfExists kind = "BF.EXISTS"
	cfAdd    kind = "CF.ADD"
	cfDel    kind = "CF.DEL"
	cfExists kind = "CF.EXISTS"
)

func (k kind) write() bool { return k == bfAdd || k == cfAdd || k == cfDel }

// op is one completed operation, as a client saw it. Writes that surely did not
// happen are not recorded; reads that failed are not either.
type op struct {
	client  int
	kind    kind
	item    string
	call    int64 // ns since the run began
	ret     int64 // ns since the run began; for an unknown write, the run's end
	out     bool  // the answer of EXISTS and DEL
	unknown bool  // a write whose outcome the client could not learn
}

// history collects operations from every worker.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []op
}

func newHistory() *history { return &history{start: time.Now()} }

func (h *history) now() int64 { return int64(time.Since(h.start)) }

func (h *history) add(o op) {
	h.mu.Lock()
	h.ops = append(h.ops, o)
	h.mu.Unlock()
}

// closed returns the operations, with unknown writes returning at end: they
// may take effect at any moment after their call, or never.
func (h *history) closed(end int64) []op {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]op, len(h.ops))
	copy(out, h.ops)
	for i := range out {
		if out[i].unknown {
			out[i].ret = end
		}
	}
	return out
}
