package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/logengine"
)

// What is on disk, and how it fails. The log engine checksums its blocks and
// each entry (internal/logengine); before it, bbolt checksummed only its meta
// pages, and a flipped bit in a log entry reached the state machine as
// another write. Three guards stand between the disk and raft:
//
//   - checkLog reads every entry before raft does, at start: each must be there,
//     at its index, and decode (version 2 entries carry a CRC-32C). Damage the
//     newest snapshot covers is dropped; damage after it stops the start with
//     a *LogDamage that names the index and the ways out.
//   - guardedLogs keeps the log after the older of the two retained snapshots
//     when raft compacts, so that if the newest snapshot turns out damaged raft
//     can restore the older one and replay what followed it.
//   - guardedSnaps never offers raft an older snapshot whose following log is
//     gone: restoring it would lose writes silently, and replaying the missing
//     log is raft's "log not found" panic.
//   - verifiedStore checks the checksum of every command entry read back from
//     disk while the node runs (entries in the log cache were never on disk).
//     Raft reads the disk mostly to send a lagging follower old entries; a
//     damaged one is reported as missing, which makes raft send a snapshot
//     instead, and the node takes a fresh snapshot so that one covers it.
//     (Were the apply loop ever to read a damaged entry from disk, raft would
//     panic on the missing entry; it reads entries the cache still holds.)

// LogDamage is a log that holds an entry it cannot read, after the newest
// snapshot: the node must not start on it. It says what recovery loses.
type LogDamage struct {
	DataDir string
	Index   uint64 // the first damaged entry; 0 when the log's bounds could not be read

	First, Last uint64 // the log's range
	Reason      string
	// After is what truncating the log at Index loses: entries Index..Last and
	// the writes in those of them that still decode (Unreadable did not).
	Entries, Writes, Unreadable int
	// SoleVoter: the last configuration the node holds has it as its only
	// voter, so there are no peers to recover from.
	SoleVoter bool
}

func (d *LogDamage) Error() string {
	var b strings.Builder
	if d.Index == 0 {
		// The bounds of the log could not be read: no truncation is possible.
		fmt.Fprintf(&b, "corrupt log in %s: %s\n", d.DataDir, d.Reason)
		b.WriteString("The node has not started, so nothing was lost yet. Ways out:\n")
		fmt.Fprintf(&b, "  - rejoin from the peers (nothing a majority acknowledged is lost): rookery recover --data-dir %s,\n"+
			"    then start the node as before; it leaves the configuration and rejoins with a snapshot from the leader\n", d.DataDir)
		b.WriteString("  - restore a backup: rookery snapshot restore (see README, Backups)")
		return b.String()
	}
	fmt.Fprintf(&b, "corrupt log entry at index %d in %s (log %d..%d): %s\n", d.Index, d.DataDir, d.First, d.Last, d.Reason)
	b.WriteString("The node has not started, so nothing was lost yet. Ways out:\n")
	if !d.SoleVoter {
		fmt.Fprintf(&b, "  - rejoin from the peers (nothing a majority acknowledged is lost): rookery recover --data-dir %s,\n"+
			"    then start the node as before; it leaves the configuration and rejoins with a snapshot from the leader\n", d.DataDir)
	}
	b.WriteString("  - restore a backup: rookery snapshot restore (see README, Backups)\n")
	fmt.Fprintf(&b, "  - truncate the log at %d: rookery recover --data-dir %s --truncate-at %d\n"+
		"    this loses entries %d..%d: %d entries holding %d writes", d.Index, d.DataDir, d.Index, d.Index, d.Last, d.Entries, d.Writes)
	if d.Unreadable > 0 {
		fmt.Fprintf(&b, " (and %s too damaged to count)", plural(d.Unreadable, "entry", "entries"))
	}
	if !d.SoleVoter {
		b.WriteString("; on a node with peers, prefer rejoining: a truncated voter may vote away writes it acknowledged")
	}
	return b.String()
}

// logScan is what checkLog found.
type logScan struct {
	first, last uint64
	damaged     []uint64 // indexes of unreadable entries, ascending
	reasons     map[uint64]string
	// counted from the first damaged entry on
	entries, writes, unreadable int
	soleVoter                   bool
	lastConf                    raft.Configuration
	lastConfIndex               uint64
}

// scanLog reads every entry of logs.
func scanLog(logs raft.LogStore, self string) (*logScan, error) {
	first, err := logs.FirstIndex()
	if err != nil {
		return nil, fmt.Errorf("read log store: %w", err)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return nil, fmt.Errorf("read log store: %w", err)
	}
	sc := &logScan{first: first, last: last, reasons: map[uint64]string{}}
	if last == 0 {
		return sc, nil
	}
	readEntries(logs, first, last, func(i uint64, l *raft.Log, err error) {
		why, writes := checkEntry(i, l, err, sc)
		if why != "" {
			sc.damaged = append(sc.damaged, i)
			sc.reasons[i] = why
		}
		if len(sc.damaged) > 0 {
			sc.entries++
			if why != "" {
				sc.unreadable++
			}
			sc.writes += writes
		}
	})
	sc.soleVoter = len(sc.lastConf.Servers) == 1 && string(sc.lastConf.Servers[0].ID) == self
	return sc, nil
}

// readEntries reads entries first..last in order, with one iterator when
// the store can (the log engine: a point read per entry took seconds for a
// long log), else one GetLog each.
func readEntries(logs raft.LogStore, first, last uint64, fn func(i uint64, l *raft.Log, err error)) {
	if s, ok := logs.(interface {
		Scan(lo, hi uint64, fn func(uint64, *raft.Log, error))
	}); ok {
		s.Scan(first, last, fn)
		return
	}
	for i := first; i <= last; i++ {
		var l raft.Log
		err := logs.GetLog(i, &l)
		fn(i, &l, err)
	}
}

// checkEntry looks at entry i as read (l, err): why it is damaged ("" if it
// is not) and how many writes it holds.
func checkEntry(i uint64, l *raft.Log, err error, sc *logScan) (why string, writes int) {
	if err != nil {
		return "unreadable: " + err.Error(), 0
	}
	if l.Index != i {
		return fmt.Sprintf("stored under index %d but says it is %d", i, l.Index), 0
	}
	switch l.Type {
	case raft.LogCommand:
		_, cmds, err := fsm.DecodeEntry(l.Data)
		if errors.Is(err, fsm.ErrNewerFormat) {
			// Intact, from a newer build (a rollback): not damage. Applying it
			// halts with "needs a newer rookery", which says what to do.
			return "", 0
		}
		if err != nil {
			return err.Error(), 0
		}
		return "", len(cmds)
	case raft.LogConfiguration:
		c, err := decodeConfiguration(l.Data)
		if err != nil {
			return err.Error(), 0
		}
		sc.lastConf, sc.lastConfIndex = c, i
	}
	return "", 0
}

// decodeConfiguration is raft.DecodeConfiguration, which panics on bytes it
// cannot decode; damage is an error here.
func decodeConfiguration(b []byte) (c raft.Configuration, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("undecodable configuration entry: %v", r)
		}
	}()
	return raft.DecodeConfiguration(b), nil
}

// checkLog verifies the log before raft reads it. Damaged entries that the
// newest snapshot covers are deleted (raft would only ever send them to a
// lagging follower); damage after it is a *LogDamage.
func checkLog(logs raft.LogStore, snaps raft.SnapshotStore, dataDir, self string, log *slog.Logger) error {
	sc, err := scanLog(logs, self)
	if errors.Is(err, logengine.ErrDamaged) {
		return &LogDamage{DataDir: dataDir, Reason: err.Error()}
	}
	if err != nil || len(sc.damaged) == 0 {
		return err
	}
	var newest uint64
	if metas, err := snaps.List(); err == nil && len(metas) > 0 {
		newest = metas[0].Index
		if len(sc.lastConf.Servers) == 0 { // no configuration entry left in the log
			c := metas[0].Configuration
			sc.soleVoter = len(c.Servers) == 1 && string(c.Servers[0].ID) == self
		}
	}
	worst := sc.damaged[len(sc.damaged)-1]
	if worst <= newest {
		log.Warn("damaged log entries are covered by the newest snapshot; dropping them",
			"damaged", len(sc.damaged), "first_damaged", sc.damaged[0], "reason", sc.reasons[sc.damaged[0]], "snapshot", newest)
		if err := logs.DeleteRange(sc.first, worst); err != nil {
			return fmt.Errorf("drop damaged log entries %d..%d: %w", sc.first, worst, err)
		}
		return nil
	}
	at := sc.damaged[0]
	if at <= newest {
		// Only the damage past the snapshot counts; recount from there.
		for _, d := range sc.damaged {
			if d > newest {
				at = d
				break
			}
		}
	}
	d := &LogDamage{DataDir: dataDir, Index: at, First: sc.first, Last: sc.last, Reason: sc.reasons[at], SoleVoter: sc.soleVoter}
	d.Entries, d.Writes, d.Unreadable = countFrom(logs, at, sc.last)
	return d
}

// countFrom counts the entries, writes and unreadable entries of from..last.
func countFrom(logs raft.LogStore, from, last uint64) (entries, writes, unreadable int) {
	var sc logScan
	readEntries(logs, from, last, func(i uint64, l *raft.Log, err error) {
		entries++
		why, w := checkEntry(i, l, err, &sc)
		if why != "" {
			unreadable++
		}
		writes += w
	})
	return entries, writes, unreadable
}

// guardedLogs keeps the log after the older retained snapshot (see above).
type guardedLogs struct {
	raft.LogStore
	snaps raft.SnapshotStore
}

// DeleteRange passes suffix truncation (a follower dropping entries that
// conflict with the leader's, which always runs to the last index) through
// untouched, and clamps compaction of a prefix to the older snapshot.
func (g guardedLogs) DeleteRange(lo, hi uint64) error {
	last, err := g.LogStore.LastIndex()
	if err != nil {
		return err
	}
	if hi < last {
		keep := uint64(0)
		if metas, err := g.snaps.List(); err == nil && len(metas) >= 2 {
			keep = metas[1].Index
		}
		if hi = min(hi, keep); hi < lo {
			return nil
		}
	}
	return g.LogStore.DeleteRange(lo, hi)
}

// guardedSnaps offers raft the newest snapshot, and an older one only while
// the log still holds everything from just after it up to the newest.
type guardedSnaps struct {
	raft.SnapshotStore
	logs raft.LogStore
}

func (g guardedSnaps) List() ([]*raft.SnapshotMeta, error) {
	metas, err := g.SnapshotStore.List()
	if err != nil || len(metas) < 2 {
		return metas, err
	}
	first, err1 := g.logs.FirstIndex()
	last, err2 := g.logs.LastIndex()
	if err := errors.Join(err1, err2); err != nil {
		return metas[:1], nil
	}
	out := metas[:1]
	for _, m := range metas[1:] {
		if last > 0 && first <= m.Index+1 && last >= metas[0].Index {
			out = append(out, m)
		}
	}
	return out, nil
}

// verifiedStore is a log store that reports damaged command entries as
// missing (see above); onDamage hears of each.
type verifiedStore struct {
	raft.LogStore
	onDamage func(index uint64, err error)
}

func (v verifiedStore) GetLog(index uint64, l *raft.Log) error {
	if err := v.LogStore.GetLog(index, l); err != nil {
		return err
	}
	var bad error
	switch {
	case l.Index != index:
		bad = fmt.Errorf("stored under index %d but says it is %d", index, l.Index)
	case l.Type == raft.LogCommand:
		if _, _, err := fsm.DecodeEntry(l.Data); err != nil && !errors.Is(err, fsm.ErrNewerFormat) {
			bad = err // an entry of a newer build is intact: the FSM says what it needs
		}
	}
	if bad != nil {
		v.onDamage(index, bad)
		return raft.ErrLogNotFound
	}
	return nil
}

// plural is "1 entry" or "n entries".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
