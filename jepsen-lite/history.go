package main

import (
	"slices"
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

// key is the filter an operation of kind k works on.
func (k kind) key() string {
	if k == bfAdd || k == bfExists {
		return bloomKey
	}
	return cuckooKey
}

// op is one completed operation, as a client saw it. Failed operations (writes
// that surely did not happen, reads that got no answer) are recorded for the
// artifacts but never checked.
type op struct {
	client  int
	kind    kind
	item    string
	call    int64 // ns since the run began
	ret     int64 // ns since the run began; closed moves an unknown write's to the run's end
	out     bool  // the answer of EXISTS and DEL
	unknown bool  // a write whose outcome the client could not learn
	failed  bool  // surely not applied (a write) or not answered (a read)
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

func (h *history) add(o op) {
	h.mu.Lock()
	h.ops = append(h.ops, o)
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
func (h *history) closed(end int64) []op {
	var out []op
	for _, o := range h.all() {
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
