package transport

import "sync/atomic"

// budget is the memory all connections' request readers may hold together
// (Config.MaxRequestBuffer). Without it, each connection's limits are safe on
// their own but not in sum: a thousand clients each sending a request just under
// --max-request-size take a thousand times that before any of them is refused.
//
// Readers charge what they hold beyond a small allowance per connection: buffer
// growth past the idle buffer, their argument-position table past a few hundred
// arguments, and the copies of the arguments they hand out until the batch that
// holds them has been executed. The allowance keeps the pipelined hot path off
// the shared counter: a reader touches it only when a buffer changes size or
// when its batch's copies pass chargeQuantum, never once per request.
//
// Connections that have not authenticated draw on a child budget, a quarter of
// the whole, so that strangers filling their buffers cannot starve the clients
// that have the password. What a child takes is also taken from its parent.
type budget struct {
	limit  int64
	used   atomic.Int64
	parent *budget
}

// errBudget refuses a request whose bytes the budget cannot cover.
const errBudget = protocolError("server request buffers are full, try again later")

// newBudget returns a budget of limit bytes; with a parent, what it grants is
// also taken from the parent.
func newBudget(limit int64, parent *budget) *budget {
	return &budget{limit: limit, parent: parent}
}

// take reserves n bytes and reports whether they fit. It never over-commits, so
// what is already admitted keeps its bytes and only the newcomer is refused.
func (b *budget) take(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	if !b.parent.take(n) {
		return false
	}
	for {
		cur := b.used.Load()
		if cur+n > b.limit || cur+n < cur {
			b.parent.give(n)
			return false
		}
		if b.used.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// give returns n bytes taken earlier.
func (b *budget) give(n int64) {
	if b != nil && n > 0 {
		b.used.Add(-n)
		b.parent.give(n)
	}
}

// handUp moves n bytes taken from b to its parent alone: the connection holding
// them has authenticated and now draws on the parent.
func (b *budget) handUp(n int64) *budget {
	if b == nil || b.parent == nil {
		return b
	}
	if n > 0 {
		b.used.Add(-n)
	}
	return b.parent
}

// inUse is the bytes currently reserved, for metrics and tests.
func (b *budget) inUse() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// How a reader charges the budget.

// recharge settles the budget for a buffer of bufLen bytes and an argument table
// of marksCap entries, beyond the sizes every connection has for free; false,
// changing nothing, if growth does not fit.
func (rd *reader) recharge(bufLen, marksCap int) bool {
	want := int64(max(0, bufLen-readBufIdle) + 8*max(0, marksCap-marksFree))
	if d := want - rd.charged; d > 0 && !rd.bud.take(d) {
		return false
	} else if d < 0 {
		rd.bud.give(-d)
	}
	rd.charged = want
	return true
}

// owe counts copies about to be handed out. They are charged in lumps of more
// than chargeQuantum, so a batch of small requests never touches the shared
// budget, and each connection holds at most chargeQuantum uncharged.
func (rd *reader) owe(data, args int) error {
	rd.owed += int64(data + args*sliceHeader)
	if rd.owed <= chargeQuantum {
		return nil
	}
	if !rd.bud.take(rd.owed) {
		return errBudget
	}
	rd.held += rd.owed
	rd.owed = 0
	return nil
}

// release returns to the budget what the copies handed out so far were charged;
// the connection calls it once their batch has executed.
func (rd *reader) release() {
	rd.bud.give(rd.held)
	rd.held, rd.owed = 0, 0
}

// authenticated moves what the reader holds from the strangers' budget to the
// whole one, which it draws on from now on.
func (rd *reader) authenticated() {
	rd.bud = rd.bud.handUp(rd.charged + rd.held)
}

// close returns everything the reader holds to the budget; the connection calls
// it when it ends.
func (rd *reader) close() {
	rd.release()
	rd.bud.give(rd.charged)
	rd.charged = 0
	rd.buf, rd.marks = nil, nil
}
