package fsm

import (
	"cmp"
	"slices"

	"github.com/rookerydb/rookery/internal/mutant"
)

// Transactions (MULTI/EXEC, log format 10). A transaction is one log entry,
// an OpExec: its commands apply one after another inside one Apply, so every
// replica applies all of them at the same index with nothing in between, and
// a reader waiting for that index (a linearizable read) sees all or none.
// A command that fails inside (a wrong type, a full filter) fails alone, as
// in Redis; the others still apply.
//
// WATCH is optimistic, as in Redis: the client is told nothing, and EXEC
// applies nothing if a watched key changed after it was watched. What
// "after" means must be the same on every replica, so it is a log index:
// WATCH records the index its replica had applied when the key was read
// (after a read barrier), and the OpExec carries it; applying the OpExec
// compares it with the index of the last entry that created, changed or
// removed the key (its version). A version above the watched index means the
// key changed since: ErrWatched, nothing applied.
//
// Versions are state like any other: an entry's ver, the removal index of
// recently removed keys (tombstones, bounded), and the index below which
// removals are forgotten; from the first transaction on they travel in
// snapshots (version 5). Before the first OpExec they are not in snapshots,
// so replicas may disagree about old versions; the first OpExec therefore
// sets a floor, its own index, under which no version is told apart: every
// replica applies that entry with the same state, and from then on every
// version is kept exactly. A transaction watched before the floor aborts
// once, and the client's retry goes through.

// txState is what WATCH compares against. Apply goroutine only.
type txState struct {
	// floor is the index of the first OpExec applied (0: none yet): every
	// version is at least floor.
	floor uint64
	// removed is the index at which each recently removed key went;
	// forgotten is the highest index of a removal no longer in removed (a
	// key absent from both was removed at or before it, or never existed).
	removed   map[string]uint64
	forgotten uint64
}

// maxTombstones bounds the removals kept by key; past it the older half is
// forgotten (a watched key removed then reads as changed at forgotten, so a
// transaction may abort for a removal of another key: never the other way).
const maxTombstones = 4096

// version is the index of the last entry that changed key, as WATCH compares
// it: at least the floor.
func (f *FSM) version(key string) uint64 {
	v := f.tx.forgotten
	if e := f.reg.byKey[key]; e != nil {
		v = e.ver
	} else if i, ok := f.tx.removed[key]; ok {
		v = i
	}
	return max(v, f.tx.floor)
}

// noteRemoved records that key is removed by the entry being applied.
func (f *FSM) noteRemoved(key string) {
	if f.tx.floor == 0 {
		return // no transaction yet: the first one's floor covers this
	}
	if f.tx.removed == nil {
		f.tx.removed = make(map[string]uint64)
	}
	f.tx.removed[key] = f.applying
	if len(f.tx.removed) <= maxTombstones {
		return
	}
	type tomb struct {
		key   string
		index uint64
	}
	all := make([]tomb, 0, len(f.tx.removed))
	for k, i := range f.tx.removed {
		all = append(all, tomb{k, i})
	}
	// Oldest first, ties by key: the same on every replica, whatever the
	// map's order.
	slices.SortFunc(all, func(a, b tomb) int {
		return cmp.Or(cmp.Compare(a.index, b.index), cmp.Compare(a.key, b.key))
	})
	for _, t := range all[:len(all)/2] {
		delete(f.tx.removed, t.key)
		f.tx.forgotten = max(f.tx.forgotten, t.index)
	}
}

// noteFlushed records that every key was removed by the entry being applied.
func (f *FSM) noteFlushed() {
	if f.tx.floor == 0 {
		return // as noteRemoved: snapshots carry none of this before then
	}
	f.tx.removed = nil
	f.tx.forgotten = f.applying
}

// applyExec applies a transaction: nothing if a watched key changed since
// it was watched, else every command in order, one result each.
func (f *FSM) applyExec(c *Command) *Result {
	if f.tx.floor == 0 {
		f.tx.floor = f.applying
	}
	if len(c.Watch) != len(c.Keys) {
		return &Result{Err: ErrBadData}
	}
	for i, k := range c.Keys {
		if f.version(k) > c.Watch[i] && !mutant.On(mutant.WatchIgnored) {
			return &Result{Err: ErrWatched}
		}
	}
	r := &Result{Subs: make([]*Result, len(c.Subs))}
	for i, sub := range c.Subs {
		if !InExec(sub.Op) || sub.Session != (Session{}) {
			r.Subs[i] = &Result{Err: ErrBadData} // never encoded: the codec refuses it
			continue
		}
		sub.Time = c.Time
		if sub.MemLimit == 0 {
			sub.MemLimit = c.MemLimit
		}
		r.Subs[i] = f.dispatch(sub)
	}
	return r
}

// applyTest answers EXISTS inside a transaction: one outcome per item.
func (f *FSM) applyTest(c *Command) *Result {
	found := f.Exists(c.Family, c.Key, c.Items)
	r := &Result{Ints: make([]int64, len(found))}
	for i, ok := range found {
		r.Ints[i] = b2i(ok)
	}
	return r
}

// applyCount answers COUNT inside a transaction.
func (f *FSM) applyCount(c *Command) *Result {
	if len(c.Items) != 1 {
		return &Result{Err: ErrBadData}
	}
	n := f.Count(c.Family, c.Key, c.Items[0])
	return &Result{Ints: []int64{int64(min(n, 1<<63-1))}}
}

// WatchIndex is the index WATCH records for a key read from this replica:
// the last entry applied. Call it after a read barrier.
func (f *FSM) WatchIndex() uint64 { return f.applied.Load() }
