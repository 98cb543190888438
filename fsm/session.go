package fsm

import (
	"cmp"
	"slices"

	"github.com/rookerydb/rookery/internal/mutant"
)

// The session table makes retries exactly-once (Raft dissertation, section 6.3).
// A mutation may carry (client id, sequence number). The table remembers, per
// client, the results of its most recent sequence numbers; a command whose
// (client, seq) it already holds is answered with the stored result and not
// applied again. Retries of a write whose outcome was unknown are therefore
// safe: a CF.ADD retried after a leader change adds one copy, not two.
//
// Everything here is a function of the log: time is the leader's clock as
// stamped into each command, made monotonic by taking the maximum seen, and
// eviction orders are total (by time, then client id), never map order.

const (
	// sessionWindow is how many results a client keeps: a client may have this
	// many writes in flight and still retry any of them safely.
	sessionWindow = 128
	// maxSessions bounds the table; past it, the least recently seen clients are
	// forgotten first.
	maxSessions = 1 << 16
)

type seqResult struct {
	seq uint64
	res *Result
}

type clientSession struct {
	lastSeen int64       // log clock of the client's latest request
	results  []seqResult // ascending seq, at most sessionWindow
	// floor is the highest seq whose result was dropped from the window; a
	// request at or below it may have been applied and cannot be answered.
	floor uint64
}

type sessionTable struct {
	ttl       int64 // ns
	now       int64 // log clock: the largest command time seen
	lastSweep int64
	clients   map[uint64]*clientSession
}

func newSessionTable(ttl int64) *sessionTable {
	return &sessionTable{ttl: ttl, clients: make(map[uint64]*clientSession)}
}

// advance moves the log clock to t (never backwards) and expires idle sessions
// now and then.
func (t *sessionTable) advance(ts int64) {
	if ts > t.now {
		t.now = ts
	}
	if t.now-t.lastSweep < t.ttl/8 {
		return
	}
	t.lastSweep = t.now
	for id, cs := range t.clients {
		// Deleting by a predicate gives the same table whatever the map's order.
		if t.now-cs.lastSeen > t.ttl {
			delete(t.clients, id)
		}
	}
}

// lookup answers a replayed request: the stored result, or ErrSessionExpired for
// a sequence number older than the window.
func (t *sessionTable) lookup(s Session) (*Result, bool) {
	cs := t.clients[s.ClientID]
	if cs == nil || mutant.On(mutant.SessionsOff) {
		return nil, false
	}
	if s.Seq <= cs.floor {
		return &Result{Err: ErrSessionExpired}, true
	}
	i, ok := slices.BinarySearchFunc(cs.results, s.Seq, func(r seqResult, seq uint64) int {
		return cmp.Compare(r.seq, seq)
	})
	if !ok {
		return nil, false
	}
	cs.lastSeen = t.now
	return cloneResult(cs.results[i].res), true
}

// store records r as the result of s.
func (t *sessionTable) store(s Session, ts int64, r *Result) {
	cs := t.clients[s.ClientID]
	if cs == nil {
		if len(t.clients) >= maxSessions {
			t.evictOldest()
		}
		cs = &clientSession{}
		t.clients[s.ClientID] = cs
	}
	cs.lastSeen = t.now
	i, _ := slices.BinarySearchFunc(cs.results, s.Seq, func(r seqResult, seq uint64) int {
		return cmp.Compare(r.seq, seq)
	})
	cs.results = slices.Insert(cs.results, i, seqResult{seq: s.Seq, res: cloneResult(r)})
	if len(cs.results) > sessionWindow {
		cs.floor = max(cs.floor, cs.results[0].seq)
		cs.results = slices.Delete(cs.results, 0, 1)
	}
}

// evictOldest forgets the least recently seen eighth of the table.
func (t *sessionTable) evictOldest() {
	type idSeen struct {
		id   uint64
		seen int64
	}
	all := make([]idSeen, 0, len(t.clients))
	for id, cs := range t.clients {
		all = append(all, idSeen{id, cs.lastSeen})
	}
	slices.SortFunc(all, func(a, b idSeen) int {
		if a.seen != b.seen {
			return cmp.Compare(a.seen, b.seen)
		}
		return cmp.Compare(a.id, b.id)
	})
	for _, x := range all[:max(1, len(all)/8)] {
		delete(t.clients, x.id)
	}
}

// clone returns a deep copy, for a snapshot.
func (t *sessionTable) clone() *sessionTable {
	c := &sessionTable{ttl: t.ttl, now: t.now, lastSweep: t.lastSweep,
		clients: make(map[uint64]*clientSession, len(t.clients))}
	for id, cs := range t.clients {
		c.clients[id] = &clientSession{lastSeen: cs.lastSeen, floor: cs.floor,
			results: slices.Clone(cs.results)} // results are never mutated in place
	}
	return c
}

func cloneResult(r *Result) *Result {
	c := *r
	c.Ints = slices.Clone(r.Ints)
	return &c
}
