package logengine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
)

// ErrKeyNotFound is returned by Get and GetUint64 for a missing key. Its text
// must stay "not found": hashicorp/raft compares err.Error() with it, as it
// does for raft-boltdb's error of the same name.
var ErrKeyNotFound = errors.New("not found")

// Stable-store keys that hashicorp/raft writes, copied by Import.
var (
	keyCurrentTerm  = []byte("CurrentTerm")
	keyLastVoteTerm = []byte("LastVoteTerm")
	keyLastVoteCand = []byte("LastVoteCand")
)

var (
	_ raft.LogStore    = (*Log)(nil)
	_ raft.StableStore = (*Log)(nil)
)

// Log is the log and stable store of one Raft group in an Engine. One raft
// instance writes it; GetLog, FirstIndex and LastIndex may run concurrently
// with the writes. Logs of different groups are independent, and their
// synced commits share fsyncs when they happen at the same time.
type Log struct {
	e   *Engine
	gid uint32

	// mu guards the cached bounds of the log; 0, 0 when it is empty. Raft
	// indexes start at 1, so index 0 is never stored.
	mu          sync.Mutex
	first, last uint64
	broken      error // the bounds could not be read: the block of the first or last entry is damaged

	// Read-ahead for reads in index order (raft reads the whole log after
	// its snapshot when it starts, one GetLog at a time): a read of the entry
	// after the last one read fetches the next readAhead entries with one
	// iterator. writes counts StoreLogs and DeleteRange calls; entries read
	// while it changed are not kept.
	ra struct {
		sync.Mutex
		lo, miss uint64
		vals     [][]byte
	}
	writes   atomic.Uint64
	raLoaded uint64 // writes when the read-ahead was filled (under ra)
}

// readAhead is how many entries a read in index order fetches at once.
const readAhead = 256

// FirstIndex returns the first index stored, or 0 when the log is empty.
func (l *Log) FirstIndex() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first, l.broken
}

// LastIndex returns the last index stored, or 0 when the log is empty.
func (l *Log) LastIndex() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last, l.broken
}

// GetLog reads entry index into out. It returns raft.ErrLogNotFound when the
// entry is absent and an error wrapping ErrDamaged when it does not decode.
func (l *Log) GetLog(index uint64, out *raft.Log) error {
	if v := l.readAhead(index); v != nil {
		if err := DecodeLog(index, v, out); err != nil {
			return fmt.Errorf("group %d: %w", l.gid, err)
		}
		return nil
	}
	v, closer, err := l.e.db.Get(logKey(l.gid, index))
	if errors.Is(err, pebble.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		if pebble.IsCorruptionError(err) {
			return fmt.Errorf("group %d: read log entry %d: %w: %s", l.gid, index, ErrDamaged, firstLine(err))
		}
		return fmt.Errorf("group %d: read log entry %d: %s", l.gid, index, firstLine(err))
	}
	defer closer.Close()
	if err := DecodeLog(index, v, out); err != nil {
		return fmt.Errorf("group %d: %w", l.gid, err)
	}
	return nil
}

// StoreLog stores one entry, synced.
func (l *Log) StoreLog(entry *raft.Log) error {
	return l.StoreLogs([]*raft.Log{entry})
}

// readAhead returns the stored value of entry index from the read-ahead,
// fetching the next entries when index follows the last entry read; nil
// when it has none.
func (l *Log) readAhead(index uint64) []byte {
	l.ra.Lock()
	defer l.ra.Unlock()
	if index >= l.ra.lo && index < l.ra.lo+uint64(len(l.ra.vals)) {
		if w := l.writes.Load(); w == l.raLoaded {
			return l.ra.vals[index-l.ra.lo]
		}
		l.ra.vals = nil
	}
	sequential := index == l.ra.miss+1
	l.ra.miss = index
	if !sequential {
		return nil
	}
	w := l.writes.Load()
	start, end := l.span(index, index+readAhead-1)
	it, err := l.e.db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return nil
	}
	var vals [][]byte
	for ok := it.First(); ok && indexOf(it.Key()) == index+uint64(len(vals)); ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			break
		}
		vals = append(vals, append([]byte(nil), v...))
	}
	if it.Close() != nil || len(vals) == 0 || l.writes.Load() != w {
		return nil
	}
	l.ra.lo, l.ra.vals, l.raLoaded = index, vals, w
	return vals[0]
}

// StoreLogs stores entries in one batch committed with pebble.Sync.
func (l *Log) StoreLogs(entries []*raft.Log) error {
	if len(entries) == 0 {
		return nil
	}
	// Before and after: a read-ahead that overlaps the write is not kept.
	l.writes.Add(1)
	defer l.writes.Add(1)
	b := l.e.db.NewBatch()
	defer b.Close()
	key := logKey(l.gid, 0)
	var val []byte
	lo, hi := entries[0].Index, entries[0].Index
	for _, entry := range entries {
		binary.BigEndian.PutUint64(key[5:], entry.Index)
		val = appendLog(val[:0], entry)
		if err := b.Set(key, val, nil); err != nil { // Set copies key and val
			return fmt.Errorf("group %d: store log entry %d: %w", l.gid, entry.Index, err)
		}
		lo, hi = min(lo, entry.Index), max(hi, entry.Index)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("group %d: store log entries %d-%d: %w", l.gid, lo, hi, err)
	}
	l.widen(lo, hi)
	return nil
}

// DeleteRange deletes the entries lo to hi inclusive in one synced batch.
// Raft uses it to drop a compacted prefix and to truncate a conflicting
// suffix.
func (l *Log) DeleteRange(lo, hi uint64) error {
	if lo > hi {
		return nil
	}
	l.writes.Add(1)
	defer l.writes.Add(1)
	b := l.e.db.NewBatch()
	defer b.Close()
	start, end := l.span(lo, hi)
	if err := b.DeleteRange(start, end, nil); err != nil {
		return fmt.Errorf("group %d: delete log entries %d-%d: %w", l.gid, lo, hi, err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("group %d: delete log entries %d-%d: %w", l.gid, lo, hi, err)
	}
	l.shrink(lo, hi)
	return nil
}

// span is the key range of entries lo to hi inclusive.
func (l *Log) span(lo, hi uint64) (start, end []byte) {
	end = prefixEnd(groupPrefix(kindLog, l.gid)) // hi+1 would overflow
	if hi < math.MaxUint64 {
		end = logKey(l.gid, hi+1)
	}
	return logKey(l.gid, lo), end
}

// shrink takes the deletion of entries lo to hi into the cached bounds. Raft
// deletes a prefix or a suffix; the bounds are worked out, not read back, so
// that a damaged block among the deleted entries is never read.
func (l *Log) shrink(lo, hi uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.last == 0 || hi < l.first || lo > l.last:
	case lo <= l.first && hi >= l.last:
		l.first, l.last = 0, 0
	case lo <= l.first:
		l.first = hi + 1
	case hi >= l.last:
		l.last = lo - 1
	}
}

// Set stores a stable-store key, synced.
func (l *Log) Set(key, val []byte) error {
	if err := l.e.db.Set(stableKey(l.gid, key), val, pebble.Sync); err != nil {
		return fmt.Errorf("group %d: set %q: %w", l.gid, key, err)
	}
	return nil
}

// Get returns the value of a stable-store key, or ErrKeyNotFound itself
// (unwrapped, as raft expects) when it is missing.
func (l *Log) Get(key []byte) ([]byte, error) {
	v, closer, err := l.e.db.Get(stableKey(l.gid, key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrKeyNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("group %d: get %q: %w", l.gid, key, err)
	}
	defer closer.Close()
	return append([]byte{}, v...), nil
}

// SetUint64 stores v under key as 8 big-endian bytes, as raft-boltdb does.
func (l *Log) SetUint64(key []byte, v uint64) error {
	return l.Set(key, binary.BigEndian.AppendUint64(nil, v))
}

// GetUint64 returns the value SetUint64 stored under key, or 0 and
// ErrKeyNotFound when it is missing.
func (l *Log) GetUint64(key []byte) (uint64, error) {
	v, err := l.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("group %d: value of %q has %d bytes, not 8", l.gid, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// Imported tells whether Import has completed for this group.
func (l *Log) Imported() (bool, error) {
	_, closer, err := l.e.db.Get(groupPrefix(kindMark, l.gid))
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("group %d: read import mark: %w", l.gid, err)
	}
	closer.Close()
	return true, nil
}

// Import replaces everything the group holds with every entry of src and
// the raft keys CurrentTerm, LastVoteTerm and LastVoteCand of stable (those
// present), and sets the import mark, all in one synced batch: after a crash
// either the whole import is there or none of it. It moves a group from its
// old raft-boltdb file into the engine; raft must not be running on l.
func (l *Log) Import(src raft.LogStore, stable raft.StableStore) error {
	b := l.e.db.NewBatch()
	defer b.Close()
	for _, kind := range []byte{kindLog, kindStable} {
		p := groupPrefix(kind, l.gid)
		if err := b.DeleteRange(p, prefixEnd(p), nil); err != nil {
			return fmt.Errorf("group %d: import: %w", l.gid, err)
		}
	}

	first, err := src.FirstIndex()
	if err != nil {
		return fmt.Errorf("group %d: import: first index: %w", l.gid, err)
	}
	last, err := src.LastIndex()
	if err != nil {
		return fmt.Errorf("group %d: import: last index: %w", l.gid, err)
	}
	if first != 0 {
		for i := first; i <= last; i++ {
			var entry raft.Log // fresh: a decoder may keep fields it does not set
			if err := src.GetLog(i, &entry); err != nil {
				// Moved as damaged: the node reports it at this index, as it
				// would have before the move, and the same ways out apply.
				bad := []byte("unreadable in the log it was moved from: " + err.Error())
				if err := b.Set(logKey(l.gid, i), bad, nil); err != nil {
					return fmt.Errorf("group %d: import: %w", l.gid, err)
				}
				continue
			}
			if entry.Index != i {
				return fmt.Errorf("group %d: import: source returned entry %d for index %d", l.gid, entry.Index, i)
			}
			if err := b.Set(logKey(l.gid, i), EncodeLog(&entry), nil); err != nil {
				return fmt.Errorf("group %d: import: %w", l.gid, err)
			}
			if i == math.MaxUint64 {
				break
			}
		}
	}

	for _, key := range [][]byte{keyCurrentTerm, keyLastVoteTerm} {
		v, err := stable.GetUint64(key)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("group %d: import: %s: %w", l.gid, key, err)
		}
		if err := b.Set(stableKey(l.gid, key), binary.BigEndian.AppendUint64(nil, v), nil); err != nil {
			return fmt.Errorf("group %d: import: %w", l.gid, err)
		}
	}
	cand, err := stable.Get(keyLastVoteCand)
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("group %d: import: %s: %w", l.gid, keyLastVoteCand, err)
	}
	if err == nil {
		if err := b.Set(stableKey(l.gid, keyLastVoteCand), cand, nil); err != nil {
			return fmt.Errorf("group %d: import: %w", l.gid, err)
		}
	}

	if err := b.Set(groupPrefix(kindMark, l.gid), []byte{1}, nil); err != nil {
		return fmt.Errorf("group %d: import: %w", l.gid, err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("group %d: import: commit: %w", l.gid, err)
	}
	return l.loadBounds()
}

// isNotFound tells whether a StableStore error means a missing key. Raft
// itself tests the message, since each store has its own error value.
func isNotFound(err error) bool {
	return err != nil && err.Error() == ErrKeyNotFound.Error()
}

// Drop deletes everything the group holds (Engine.Drop).
func (l *Log) Drop() error { return l.e.Drop(l.gid) }

// Stored returns the raw stored value of entry index. It is a test hook.
func (l *Log) Stored(index uint64) ([]byte, error) {
	v, closer, err := l.e.db.Get(logKey(l.gid, index))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, raft.ErrLogNotFound
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return append([]byte{}, v...), nil
}

// Overwrite stores raw as the value of entry index, synced. It is a test
// hook to simulate damage.
func (l *Log) Overwrite(index uint64, raw []byte) error {
	l.writes.Add(1)
	defer l.writes.Add(1)
	if err := l.e.db.Set(logKey(l.gid, index), raw, pebble.Sync); err != nil {
		return err
	}
	l.widen(index, index)
	return nil
}

// widen takes entries lo to hi, just stored, into the cached bounds.
func (l *Log) widen(lo, hi uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.first == 0 || lo < l.first {
		l.first = lo
	}
	l.last = max(l.last, hi)
}

// loadBounds reads the first and last index of the group from the
// database into the cache.
func (l *Log) loadBounds() error {
	l.writes.Add(1) // after a Drop, Import or Rewrite: the read-ahead goes
	l.mu.Lock()
	defer l.mu.Unlock()
	p := groupPrefix(kindLog, l.gid)
	it, err := l.e.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return fmt.Errorf("group %d: read log bounds: %w", l.gid, err)
	}
	l.first, l.last, l.broken = 0, 0, nil
	if it.First() {
		l.first = indexOf(it.Key())
		if it.Last() {
			l.last = indexOf(it.Key())
		}
	}
	if err := it.Close(); err != nil {
		l.first, l.last = 0, 0
		if pebble.IsCorruptionError(err) {
			l.broken = fmt.Errorf("group %d: read log bounds: %w: %s", l.gid, ErrDamaged, firstLine(err))
			return l.broken
		}
		return fmt.Errorf("group %d: read log bounds: %s", l.gid, firstLine(err))
	}
	return nil
}

// indexOf returns the index in a log key (0 for a key too short to be one).
func indexOf(key []byte) uint64 {
	if len(key) != 13 {
		return 0
	}
	return binary.BigEndian.Uint64(key[5:])
}

// firstLine is the first line of err's message: Pebble's errors carry
// details on the lines after it.
func firstLine(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}

// Scan reads entries lo to hi in order with one iterator and calls fn for
// each index: with the entry, or with raft.ErrLogNotFound for a missing one,
// or an error wrapping ErrDamaged for one that does not decode. Once the
// iterator fails (a damaged block), the rest are read one by one, so that
// each index still gets its own answer.
func (l *Log) Scan(lo, hi uint64, fn func(index uint64, entry *raft.Log, err error)) {
	if lo == 0 || lo > hi {
		return
	}
	start, end := l.span(lo, hi)
	next := lo
	it, err := l.e.db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err == nil {
		for ok := it.First(); ok && next <= hi; ok = it.Next() {
			idx := indexOf(it.Key())
			for ; next < idx && next <= hi; next++ {
				fn(next, nil, raft.ErrLogNotFound)
			}
			if idx != next {
				continue
			}
			v, verr := it.ValueAndErr()
			if verr != nil {
				break
			}
			var entry raft.Log
			if derr := DecodeLog(idx, v, &entry); derr != nil {
				fn(idx, nil, fmt.Errorf("group %d: %w", l.gid, derr))
			} else {
				fn(idx, &entry, nil)
			}
			next++
		}
		if it.Error() == nil {
			for ; next <= hi; next++ {
				fn(next, nil, raft.ErrLogNotFound)
			}
		}
		it.Close()
	}
	for ; next <= hi; next++ {
		var entry raft.Log
		if err := l.GetLog(next, &entry); err != nil {
			fn(next, nil, err)
		} else {
			fn(next, &entry, nil)
		}
	}
}
