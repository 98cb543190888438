// Package logengine keeps the Raft log and stable store (term and vote) of
// every Raft group on a node in one Pebble database.
//
// With one raft-boltdb file per group, every group pays its own fsync for
// each append. Here every group commits its own synced Pebble batch, and
// Pebble's commit pipeline folds the batches that arrive while a WAL sync is
// in flight into the next single WAL write and fsync. Groups that append at
// the same time therefore share their fsyncs.
//
// Keys (gid and index big-endian, so that keys sort by group, then index):
//
//	log entry    'l' | gid uint32 | index uint64  -> EncodeLog value
//	stable key   's' | gid uint32 | key bytes     -> value as given
//	import mark  'm' | gid uint32                 -> 1
//
// Open the Engine once per data directory, take a Log per group with Group,
// and hand that Log to raft as both its LogStore and its StableStore.
package logengine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

const (
	cacheBytes    = 8 << 20 // Pebble block cache
	memTableBytes = 4 << 20 // one Pebble memtable
	memTables     = 2       // memtables allowed before writes stall
)

// MemoryBytes is the most memory the engine's block cache and memtables take;
// count it against the node's memory budget.
const MemoryBytes int64 = cacheBytes + memTables*memTableBytes

// ErrDamaged is wrapped by the errors of GetLog and DecodeLog when a stored
// value fails its CRC or does not decode.
var ErrDamaged = errors.New("damaged log entry")

// ErrLocked is wrapped by the error of Open when another Engine, in this
// process or another, already has the directory open.
var ErrLocked = errors.New("another process holds the log engine")

// Key kinds: the first byte of every key.
const (
	kindLog    = 'l'
	kindStable = 's'
	kindMark   = 'm'
)

// Engine is one Pebble database holding the logs of many Raft groups.
type Engine struct {
	db     *pebble.DB
	dir    string
	logger *slog.Logger

	mu     sync.Mutex
	closed bool
	groups map[uint32]*Log // handles handed out by Group
	mem    uint64          // MemoryUse's last reading, taken at memAt
	memAt  time.Time
}

// Open opens (creating it if missing) the log engine in dir. Pebble's own
// messages go to logger: informational ones at debug level. A nil logger
// discards them.
func Open(dir string, logger *slog.Logger) (*Engine, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	db, err := openDB(dir, logger)
	if err != nil {
		return nil, err
	}
	return &Engine{db: db, dir: dir, logger: logger, groups: make(map[uint32]*Log)}, nil
}

// openDB opens the Pebble database in dir with the engine's options.
func openDB(dir string, logger *slog.Logger) (*pebble.DB, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open log engine %s: %w", dir, err)
	}
	cache := pebble.NewCache(cacheBytes)
	defer cache.Unref() // the DB holds its own reference
	opts := &pebble.Options{
		FormatMajorVersion:          pebble.FormatNewest,
		Cache:                       cache,
		MemTableSize:                memTableBytes,
		MemTableStopWritesThreshold: memTables,
		MaxOpenFiles:                64,
		Logger:                      pebbleLogger{logger},
	}
	// Damage in a table fails the read of its block, which the node reports
	// as a damaged entry and recovers from (Pebble's default is to halt).
	opts.EventListener = &pebble.EventListener{
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			logger.Error("damaged log engine file: stop the node and run rookery recover", "component", "pebble",
				"path", info.Path, "err", firstLine(info.Details))
		},
		BackgroundError: func(err error) {
			logger.Error("log engine background error", "component", "pebble", "err", firstLine(err))
		},
	}
	// Entries live until the next snapshot compacts them away: compressing
	// them costs CPU on every flush and buys little disk.
	opts.ApplyCompressionSettings(func() pebble.DBCompressionSettings { return pebble.DBCompressionNone })
	db, err := pebble.Open(dir, opts)
	if err != nil {
		if isLockError(err) {
			return nil, fmt.Errorf("open log engine %s: %w (is a node already running on this data directory?): %w", dir, ErrLocked, err)
		}
		return nil, fmt.Errorf("open log engine %s: %w", dir, err)
	}
	return db, nil
}

// isLockError tells whether Pebble failed to take the directory's LOCK file:
// fcntl reports EAGAIN when another process holds it, and Pebble refuses by
// itself when this process already does.
func isLockError(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || strings.Contains(err.Error(), "lock held by current process")
}

// Close flushes the memtables and closes the database. Logs taken from the
// Engine must not be used afterwards. Closing twice is harmless.
//
// The flush leaves the write-ahead log empty after a clean stop: Pebble
// reads a damaged record at the end of its newest WAL as a write torn by a
// crash and drops it with what follows, while damage in a table fails the
// read of its block, which the node reports (and recovers from a peer).
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	return errors.Join(e.db.Flush(), e.db.Close())
}

// Group returns the Log of group gid, reading its first and last index. The
// same handle is returned for the same gid, so that its cached bounds stay
// right.
func (e *Engine) Group(gid uint32) (*Log, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errors.New("log engine is closed")
	}
	if l, ok := e.groups[gid]; ok {
		return l, nil
	}
	l := &Log{e: e, gid: gid}
	if err := l.loadBounds(); err != nil && !errors.Is(err, ErrDamaged) {
		return nil, err
	}
	// A log whose first or last entry is in a damaged block has no bounds:
	// its FirstIndex and LastIndex say so, and only Drop or Rewrite mend it.
	e.groups[gid] = l
	return l, nil
}

// Drop deletes every key of group gid (log, stable store and import mark)
// in one synced batch. The group's raft must be stopped first; its Log is
// left empty and may be used again. (To drop a damaged group, Rewrite:
// a compaction would read the damaged block under the deletion, and fail.)
func (e *Engine) Drop(gid uint32) error {
	b := e.db.NewBatch()
	defer b.Close()
	for _, kind := range []byte{kindLog, kindStable, kindMark} {
		p := groupPrefix(kind, gid)
		if err := b.DeleteRange(p, prefixEnd(p), nil); err != nil {
			return fmt.Errorf("drop group %d: %w", gid, err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("drop group %d: %w", gid, err)
	}
	e.mu.Lock()
	l := e.groups[gid]
	e.mu.Unlock()
	if l != nil {
		return l.loadBounds()
	}
	return nil
}

// Groups returns the ids of the groups that hold any key, ascending.
func (e *Engine) Groups() ([]uint32, error) {
	seen := make(map[uint32]bool)
	for _, kind := range []byte{kindLog, kindStable, kindMark} {
		it, err := e.db.NewIter(&pebble.IterOptions{
			LowerBound: []byte{kind},
			UpperBound: []byte{kind + 1},
		})
		if err != nil {
			return nil, fmt.Errorf("list groups: %w", err)
		}
		// Visit one key per group: after each, skip to the next group.
		for ok := it.First(); ok; ok = it.SeekGE(prefixEnd(it.Key()[:5])) {
			if len(it.Key()) < 5 {
				break // not a key this package writes; cannot happen
			}
			seen[binary.BigEndian.Uint32(it.Key()[1:5])] = true
		}
		if err := it.Close(); err != nil {
			return nil, fmt.Errorf("list groups: %w", err)
		}
	}
	ids := make([]uint32, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

// groupPrefix is the 5-byte prefix of every key of one kind of group gid.
func groupPrefix(kind byte, gid uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{kind}, gid)
}

// logKey is the key of entry index of group gid.
func logKey(gid uint32, index uint64) []byte {
	return binary.BigEndian.AppendUint64(groupPrefix(kindLog, gid), index)
}

// stableKey is the key of stable-store key k of group gid.
func stableKey(gid uint32, k []byte) []byte {
	return append(groupPrefix(kindStable, gid), k...)
}

// prefixEnd returns the smallest key greater than every key starting with p.
// The kind bytes are never 0xff, so a result always exists.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	panic(fmt.Sprintf("logengine: no key follows prefix %x", p))
}

// pebbleLogger passes Pebble's messages on to slog.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf logs and panics: Pebble calls it for unrecoverable states and
// expects it not to return.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "component", "pebble")
	panic("pebble: " + msg)
}

// MemoryUse is what the engine holds in memory now: its memtables and the
// block cache's contents, at most MemoryBytes plus a memtable being
// flushed. The figure is read at most every 100 ms.
func (e *Engine) MemoryUse() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return 0
	}
	if now := time.Now(); now.Sub(e.memAt) > 100*time.Millisecond {
		m := e.db.Metrics()
		e.mem = m.MemTable.Size + uint64(max(m.BlockCache.Size, 0))
		e.memAt = now
	}
	return e.mem
}
