package cluster

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

func writeSnap(t *testing.T, store raft.SnapshotStore, index uint64, data []byte) string {
	t.Helper()
	_, trans := raft.NewInmemTransport("")
	sink, err := store.Create(1, index, 2, raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: "a"}}}, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return sink.ID()
}

func readSnap(t *testing.T, store raft.SnapshotStore, id string) ([]byte, error) {
	t.Helper()
	_, rc, err := store.Open(id)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// The store reads back what it wrote, and what raft's own file store wrote in
// the same directory; it keeps the newest two, and a damaged state file is an
// error at the end of reading it, never data.
func TestSnapStore(t *testing.T) {
	dir := t.TempDir()
	old, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	oldID := writeSnap(t, old, 10, []byte("written by raft's store"))
	os.MkdirAll(filepath.Join(dir, snapDir, "9-99-1.tmp"), 0o755) // a crash mid-snapshot

	s, err := newSnapStore(dir, 2, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, snapDir, "9-99-1.tmp")); !os.IsNotExist(err) {
		t.Fatal("a half-written snapshot was left behind")
	}
	if b, err := readSnap(t, s, oldID); err != nil || string(b) != "written by raft's store" {
		t.Fatalf("raft's snapshot: %q %v", b, err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<20) // 48 MiB: crosses a writeback hint
	id20 := writeSnap(t, s, 20, big)
	id30 := writeSnap(t, s, 30, []byte("newest"))
	metas, err := s.List()
	if err != nil || len(metas) != 2 || metas[0].ID != id30 || metas[1].ID != id20 {
		t.Fatalf("List: %v %v", metas, err)
	}
	if _, err := os.Stat(filepath.Join(dir, snapDir, oldID)); !os.IsNotExist(err) {
		t.Fatal("the oldest snapshot was not reaped")
	}
	if b, err := readSnap(t, s, id20); err != nil || !bytes.Equal(b, big) {
		t.Fatalf("48 MiB snapshot read back: %d bytes, %v", len(b), err)
	}
	// Damage the state file, same size.
	state := filepath.Join(dir, snapDir, id20, snapStateFile)
	f, _ := os.OpenFile(state, os.O_RDWR, 0)
	f.WriteAt([]byte{'X'}, 40<<20)
	f.Close()
	if _, err := readSnap(t, s, id20); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("damaged snapshot: %v", err)
	}
	// Truncated.
	os.Truncate(state, 1000)
	if _, err := readSnap(t, s, id20); err == nil {
		t.Fatal("a truncated snapshot opened")
	}
	// Cancel leaves nothing.
	sink, _ := s.Create(1, 40, 2, raft.Configuration{}, 1, nil)
	sink.Write([]byte("partial"))
	sink.Cancel()
	if ents, _ := os.ReadDir(filepath.Join(dir, snapDir)); len(ents) != 2 {
		t.Fatalf("%d entries after a cancelled snapshot, want 2", len(ents))
	}
}
