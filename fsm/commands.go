package fsm

import (
	"errors"

	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/internal/mutant"
)

// The handlers of the dispatch table. Each runs on the apply goroutine, returns
// a domain outcome as a value, and changes nothing when it returns an error
// (except that a multi-item command keeps the items it applied before a
// stopping error, as RedisBloom's do).

// applyReserve creates c.Key from c.Spec.
func (f *FSM) applyReserve(c *Command) *Result {
	if err := f.vacant(c.Key, c.Family); err != nil {
		return &Result{Err: err}
	}
	flt, err := f.create(c)
	if err != nil {
		return &Result{Err: err}
	}
	f.install(c.Key, flt)
	return &Result{}
}

// vacant checks that a command of family fam may create key: ErrExists if key
// holds a filter of fam, ErrWrongType if one of another family.
func (f *FSM) vacant(key string, fam Family) error {
	switch e := f.reg.byKey[key]; {
	case e == nil:
		return nil
	case familyOf(e.kind) != fam:
		return ErrWrongType
	}
	return ErrExists
}

// create builds the filter c.Spec describes, which must be of c's family,
// within c's memory limit (memlimit.go).
func (f *FSM) create(c *Command) (filters.Filter, error) {
	if familyOf(c.Spec.Kind) != c.Family || c.Family == FamilyNone {
		return nil, ErrBadSpec
	}
	est, _ := EstimateBytes(c.Spec)
	return f.createWithin(c, est, func() (filters.Filter, error) { return newFilter(c.Spec) })
}

// install puts flt under key, replacing whatever was there. The key starts
// with no deadline; a windowed filter starts at the log's clock.
func (f *FSM) install(key string, flt filters.Filter) *entry {
	if old := f.reg.byKey[key]; old != nil {
		f.removeEntry(old)
	}
	e := &entry{key: key, kind: flt.Kind(), f: flt, gen: f.gen, mem: entryBytes(key, flt), ver: f.applying}
	f.reg.put(e)
	f.memory.Add(e.mem)
	if IsWindowed(e.kind) {
		f.age(e)
	}
	return e
}

// removeEntry deletes e's key, its deadline and its place among the windowed
// filters' retirements.
func (f *FSM) removeEntry(e *entry) {
	f.noteRemoved(e.key)
	f.clearDeadline(e)
	f.dropRetirement(e)
	f.reg.remove(e)
	f.memory.Add(-e.mem)
}

// lookup finds key for a command of family fam.
func (f *FSM) lookup(key string, fam Family) (*entry, error) {
	e := f.reg.byKey[key]
	switch {
	case e == nil:
		return nil, ErrNotFound
	case familyOf(e.kind) != fam:
		return nil, ErrWrongType
	}
	return e, nil
}

// mutate runs fn on e's filter under its write lock. If a live snapshot may be
// streaming the filter, fn gets a fork of it instead (copy-on-write): a filter
// that shares every page with the frozen one and copies a page the first time
// fn writes it, so the snapshot goes on streaming the filter as it was while a
// write costs the pages it touches, never a copy of the whole filter. Forking
// copies no page, only page tables, and runs outside the lock: it reads no
// page, and nothing writes a frozen filter.
func (f *FSM) mutate(e *entry, fn func(flt filters.Filter)) {
	if e.gen <= f.snapMax.Load() {
		c := filters.Fork(e.f)
		e.mu.Lock()
		e.f = c
		e.mu.Unlock()
		e.gen = f.gen
	}
	e.ver = f.applying
	e.mu.Lock()
	fn(e.f)
	mem := e.bytes()
	e.mu.Unlock()
	f.memory.Add(mem - e.mem)
	e.mem = mem
}

// applyAdd adds c.Items, creating the filter first unless it exists or
// c.NoCreate forbids it.
func (f *FSM) applyAdd(c *Command) *Result {
	e, err := f.lookup(c.Key, c.Family)
	if errors.Is(err, ErrNotFound) && !c.NoCreate {
		var flt filters.Filter
		if flt, err = f.create(c); err == nil {
			e = f.install(c.Key, flt)
		}
	}
	if err != nil {
		return &Result{Err: err}
	}
	if filters.Loading(e.f) {
		return &Result{Err: ErrBadData}
	}
	if k := kinds[e.kind]; k.refuse != nil {
		if err := k.refuse(e.f); err != nil {
			return &Result{Err: err}
		}
	}
	if err := refuseMaxFilters(c, e.f); err != nil {
		return &Result{Err: err}
	}
	r := &Result{Ints: make([]int64, 0, len(c.Items))}
	defer f.fileRetirement(e)
	f.mutate(e, func(flt filters.Filter) {
		// A windowed filter with no items waits for no retirement: it moves
		// to the log's clock here, so the items land in the current
		// generation.
		if w, ok := flt.(windowed); ok {
			w.Advance(f.clockFor(w))
		}
		if b := f.budgetGrowth(c, flt); b != nil {
			defer b.ClearGrowthBudget()
		}
		// A batch reads ahead the memory of each window of items before
		// adding them (filters/prefetch.go); one item gains nothing.
		pf, _ := flt.(filters.Prefetcher)
		if len(c.Items) < 2 {
			pf = nil
		}
		add := adder(flt) // once, not per item: a map lookup cost 6% of a leader's CPU
		for i, it := range c.Items {
			if pf != nil && i%filters.PrefetchWindow == 0 {
				pf.Prefetch(c.Items[i:min(i+filters.PrefetchWindow, len(c.Items))])
			}
			v, err, stop := add(flt, it, c.NX, c.Multi)
			if mutant.On(mutant.AddTwice) && err == nil {
				add(flt, it, c.NX, c.Multi)
			}
			if err != nil && (stop || !c.Multi) {
				r.Err = err
				r.Stopped = c.Multi
				if !c.Multi {
					r.Ints = nil
				}
				return
			}
			r.Ints = append(r.Ints, v)
		}
	})
	return r
}

// refuseMaxFilters refuses a cuckoo add whose command carries a limit on
// sub-filters (the proposer's cf-max-expansions) the filter has reached, as
// RedisBloom refuses every add then, before inserting anything.
func refuseMaxFilters(c *Command, flt filters.Filter) error {
	if c.MaxFilters == 0 || c.Family != FamilyCF {
		return nil
	}
	if sf, ok := flt.(interface{ Filters() int }); ok && sf.Filters() >= int(c.MaxFilters) {
		return ErrMaxExpansions
	}
	return nil
}

// adder returns how items are added to flt: its kind's kindDesc.add.
func adder(flt filters.Filter) func(flt filters.Filter, item []byte, nx, multi bool) (int64, error, bool) {
	k, ok := kinds[flt.Kind()]
	if !ok || k.add == nil {
		return func(filters.Filter, []byte, bool, bool) (int64, error, bool) { return 0, ErrWrongType, true }
	}
	return k.add
}

// applyDelete deletes one copy of each of c.Items (CF.DEL, CBF.DEL).
func (f *FSM) applyDelete(c *Command) *Result {
	e, err := f.lookup(c.Key, c.Family)
	if err != nil {
		return &Result{Err: err}
	}
	if _, ok := e.f.(filters.Deleter); !ok {
		return &Result{Err: ErrWrongType}
	}
	if filters.Loading(e.f) {
		return &Result{Err: ErrBadData}
	}
	r := &Result{Ints: make([]int64, 0, len(c.Items))}
	defer f.fileRetirement(e)
	f.mutate(e, func(flt filters.Filter) {
		if w, ok := flt.(windowed); ok {
			w.Advance(f.clockFor(w))
		}
		d := flt.(filters.Deleter)
		for _, it := range c.Items {
			ok := d.Delete(it)
			if mutant.On(mutant.DeleteTwice) {
				d.Delete(it)
			}
			r.Ints = append(r.Ints, b2i(ok))
		}
	})
	return r
}

// applyDelKeys deletes c.Keys and counts those that existed (DEL).
func (f *FSM) applyDelKeys(c *Command) *Result {
	n := int64(0)
	for _, k := range c.Keys {
		if e := f.reg.byKey[k]; e != nil {
			f.removeEntry(e)
			n++
		}
	}
	return &Result{Ints: []int64{n}}
}

// applyRename moves c.Key's filter to c.Keys[0] (RENAME), replacing whatever
// was there; with c.NX only if nothing was (RENAMENX). The filter keeps its
// snapshot generation, so a snapshot still streaming it is not written under,
// and its deadline, as Redis's RENAME keeps a key's TTL.
func (f *FSM) applyRename(c *Command) *Result {
	if len(c.Keys) != 1 {
		return &Result{Err: ErrBadData}
	}
	src := f.reg.byKey[c.Key]
	if src == nil {
		return &Result{Err: ErrNotFound}
	}
	to := c.Keys[0]
	if to == c.Key {
		return &Result{Ints: []int64{b2i(!c.NX)}}
	}
	if dst := f.reg.byKey[to]; dst != nil {
		if c.NX {
			return &Result{Ints: []int64{0}}
		}
		f.removeEntry(dst)
	}
	deadline := src.exp.Load()
	f.removeEntry(src)
	e := &entry{key: to, kind: src.kind, f: src.f, gen: src.gen, mem: entryBytes(to, src.f), ver: f.applying}
	f.reg.put(e)
	f.memory.Add(e.mem)
	if deadline != nil {
		f.setDeadline(e, deadline.deadline)
	}
	f.fileRetirement(e)
	return &Result{Ints: []int64{1}}
}

// applyFlush deletes every filter (FLUSHALL, FLUSHDB).
func (f *FSM) applyFlush(c *Command) *Result {
	f.reg.mu.Lock()
	n := len(f.reg.byKey)
	f.reg.byKey, f.reg.order = make(map[string]*entry), nil
	f.reg.mu.Unlock()
	f.memory.Store(0)
	f.deadlines, f.retires = nil, nil
	f.noteDeadlines()
	f.noteFlushed()
	return &Result{Ints: []int64{int64(n)}}
}

// applyCompact compacts c.Key's cuckoo filter (CF.COMPACT).
func (f *FSM) applyCompact(c *Command) *Result {
	e, err := f.lookup(c.Key, FamilyCF)
	if err != nil {
		return &Result{Err: err}
	}
	if filters.Loading(e.f) {
		return &Result{Err: ErrBadData}
	}
	// A windowed cuckoo filter is one table: there is nothing to compact.
	if _, ok := e.f.(interface{ Compact() }); ok {
		f.mutate(e, func(flt filters.Filter) { flt.(interface{ Compact() }).Compact() })
	}
	return &Result{}
}

// applyLoadChunk loads one SCANDUMP chunk: iterator 1 (the header) creates an
// empty filter under c.Key, which must not exist; later chunks fill it. Until
// the last chunk is in, the filter answers reads from what has arrived and
// refuses other writes (ErrBadData): its counters are the header's, checked
// against its arrays only when the last chunk lands (filters/load.go). A chunk
// of another dump, or one that would leave the filter inconsistent, is refused
// with ErrBadData and changes nothing.
//
// As in RedisBloom, iterator 1 sent to a Bloom key that exists is a chunk (and
// so bad data), while a cuckoo key answers ErrExists.
func (f *FSM) applyLoadChunk(c *Command) *Result {
	if c.Iter == 1 && (c.Family != FamilyBF || f.reg.get(c.Key) == nil) {
		if err := f.vacant(c.Key, c.Family); err != nil {
			return &Result{Err: err}
		}
		flt, err := f.createWithin(c, headerBytes(c), func() (filters.Filter, error) { return loadHeader(c.Family, c.Data) })
		if err != nil {
			return &Result{Err: err}
		}
		f.install(c.Key, flt)
		return &Result{}
	}
	e, err := f.lookup(c.Key, c.Family)
	if err != nil {
		return &Result{Err: err}
	}
	r := &Result{}
	if _, ok := e.f.(rbDumper); ok {
		// RedisBloom's layouts take chunks at any time, as RedisBloom does:
		// nothing ties their bits to their counters.
		f.mutate(e, func(flt filters.Filter) { r.Err = rbChunkErr(flt.(rbDumper).LoadChunk(c.Iter, c.Data)) })
		return r
	}
	if IsWindowed(e.kind) {
		// Once its last chunk is in, a windowed filter moves to the log's
		// clock (window.go).
		defer f.age(e)
	}
	f.mutate(e, func(flt filters.Filter) { r.Err = ownChunkErr(filters.LoadChunk(flt, c.Iter, c.Data)) })
	return r
}

// ownChunkErr is the outcome of a chunk of our own dump format.
func ownChunkErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, filters.ErrChunkOutside):
		return ErrChunkOutside
	case errors.Is(err, filters.ErrChunkTooBig):
		return ErrChunkTooBig
	case errors.Is(err, filters.ErrBadPosition):
		return ErrBadPosition
	}
	return ErrBadData
}

// loadHeader builds the filter the first chunk of a dump describes: one of our
// own dumps (it begins with our magic), or else one of RedisBloom's, which
// makes a filter of RedisBloom's layout. A cuckoo header of the wrong length
// is no header at all (ErrBadHeader); any other refusal is ErrBadData.
func loadHeader(fam Family, data []byte) (filters.Filter, error) {
	if filters.IsDumpHeader(data) {
		flt, err := filters.LoadHeader(data)
		if err != nil || !dumpKind(fam, flt.Kind()) {
			return nil, ErrBadData
		}
		return flt, nil
	}
	if fam == FamilyCF {
		if len(data) != filters.RBCuckooHeaderBytes {
			return nil, ErrBadHeader
		}
		flt, err := filters.NewRBCuckooFromHeader(data)
		if err != nil {
			return nil, ErrBadData
		}
		return flt, nil
	}
	flt, err := filters.NewRBChainFromHeader(data)
	if err != nil {
		return nil, ErrBadData
	}
	return flt, nil
}

// rbChunkErr is the outcome of a chunk loaded into a RedisBloom layout.
func rbChunkErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, filters.ErrRBNoLink):
		return ErrChunkOutside
	case errors.Is(err, filters.ErrRBTooBig):
		return ErrChunkTooBig
	}
	return ErrBadData
}

// dumpKind reports whether a LOADCHUNK of family fam may create a filter of kind
// k: only a kind that the family's commands create, and so whose dump SCANDUMP
// can hand out (BF.* makes scalable chains, never a plain Bloom).
func dumpKind(fam Family, k filters.Kind) bool {
	d, ok := kinds[k]
	return ok && d.loadable && d.family == fam
}

func b2i(v bool) int64 {
	if v {
		return 1
	}
	return 0
}

// GuessResult is the reply c would get if it applied with every item new and
// every key present: what a node that answers without waiting for the log
// would say. Only internal/mutant's ack-at-proposal bug uses it.
func GuessResult(c *Command) *Result {
	r := &Result{}
	switch c.Op {
	case OpAdd, OpDelete:
		for range c.Items {
			r.Ints = append(r.Ints, 1)
		}
	case OpDelKeys:
		r.Ints = []int64{int64(len(c.Keys))}
	case OpExpire, OpPersist, OpRename, OpFlush:
		r.Ints = []int64{1}
	}
	return r
}
