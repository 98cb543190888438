package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/fsm"
)

// memSink is a raft.SnapshotSink in memory.
type memSink struct{ bytes.Buffer }

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { return nil }
func (s *memSink) Cancel() error { return nil }

// stateStream is the snapshot stream of a state machine holding key with items.
func stateStream(t *testing.T, key string, items ...string) []byte {
	t.Helper()
	f := fsm.New(fsm.Options{Logger: testLogger()})
	if r := f.ApplyCommand(7, bfAdd(key, items...)); r.Err != nil {
		t.Fatal(r.Err)
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

// backupBytes writes the backup of state as a file.
func backupBytes(t *testing.T, meta BackupMeta, state []byte) []byte {
	t.Helper()
	meta.StateBytes = int64(len(state))
	b, err := NewBackup(meta, io.NopCloser(bytes.NewReader(state)))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	n, err := b.WriteTo(&out)
	if err != nil || n != b.Size() || int64(out.Len()) != b.Size() {
		t.Fatalf("WriteTo: %d bytes, %v; Size says %d", n, err, b.Size())
	}
	return out.Bytes()
}

func testMeta() BackupMeta {
	return BackupMeta{
		Index:               7,
		Term:                2,
		RaftSnapshotVersion: int(raft.SnapshotVersionMax),
		Configuration:       []BackupServer{{ID: "n1", Address: "127.0.0.1:6481", Suffrage: "Voter"}},
		ConfigurationIndex:  1,
		Node:                "n1",
		Created:             time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

// TestBackupFileChecks: a backup describes itself, and VerifyBackup refuses
// every kind of damage with a message that names the damaged part.
func TestBackupFileChecks(t *testing.T) {
	state := stateStream(t, "users", "alice", "bob")
	file := backupBytes(t, testMeta(), state)
	info, err := VerifyBackup(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	want := testMeta()
	want.StateBytes = int64(len(state))
	if fmt.Sprint(info.Meta) != fmt.Sprint(want) || info.FileBytes != int64(len(file)) {
		t.Fatalf("meta %+v, %d bytes; want %+v, %d", info.Meta, info.FileBytes, want, len(file))
	}
	if len(info.State.Filters) != 1 || info.State.Filters[0].Key != "users" || info.State.Filters[0].Items != 2 ||
		info.State.AppliedIndex != 7 {
		t.Fatalf("state %+v", info.State)
	}

	hdr := len(file) - len(state) - sha256.Size // where the state begins
	flip := func(at int) []byte {
		bad := bytes.Clone(file)
		bad[at] ^= 0x04
		return bad
	}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"magic", flip(0), "not a Rookery backup"},
		{"version", flip(len(backupMagic)), "header checksum mismatch"},
		{"header", flip(hdr - 10), "header checksum mismatch"},
		{"header length", flip(len(backupMagic) + 5), "header length"},
		{"state", flip(hdr + len(state)/2), "state machine snapshot is damaged"},
		{"state header", flip(hdr + 1), "state machine snapshot is damaged"},
		{"trailer", flip(len(file) - 1), "file checksum mismatch"},
		{"truncated in the state", file[:hdr+len(state)/2], "truncated"},
		{"truncated in the trailer", file[:len(file)-5], "truncated"},
		{"truncated in the header", file[:hdr-3], "truncated in the header"},
		{"empty", nil, "too short"},
		{"extended", append(bytes.Clone(file), 0), "data after the end"},
		{"bare state", state, "bare state machine snapshot"},
	} {
		_, err := VerifyBackup(bytes.NewReader(c.data))
		if !errors.Is(err, ErrBadBackup) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	for at := 0; at < len(file); at++ {
		if _, err := VerifyBackup(bytes.NewReader(flip(at))); err == nil {
			t.Fatalf("byte %d of %d flipped: accepted", at, len(file))
		}
	}
}

// TestBackupRestoresIntoFreshCluster is issue 9's backup story in one process:
// a backup taken on one cluster's leader restores into a fresh cluster of
// other nodes, whose every node, a node restarted afterwards and a node that
// joins later all hold the backup's items and nothing of what they held
// before. A follower refuses to take or restore one, and a damaged file
// changes nothing.
func TestBackupRestoresIntoFreshCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src := newTestCluster(t, 3, nil)
	_, leader := src.leader(10 * time.Second)
	var items []string
	for i := 0; i < 300; i++ {
		items = append(items, fmt.Sprintf("user-%d", i))
	}
	for i := 0; i < len(items); i += 50 {
		mustSubmit(t, leader, bfAdd("users", items[i:i+50]...))
	}
	fol := src.nodes[src.followers()[0]]
	if _, err := fol.meta.OpenBackup(ctx, false); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("backup on a follower: %v, want ErrNotLeader", err)
	}
	file := takeBackup(t, ctx, leader, false)
	info, err := VerifyBackup(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.State.Filters) != 1 || info.State.Filters[0].Items != uint64(len(items)) || len(info.Meta.Configuration) != 3 {
		t.Fatalf("backup holds %+v, configuration %+v", info.State.Filters, info.Meta.Configuration)
	}
	// A follower's own state, when asked for, is a valid backup too.
	if _, err := VerifyBackup(bytes.NewReader(takeBackup(t, ctx, fol, true))); err != nil {
		t.Fatalf("stale backup of a follower: %v", err)
	}

	dst := newTestCluster(t, 3, nil)
	_, dl := dst.leader(10 * time.Second)
	mustSubmit(t, dl, bfAdd("before", "x"))
	dfol := dst.nodes[dst.followers()[0]]
	if _, err := dfol.meta.RestoreBackup(ctx, failReader{t}, int64(len(file))); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("restore on a follower: %v, want ErrNotLeader", err)
	}
	bad := bytes.Clone(file)
	bad[len(bad)/2] ^= 0x10
	if _, err := dl.meta.RestoreBackup(ctx, bytes.NewReader(bad), int64(len(bad))); !errors.Is(err, ErrBadBackup) {
		t.Fatalf("damaged restore: %v, want ErrBadBackup", err)
	}
	if !exists(t, dl, "before", "x") || dl.meta.fsm.Len() != 1 {
		t.Fatal("a refused restore changed the state")
	}

	res, err := dl.meta.RestoreBackup(ctx, bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Index <= info.Meta.Index || len(res.State.Filters) != 1 {
		t.Fatalf("restored at index %d (backup at %d), %d filters", res.Index, info.Meta.Index, len(res.State.Filters))
	}
	checkRestored := func(n *Node) {
		t.Helper()
		for _, it := range items {
			if !exists(t, n, "users", it) {
				t.Fatalf("%s lacks %s after the restore", n.ID(), it)
			}
		}
		if _, ok := n.meta.fsm.KindOf("before"); ok {
			t.Fatalf("%s still holds a filter the backup does not", n.ID())
		}
	}
	for _, n := range dst.live() {
		checkRestored(n)
	}
	// The cluster goes on from the restored state, and it lasts: a node
	// restarted on its data directory, and one that joins, hold it too.
	mustSubmit(t, dst.nodes[dst.followers()[0]], bfAdd("users", "after"))
	i := dst.followers()[1]
	dst.crash(i)
	dst.start(i)
	j := dst.add(nil)
	for _, k := range []int{i, j} {
		n := dst.nodes[k]
		eventually(t, 20*time.Second, n.ID()+" ready", n.Ready)
		checkRestored(n)
		if !exists(t, n, "users", "after") {
			t.Fatalf("%s lacks the write made after the restore", n.ID())
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dst.cfgs[0].DataDir, restoreTempPattern)); len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func takeBackup(t *testing.T, ctx context.Context, n *Node, stale bool) []byte {
	t.Helper()
	b, err := n.meta.OpenBackup(ctx, stale)
	if err != nil {
		t.Fatalf("backup on %s: %v", n.ID(), err)
	}
	defer b.Close()
	var out bytes.Buffer
	if _, err := b.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// failReader fails the test if it is read.
type failReader struct{ t *testing.T }

func (f failReader) Read([]byte) (int, error) {
	f.t.Error("an upload was read by a node that does not restore it")
	return 0, io.EOF
}

// TestRestoreBounds: a node refuses an upload larger than its memory cap
// allows, whether announced or not, and a backup whose filters would not fit
// under --max-memory, leaving neither state nor files behind.
func TestRestoreBounds(t *testing.T) {
	defer func(h int64) { backupHeadroom = h }(backupHeadroom)
	backupHeadroom = 4 << 10
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	big := stateStream(t, "users", "alice")
	file := backupBytes(t, testMeta(), big)

	tc := newTestCluster(t, 1, func(c *Config) { c.MaxMemory = 512 })
	_, n := tc.leader(10 * time.Second)
	limit := n.meta.maxBackupBytes()
	if _, err := n.meta.RestoreBackup(ctx, failReader{t}, limit+1); !errors.Is(err, ErrBackupTooLarge) {
		t.Fatalf("announced oversized upload: %v", err)
	}
	if _, err := n.meta.RestoreBackup(ctx, io.MultiReader(bytes.NewReader(file), bytes.NewReader(make([]byte, limit))), -1); !errors.Is(err, ErrBackupTooLarge) {
		t.Fatalf("unannounced oversized upload: %v", err)
	}
	if _, err := n.meta.RestoreBackup(ctx, bytes.NewReader(file), int64(len(file))); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "--max-memory") {
		t.Fatalf("backup over --max-memory: %v", err)
	}
	if n.meta.fsm.Len() != 0 {
		t.Fatal("a refused restore changed the state")
	}
	if left, _ := filepath.Glob(filepath.Join(tc.cfgs[0].DataDir, restoreTempPattern)); len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

// TestTakeSnapshot: POST /v1/snapshot's work, on any node.
func TestTakeSnapshot(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	_, leader := tc.leader(10 * time.Second)
	mustSubmit(t, leader, bfAdd("users", "alice"))
	fol := tc.nodes[tc.followers()[0]]
	eventually(t, 10*time.Second, "follower applied", func() bool { return fol.meta.fsm.Len() == 1 })
	for _, n := range []*Node{leader, fol} {
		s, err := n.TakeSnapshot()
		if err != nil || s.Index == 0 || s.Size == 0 || s.ID == "" {
			t.Fatalf("snapshot on %s: %+v %v", n.ID(), s, err)
		}
	}
}
