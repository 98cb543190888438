package logengine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	dto "github.com/prometheus/client_model/go"
	"go.etcd.io/bbolt"
)

// openEngine opens an engine in dir and closes it when the test ends.
func openEngine(t testing.TB, dir string) *Engine {
	t.Helper()
	e, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func group(t testing.TB, e *Engine, gid uint32) *Log {
	t.Helper()
	l, err := e.Group(gid)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// entry makes a log entry whose contents depend on gid, index and term, so
// that an entry read from the wrong place or time shows.
func entry(gid uint32, index, term uint64) *raft.Log {
	l := &raft.Log{
		Index: index,
		Term:  term,
		Type:  raft.LogType(index % 6),
		Data:  []byte(fmt.Sprintf("group %d index %d term %d", gid, index, term)),
	}
	if index%3 == 0 {
		l.Extensions = []byte{byte(gid), byte(index)}
	}
	if index%2 == 0 {
		l.AppendedAt = time.Unix(1_700_000_000, int64(index)*1001).UTC()
	}
	return l
}

// sameLog reports how got differs from want, or "" when it does not.
func sameLog(got, want *raft.Log) string {
	switch {
	case got.Index != want.Index:
		return fmt.Sprintf("index %d, want %d", got.Index, want.Index)
	case got.Term != want.Term:
		return fmt.Sprintf("term %d, want %d", got.Term, want.Term)
	case got.Type != want.Type:
		return fmt.Sprintf("type %v, want %v", got.Type, want.Type)
	case !bytes.Equal(got.Data, want.Data):
		return fmt.Sprintf("data %q, want %q", got.Data, want.Data)
	case !bytes.Equal(got.Extensions, want.Extensions):
		return fmt.Sprintf("extensions %x, want %x", got.Extensions, want.Extensions)
	case !got.AppendedAt.Equal(want.AppendedAt) || got.AppendedAt.IsZero() != want.AppendedAt.IsZero():
		return fmt.Sprintf("appended at %v, want %v", got.AppendedAt, want.AppendedAt)
	}
	return ""
}

// checkLog fails unless the store holds exactly want between its bounds.
func checkLog(t *testing.T, s raft.LogStore, first, last uint64, want func(index uint64) *raft.Log) {
	t.Helper()
	if got, _ := s.FirstIndex(); got != first {
		t.Fatalf("FirstIndex = %d, want %d", got, first)
	}
	if got, _ := s.LastIndex(); got != last {
		t.Fatalf("LastIndex = %d, want %d", got, last)
	}
	for _, i := range []uint64{first - 1, last + 1} {
		if i == 0 {
			continue
		}
		var out raft.Log
		if err := s.GetLog(i, &out); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("GetLog(%d) outside [%d, %d]: err = %v, want ErrLogNotFound", i, first, last, err)
		}
	}
	if first == 0 {
		return
	}
	for i := first; i <= last; i++ {
		var out raft.Log
		if err := s.GetLog(i, &out); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		if diff := sameLog(&out, want(i)); diff != "" {
			t.Fatalf("GetLog(%d): %s", i, diff)
		}
	}
}

func TestLogStoreContract(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir)
	l := group(t, e, 1)
	checkLog(t, l, 0, 0, nil)
	var out raft.Log
	if err := l.GetLog(1, &out); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog on empty log: %v", err)
	}

	if err := l.StoreLog(entry(1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	var batch []*raft.Log
	for i := uint64(2); i <= 10; i++ {
		batch = append(batch, entry(1, i, 1))
	}
	if err := l.StoreLogs(batch); err != nil {
		t.Fatal(err)
	}
	term1 := func(i uint64) *raft.Log { return entry(1, i, 1) }
	checkLog(t, l, 1, 10, term1)

	// Compaction drops a prefix.
	if err := l.DeleteRange(1, 4); err != nil {
		t.Fatal(err)
	}
	checkLog(t, l, 5, 10, term1)

	// A conflict truncates a suffix, then the new leader's entries follow.
	if err := l.DeleteRange(8, 10); err != nil {
		t.Fatal(err)
	}
	checkLog(t, l, 5, 7, term1)
	batch = nil
	for i := uint64(8); i <= 12; i++ {
		batch = append(batch, entry(1, i, 2))
	}
	if err := l.StoreLogs(batch); err != nil {
		t.Fatal(err)
	}
	mixed := func(i uint64) *raft.Log {
		if i >= 8 {
			return entry(1, i, 2)
		}
		return entry(1, i, 1)
	}
	checkLog(t, l, 5, 12, mixed)

	// Bounds and entries survive a restart.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	e = openEngine(t, dir)
	l = group(t, e, 1)
	checkLog(t, l, 5, 12, mixed)

	// Deleting everything empties the log; it then starts afresh.
	if err := l.DeleteRange(0, math.MaxUint64); err != nil {
		t.Fatal(err)
	}
	checkLog(t, l, 0, 0, nil)
	if err := l.StoreLogs([]*raft.Log{entry(1, 20, 3), entry(1, 21, 3)}); err != nil {
		t.Fatal(err)
	}
	checkLog(t, l, 20, 21, func(i uint64) *raft.Log { return entry(1, i, 3) })
}

func TestGroupsAreIsolated(t *testing.T) {
	e := openEngine(t, t.TempDir())
	// MaxUint32 is the last group: its key ranges end at the next kind.
	gids := []uint32{1, 2, math.MaxUint32}
	for _, gid := range gids {
		l := group(t, e, gid)
		var batch []*raft.Log
		for i := uint64(1); i <= 5; i++ {
			batch = append(batch, entry(gid, i, uint64(gid)))
		}
		if err := l.StoreLogs(batch); err != nil {
			t.Fatal(err)
		}
		if err := l.SetUint64([]byte("CurrentTerm"), uint64(gid)); err != nil {
			t.Fatal(err)
		}
	}
	// A group holding only a stable key still counts.
	if err := group(t, e, 7).Set([]byte("LastVoteCand"), []byte("n7")); err != nil {
		t.Fatal(err)
	}
	if l1, l2 := group(t, e, 1), group(t, e, 1); l1 != l2 {
		t.Fatal("Group returned two handles for one group")
	}

	check := func(gid uint32) {
		t.Helper()
		l := group(t, e, gid)
		checkLog(t, l, 1, 5, func(i uint64) *raft.Log { return entry(gid, i, uint64(gid)) })
		if v, err := l.GetUint64([]byte("CurrentTerm")); err != nil || v != uint64(gid) {
			t.Fatalf("group %d CurrentTerm = %d, %v", gid, v, err)
		}
		if _, err := l.Get([]byte("LastVoteCand")); err != ErrKeyNotFound {
			t.Fatalf("group %d sees group 7's stable key: %v", gid, err)
		}
	}
	for _, gid := range gids {
		check(gid)
	}
	if got, err := e.Groups(); err != nil || !slices.Equal(got, []uint32{1, 2, 7, math.MaxUint32}) {
		t.Fatalf("Groups = %v, %v", got, err)
	}

	if err := e.Drop(2); err != nil {
		t.Fatal(err)
	}
	if got, err := e.Groups(); err != nil || !slices.Equal(got, []uint32{1, 7, math.MaxUint32}) {
		t.Fatalf("Groups after Drop(2) = %v, %v", got, err)
	}
	l2 := group(t, e, 2)
	checkLog(t, l2, 0, 0, nil)
	if _, err := l2.GetUint64([]byte("CurrentTerm")); err != ErrKeyNotFound {
		t.Fatalf("dropped group's CurrentTerm: %v", err)
	}
	check(1)
	check(math.MaxUint32)
	if v, err := group(t, e, 7).Get([]byte("LastVoteCand")); err != nil || string(v) != "n7" {
		t.Fatalf("group 7 LastVoteCand = %q, %v", v, err)
	}
}

// TestStableStoreLikeBoltDB runs the same calls on a Log and on raft-boltdb
// and expects the same answers.
func TestStableStoreLikeBoltDB(t *testing.T) {
	bolt, err := raftboltdb.NewBoltStore(filepath.Join(t.TempDir(), "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	l := group(t, openEngine(t, t.TempDir()), 3)

	type answer struct {
		val []byte
		u   uint64
		err string
	}
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	run := func(s raft.StableStore) []answer {
		var got []answer
		get := func(k string) {
			v, err := s.Get([]byte(k))
			got = append(got, answer{val: v, err: errText(err)})
		}
		getU := func(k string) {
			u, err := s.GetUint64([]byte(k))
			got = append(got, answer{u: u, err: errText(err)})
		}
		get("missing")
		getU("missing")
		if err := s.Set([]byte("LastVoteCand"), []byte("node-2")); err != nil {
			t.Fatal(err)
		}
		get("LastVoteCand")
		if err := s.Set([]byte("LastVoteCand"), []byte("node-3")); err != nil {
			t.Fatal(err)
		}
		get("LastVoteCand")
		for _, v := range []uint64{0, 1, 1 << 40, math.MaxUint64} {
			if err := s.SetUint64([]byte("CurrentTerm"), v); err != nil {
				t.Fatal(err)
			}
			getU("CurrentTerm")
			get("CurrentTerm") // the raw 8 bytes
		}
		return got
	}
	want, got := run(bolt), run(l)
	if len(got) != len(want) {
		t.Fatalf("%d answers, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].val, want[i].val) || got[i].u != want[i].u || got[i].err != want[i].err {
			t.Errorf("answer %d: got %+v, raft-boltdb gives %+v", i, got[i], want[i])
		}
	}
	if want[0].err != "not found" {
		t.Fatalf("raft-boltdb's missing-key error is %q", want[0].err)
	}
	if _, err := l.Get([]byte("missing")); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("Get missing: %v, want ErrKeyNotFound", err)
	}
}

func TestDamageIsDetected(t *testing.T) {
	l := group(t, openEngine(t, t.TempDir()), 1)
	want := entry(1, 6, 4) // has extensions and a time
	if err := l.StoreLog(want); err != nil {
		t.Fatal(err)
	}
	raw, err := l.Stored(6)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, EncodeLog(want)) {
		t.Fatalf("stored %x, want %x", raw, EncodeLog(want))
	}
	expectDamaged := func(what string, bad []byte) {
		t.Helper()
		if err := l.Overwrite(6, bad); err != nil {
			t.Fatal(err)
		}
		var out raft.Log
		err := l.GetLog(6, &out)
		if !errors.Is(err, ErrDamaged) {
			t.Fatalf("%s: GetLog returned %v (entry %+v), want ErrDamaged", what, err, out)
		}
	}
	for i := range raw {
		for _, flip := range []byte{0x01, 0x80, 0xff} {
			bad := slices.Clone(raw)
			bad[i] ^= flip
			expectDamaged(fmt.Sprintf("byte %d ^ %#x", i, flip), bad)
		}
	}
	for n := range len(raw) {
		expectDamaged(fmt.Sprintf("cut to %d bytes", n), raw[:n])
	}
	expectDamaged("one byte added", append(slices.Clone(raw), 0))

	if err := l.Overwrite(6, raw); err != nil {
		t.Fatal(err)
	}
	var out raft.Log
	if err := l.GetLog(6, &out); err != nil {
		t.Fatal(err)
	}
	if diff := sameLog(&out, want); diff != "" {
		t.Fatal(diff)
	}
	if _, err := l.Stored(7); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("Stored(missing): %v", err)
	}
}

// boltStore makes a raft-boltdb store holding entries first..last of group
// gid and, when vote is set, a term and vote.
func boltStore(t *testing.T, gid uint32, first, last uint64, vote bool) *raftboltdb.BoltStore {
	t.Helper()
	s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(t.TempDir(), "raft.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if last > 0 {
		var batch []*raft.Log
		for i := uint64(1); i <= last; i++ {
			batch = append(batch, entry(gid, i, 7))
		}
		if err := s.StoreLogs(batch); err != nil {
			t.Fatal(err)
		}
		if first > 1 {
			if err := s.DeleteRange(1, first-1); err != nil {
				t.Fatal(err)
			}
		}
	}
	if vote {
		for _, err := range []error{
			s.SetUint64([]byte("CurrentTerm"), 8),
			s.SetUint64([]byte("LastVoteTerm"), 7),
			s.Set([]byte("LastVoteCand"), []byte("node-2")),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return s
}

func TestImportFromBoltDB(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir)
	l := group(t, e, 5)
	other := group(t, e, 6)

	// The group already holds entries and stable keys that Import replaces.
	var batch []*raft.Log
	for i := uint64(1); i <= 100; i++ {
		batch = append(batch, entry(99, i, 99))
	}
	for _, s := range []*Log{l, other} {
		if err := s.StoreLogs(batch); err != nil {
			t.Fatal(err)
		}
		if err := s.SetUint64([]byte("CurrentTerm"), 99); err != nil {
			t.Fatal(err)
		}
		if err := s.Set([]byte("Stray"), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}

	src := boltStore(t, 5, 11, 50, true)
	if done, err := l.Imported(); err != nil || done {
		t.Fatalf("Imported before Import = %v, %v", done, err)
	}
	if err := l.Import(src, src); err != nil {
		t.Fatal(err)
	}

	check := func(l *Log) {
		t.Helper()
		checkLog(t, l, 11, 50, func(i uint64) *raft.Log {
			var want raft.Log
			if err := src.GetLog(i, &want); err != nil {
				t.Fatal(err)
			}
			return &want
		})
		for key, want := range map[string]uint64{"CurrentTerm": 8, "LastVoteTerm": 7} {
			if v, err := l.GetUint64([]byte(key)); err != nil || v != want {
				t.Fatalf("%s = %d, %v; want %d", key, v, err, want)
			}
		}
		if v, err := l.Get([]byte("LastVoteCand")); err != nil || string(v) != "node-2" {
			t.Fatalf("LastVoteCand = %q, %v", v, err)
		}
		if _, err := l.Get([]byte("Stray")); err != ErrKeyNotFound {
			t.Fatalf("a stable key from before the import survived: %v", err)
		}
		if done, err := l.Imported(); err != nil || !done {
			t.Fatalf("Imported = %v, %v", done, err)
		}
	}
	check(l)
	// The imported entries equal raft-boltdb's own decoding and our test
	// entries; check the latter too so a shared mistake would show.
	var got raft.Log
	if err := l.GetLog(20, &got); err != nil {
		t.Fatal(err)
	}
	if diff := sameLog(&got, entry(5, 20, 7)); diff != "" {
		t.Fatal(diff)
	}

	// The neighbouring group is untouched.
	checkLog(t, other, 1, 100, func(i uint64) *raft.Log { return entry(99, i, 99) })
	if done, _ := other.Imported(); done {
		t.Fatal("Import marked another group")
	}

	// It all survives a restart.
	e.Close()
	e = openEngine(t, dir)
	check(group(t, e, 5))

	// Importing an empty store without term or vote empties the group.
	l = group(t, e, 5)
	if err := l.Import(boltStore(t, 5, 0, 0, false), boltStore(t, 5, 0, 0, false)); err != nil {
		t.Fatal(err)
	}
	checkLog(t, l, 0, 0, nil)
	if _, err := l.GetUint64([]byte("CurrentTerm")); err != ErrKeyNotFound {
		t.Fatalf("CurrentTerm after importing none: %v", err)
	}
	if done, err := l.Imported(); err != nil || !done {
		t.Fatalf("Imported = %v, %v", done, err)
	}
	if got, _ := e.Groups(); !slices.Equal(got, []uint32{5, 6}) {
		t.Fatalf("Groups = %v", got)
	}

	// Drop removes the import mark too.
	if err := e.Drop(5); err != nil {
		t.Fatal(err)
	}
	if done, err := l.Imported(); err != nil || done {
		t.Fatalf("Imported after Drop = %v, %v", done, err)
	}
	if got, _ := e.Groups(); !slices.Equal(got, []uint32{6}) {
		t.Fatalf("Groups after Drop = %v", got)
	}
}

func TestOpenLockedInProcess(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir)
	if e2, err := Open(dir, nil); !errors.Is(err, ErrLocked) {
		if e2 != nil {
			e2.Close()
		}
		t.Fatalf("second Open: %v, want ErrLocked", err)
	} else {
		t.Log(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2, err := Open(dir, nil)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	e2.Close()
}

// lockChildEnv names the directory a child test process tries to open.
const lockChildEnv = "LOGENGINE_LOCK_CHILD_DIR"

func TestOpenLockedAcrossProcesses(t *testing.T) {
	if dir := os.Getenv(lockChildEnv); dir != "" {
		// Child: report what Open says about the parent's directory.
		e, err := Open(dir, nil)
		switch {
		case errors.Is(err, ErrLocked):
			fmt.Println("child: locked:", err)
		case err != nil:
			fmt.Println("child: error:", err)
		default:
			e.Close()
			fmt.Println("child: opened")
		}
		return
	}
	dir := t.TempDir()
	e := openEngine(t, dir)
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenLockedAcrossProcesses$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "child: locked:") {
		t.Fatalf("child could open a locked engine:\n%s", out)
	}
	t.Logf("%s", bytes.SplitN(out, []byte("\n"), 2)[0])
	e.Close()
}

// TestConcurrentGroups writes 8 groups from 8 goroutines while other
// goroutines read them, then checks every entry.
func TestConcurrentGroups(t *testing.T) {
	const groups, commits = 8, 300
	e := openEngine(t, t.TempDir())
	var writers, readers sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, 2*groups)
	for g := uint32(1); g <= groups; g++ {
		l := group(t, e, g)
		writers.Add(1)
		go func() {
			defer writers.Done()
			next := uint64(1)
			for c := range commits {
				var batch []*raft.Log
				for range 1 + c%3 {
					batch = append(batch, entry(g, next, 1))
					next++
				}
				if err := l.StoreLogs(batch); err != nil {
					errs <- err
					return
				}
			}
		}()
		readers.Add(1)
		go func() {
			defer readers.Done()
			for n := uint64(0); ; n++ {
				select {
				case <-done:
					return
				default:
				}
				last, _ := l.LastIndex()
				if last == 0 {
					continue
				}
				i := 1 + n*7919%last // wander over the log
				var out raft.Log
				if err := l.GetLog(i, &out); err != nil {
					errs <- fmt.Errorf("group %d GetLog(%d) with last %d: %w", g, i, last, err)
					return
				}
				if diff := sameLog(&out, entry(g, i, 1)); diff != "" {
					errs <- fmt.Errorf("group %d entry %d: %s", g, i, diff)
					return
				}
			}
		}()
	}
	writers.Wait()
	close(done)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var want uint64
	for c := range commits {
		want += uint64(1 + c%3)
	}
	for g := uint32(1); g <= groups; g++ {
		checkLog(t, group(t, e, g), 1, want, func(i uint64) *raft.Log { return entry(g, i, 1) })
	}
}

func TestEncodeLogRoundTrip(t *testing.T) {
	for _, l := range []*raft.Log{
		{},
		{Term: math.MaxUint64, Type: raft.LogConfiguration, Data: make([]byte, 300)},
		{Term: 3, AppendedAt: time.Unix(-5, -7)}, // before 1970
		entry(1, 12, 2),
	} {
		var out raft.Log
		if err := DecodeLog(l.Index, EncodeLog(l), &out); err != nil {
			t.Fatal(err)
		}
		if diff := sameLog(&out, l); diff != "" {
			t.Fatal(diff)
		}
	}
}

// withCRC closes body with a valid CRC, so the fuzzer also reaches the
// decoder behind the CRC check.
func withCRC(body []byte) []byte {
	return binary.BigEndian.AppendUint32(slices.Clone(body), crc32.Checksum(body, castagnoli))
}

func FuzzDecodeLog(f *testing.F) {
	for _, l := range []*raft.Log{{}, entry(1, 2, 3), entry(7, 9, 1<<40), {Data: make([]byte, 200)}} {
		f.Add(EncodeLog(l))
	}
	// A body whose term 0 is written in two bytes: it must not decode, as
	// it would not re-encode the same (withCRC gives it a valid CRC).
	f.Add([]byte{codecVersion, 0x80, 0x00, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, v := range [][]byte{b, withCRC(b)} {
			var out raft.Log
			err := DecodeLog(42, v, &out)
			if err != nil {
				if !errors.Is(err, ErrDamaged) {
					t.Fatalf("error does not wrap ErrDamaged: %v", err)
				}
				continue
			}
			if out.Index != 42 {
				t.Fatalf("index %d, want 42", out.Index)
			}
			if again := EncodeLog(&out); !bytes.Equal(again, v) {
				t.Fatalf("decoded %x to %+v, which encodes to %x", v, out, again)
			}
		}
	})
}

// BenchmarkCommits measures synced commits of 8 entries of 100 bytes, b.N
// commits in all, spread over 1 or 8 groups that commit concurrently: on
// the log engine (one Pebble database) and on raft-boltdb (a file per
// group) for comparison.
func BenchmarkCommits(b *testing.B) {
	for _, engine := range []string{"pebble", "boltdb"} {
		for _, groups := range []int{1, 8} {
			b.Run(fmt.Sprintf("engine=%s/groups=%d", engine, groups), func(b *testing.B) {
				dir := b.TempDir()
				stores := make([]raft.LogStore, groups)
				var e *Engine
				if engine == "pebble" {
					e = openEngine(b, dir)
					for g := range stores {
						stores[g] = group(b, e, uint32(g))
					}
				} else {
					for g := range stores {
						s, err := raftboltdb.New(raftboltdb.Options{
							Path:        filepath.Join(dir, fmt.Sprintf("group-%d.db", g)),
							BoltOptions: &bbolt.Options{NoFreelistSync: true, FreelistType: bbolt.FreelistMapType},
						})
						if err != nil {
							b.Fatal(err)
						}
						b.Cleanup(func() { s.Close() })
						stores[g] = s
					}
				}
				syncsBefore := walSyncs(e)
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for g, s := range stores {
					n := b.N / groups
					if g < b.N%groups {
						n++
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						batch := make([]*raft.Log, 8)
						for i := range batch {
							batch[i] = &raft.Log{Term: 1, Type: raft.LogCommand, Data: make([]byte, 100)}
						}
						next := uint64(1)
						for range n {
							for _, l := range batch {
								l.Index = next
								next++
							}
							if err := s.StoreLogs(batch); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N), "ns/commit")
				if e != nil {
					b.ReportMetric(float64(b.N)/float64(walSyncs(e)-syncsBefore), "commits/fsync")
				}
			})
		}
	}
}

// walSyncs counts the WAL fsyncs of e's Pebble database so far (0 for nil).
func walSyncs(e *Engine) uint64 {
	if e == nil {
		return 0
	}
	var m dto.Metric
	if err := e.db.Metrics().LogWriter.FsyncLatency.Write(&m); err != nil {
		panic(err)
	}
	return m.GetHistogram().GetSampleCount()
}
