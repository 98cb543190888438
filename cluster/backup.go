package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/errdetail"
	"github.com/rookerydb/rookery/internal/wire"
)

// Backups, as Consul's `consul snapshot save/restore` makes them.
//
// A backup is one file that describes itself:
//
//	"RKYBACK\x00"   magic
//	uint16          format version (1), little endian as the rest
//	uint32          length n of the header
//	n bytes         the header, JSON (BackupMeta): the Raft snapshot's index,
//	                term, version and configuration, who took it and when, and
//	                the length of the state machine stream that follows
//	uint32          CRC-32C of everything above
//	state           the state machine's own snapshot stream (fsm/snapshot.go),
//	                exactly as raft stores it, every section checksummed
//	32 bytes        SHA-256 of everything above
//
// The header has its own checksum so that a damaged length is caught before
// it is trusted. The trailing SHA-256 covers the whole file, so no byte goes
// unchecked even where the stream's CRCs are weak (a flipped pair of bits),
// and a truncated or extended file is told apart from a damaged one.
// VerifyBackup checks all of it in one pass with the state machine's own
// reader (fsm.VerifySnapshot), holding one filter at a time: a file it accepts
// is one the state machine restores, which matters because raft panics if a
// restore it has started fails.
//
// Taking one (OpenBackup): on the leader, a Barrier first, so that the state
// machine holds every write committed before the request, then raft's user
// snapshot (raft.Snapshot, whose Open gives the stored snapshot and its meta).
// A follower answers ErrNotLeader unless the caller accepts its own, possibly
// older, state (stale): the leader's is the fresh one, and transport sends the
// client there.
//
// Restoring one (RestoreBackup) happens on the leader only. The upload is
// streamed to a temporary file in the data directory, bounded by the node's
// memory cap (maxBackupBytes), verified whole, checked against --max-memory,
// and only then handed to raft.Restore. That installs it as a new snapshot at
// an index past both the backup's and the log's, leaving a hole in the log, so
// every follower and every later joiner installs it too; raft keeps the
// cluster's current configuration, so a backup restores into a fresh cluster
// of other nodes. The restored state machine keeps the backup's sessions, so a
// client retrying across the restore is still answered at most once. Writes in
// flight during a restore fail. One restore runs at a time per data directory.

const (
	backupMagic   = "RKYBACK\x00"
	backupVersion = 1
	// maxBackupHeader bounds the header read from a file; a configuration of
	// hundreds of servers takes a few kilobytes.
	maxBackupHeader = 1 << 20
	// backupPrefix is the magic, version and header length.
	backupPrefix = len(backupMagic) + 2 + 4
	// fsmMagic opens a bare state machine stream (a raft state.bin).
	fsmMagic = "RKYSNAP\x00"
)

// Errors of backups and restores; each leaves the cluster as it was.
var (
	// ErrBadBackup: the file is damaged, truncated or not a backup.
	ErrBadBackup = errors.New("bad backup")
	// ErrBackupTooLarge: the upload is larger than this node takes.
	ErrBackupTooLarge = errors.New("backup too large")
	// ErrRestoreInProgress: another restore is running on this node.
	ErrRestoreInProgress = errors.New("a restore is already in progress")
	// ErrNothingToSnapshot: the node has applied nothing yet.
	ErrNothingToSnapshot = errors.New("nothing to snapshot yet")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BackupServer is one server of the Raft configuration a backup was taken in.
type BackupServer struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"` // Voter, Nonvoter or Staging
}

// BackupMeta is a backup file's header.
type BackupMeta struct {
	// Index and Term are those of the Raft snapshot: the last log entry it
	// reflects.
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// RaftSnapshotVersion is raft's snapshot format version.
	RaftSnapshotVersion int `json:"raft_snapshot_version"`
	// Configuration is the cluster's Raft configuration when it was taken; a
	// restore keeps the configuration of the cluster it restores into.
	Configuration      []BackupServer `json:"configuration"`
	ConfigurationIndex uint64         `json:"configuration_index"`
	// StateBytes is the length of the state machine stream.
	StateBytes int64 `json:"state_bytes"`
	// Node took the snapshot, at Created.
	Node    string    `json:"node"`
	Created time.Time `json:"created"`
}

// BackupInfo is what VerifyBackup found in a backup.
type BackupInfo struct {
	Meta      BackupMeta
	State     *fsm.SnapshotSummary
	FileBytes int64
}

// Backup is a snapshot opened as a backup file, ready to be written out once.
type Backup struct {
	meta   BackupMeta
	header []byte
	state  io.ReadCloser
}

// NewBackup makes a backup of the state machine stream state, whose length
// meta.StateBytes must give. The Backup owns state and closes it.
func NewBackup(meta BackupMeta, state io.ReadCloser) (*Backup, error) {
	js, err := json.Marshal(meta)
	if err != nil {
		return nil, fmt.Errorf("backup header: %w", err)
	}
	h := []byte(backupMagic)
	h = binary.LittleEndian.AppendUint16(h, backupVersion)
	h = binary.LittleEndian.AppendUint32(h, uint32(len(js)))
	h = append(h, js...)
	h = binary.LittleEndian.AppendUint32(h, crc32.Checksum(h, castagnoli))
	return &Backup{meta: meta, header: h, state: state}, nil
}

// Meta returns the backup's header.
func (b *Backup) Meta() BackupMeta { return b.meta }

// Size is the length of the whole file.
func (b *Backup) Size() int64 { return int64(len(b.header)) + b.meta.StateBytes + sha256.Size }

// WriteTo writes the whole file to w.
func (b *Backup) WriteTo(w io.Writer) (int64, error) {
	sum := sha256.New()
	cw := &wire.CountWriter{W: io.MultiWriter(w, sum)}
	if _, err := cw.Write(b.header); err != nil {
		return cw.N, err
	}
	if _, err := io.CopyN(cw, b.state, b.meta.StateBytes); err != nil {
		return cw.N, fmt.Errorf("copy snapshot: %w", err)
	}
	n, err := w.Write(sum.Sum(nil))
	return cw.N + int64(n), err
}

// Close releases the snapshot.
func (b *Backup) Close() error { return b.state.Close() }

// VerifyBackup reads a whole backup file from r and checks every part of it:
// the header's checksum, the state machine stream section by section, and the
// checksum of the whole file. Errors wrap ErrBadBackup and say what is
// damaged.
func VerifyBackup(r io.Reader) (*BackupInfo, error) {
	cr := &wire.CountReader{R: r}
	sum := sha256.New()
	tr := io.TeeReader(cr, sum)
	meta, err := readBackupHeader(tr)
	if err != nil {
		return nil, err
	}
	want := cr.N + meta.StateBytes + sha256.Size
	truncated := func() error {
		return fmt.Errorf("%w: truncated: the file ends after %d bytes, its header announces %d", ErrBadBackup, cr.N, want)
	}
	state, err := fsm.VerifySnapshot(io.LimitReader(tr, meta.StateBytes))
	if err != nil {
		if cr.EOF {
			return nil, truncated()
		}
		return nil, fmt.Errorf("%w: the state machine snapshot is damaged: %s", ErrBadBackup, errdetail.Of(err))
	}
	var tail [sha256.Size]byte
	if _, err := io.ReadFull(cr, tail[:]); err != nil {
		if cr.EOF {
			return nil, truncated()
		}
		return nil, fmt.Errorf("%w: read checksum: %v", ErrBadBackup, err)
	}
	if !bytes.Equal(tail[:], sum.Sum(nil)) {
		return nil, fmt.Errorf("%w: file checksum mismatch: the file is damaged", ErrBadBackup)
	}
	if n, _ := io.ReadFull(cr, make([]byte, 1)); n > 0 {
		return nil, fmt.Errorf("%w: data after the end of the backup (%d bytes expected)", ErrBadBackup, want)
	}
	return &BackupInfo{Meta: meta, State: state, FileBytes: cr.N}, nil
}

// readBackupHeader reads and checks the header.
func readBackupHeader(r io.Reader) (BackupMeta, error) {
	var meta BackupMeta
	bad := func(format string, args ...any) (BackupMeta, error) {
		return meta, fmt.Errorf("%w: %s", ErrBadBackup, fmt.Sprintf(format, args...))
	}
	pre := make([]byte, backupPrefix)
	if _, err := io.ReadFull(r, pre); err != nil {
		return bad("not a Rookery backup: the file is too short")
	}
	switch {
	case string(pre[:len(fsmMagic)]) == fsmMagic:
		return bad("this is a bare state machine snapshot (a raft state.bin), not a backup file; make one with rookery snapshot save")
	case string(pre[:len(backupMagic)]) != backupMagic:
		return bad("not a Rookery backup (or its first bytes are damaged)")
	}
	n := binary.LittleEndian.Uint32(pre[backupPrefix-4:])
	if n > maxBackupHeader {
		return bad("header length %d: the header is damaged", n)
	}
	rest := make([]byte, n+4)
	if _, err := io.ReadFull(r, rest); err != nil {
		return bad("truncated in the header")
	}
	all := append(pre, rest[:n]...)
	if crc32.Checksum(all, castagnoli) != binary.LittleEndian.Uint32(rest[n:]) {
		return bad("header checksum mismatch: the header is damaged")
	}
	// The version is checked after the checksum, so that a damaged version
	// reads as damage, not as a file from the future.
	if v := binary.LittleEndian.Uint16(pre[len(backupMagic):]); v != backupVersion {
		return bad("backup format version %d, this build reads %d", v, backupVersion)
	}
	if err := json.Unmarshal(rest[:n], &meta); err != nil {
		return bad("header: %v", err)
	}
	switch v := raft.SnapshotVersion(meta.RaftSnapshotVersion); {
	case meta.StateBytes <= 0 || meta.Index == 0:
		return bad("header: no snapshot (index %d, %d bytes)", meta.Index, meta.StateBytes)
	case v < raft.SnapshotVersionMin || v > raft.SnapshotVersionMax:
		return bad("raft snapshot version %d, this build reads %d to %d", v, raft.SnapshotVersionMin, raft.SnapshotVersionMax)
	}
	return meta, nil
}

// backupServers turns a Raft configuration into a header's.
func backupServers(c raft.Configuration) []BackupServer {
	out := make([]BackupServer, len(c.Servers))
	for i, s := range c.Servers {
		out[i] = BackupServer{ID: string(s.ID), Address: string(s.Address), Suffrage: s.Suffrage.String()}
	}
	return out
}

// Snapshots, backups and restores of a Node.

const (
	// restoreEnqueueTimeout bounds how long raft.Restore waits for the leader
	// loop to take the restore, and then its no-op entry. The restore itself
	// and the followers' installs take as long as the state's size needs.
	restoreEnqueueTimeout = 30 * time.Second
	// restoreTempPattern names the temporary file an upload is streamed to.
	restoreTempPattern = "restore-*.tmp"
	// backupNoCap bounds an upload on a node without a memory cap.
	backupNoCap = 64 << 30
)

// backupHeadroom is what an upload may hold beyond the filters: the session
// table, the headers. A variable so that tests can make it small.
var backupHeadroom int64 = 1 << 30

// restoreLocks holds a *sync.Mutex per data directory: one restore at a time.
var restoreLocks sync.Map

// SnapshotInfo describes a Raft snapshot a node took.
type SnapshotInfo struct {
	ID    string
	Index uint64
	Term  uint64
	Size  int64
}

// Restored is what RestoreBackup installed.
type Restored struct {
	*BackupInfo
	// Index is the log index the restored state took in this cluster.
	Index uint64
}

// TakeSnapshot has raft snapshot this node's state now and compact its log, as
// it does by itself every --snapshot-threshold entries.
func (g *group) TakeSnapshot() (SnapshotInfo, error) {
	meta, rc, err := g.snapshotNow()
	if err != nil {
		return SnapshotInfo{}, err
	}
	rc.Close()
	return SnapshotInfo{ID: meta.ID, Index: meta.Index, Term: meta.Term, Size: meta.Size}, nil
}

// OpenBackup takes a snapshot and opens it as a backup file. On the leader it
// first commits a barrier, so that the backup holds every write acknowledged
// before the call; a follower answers ErrNotLeader unless stale, when it backs
// up its own state, which may miss the latest writes.
func (g *group) OpenBackup(ctx context.Context, stale bool) (*Backup, error) {
	if !stale {
		if !g.IsLeader() {
			return nil, ErrNotLeader
		}
		timeout := g.n.cfg.ApplyTimeout
		if dl, ok := ctx.Deadline(); ok {
			timeout = min(timeout, time.Until(dl))
		}
		if err := g.raft.Barrier(timeout).Error(); err != nil {
			return nil, translateReadErr(err)
		}
	}
	meta, rc, err := g.snapshotNow()
	if err != nil {
		return nil, err
	}
	b, err := NewBackup(BackupMeta{
		Index:               meta.Index,
		Term:                meta.Term,
		RaftSnapshotVersion: int(meta.Version),
		Configuration:       backupServers(meta.Configuration),
		ConfigurationIndex:  meta.ConfigurationIndex,
		StateBytes:          meta.Size,
		Node:                g.n.cfg.ID,
		Created:             time.Now().UTC(),
	}, rc)
	if err != nil {
		rc.Close()
		return nil, err
	}
	g.log.Info("backup opened", "index", meta.Index, "term", meta.Term, "bytes", b.Size(), "stale", stale)
	return b, nil
}

// snapshotNow takes a user snapshot and opens it; the store checks the
// file's checksum as it is read (snapstore.go).
func (g *group) snapshotNow() (*raft.SnapshotMeta, io.ReadCloser, error) {
	f := g.raft.Snapshot()
	if err := f.Error(); err != nil {
		switch {
		case errors.Is(err, raft.ErrNothingNewToSnapshot):
			return nil, nil, ErrNothingToSnapshot
		case errors.Is(err, raft.ErrRaftShutdown):
			return nil, nil, ErrShutdown
		}
		return nil, nil, fmt.Errorf("take snapshot: %w", err)
	}
	meta, rc, err := f.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("open snapshot: %w", err)
	}
	return meta, rc, nil
}

// RestoreBackup restores the cluster to the backup read from r, whose length
// is size (-1 if unknown). It runs on the leader only (ErrNotLeader
// elsewhere, before r is read), streams r to a temporary file in the data
// directory, verifies it whole and installs it through raft.Restore. A damaged
// or oversized backup changes nothing.
func (g *group) RestoreBackup(ctx context.Context, r io.Reader, size int64) (*Restored, error) {
	mu, _ := restoreLocks.LoadOrStore(g.n.cfg.DataDir, new(sync.Mutex))
	if !mu.(*sync.Mutex).TryLock() {
		return nil, ErrRestoreInProgress
	}
	defer mu.(*sync.Mutex).Unlock()
	if !g.IsLeader() {
		return nil, ErrNotLeader
	}
	limit := g.maxBackupBytes()
	if size > limit {
		return nil, fmt.Errorf("%w: %d bytes, this node takes at most %d", ErrBackupTooLarge, size, limit)
	}
	f, err := g.receiveBackup(ctx, r, limit)
	if err != nil {
		return nil, err
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	info, err := VerifyBackup(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return nil, err
	}
	// Every replica installs the backup in place of the group's state: it
	// must fit in the room each replica's node leaves the group (budget.go).
	if b := g.admitBatch(ctx, nil, 0).budget; b.cap > 0 && info.State.MemoryBytes > b.cap {
		return nil, fmt.Errorf("%w: the backup's filters take %d bytes, more than node %s leaves this shard under its --max-memory (%d, with its other shards)",
			ErrTooLarge, info.State.MemoryBytes, b.who, b.limit)
	}
	if _, err := f.Seek(info.FileBytes-info.Meta.StateBytes-sha256.Size, io.SeekStart); err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !g.IsLeader() {
		return nil, ErrNotLeader
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersion(info.Meta.RaftSnapshotVersion),
		Index: info.Meta.Index, Term: info.Meta.Term, Size: info.Meta.StateBytes}
	state := bufio.NewReaderSize(io.LimitReader(f, info.Meta.StateBytes), 1<<20)
	before := g.lastSnapshotIndex()
	if err := g.raft.Restore(meta, state, restoreEnqueueTimeout); err != nil {
		return nil, restoreErr(err, g.lastSnapshotIndex() != before)
	}
	idx := g.lastSnapshotIndex()
	g.log.Warn("restored a backup: the cluster's state is now the backup's", "index", idx,
		"backup_index", info.Meta.Index, "backup_term", info.Meta.Term, "backup_node", info.Meta.Node,
		"filters", len(info.State.Filters), "memory_bytes", info.State.MemoryBytes)
	return &Restored{BackupInfo: info, Index: idx}, nil
}

// receiveBackup streams r into a new temporary file in the data directory,
// refusing more than limit bytes, and returns the file. Files left by an
// earlier restore that did not finish (a crash) are removed first: the caller
// holds the data directory's restore lock, so nobody else is writing them.
func (g *group) receiveBackup(ctx context.Context, r io.Reader, limit int64) (*os.File, error) {
	if old, err := filepath.Glob(filepath.Join(g.n.cfg.DataDir, restoreTempPattern)); err == nil {
		for _, p := range old {
			os.Remove(p)
		}
	}
	f, err := os.CreateTemp(g.n.cfg.DataDir, restoreTempPattern)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	fail := func(err error) (*os.File, error) {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	got, err := io.CopyBuffer(f, io.LimitReader(r, limit+1), make([]byte, 1<<20))
	switch {
	case err != nil:
		return fail(fmt.Errorf("receive backup after %d bytes: %w", got, err))
	case got > limit:
		return fail(fmt.Errorf("%w: more than %d bytes, the most this node takes", ErrBackupTooLarge, limit))
	case ctx.Err() != nil:
		return fail(ctx.Err())
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fail(fmt.Errorf("restore: %w", err))
	}
	return f, nil
}

// maxBackupBytes bounds an upload, so that a caller cannot fill the disk: a
// filter's encoding is about its size in memory, so twice the memory cap and
// room for the session table is more than any backup this node could restore.
func (g *group) maxBackupBytes() int64 {
	if m := g.n.cfg.MaxMemory; m > 0 && m < 1<<60 {
		return 2*int64(m) + backupHeadroom
	}
	return backupNoCap
}

// lastSnapshotIndex is the index of raft's newest snapshot. A restore always
// moves it forward: raft installs the backup past the last index of its log.
func (g *group) lastSnapshotIndex() uint64 {
	idx, _ := strconv.ParseUint(g.raft.Stats()["last_snapshot_index"], 10, 64)
	return idx
}

// restoreErr translates raft.Restore's errors. raft's errors do not say which
// step failed, so moved (whether raft's newest snapshot changed meanwhile) is
// the witness: if it did not, nothing was restored; if it did, the restore
// took place here and what failed came after it (its no-op entry, the
// leadership), so whether the cluster keeps it is unknown. An automatic
// snapshot at the same moment also moves it, which can only turn a definite
// answer into "unknown", never the other way.
func restoreErr(err error, moved bool) error {
	switch {
	case moved:
		return fmt.Errorf("%w: restore: %v; check the cluster's state before restoring again", ErrIndeterminate, err)
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return ErrNotLeader
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrShutdown
	}
	return fmt.Errorf("restore: %w", err)
}
