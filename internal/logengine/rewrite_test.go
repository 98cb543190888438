package logengine

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// damagedEngine writes 300 entries to group 0 and 50 to group 1 (each entry
// of group 0 naming its index, padded so that the log spans several
// blocks), closes the engine, and flips one bit of needle in its tables.
func damagedEngine(t *testing.T, needle string) string {
	t.Helper()
	dir := t.TempDir()
	e, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	g0, g1 := group(t, e, 0), group(t, e, 1)
	for i := uint64(1); i <= 300; i++ {
		if err := g0.StoreLog(&raft.Log{Index: i, Term: 1, Type: raft.LogCommand,
			Data: []byte(fmt.Sprintf("entry-%04d-%s", i, strings.Repeat("x", 40)))}); err != nil {
			t.Fatal(err)
		}
	}
	for i := uint64(1); i <= 50; i++ {
		if err := g1.StoreLog(entry(1, i, 2)); err != nil {
			t.Fatal(err)
		}
	}
	if err := g0.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	flipped := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(b, []byte(needle)); i >= 0 {
			b[i+len(needle)-1] ^= 1
			flipped++
			if err := os.WriteFile(f, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if flipped == 0 {
		t.Fatalf("no table holds %q", needle)
	}
	return dir
}

// A flipped bit in a table fails the read of its block: every entry there
// reads as damaged, none as another entry. Rewrite cuts the group from the
// first damaged entry on and keeps the rest of it, its stable store and
// the other group; the engine then reads back whole, after a reopen too.
func TestRewriteCutsADamagedBlock(t *testing.T) {
	dir := damagedEngine(t, "entry-0200-")
	e := openEngine(t, dir)
	g0 := group(t, e, 0)
	first := uint64(0)
	for i := uint64(1); i <= 300; i++ {
		var l raft.Log
		err := g0.GetLog(i, &l)
		if err != nil && !errors.Is(err, ErrDamaged) {
			t.Fatalf("entry %d: %v, want ErrDamaged", i, err)
		}
		if err != nil && first == 0 {
			first = i
		}
		if err == nil && !strings.HasPrefix(string(l.Data), fmt.Sprintf("entry-%04d-", i)) {
			t.Fatalf("entry %d reads as %q", i, l.Data)
		}
	}
	if first == 0 || first > 200 || first < 100 {
		t.Fatalf("first damaged entry %d, want the start of the block holding 200", first)
	}
	if err := e.Rewrite([]uint32{0, 1}, 0, first); err != nil {
		t.Fatal(err)
	}
	check := func(e *Engine) {
		t.Helper()
		g0, g1 := group(t, e, 0), group(t, e, 1)
		checkLog(t, g1, 1, 50, func(i uint64) *raft.Log { return entry(1, i, 2) })
		if lo, _ := g0.FirstIndex(); lo != 1 {
			t.Fatalf("group 0 starts at %d", lo)
		}
		if hi, _ := g0.LastIndex(); hi != first-1 {
			t.Fatalf("group 0 ends at %d, want %d", hi, first-1)
		}
		for i := uint64(1); i < first; i++ {
			var l raft.Log
			if err := g0.GetLog(i, &l); err != nil || !strings.HasPrefix(string(l.Data), fmt.Sprintf("entry-%04d-", i)) {
				t.Fatalf("entry %d after the rewrite: %q %v", i, l.Data, err)
			}
		}
		if v, err := g0.GetUint64([]byte("CurrentTerm")); v != 7 || err != nil {
			t.Fatalf("term after the rewrite: %d %v", v, err)
		}
	}
	check(e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	check(openEngine(t, dir))
}

// Damage in the block holding a log's first entries leaves it without
// bounds: Group still opens it, FirstIndex says ErrDamaged, and a rewrite
// without the group mends the engine for the others.
func TestRewriteDropsAGroupWithoutBounds(t *testing.T) {
	dir := damagedEngine(t, "entry-0002-")
	e := openEngine(t, dir)
	g0 := group(t, e, 0)
	if _, err := g0.FirstIndex(); !errors.Is(err, ErrDamaged) {
		t.Fatalf("FirstIndex of a log whose first block is damaged: %v", err)
	}
	if err := e.Rewrite([]uint32{0, 1}, 0, 0); err != nil {
		t.Fatal(err)
	}
	if lo, err := g0.FirstIndex(); lo != 0 || err != nil {
		t.Fatalf("group 0 after it was dropped: %d %v", lo, err)
	}
	checkLog(t, group(t, e, 1), 1, 50, func(i uint64) *raft.Log { return entry(1, i, 2) })
}

// An entry the old store cannot read is moved as a damaged entry at its
// index, not dropped and not the end of the move.
func TestImportKeepsAnUnreadableEntryAsDamage(t *testing.T) {
	src := &holeyStore{LogStore: raft.NewInmemStore(), hole: 3}
	for i := uint64(1); i <= 5; i++ {
		if err := src.StoreLog(entry(0, i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	e := openEngine(t, t.TempDir())
	l := group(t, e, 0)
	if err := l.Import(src, raft.NewInmemStore()); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 5; i++ {
		var got raft.Log
		err := l.GetLog(i, &got)
		if i == 3 && !errors.Is(err, ErrDamaged) {
			t.Fatalf("the unreadable entry moved as %v %v", got, err)
		}
		if i != 3 && (err != nil || sameLog(&got, entry(0, i, 1)) != "") {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
}

type holeyStore struct {
	raft.LogStore
	hole uint64
}

func (h *holeyStore) GetLog(i uint64, l *raft.Log) error {
	if i == h.hole {
		return errors.New("msgpack decode error")
	}
	return h.LogStore.GetLog(i, l)
}

// Scan gives every index its own answer: the entry, not found, or damaged.
func TestScan(t *testing.T) {
	e := openEngine(t, t.TempDir())
	l := group(t, e, 3)
	for i := uint64(1); i <= 10; i++ {
		if err := l.StoreLog(entry(3, i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.DeleteRange(5, 5); err != nil {
		t.Fatal(err)
	}
	if err := l.Overwrite(7, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	next := uint64(2)
	l.Scan(2, 12, func(i uint64, got *raft.Log, err error) {
		if i != next {
			t.Fatalf("index %d after %d", i, next-1)
		}
		next++
		switch {
		case i == 5 || i > 10:
			if !errors.Is(err, raft.ErrLogNotFound) {
				t.Errorf("entry %d: %v, want not found", i, err)
			}
		case i == 7:
			if !errors.Is(err, ErrDamaged) {
				t.Errorf("entry 7: %v, want damaged", err)
			}
		default:
			if err != nil || sameLog(got, entry(3, i, 1)) != "" {
				t.Errorf("entry %d: %v %v", i, got, err)
			}
		}
	})
	if next != 13 {
		t.Fatalf("scan ended at %d", next-1)
	}
}

// Reads in index order come from the read-ahead; a write after it (raft
// replacing a conflicting suffix) is read back, never the entries it
// replaced.
func TestReadAheadSeesWrites(t *testing.T) {
	e := openEngine(t, t.TempDir())
	l := group(t, e, 2)
	for i := uint64(1); i <= 100; i++ {
		if err := l.StoreLog(entry(2, i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	read := func(i, term uint64) {
		t.Helper()
		var got raft.Log
		if err := l.GetLog(i, &got); err != nil || sameLog(&got, entry(2, i, term)) != "" {
			t.Fatalf("entry %d: %v %v, want term %d", i, got, err, term)
		}
	}
	for i := uint64(1); i <= 50; i++ {
		read(i, 1)
	}
	if err := l.DeleteRange(40, 100); err != nil {
		t.Fatal(err)
	}
	for i := uint64(40); i <= 60; i++ {
		if err := l.StoreLog(entry(2, i, 2)); err != nil {
			t.Fatal(err)
		}
	}
	for i := uint64(40); i <= 60; i++ {
		read(i, 2)
	}
	var got raft.Log
	if err := l.GetLog(61, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("entry 61 after the suffix was replaced: %v %v", got, err)
	}
}
