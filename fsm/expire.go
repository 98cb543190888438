package fsm

import (
	"container/heap"
	"math"
)

// Expiry: a key may have a deadline, a Unix time in milliseconds as Redis
// keeps it. Time here is the log's clock: the largest Command.Time applied
// (the leader's clock, stamped into each command when it was proposed), the
// same clock sessions expire by. Before each command applies, every key whose
// deadline is at or before the log's clock is removed, earliest deadline
// first and by key among equal deadlines. So every replica removes a key at
// the same command of the same entry, whatever its own clock says, and after
// any command no key has a deadline at or before the log's clock. The leader
// proposes an OpExpireTick once its clock passes the earliest deadline
// (cluster/expire.go), so keys expire when nothing else is written.

// expiry is one key's deadline and its place in the deadline index. A
// deadline never changes once its expiry is stored in the entry (a new
// deadline is a new expiry), so readers on any goroutine may read it; at and
// the index belong to the apply goroutine.
type expiry struct {
	deadline int64 // Unix ms
	e        *entry
	at       int // position in FSM.deadlines
}

// expiryBytes is what a deadline adds to its key, as --max-memory counts
// it: its expiry (24 bytes) and its slot in the index (8 bytes, half as much
// again on average for the slack of a slice grown by doubling). The entry
// itself does not grow: the pointer to its expiry fits the slack of its size
// class (TestExpiryKeepsMemoryHonest).
const expiryBytes = 36

// deadlineHeap orders expiries by (deadline, key): a total order, so the
// keys due at one moment are removed in the same order everywhere, however
// the heap happened to be laid out.
type deadlineHeap []*expiry

func (h deadlineHeap) Len() int { return len(h) }

func (h deadlineHeap) Less(i, j int) bool {
	if h[i].deadline != h[j].deadline {
		return h[i].deadline < h[j].deadline
	}
	return h[i].e.key < h[j].e.key
}

func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].at, h[j].at = i, j
}

func (h *deadlineHeap) Push(x any) {
	x.(*expiry).at = len(*h)
	*h = append(*h, x.(*expiry))
}

func (h *deadlineHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return x
}

// logMillis is the log's clock in Unix milliseconds (never negative).
func (f *FSM) logMillis() int64 { return max(f.sessions.now, 0) / 1e6 }

// setDeadline gives e the deadline (Unix ms), replacing any it had.
func (f *FSM) setDeadline(e *entry, deadline int64) {
	x := &expiry{deadline: deadline, e: e}
	e.ver = f.applying
	if old := e.exp.Load(); old != nil {
		x.at = old.at
		f.deadlines[x.at] = x
		e.exp.Store(x)
		heap.Fix(&f.deadlines, x.at)
	} else {
		heap.Push(&f.deadlines, x)
		e.exp.Store(x)
		e.mem += expiryBytes
		f.memory.Add(expiryBytes)
	}
	f.noteDeadlines()
}

// clearDeadline drops e's deadline and reports whether it had one.
func (f *FSM) clearDeadline(e *entry) bool {
	old := e.exp.Load()
	if old == nil {
		return false
	}
	heap.Remove(&f.deadlines, old.at)
	e.ver = f.applying
	e.exp.Store(nil)
	e.mem -= expiryBytes
	f.memory.Add(^uint64(expiryBytes - 1)) // minus expiryBytes
	f.noteDeadlines()
	return true
}

// noteDeadlines publishes the index's size and earliest deadline (or
// retirement of a windowed generation) to readers on other goroutines, and
// wakes the leader's expiry timer when it moved.
func (f *FSM) noteDeadlines() {
	f.expires.Store(int64(len(f.deadlines)))
	next := f.nextRetirement()
	if len(f.deadlines) > 0 && (next == 0 || f.deadlines[0].deadline < next) {
		next = f.deadlines[0].deadline
	}
	if f.next.Swap(next) != next {
		select {
		case f.nextCh <- struct{}{}:
		default:
		}
	}
}

// expireDue removes every key whose deadline is at or before the log's clock,
// earliest first.
func (f *FSM) expireDue() {
	now := f.logMillis()
	for len(f.deadlines) > 0 && f.deadlines[0].deadline <= now {
		f.expireEntry(f.deadlines[0].e)
	}
}

// expireEntry removes e because its deadline passed.
func (f *FSM) expireEntry(e *entry) {
	f.removeEntry(e)
	f.expired.Add(1)
	if f.onExpire != nil {
		f.onExpire(e.key, f.applying)
	}
}

// applyExpire sets c.Key's deadline (EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT) as
// Redis 7 does: ErrBadExpire when a time to live added to the log's clock
// overflows; 0 when the key is missing or a condition fails; else 1, and a
// deadline at or before the log's clock removes the key at once.
func (f *FSM) applyExpire(c *Command) *Result {
	now := f.logMillis()
	when := c.Expire
	if !c.ExpireAt {
		if when > math.MaxInt64-now {
			return &Result{Err: ErrBadExpire}
		}
		when += now
	}
	e := f.reg.byKey[c.Key]
	if e == nil || !expireAllowed(c.ExpireIf, e.exp.Load(), when) {
		return &Result{Ints: []int64{0}}
	}
	if when <= now {
		f.expireEntry(e)
	} else {
		f.setDeadline(e, when)
	}
	return &Result{Ints: []int64{1}}
}

// expireAllowed checks Redis 7's conditions for a new deadline when against
// the key's current one (nil: none, which GT and LT take as infinite).
func expireAllowed(cond ExpireCond, cur *expiry, when int64) bool {
	switch {
	case cond&ExpireNX != 0 && cur != nil:
		return false
	case cond&ExpireXX != 0 && cur == nil:
		return false
	case cond&ExpireGT != 0 && (cur == nil || when <= cur.deadline):
		return false
	case cond&ExpireLT != 0 && cur != nil && when >= cur.deadline:
		return false
	}
	return true
}

// applyPersist drops c.Key's deadline (PERSIST): 1 if it had one, else 0.
func (f *FSM) applyPersist(c *Command) *Result {
	e := f.reg.byKey[c.Key]
	if e == nil || !f.clearDeadline(e) {
		return &Result{Ints: []int64{0}}
	}
	return &Result{Ints: []int64{1}}
}

// applyExpireTick does nothing itself: advancing the log's clock to its Time
// before it applied removed what was due.
func (f *FSM) applyExpireTick(c *Command) *Result { return &Result{} }

// Expiry returns key's deadline in Unix milliseconds (0 when it has none) and
// whether key exists (TTL, PTTL, EXPIRETIME, PEXPIRETIME).
func (f *FSM) Expiry(key string) (deadline int64, exists bool) {
	e := f.reg.get(key)
	if e == nil {
		return 0, false
	}
	if x := e.exp.Load(); x != nil {
		return x.deadline, true
	}
	return 0, true
}

// Expires returns how many keys have a deadline (INFO keyspace's expires=).
func (f *FSM) Expires() int { return int(f.expires.Load()) }

// ExpiredKeys returns how many keys this state machine removed because their
// deadline passed, since it was created (INFO stats' expired_keys). It counts
// what this node applied, so it is not part of snapshots.
func (f *FSM) ExpiredKeys() uint64 { return f.expired.Load() }

// NextDeadline returns the earliest moment the log's clock alone changes the
// state, in Unix milliseconds: a key's deadline, or a windowed filter's
// generation retiring (window.go); 0 when there is none. The leader proposes an
// OpExpireTick once its clock passes it.
func (f *FSM) NextDeadline() int64 { return f.next.Load() }

// NextDeadlineChanged receives a value (at most one waits) whenever
// NextDeadline changes; the leader's expiry timer re-arms on it.
func (f *FSM) NextDeadlineChanged() <-chan struct{} { return f.nextCh }
