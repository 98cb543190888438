package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/fsm"
)

// flipInEntry finds the log entry of a stopped node whose data holds needle and
// flips one bit inside needle, as a bad disk sector would; it returns the
// entry's index.
func flipInEntry(t *testing.T, dataDir, needle string) uint64 {
	t.Helper()
	s, err := openOffline(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if at := bytes.Index(l.Data, []byte(needle)); at >= 0 {
			l.Data[at+len(needle)-1] ^= 0x01
			if err := s.StoreLog(&l); err != nil {
				t.Fatal(err)
			}
			return i
		}
	}
	t.Fatalf("no entry holds %q", needle)
	return 0
}

// singleNode starts a one-voter cluster on dir.
func singleNode(t *testing.T, tweak func(*Config)) *testCluster {
	return newTestCluster(t, 1, tweak)
}

// A flipped bit in an entry of a stopped single node: the node refuses to
// start and says where and what each way out loses; truncating at the entry
// loses exactly what it said, and the node starts with everything before it.
func TestDamagedLogRefusesToStart(t *testing.T) {
	tc := singleNode(t, nil)
	_, n := tc.leader(10 * time.Second)
	for i := 0; i < 100; i++ {
		mustSubmit(t, n, bfAdd("k", fmt.Sprintf("item-%03d", i)))
	}
	dir := tc.cfgs[0].DataDir
	tc.crash(0)
	at := flipInEntry(t, dir, "item-060")

	_, err := New(tc.cfgs[0])
	var dmg *LogDamage
	if !errors.As(err, &dmg) {
		t.Fatalf("start on a damaged log: %v", err)
	}
	if dmg.Index != at || dmg.Writes != 39 || dmg.Unreadable != 1 || dmg.Entries != int(dmg.Last-at+1) {
		t.Fatalf("damage %+v: want index %d, 39 countable writes after it", dmg, at)
	}
	msg := err.Error()
	for _, want := range []string{fmt.Sprintf("corrupt log entry at index %d", at), "checksum mismatch",
		fmt.Sprintf("--truncate-at %d", at), "39 writes", "restore a backup"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "rejoin from the peers") {
		t.Errorf("a sole voter was offered to rejoin from peers:\n%s", msg)
	}
	if err := CheckDataDir(dir, tc.cfgs[0].ID); !errors.As(err, &dmg) || dmg.Index != at {
		t.Fatalf("CheckDataDir: %v", err)
	}
	if _, err := Recover(dir, tc.cfgs[0].ID, "test"); err == nil {
		t.Fatal("a sole voter was moved aside to rejoin peers it does not have")
	}

	tr, err := Truncate(dir, at)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Writes != 39 || tr.Unreadable != 1 || tr.ByKey["k"] != 39 {
		t.Fatalf("truncation %+v", tr)
	}
	tc.start(0)
	_, n = tc.leader(10 * time.Second)
	for i := 0; i < 100; i++ {
		item := fmt.Sprintf("item-%03d", i)
		if got, want := exists(t, n, "k", item), i < 60; got != want {
			t.Fatalf("%s present %v after truncating at item-060's entry", item, got)
		}
	}
	mustSubmit(t, n, bfAdd("k", "after"))
}

// The newest snapshot damaged: raft falls back to the older one, and the log
// after it is still there (however short --trailing-logs), so every write
// comes back.
func TestDamagedSnapshotFallsBack(t *testing.T) {
	tc := singleNode(t, func(c *Config) {
		c.TrailingLogs = 5
		c.SnapshotThreshold = 1 << 20 // only the snapshots the test asks for
	})
	_, n := tc.leader(10 * time.Second)
	var items []string
	write := func(k int) {
		for i := 0; i < k; i++ {
			item := fmt.Sprintf("w-%d", len(items))
			mustSubmit(t, n, bfAdd("k", item))
			items = append(items, item)
		}
	}
	write(40)
	if err := n.meta.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	write(40)
	if err := n.meta.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	write(20)
	dir := tc.cfgs[0].DataDir
	tc.crash(0)

	snaps, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "state.bin"))
	if len(snaps) != 2 {
		t.Fatalf("%d snapshots, want 2", len(snaps))
	}
	sort.Strings(snaps) // named term-index-time: the newest sorts last
	b, err := os.ReadFile(snaps[1])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x10
	if err := os.WriteFile(snaps[1], b, 0o644); err != nil {
		t.Fatal(err)
	}

	tc.start(0)
	_, n = tc.leader(10 * time.Second)
	for _, item := range items {
		if !exists(t, n, "k", item) {
			t.Fatalf("%s lost after falling back to the older snapshot", item)
		}
	}
}

// A follower whose log was damaged while it was down refuses to start; moved
// aside by Recover, it leaves the configuration, rejoins as a new member,
// catches up (writes made meanwhile included) and is a voter again.
func TestRecoverRejoinsFromPeers(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	_, l := tc.leader(10 * time.Second)
	f := tc.followers()[0]
	for i := 0; i < 50; i++ {
		tc.mustWrite(bfAdd("k", fmt.Sprintf("before-%02d", i)))
	}
	eventually(t, 10*time.Second, "the follower to apply", func() bool {
		_, l = tc.leader(10 * time.Second)
		return tc.nodes[f].meta.fsm.AppliedIndex() >= l.meta.fsm.AppliedIndex()
	})
	dir := tc.cfgs[f].DataDir
	tc.crash(f)
	flipInEntry(t, dir, "before-25")
	if _, err := New(tc.cfgs[f]); err == nil || !strings.Contains(err.Error(), "rejoin from the peers") {
		t.Fatalf("start of the damaged follower: %v", err)
	}
	for i := 0; i < 20; i++ {
		tc.mustWrite(bfAdd("k", fmt.Sprintf("while-down-%02d", i)))
	}
	rj, err := Recover(dir, tc.cfgs[f].ID, "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(rj.Peers) != 2 {
		t.Fatalf("peers %v", rj.Peers)
	}
	if _, err := os.Stat(filepath.Join(rj.Moved, logAside)); err != nil {
		t.Fatalf("the damaged log was not kept: %v", err)
	}
	tc.start(f)
	eventually(t, 30*time.Second, "the recovered node to be a voter again", func() bool {
		_, l = tc.leader(10 * time.Second)
		return l.meta.voters() == 3 && tc.nodes[f].Ready()
	})
	for i := 0; i < 50; i++ {
		if !exists(t, tc.nodes[f], "k", fmt.Sprintf("before-%02d", i)) {
			t.Fatalf("before-%02d missing on the recovered node", i)
		}
	}
	for i := 0; i < 20; i++ {
		if !exists(t, tc.nodes[f], "k", fmt.Sprintf("while-down-%02d", i)) {
			t.Fatalf("while-down-%02d missing on the recovered node", i)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, RejoinFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("rejoin marker left behind: %v", err)
	}
}

// TestRecoverWithoutLogBounds: damage in the block of the log engine that
// holds a follower's first entries (every entry, on a short log) leaves the
// log without bounds. The node refuses to start, naming the rejoin; Recover
// finds the peers in the members file (the configuration is unreadable),
// rewrites the engine without the group, and the node rejoins with every
// write.
func TestRecoverWithoutLogBounds(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	_, l := tc.leader(10 * time.Second)
	f := tc.followers()[0]
	for i := 0; i < 20; i++ {
		tc.mustWrite(bfAdd("k", fmt.Sprintf("before-%02d", i)))
	}
	eventually(t, 10*time.Second, "the follower to apply and record its peers", func() bool {
		_, l = tc.leader(10 * time.Second)
		return tc.nodes[f].meta.fsm.AppliedIndex() >= l.meta.fsm.AppliedIndex() && len(tc.nodes[f].heal.book.get().Peers) == 2
	})
	dir := tc.cfgs[f].DataDir
	tc.crash(f)
	flipInEngineFiles(t, dir, "before-10")
	_, err := New(tc.cfgs[f])
	var dmg *LogDamage
	if !errors.As(err, &dmg) || dmg.Index != 0 || !strings.Contains(err.Error(), "rookery recover --data-dir "+dir) ||
		strings.Contains(err.Error(), "--truncate-at") {
		t.Fatalf("start of the follower whose log has no bounds: %v", err)
	}
	rj, err := Recover(dir, tc.cfgs[f].ID, "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(rj.Peers) != 2 {
		t.Fatalf("peers %v", rj.Peers)
	}
	tc.start(f)
	eventually(t, 30*time.Second, "the recovered node to be a voter again", func() bool {
		_, l = tc.leader(10 * time.Second)
		return l.meta.voters() == 3 && tc.nodes[f].Ready()
	})
	for i := 0; i < 20; i++ {
		if !exists(t, tc.nodes[f], "k", fmt.Sprintf("before-%02d", i)) {
			t.Fatalf("before-%02d missing on the recovered node", i)
		}
	}
}

// flipInEngineFiles flips one bit of every copy of needle in the tables of
// a stopped node's log engine.
func flipInEngineFiles(t *testing.T, dataDir, needle string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dataDir, EngineDir, "*.sst"))
	n := 0
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(b, []byte(needle)); i >= 0 {
			b[i+len(needle)-1] ^= 0x01
			n++
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n == 0 {
		t.Fatalf("no table of %s holds %q", dataDir, needle)
	}
}

// An entry damaged on the leader's disk, which a follower that was down needs:
// the leader notices when it reads it back, sends a snapshot instead and
// takes one that covers the entry; the follower ends with every write.
func TestLeaderSendsSnapshotForDamagedEntry(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.leader(10 * time.Second) // a cluster with a leader, before one of them stops
	f := tc.followers()[0]
	tc.crash(f)
	var items []string
	for i := 0; i < 700; i++ { // more than the log cache holds
		item := fmt.Sprintf("x-%03d", i)
		tc.mustWrite(bfAdd("k", item))
		items = append(items, item)
	}
	// Damage x-010's entry in the leader's store, under its cache.
	_, l := tc.leader(10 * time.Second)
	first, _ := l.meta.store.FirstIndex()
	last, _ := l.meta.store.LastIndex()
	damaged := false
	for i := first; i <= last && !damaged; i++ {
		var lg raft.Log
		if err := l.meta.store.GetLog(i, &lg); err != nil {
			t.Fatal(err)
		}
		if at := bytes.Index(lg.Data, []byte("x-010")); at >= 0 {
			lg.Data[at+4] ^= 1
			if err := l.meta.store.StoreLog(&lg); err != nil {
				t.Fatal(err)
			}
			damaged = true
		}
	}
	if !damaged {
		t.Fatal("no entry holds x-010")
	}
	tc.start(f)
	eventually(t, 30*time.Second, "the follower to catch up", func() bool {
		return tc.nodes[f].meta.fsm.AppliedIndex() >= l.meta.fsm.AppliedIndex()
	})
	if h := tc.nodes[f].meta.fsm.Halted(); h != nil {
		t.Fatalf("the follower halted: %v", h)
	}
	for _, item := range items {
		if !exists(t, tc.nodes[f], "k", item) {
			t.Fatalf("%s missing on the follower", item)
		}
	}
}

// An entry no node can read (damaged before it was replicated): every node
// stops applying at it, reports it, refuses reads, and a write's outcome is
// reported unknown; nothing panics.
func TestHaltedNodesReportAndRefuse(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	_, l := tc.leader(10 * time.Second)
	mustSubmit(t, l, bfAdd("k", "a"))
	bad := fsm.EncodeCommand(bfAdd("k", "b"))
	bad[len(bad)-1] ^= 0xff
	if err := l.meta.raft.Apply(bad, 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "every node to halt", func() bool {
		for _, n := range tc.live() {
			if n.meta.fsm.Halted() == nil {
				return false
			}
		}
		return true
	})
	for _, n := range tc.live() {
		st := n.Status()
		if st.Ready || !strings.Contains(st.Problem, "corrupt log entry at index") || !strings.Contains(st.Problem, "rookery recover") {
			t.Fatalf("%s status %+v", n.ID(), st)
		}
		if err := n.meta.ReadBarrier(t.Context(), ReadStale); !errors.Is(err, ErrHalted) {
			t.Fatalf("%s: stale read on a halted node: %v", n.ID(), err)
		}
	}
	_, l = tc.leader(10 * time.Second)
	// Never acknowledged: indeterminate (appended, never applied), or refused
	// by a node that has just handed leadership on (halted nodes step aside).
	_, err := submit(t.Context(), l, bfAdd("k", "c"))
	if !errors.Is(err, ErrIndeterminate) && !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrNoLeader) {
		t.Fatalf("write on a halted cluster: %v", err)
	}
}

// The leader writes entries every voter can read: while a voter gossips that
// it reads version 1 only, entries carry no checksum; once it reads version 2,
// they do.
func TestEntryCodecFollowsTheVoters(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	_, l := tc.leader(10 * time.Second)
	lastEntryVersion := func() byte {
		var lg raft.Log
		if err := l.meta.logs.GetLog(l.meta.raft.LastIndex(), &lg); err != nil {
			t.Fatal(err)
		}
		return lg.Data[1]
	}
	mustSubmit(t, l, bfAdd("k", "a"))
	if v := lastEntryVersion(); v != fsm.CodecVersion {
		t.Fatalf("entry version %d with every voter current, want %d", v, fsm.CodecVersion)
	}
	old := tc.nodes[tc.followers()[0]]
	eventually(t, 10*time.Second, "a version 1 entry", func() bool {
		// Set again each round: the node regossips its own metadata when its
		// membership changes (heal.go), which would undo a single setting.
		m := old.localMeta()
		m.Codec = 0 // as a build before versions were gossiped
		old.delegate.set(m)
		if err := old.ml.UpdateNode(time.Second); err != nil {
			t.Fatal(err)
		}
		mustSubmit(t, l, bfAdd("k", "b"))
		return lastEntryVersion() == fsm.CodecV1
	})
	old.delegate.set(old.localMeta())
	if err := old.ml.UpdateNode(time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "version 2 entries again", func() bool {
		mustSubmit(t, l, bfAdd("k", "c"))
		return lastEntryVersion() == fsm.CodecVersion
	})
	for _, n := range tc.live() {
		if !exists(t, n, "k", "b") {
			t.Fatalf("%s lacks the version 1 write", n.ID())
		}
	}
}

// TestNewerEntryIsNotDamage: an intact entry of a log format newer than this
// build reads (what a rolled-back node finds) is not reported as damage at
// start nor hidden from raft as a damaged entry: applying it halts with
// "needs a newer rookery", which names the fix. A flipped bit in it still is
// damage.
func TestNewerEntryIsNotDamage(t *testing.T) {
	body := []byte{byte(fsm.TypeCommand), fsm.CodecVersion + 1, 1, 2, 3}
	newer := binary.LittleEndian.AppendUint32(append([]byte(nil), body...), crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
	flipped := append([]byte(nil), newer...)
	flipped[3] ^= 1
	logs := raft.NewInmemStore()
	if err := logs.StoreLogs([]*raft.Log{
		{Index: 1, Type: raft.LogCommand, Data: newer},
		{Index: 2, Type: raft.LogCommand, Data: flipped},
	}); err != nil {
		t.Fatal(err)
	}
	var sc logScan
	check := func(i uint64) string {
		var l raft.Log
		err := logs.GetLog(i, &l)
		why, _ := checkEntry(i, &l, err, &sc)
		return why
	}
	if why := check(1); why != "" {
		t.Errorf("an intact newer entry read as damage: %s", why)
	}
	if why := check(2); why == "" {
		t.Error("a damaged newer entry read as intact")
	}
	var damaged []uint64
	v := verifiedStore{LogStore: logs, onDamage: func(i uint64, _ error) { damaged = append(damaged, i) }}
	var l raft.Log
	if err := v.GetLog(1, &l); err != nil {
		t.Errorf("GetLog of an intact newer entry: %v", err)
	}
	if err := v.GetLog(2, &l); !errors.Is(err, raft.ErrLogNotFound) || len(damaged) != 1 || damaged[0] != 2 {
		t.Errorf("GetLog of a damaged newer entry: %v, damage reported at %v", err, damaged)
	}
}
