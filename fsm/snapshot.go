package fsm

import (
	"bufio"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/internal/errdetail"
	"github.com/rookerydb/rookery/internal/mutant"
)

// Snapshot stream, version 2:
//
//	header   "RKYSNAP\x00", uint16 version, CRC-32C of both
//	section  tag 'S': the session table (its clock is the log's clock)
//	section  tag 'F': one filter: uvarint key length, key, uvarint deadline
//	                  (Unix ms, 0 for none), the filter's own encoding
//	                  (filters.Encode); one per filter, keys ascending
//	section  tag 'E': uvarint filter count, uvarint applied index
//
// Version 1 is the same without deadlines. Both are read, and a state with no
// deadline is written as version 1, so a node of a build before expiry can
// still install it (no key has a deadline until every node reads log format
// 5, so in a rolling upgrade the older nodes get version 1). Version 3 is
// version 2 written when a filter is windowed (filters.KindWindowBloom,
// KindWindowCuckoo): a build before them refuses it by its version, rather
// than as a damaged filter (no windowed filter exists until every node reads
// log format 6). Version 5 is version 4 (the map section only where there is
// a map) written once a transaction has applied (tx.go): a section 'T'
// after the sessions and the map (uvarint floor, uvarint forgotten, uvarint
// count, then each tombstone's key and uvarint index, keys ascending), and
// each filter's uvarint version after its deadline. Version 6 is version 5
// written once users were set (acl.go), with a section 'U' after the
// transaction section: uvarint length, then the users (FSM.encodeUsers).

// Every section ends with the CRC-32C of its tag and contents, so Restore
// verifies each part as it streams, and a filter's own encoding carries its own
// checksum as well. Restore builds the new state aside and installs it only once
// the whole stream has checked out; a damaged snapshot changes nothing.

const (
	snapMagic   = "RKYSNAP\x00"
	snapVersion = 2 // with deadlines
	snapV1      = 1 // without: what a state with no deadline is written as
	snapV3      = 3 // version 2 holding windowed filters
	snapV4      = 4 // as 3, with a section 'M', the cluster map (group 0 of a sharded cluster)
	snapV5      = 5 // as 4, with a section 'T' and filters' versions (transactions)
	snapV6      = 6 // as 5, with a section 'U', the users (acl.go)

	tagSessions = 'S'
	tagMap      = 'M'
	tagTx       = 'T'
	tagUsers    = 'U'
	tagFilter   = 'F'
	tagEnd      = 'E'

	// maxSnapKey bounds a key read from a snapshot.
	maxSnapKey = 1 << 20
	// maxSnapInts bounds the outcomes of one stored session result.
	maxSnapInts = 1 << 24
)

// ErrBadSnapshot reports a snapshot that is damaged or not one of ours.
var ErrBadSnapshot = errors.New("fsm: bad snapshot")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Snapshot freezes the current state cheaply: it records which filter objects
// make up the state and copies the (small) session table. Filters are not
// copied; a later mutation of a frozen filter copies it first (copy-on-write).
// Persist then streams the frozen state while later entries apply.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	if h := f.halt.Load(); h != nil {
		// raft would label the snapshot with entries this state never applied.
		return nil, fmt.Errorf("no snapshot of a halted state machine: %w", h)
	}
	s := &snapshot{fsm: f, gen: f.gen, applied: f.applied.Load(), sessions: f.sessions.clone(), cmap: f.cmap.Load()}
	if f.tx.floor != 0 {
		s.tx = &txState{floor: f.tx.floor, forgotten: f.tx.forgotten, removed: maps.Clone(f.tx.removed)}
	}
	if f.users != nil && f.usersSet {
		s.users = f.encodeUsers()
	}
	s.entries = make([]frozen, 0, len(f.reg.byKey))
	for _, e := range f.reg.byKey {
		fr := frozen{key: e.key, f: e.f, ver: e.ver}
		if x := e.exp.Load(); x != nil {
			fr.deadline = x.deadline
		}
		s.entries = append(s.entries, fr)
	}
	sort.Slice(s.entries, func(i, j int) bool { return s.entries[i].key < s.entries[j].key })
	f.snapMu.Lock()
	f.snapLive[s.gen]++
	f.snapMax.Store(s.gen)
	f.snapMu.Unlock()
	f.gen++
	return s, nil
}

type frozen struct {
	key      string
	f        filters.Filter
	deadline int64 // Unix ms, 0 for none
	ver      uint64
}

type snapshot struct {
	fsm      *FSM
	gen      uint64
	applied  uint64
	entries  []frozen
	sessions *sessionTable
	cmap     *Map
	tx       *txState // nil before the first transaction
	users    []byte   // nil before users were set
	once     sync.Once
}

// Persist streams the snapshot to sink.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.write(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

// write writes the snapshot stream to w.
func (s *snapshot) write(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	sw := &sectionWriter{w: bw}
	version := uint16(snapV1)
	for _, e := range s.entries {
		if IsWindowed(e.f.Kind()) {
			version = snapV3
			break
		}
		if e.deadline != 0 {
			version = snapVersion
		}
	}
	if s.cmap != nil {
		version = snapV4
	}
	if s.tx != nil {
		version = snapV5
	}
	if s.users != nil {
		version = snapV6
	}
	hdr := binary.LittleEndian.AppendUint16([]byte(snapMagic), version)
	if _, err := bw.Write(binary.LittleEndian.AppendUint32(hdr, crc32.Checksum(hdr, castagnoli))); err != nil {
		return err
	}
	sw.begin(tagSessions)
	sw.write(encodeSessions(s.sessions))
	sw.end()
	if s.cmap != nil {
		sw.begin(tagMap)
		m := EncodeMap(s.cmap)
		sw.write(binary.AppendUvarint(nil, uint64(len(m))))
		sw.write(m)
		sw.end()
	}
	if s.tx != nil {
		sw.begin(tagTx)
		sw.write(encodeTx(s.tx))
		sw.end()
	}
	if s.users != nil {
		sw.begin(tagUsers)
		sw.write(binary.AppendUvarint(nil, uint64(len(s.users))))
		sw.write(s.users)
		sw.end()
	}
	for _, e := range s.entries {
		sw.begin(tagFilter)
		b := appendString(nil, e.key)
		if version >= snapVersion {
			b = binary.AppendUvarint(b, uint64(e.deadline))
		}
		if version >= snapV5 {
			b = binary.AppendUvarint(b, e.ver)
		}
		sw.write(b)
		if sw.err == nil {
			_, sw.err = filters.Encode(sw, e.f)
		}
		sw.end()
	}
	sw.begin(tagEnd)
	end := binary.AppendUvarint(nil, uint64(len(s.entries)))
	sw.write(binary.AppendUvarint(end, s.applied))
	sw.end()
	if sw.err != nil {
		return sw.err
	}
	return bw.Flush()
}

// Release lets the filters this snapshot froze be mutated in place again.
func (s *snapshot) Release() {
	s.once.Do(func() {
		f := s.fsm
		f.snapMu.Lock()
		defer f.snapMu.Unlock()
		if f.snapLive[s.gen]--; f.snapLive[s.gen] <= 0 {
			delete(f.snapLive, s.gen)
		}
		top := uint64(0)
		for g := range f.snapLive {
			top = max(top, g)
		}
		f.snapMax.Store(top)
	})
}

// sectionWriter checksums a section as it is written; the first error sticks.
type sectionWriter struct {
	w   io.Writer
	crc uint32
	err error
}

func (s *sectionWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	s.crc = crc32.Update(s.crc, castagnoli, p[:n])
	s.err = err
	return n, err
}

func (s *sectionWriter) write(p []byte) { _, _ = s.Write(p) }

func (s *sectionWriter) begin(tag byte) {
	s.crc = 0
	s.write([]byte{tag})
}

func (s *sectionWriter) end() {
	if s.err == nil {
		_, s.err = s.w.Write(binary.LittleEndian.AppendUint32(nil, s.crc))
	}
}

func encodeSessions(t *sessionTable) []byte {
	b := binary.AppendVarint(nil, t.now)
	b = binary.AppendVarint(b, t.lastSweep)
	ids := slices.Sorted(maps.Keys(t.clients))
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		cs := t.clients[id]
		b = binary.AppendUvarint(b, id)
		b = binary.AppendVarint(b, cs.lastSeen)
		b = binary.AppendUvarint(b, cs.floor)
		b = binary.AppendUvarint(b, uint64(len(cs.results)))
		for _, r := range cs.results {
			b = binary.AppendUvarint(b, r.seq)
			enc := EncodeResult(r.res)
			b = binary.AppendUvarint(b, uint64(len(enc)))
			b = append(b, enc...)
		}
	}
	return b
}

// Restore replaces the state with the snapshot read from rc. It verifies the
// whole stream first and changes nothing if any part is damaged.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, err := readSnapshot(rc, f.sessionTTL)
	if err != nil {
		return errdetail.New(ErrBadSnapshot, "%v", err)
	}
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	order := make([]*entry, 0, len(st.entries))
	byKey := make(map[string]*entry, len(st.entries))
	mem := uint64(0)
	if mutant.On(mutant.RestoreDropsNewest) && len(st.entries) > 0 {
		st.entries = st.entries[:len(st.entries)-1]
	}
	var dl deadlineHeap
	for _, fr := range st.entries {
		e := &entry{key: fr.key, kind: fr.f.Kind(), hash: scanHash(fr.key), f: fr.f,
			gen: f.gen, mem: entryBytes(fr.key, fr.f), ver: fr.ver}
		if fr.deadline != 0 {
			x := &expiry{deadline: fr.deadline, e: e, at: len(dl)}
			e.exp.Store(x)
			e.mem += expiryBytes
			dl = append(dl, x)
		}
		order = append(order, e)
		byKey[e.key] = e
		mem += e.mem
	}
	heap.Init(&dl)
	sort.Slice(order, func(i, j int) bool { return entryLess(order[i], order[j].hash, order[j].key) })
	f.reg.mu.Lock()
	f.reg.byKey, f.reg.order = byKey, order
	f.reg.mu.Unlock()
	f.memory.Store(mem)
	f.deadlines = dl
	f.sessions = st.sessions
	f.tx = txState{}
	if st.tx != nil {
		f.tx = *st.tx
	}
	f.rebuildRetirements()
	if err := f.restoreUsers(st.users); err != nil {
		// Checked when read (readUsersSection): cannot happen.
		f.log.Error("restoring users", "err", err)
	}
	f.cmap.Store(st.cmap)
	if st.cmap != nil && f.onMap != nil {
		f.onMap(st.cmap)
	}
	f.setApplied(st.applied)
	f.log.Info("restored snapshot", "filters", len(order), "expires", len(dl), "memory_bytes", mem,
		"applied_index", st.applied)
	return nil
}

// sectionReader checksums what is read through it; it is an io.ByteReader so
// that filters.Decode reads exactly a filter's encoding and no further.
type sectionReader struct {
	r   *bufio.Reader
	crc uint32
}

func (s *sectionReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.crc = crc32.Update(s.crc, castagnoli, p[:n])
	return n, err
}

func (s *sectionReader) ReadByte() (byte, error) {
	c, err := s.r.ReadByte()
	if err == nil {
		s.crc = crc32.Update(s.crc, castagnoli, []byte{c})
	}
	return c, err
}

func (s *sectionReader) uvarint() (uint64, error) { return binary.ReadUvarint(s) }

// end checks the section's checksum, which is not itself part of the section.
func (s *sectionReader) end() error {
	var sum [4]byte
	if _, err := io.ReadFull(s.r, sum[:]); err != nil {
		return fmt.Errorf("section checksum: %w", noEOF(err))
	}
	if binary.LittleEndian.Uint32(sum[:]) != s.crc {
		return errors.New("section checksum mismatch")
	}
	s.crc = 0
	return nil
}

type snapState struct {
	entries  []frozen
	sessions *sessionTable
	applied  uint64
	cmap     *Map
	tx       *txState
	users    []byte
}

// maxMapSection bounds the cluster map's section.
const maxMapSection = 16 << 20

// readMapSection reads the cluster map's section.
func readMapSection(sr *sectionReader) (*Map, error) {
	n, err := sr.uvarint()
	if err != nil || n > maxMapSection {
		return nil, fmt.Errorf("map section: length %d: %v", n, err)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(sr, b); err != nil {
		return nil, fmt.Errorf("map section: %w", noEOF(err))
	}
	return DecodeMap(b)
}

// readSnapshot reads and verifies a whole snapshot stream, keeping every filter.
func readSnapshot(r io.Reader, ttl int64) (*snapState, error) {
	var entries []frozen
	st, err := scanSnapshot(r, ttl, func(fr frozen) { entries = append(entries, fr) })
	if err != nil {
		return nil, err
	}
	st.entries = entries
	return st, nil
}

// SnapshotSummary describes a snapshot stream that VerifySnapshot read.
type SnapshotSummary struct {
	// AppliedIndex is the state machine's applied index when it was taken.
	AppliedIndex uint64
	// Sessions is how many client sessions (exactly-once windows) it holds.
	Sessions int
	// Expires is how many of its keys have a deadline.
	Expires int
	// Filters describes every filter, keys ascending.
	Filters []Info
	// MemoryBytes is what the filters take in memory once restored, as
	// --max-memory counts it (keys included).
	MemoryBytes uint64
}

// VerifySnapshot reads a whole snapshot stream from r exactly as Restore does,
// every checksum and limit included, and describes it without changing any
// state: a stream it accepts is one Restore accepts. It holds one decoded
// filter at a time, so checking a backup needs memory for its largest filter,
// not for all of them. Errors wrap ErrBadSnapshot and name the damaged part.
func VerifySnapshot(r io.Reader) (*SnapshotSummary, error) {
	sum := &SnapshotSummary{}
	st, err := scanSnapshot(r, int64(DefaultSessionTTL), func(fr frozen) {
		in := infoOf(fr.key, fr.f)
		sum.Filters = append(sum.Filters, in)
		sum.MemoryBytes += entryBytes(fr.key, fr.f)
		if fr.deadline != 0 {
			sum.Expires++
			sum.MemoryBytes += expiryBytes
		}
	})
	if err != nil {
		return nil, errdetail.New(ErrBadSnapshot, "%v", err)
	}
	sum.AppliedIndex, sum.Sessions = st.applied, len(st.sessions.clients)
	return sum, nil
}

// scanSnapshot reads and verifies a snapshot stream, handing each filter to
// keep as it is decoded; the state it returns has no entries.
func scanSnapshot(r io.Reader, ttl int64, keep func(frozen)) (*snapState, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	hdr := make([]byte, len(snapMagic)+2+4)
	if _, err := io.ReadFull(br, hdr); err != nil {
		return nil, fmt.Errorf("header: %w", noEOF(err))
	}
	body, sum := hdr[:len(hdr)-4], binary.LittleEndian.Uint32(hdr[len(hdr)-4:])
	if string(body[:len(snapMagic)]) != snapMagic || crc32.Checksum(body, castagnoli) != sum {
		return nil, errors.New("not a Rookery snapshot")
	}
	version := binary.LittleEndian.Uint16(body[len(snapMagic):])
	if version < snapV1 || version > snapV6 {
		return nil, fmt.Errorf("snapshot version %d, this build reads %d to %d", version, snapV1, snapV6)
	}
	sr := &sectionReader{r: br}
	st := &snapState{}
	var count uint64
	var last string // the previous filter's key
	for seen := 0; ; seen++ {
		tag, err := sr.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("section tag: %w", noEOF(err))
		}
		switch {
		case seen == 0 && tag != tagSessions:
			return nil, fmt.Errorf("first section %q, want sessions", tag)
		case tag == tagSessions && seen == 0:
			if st.sessions, err = readSessions(sr, ttl); err != nil {
				return nil, err
			}
		case tag == tagMap && seen == 1 && version >= snapV4:
			if st.cmap, err = readMapSection(sr); err != nil {
				return nil, err
			}
		case tag == tagTx && st.tx == nil && count == 0 && version >= snapV5:
			if st.tx, err = readTxSection(sr); err != nil {
				return nil, err
			}
		case tag == tagUsers && st.users == nil && count == 0 && version >= snapV6:
			if st.users, err = readUsersSection(sr); err != nil {
				return nil, err
			}
		case tag == tagFilter:
			fr, err := readFilter(sr, version)
			if err != nil {
				return nil, err
			}
			if count > 0 && last >= fr.key {
				return nil, fmt.Errorf("filter %q out of order", fr.key)
			}
			// The section's checksum covers the key as well: check it before
			// the filter is kept.
			if err := sr.end(); err != nil {
				return nil, fmt.Errorf("filter %q: %w", fr.key, err)
			}
			keep(fr)
			count++
			last = fr.key
			continue
		case tag == tagEnd:
			n, err := sr.uvarint()
			if err != nil {
				return nil, fmt.Errorf("end section: %w", noEOF(err))
			}
			if n != count {
				return nil, fmt.Errorf("end section counts %d filters, stream holds %d", n, count)
			}
			if st.applied, err = sr.uvarint(); err != nil {
				return nil, fmt.Errorf("end section: %w", noEOF(err))
			}
			if err := sr.end(); err != nil {
				return nil, fmt.Errorf("end section: %w", err)
			}
			if _, err := br.ReadByte(); err != io.EOF {
				return nil, errors.New("data after the end section")
			}
			return st, nil
		default:
			return nil, fmt.Errorf("unknown section %q", tag)
		}
		// Only the sessions, map, transaction and users sections get here.
		if err := sr.end(); err != nil {
			return nil, fmt.Errorf("section %q: %w", tag, err)
		}
	}
}

func readFilter(sr *sectionReader, version uint16) (frozen, error) {
	n, err := sr.uvarint()
	if err != nil {
		return frozen{}, fmt.Errorf("filter key: %w", noEOF(err))
	}
	if n > maxSnapKey {
		return frozen{}, fmt.Errorf("filter key of %d bytes", n)
	}
	key := make([]byte, n)
	if _, err := io.ReadFull(sr, key); err != nil {
		return frozen{}, fmt.Errorf("filter key: %w", noEOF(err))
	}
	var deadline, ver uint64
	if version >= snapVersion {
		if deadline, err = sr.uvarint(); err != nil {
			return frozen{}, fmt.Errorf("filter %q deadline: %w", key, noEOF(err))
		}
		if deadline > math.MaxInt64 {
			return frozen{}, fmt.Errorf("filter %q deadline %d out of range", key, deadline)
		}
	}
	if version >= snapV5 {
		if ver, err = sr.uvarint(); err != nil {
			return frozen{}, fmt.Errorf("filter %q version: %w", key, noEOF(err))
		}
	}
	flt, err := filters.Decode(sr)
	if err != nil {
		return frozen{}, fmt.Errorf("filter %q: %w", key, err)
	}
	return frozen{key: string(key), f: flt, deadline: int64(deadline), ver: ver}, nil
}

// encodeTx is the transaction section's contents.
func encodeTx(t *txState) []byte {
	b := binary.AppendUvarint(nil, t.floor)
	b = binary.AppendUvarint(b, t.forgotten)
	keys := slices.Sorted(maps.Keys(t.removed))
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendString(b, k)
		b = binary.AppendUvarint(b, t.removed[k])
	}
	return b
}

// readTxSection reads the transaction section.
func readTxSection(sr *sectionReader) (*txState, error) {
	fail := func(what string, err error) error { return fmt.Errorf("transaction section: %s: %w", what, noEOF(err)) }
	t := &txState{}
	var err error
	if t.floor, err = sr.uvarint(); err != nil {
		return nil, fail("floor", err)
	}
	if t.forgotten, err = sr.uvarint(); err != nil {
		return nil, fail("forgotten", err)
	}
	n, err := sr.uvarint()
	if err != nil {
		return nil, fail("count", err)
	}
	if t.floor == 0 || n > maxTombstones {
		return nil, fmt.Errorf("transaction section: floor %d, %d tombstones", t.floor, n)
	}
	if n > 0 {
		t.removed = make(map[string]uint64, n)
	}
	last := ""
	for i := uint64(0); i < n; i++ {
		kn, err := sr.uvarint()
		if err != nil || kn > maxSnapKey {
			return nil, fmt.Errorf("transaction section: key length %d: %v", kn, err)
		}
		k := make([]byte, kn)
		if _, err := io.ReadFull(sr, k); err != nil {
			return nil, fail("key", err)
		}
		if i > 0 && string(k) <= last {
			return nil, fmt.Errorf("transaction section: key %q out of order", k)
		}
		last = string(k)
		if t.removed[last], err = sr.uvarint(); err != nil {
			return nil, fail("index", err)
		}
	}
	return t, nil
}

func readSessions(sr *sectionReader, ttl int64) (*sessionTable, error) {
	t := newSessionTable(ttl)
	var err error
	fail := func(what string, e error) error { return fmt.Errorf("sessions: %s: %w", what, noEOF(e)) }
	if t.now, err = binary.ReadVarint(sr); err != nil {
		return nil, fail("clock", err)
	}
	if t.lastSweep, err = binary.ReadVarint(sr); err != nil {
		return nil, fail("clock", err)
	}
	n, err := sr.uvarint()
	if err != nil {
		return nil, fail("count", err)
	}
	if n > maxSessions {
		return nil, fmt.Errorf("sessions: %d clients, at most %d", n, maxSessions)
	}
	prev := uint64(0)
	for i := uint64(0); i < n; i++ {
		id, err := sr.uvarint()
		if err != nil {
			return nil, fail("client id", err)
		}
		if i > 0 && id <= prev {
			return nil, errors.New("sessions: client ids out of order")
		}
		prev = id
		cs := &clientSession{}
		if cs.lastSeen, err = binary.ReadVarint(sr); err != nil {
			return nil, fail("client", err)
		}
		if cs.floor, err = sr.uvarint(); err != nil {
			return nil, fail("client", err)
		}
		nr, err := sr.uvarint()
		if err != nil {
			return nil, fail("results", err)
		}
		if nr > sessionWindow {
			return nil, fmt.Errorf("sessions: %d results for one client, at most %d", nr, sessionWindow)
		}
		for j := uint64(0); j < nr; j++ {
			seq, err := sr.uvarint()
			if err != nil {
				return nil, fail("result", err)
			}
			if (j > 0 && seq <= cs.results[j-1].seq) || seq <= cs.floor {
				return nil, errors.New("sessions: results out of order")
			}
			size, err := sr.uvarint()
			if err != nil {
				return nil, fail("result", err)
			}
			if size > 2+binary.MaxVarintLen64*(maxSnapInts+1) {
				return nil, fmt.Errorf("sessions: result of %d bytes", size)
			}
			enc, err := readN(sr, size)
			if err != nil {
				return nil, fail("result", err)
			}
			res, err := DecodeResult(enc)
			if err != nil {
				return nil, fmt.Errorf("sessions: %w", err)
			}
			cs.results = append(cs.results, seqResult{seq: seq, res: res})
		}
		t.clients[id] = cs
	}
	return t, nil
}

// readN reads n bytes, growing the buffer as data arrives so a lying length
// cannot force a large allocation.
func readN(r io.Reader, n uint64) ([]byte, error) {
	const step = 64 << 10
	buf := make([]byte, 0, min(n, step))
	for uint64(len(buf)) < n {
		chunk := min(n-uint64(len(buf)), step)
		at := len(buf)
		buf = append(buf, make([]byte, chunk)...)
		if _, err := io.ReadFull(r, buf[at:]); err != nil {
			return nil, err
		}
	}
	return buf, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// maxUsersSection bounds the users' section.
const maxUsersSection = 64 << 20

// readUsersSection reads the users' section and checks that it decodes.
func readUsersSection(sr *sectionReader) ([]byte, error) {
	n, err := sr.uvarint()
	if err != nil || n == 0 || n > maxUsersSection {
		return nil, fmt.Errorf("users section: length %d: %v", n, err)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(sr, b); err != nil {
		return nil, fmt.Errorf("users section: %w", noEOF(err))
	}
	if _, _, err := decodeUsersSection(b); err != nil {
		return nil, err
	}
	return b, nil
}
