package cluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// snapStore keeps raft's snapshots in a data directory, in the layout of
// raft's FileSnapshotStore (snapshots/<term>-<index>-<ms>/meta.json and
// state.bin), whose snapshots it reads as well. It is ours for speed: raft's
// store hashes every byte with CRC-64 on the writing goroutine, and reads a
// whole snapshot back to check it before handing it out; a 1 GB snapshot
// spent a second hashing and another verifying. Here the state is hashed with
// CRC-32C (in hardware) as it is written and checked as it is read, and the
// kernel is asked to start writing every 32 MiB (sync_file_range on Linux), so
// that dirty pages do not pile up until the final fsync and stall the log's
// own fsyncs behind them. The state machine's stream is checksummed section
// by section besides (fsm/snapshot.go).
type snapStore struct {
	dir    string
	retain int
	log    *slog.Logger
}

const (
	snapDir        = "snapshots"
	snapMetaFile   = "meta.json"
	snapStateFile  = "state.bin"
	snapTmpSuffix  = ".tmp"
	snapWriteChunk = 32 << 20 // bytes between writeback hints
)

// snapMeta is meta.json: raft's metadata and the state file's checksum.
type snapMeta struct {
	raft.SnapshotMeta
	// CRC is the CRC-64 (ECMA) of state.bin, of snapshots raft's own store wrote.
	CRC []byte `json:",omitempty"`
	// CRC32C is the CRC-32C of state.bin, of snapshots this store wrote.
	CRC32C *uint32 `json:",omitempty"`
}

func newSnapStore(dataDir string, retain int, log *slog.Logger) (*snapStore, error) {
	s := &snapStore{dir: filepath.Join(dataDir, snapDir), retain: retain, log: log}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("snapshot directory: %w", err)
	}
	// A snapshot that was being written when the process died is garbage.
	if ents, err := os.ReadDir(s.dir); err == nil {
		for _, e := range ents {
			if e.IsDir() && strings.HasSuffix(e.Name(), snapTmpSuffix) {
				os.RemoveAll(filepath.Join(s.dir, e.Name()))
			}
		}
	}
	return s, nil
}

// Create starts a snapshot.
func (s *snapStore) Create(version raft.SnapshotVersion, index, term uint64, conf raft.Configuration,
	confIndex uint64, _ raft.Transport) (raft.SnapshotSink, error) {
	if version != 1 {
		return nil, fmt.Errorf("unsupported snapshot version %d", version)
	}
	id := fmt.Sprintf("%d-%d-%d", term, index, time.Now().UnixMilli())
	dir := filepath.Join(s.dir, id+snapTmpSuffix)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, snapStateFile))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &snapSink{store: s, dir: dir, f: f, w: bufio.NewWriterSize(f, 1<<20),
		meta: snapMeta{SnapshotMeta: raft.SnapshotMeta{Version: version, ID: id, Index: index, Term: term,
			Configuration: conf, ConfigurationIndex: confIndex}}}, nil
}

// List returns the retained snapshots, newest first.
func (s *snapStore) List() ([]*raft.SnapshotMeta, error) {
	metas, err := s.metas()
	if err != nil {
		return nil, err
	}
	out := make([]*raft.SnapshotMeta, 0, len(metas))
	for _, m := range metas {
		out = append(out, &m.SnapshotMeta)
	}
	return out[:min(len(out), s.retain)], nil
}

// metas reads every finished snapshot's metadata, newest first.
func (s *snapStore) metas() ([]*snapMeta, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	var out []*snapMeta
	for _, e := range ents {
		if !e.IsDir() || strings.HasSuffix(e.Name(), snapTmpSuffix) {
			continue
		}
		m, err := s.readMeta(e.Name())
		if err != nil {
			s.log.Warn("ignoring a snapshot whose metadata cannot be read", "snapshot", e.Name(), "err", err)
			continue
		}
		if m.Version < raft.SnapshotVersionMin || m.Version > raft.SnapshotVersionMax {
			continue
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Term != b.Term {
			return a.Term > b.Term
		}
		if a.Index != b.Index {
			return a.Index > b.Index
		}
		return a.ID > b.ID
	})
	return out, nil
}

func (s *snapStore) readMeta(id string) (*snapMeta, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, id, snapMetaFile))
	if err != nil {
		return nil, err
	}
	var m snapMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Open opens a snapshot for reading; its checksum is checked as it is read,
// and a mismatch is the read error at the end.
func (s *snapStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	m, err := s.readMeta(id)
	if err != nil {
		return nil, nil, err
	}
	f, err := os.Open(filepath.Join(s.dir, id, snapStateFile))
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if fi.Size() != m.Size {
		f.Close()
		return nil, nil, fmt.Errorf("snapshot %s: state is %d bytes, its metadata says %d", id, fi.Size(), m.Size)
	}
	r := &snapReader{id: id, f: f, r: bufio.NewReaderSize(f, 1<<20)}
	switch {
	case m.CRC32C != nil:
		r.sum32, r.want32 = crc32.New(castagnoli), *m.CRC32C
	case len(m.CRC) == 8:
		r.sum64, r.want64 = crc64.New(crc64.MakeTable(crc64.ECMA)), m.CRC
	default:
		f.Close()
		return nil, nil, fmt.Errorf("snapshot %s: no checksum in its metadata", id)
	}
	return &m.SnapshotMeta, r, nil
}

// reap deletes all but the newest retained snapshots.
func (s *snapStore) reap() {
	metas, err := s.metas()
	if err != nil {
		return
	}
	for _, m := range metas[min(len(metas), s.retain):] {
		if err := os.RemoveAll(filepath.Join(s.dir, m.ID)); err != nil {
			s.log.Warn("remove an old snapshot", "snapshot", m.ID, "err", err)
		}
	}
}

// snapSink writes one snapshot.
type snapSink struct {
	store  *snapStore
	dir    string
	meta   snapMeta
	f      *os.File
	w      *bufio.Writer
	crc    uint32
	n      int64 // bytes written
	hinted int64 // bytes the kernel was asked to start writing back
	done   bool
}

func (k *snapSink) ID() string { return k.meta.ID }

func (k *snapSink) Write(p []byte) (int, error) {
	k.crc = crc32.Update(k.crc, castagnoli, p)
	n, err := k.w.Write(p)
	k.n += int64(n)
	if err == nil && k.n-k.hinted >= snapWriteChunk {
		if err = k.w.Flush(); err == nil {
			startWriteback(k.f, k.hinted, k.n-k.hinted)
			k.hinted = k.n
		}
	}
	return n, err
}

// Close makes the snapshot durable and visible: state, then metadata, then
// the directory's new name, each synced before the next.
func (k *snapSink) Close() error {
	if k.done {
		return nil
	}
	k.done = true
	err := errors.Join(k.w.Flush(), k.f.Sync(), k.f.Close())
	if err == nil {
		crc := k.crc
		k.meta.Size, k.meta.CRC32C = k.n, &crc
		err = k.writeMeta()
	}
	final := strings.TrimSuffix(k.dir, snapTmpSuffix)
	if err == nil {
		err = os.Rename(k.dir, final)
	}
	if err == nil {
		err = syncDir(k.store.dir)
	}
	if err != nil {
		os.RemoveAll(k.dir)
		return fmt.Errorf("finish snapshot %s: %w", k.meta.ID, err)
	}
	k.store.reap()
	return nil
}

func (k *snapSink) writeMeta() error {
	b, err := json.Marshal(&k.meta)
	if err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(k.dir, snapMetaFile))
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	return errors.Join(err, f.Sync(), f.Close())
}

// Cancel abandons the snapshot.
func (k *snapSink) Cancel() error {
	if k.done {
		return nil
	}
	k.done = true
	k.f.Close()
	return os.RemoveAll(k.dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// snapReader reads a snapshot's state and checks its checksum at the end.
type snapReader struct {
	id     string
	f      *os.File
	r      *bufio.Reader
	sum32  hash.Hash32
	want32 uint32
	sum64  hash.Hash64
	want64 []byte
}

func (s *snapReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if s.sum32 != nil {
		s.sum32.Write(p[:n])
	} else {
		s.sum64.Write(p[:n])
	}
	if err == io.EOF {
		if s.sum32 != nil && s.sum32.Sum32() != s.want32 ||
			s.sum64 != nil && string(s.sum64.Sum(nil)) != string(s.want64) {
			return n, fmt.Errorf("snapshot %s: checksum mismatch", s.id)
		}
	}
	return n, err
}

func (s *snapReader) Close() error { return s.f.Close() }
