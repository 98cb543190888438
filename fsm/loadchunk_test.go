package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/rookerydb/rookery/filters"
)

// Issue 9, part 5: dumps and counters that clients cannot poison. A client can
// compute any checksum it likes, so these tests forge chunks the way the server
// checks them and hold the state machine to what every replica must keep: no
// counter wraps, and INFO's numbers stay within what the filter can hold.

var chunkTable = crc32.MakeTable(crc32.Castagnoli)

// sealings returns the ways a client that knows the dump format seals body as
// the chunk of the dump with this header that iter names: as this build checks
// chunks (a CRC-32C of the dump's id, a hash of its header, then the offset and
// the bytes) and as the build before it did (of the offset and the bytes). The
// tests send the first and, if it is refused, the second, so that they hold a
// build to the invariants whatever checksum it wants.
func sealings(header []byte, iter int64, body []byte) [][]byte {
	var id, off [8]byte
	binary.LittleEndian.PutUint64(id[:], filters.Hash(header).H1)
	binary.LittleEndian.PutUint64(off[:], uint64(iter-1-int64(len(body))))
	now := crc32.Update(crc32.Update(crc32.Checksum(id[:], chunkTable), chunkTable, off[:]), chunkTable, body)
	before := crc32.Update(crc32.Checksum(off[:], chunkTable), chunkTable, body)
	seal := func(sum uint32) []byte {
		return binary.LittleEndian.AppendUint32(append([]byte(nil), body...), sum)
	}
	return [][]byte{seal(now), seal(before)}
}

// loadForged sends body, sealed each way until one is accepted, as the chunk
// at iter of key's dump, and returns the last result.
func loadForged(h *harness, fam Family, key string, header []byte, iter int64, body []byte) *Result {
	var r *Result
	for _, data := range sealings(header, iter, body) {
		if r = h.apply(&Command{Op: OpLoadChunk, Family: fam, Key: key, Iter: iter, Data: data}); r.Err == nil {
			break
		}
	}
	return r
}

// dumpOf returns key's dump: the header and each chunk as (iterator, data).
func dumpOf(t testing.TB, h *harness, fam Family, key string) (header []byte, iters []int64, chunks [][]byte) {
	t.Helper()
	for it := int64(0); ; {
		next, data, err := h.f.ScanDump(fam, key, it)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case next == 0:
			return header, iters, chunks
		case it == 0:
			header = data
		default:
			iters, chunks = append(iters, next), append(chunks, data)
		}
		it = next
	}
}

func (h *harness) encoding(fam Family, key string) []byte {
	var b []byte
	if err := h.f.read(fam, key, func(f filters.Filter) { b = encodeFilter(h.t, f) }); err != nil {
		h.t.Fatal(err)
	}
	return b
}

// TestForgedCuckooChunkCannotPoison: measured on the build before, a random
// payload with a valid checksum loaded into a cuckoo key holding 10 items, and
// then 91 of 5,000 deletes of items never added succeeded, taking the count to
// 18446744073709551525 on every replica. Whatever the load does now, no delete
// takes the count below zero and CF.INFO stays within the filter's slots.
func TestForgedCuckooChunkCannotPoison(t *testing.T) {
	h := newHarness(t)
	h.ok(reserve(FamilyCF, "src", cfSpec(1024, 2, 1)))
	for i := range 10 {
		h.ok(add(FamilyCF, "src", fmt.Sprint("real-", i)))
	}
	header, iters, chunks := dumpOf(t, h, FamilyCF, "src")
	h.ok(&Command{Op: OpLoadChunk, Family: FamilyCF, Key: "dst", Iter: 1, Data: header})
	rng := rand.New(rand.NewPCG(9, 9))
	for i, c := range chunks {
		body := make([]byte, len(c)-4)
		for j := range body {
			body[j] = byte(rng.Uint32())
		}
		loadForged(h, FamilyCF, "dst", header, iters[i], body)
	}
	in, err := h.f.Info(FamilyCF, "dst")
	if err != nil {
		t.Fatal(err)
	}
	deleted := 0
	for i := range 5000 {
		r := h.apply(del(FamilyCF, "dst", fmt.Sprint("never-", i)))
		now, err := h.f.Info(FamilyCF, "dst")
		if err != nil {
			t.Fatal(err)
		}
		if r.Err == nil && r.Ints[0] == 1 {
			deleted++
			if now.Items != in.Items-1 {
				t.Fatalf("a delete took the count from %d to %d", in.Items, now.Items)
			}
		} else if now.Items != in.Items {
			t.Fatalf("a failed delete changed the count from %d to %d", in.Items, now.Items)
		}
		if now.Items > now.Capacity {
			t.Fatalf("after %d deletes: %d items in %d slots", deleted, now.Items, now.Capacity)
		}
		in = now
	}
	if deleted > 10 {
		t.Fatalf("%d deletes of items never added succeeded on a filter of 10", deleted)
	}
}

// TestChunkOfAnotherFilterRefused: measured on the build before, a cuckoo
// chunk loaded into a Bloom key answered OK and overwrote its bits. A chunk
// belongs to one dump now: into a complete filter, or into one being loaded
// from another dump, it is refused and changes nothing.
func TestChunkOfAnotherFilterRefused(t *testing.T) {
	h := newHarness(t)
	h.ok(reserve(FamilyBF, "bloom", bfSpec(100_000, 0.01, 2)))
	h.ok(reserve(FamilyBF, "twin", bfSpec(100_000, 0.01, 2)))
	h.ok(reserve(FamilyCF, "cuckoo", cfSpec(1024, 2, 1)))
	for i := range 100 {
		h.ok(add(FamilyBF, "bloom", fmt.Sprint("b-", i)))
		h.ok(add(FamilyCF, "cuckoo", fmt.Sprint("c-", i)))
	}
	h.ok(add(FamilyBF, "twin", "only one"))
	_, citers, cchunks := dumpOf(t, h, FamilyCF, "cuckoo")
	bheader, biters, bchunks := dumpOf(t, h, FamilyBF, "bloom")
	_, titers, tchunks := dumpOf(t, h, FamilyBF, "twin")

	before := h.encoding(FamilyBF, "bloom")
	load := func(key string, iter int64, data []byte) *Result {
		return h.apply(&Command{Op: OpLoadChunk, Family: FamilyBF, Key: key, Iter: iter, Data: data})
	}
	if r := load("bloom", citers[0], cchunks[0]); !errors.Is(r.Err, ErrBadData) {
		t.Fatalf("a cuckoo chunk into a Bloom key: %v, want ErrBadData", r.Err)
	}
	if r := load("bloom", biters[0], bchunks[0]); !errors.Is(r.Err, ErrBadData) {
		t.Fatalf("the Bloom's own chunk into it, complete: %v, want ErrBadData", r.Err)
	}
	if string(h.encoding(FamilyBF, "bloom")) != string(before) {
		t.Fatal("a refused chunk changed the Bloom filter")
	}

	h.ok(&Command{Op: OpLoadChunk, Family: FamilyBF, Key: "copy", Iter: 1, Data: bheader})
	for name, c := range map[string]struct {
		iter int64
		data []byte
	}{
		"a cuckoo chunk":                        {citers[0], cchunks[0]},
		"a chunk of a Bloom of the same params": {titers[0], tchunks[0]},
	} {
		if r := load("copy", c.iter, c.data); !errors.Is(r.Err, ErrBadData) {
			t.Errorf("%s into a Bloom being loaded: %v, want ErrBadData", name, r.Err)
		}
	}
	for i := range bchunks {
		h.ok(&Command{Op: OpLoadChunk, Family: FamilyBF, Key: "copy", Iter: biters[i], Data: bchunks[i]})
	}
	if string(h.encoding(FamilyBF, "copy")) != string(before) {
		t.Fatal("after refused chunks, the dump did not load into a copy of its filter")
	}
}

// TestLoadingKeyRefusesWrites: until its last chunk is in, a key answers reads
// from what has arrived and refuses every write but its chunks, since its
// counters are not checked yet; a DEL removes it. Once complete it is an
// ordinary filter.
func TestLoadingKeyRefusesWrites(t *testing.T) {
	h := newHarness(t)
	h.ok(reserve(FamilyCF, "src", cfSpec(200_000, 4, 2)))
	for i := range 1000 {
		h.ok(add(FamilyCF, "src", fmt.Sprint("i-", i)))
	}
	header, iters, chunks := dumpOf(t, h, FamilyCF, "src")
	h.ok(&Command{Op: OpLoadChunk, Family: FamilyCF, Key: "dst", Iter: 1, Data: header})
	for _, c := range []*Command{
		add(FamilyCF, "dst", "x"),
		{Op: OpAdd, Family: FamilyCF, Key: "dst", Items: items("x", "y"), Multi: true, NX: true, Spec: cfSpec(1024, 2, 1)},
		del(FamilyCF, "dst", "i-1"),
	} {
		if r := h.apply(c); !errors.Is(r.Err, ErrBadData) {
			t.Errorf("op %d on a key being loaded: %v, want ErrBadData", c.Op, r.Err)
		}
	}
	if in, err := h.f.Info(FamilyCF, "dst"); err != nil || in.Items != 1000 {
		t.Errorf("CF.INFO while loading: %+v, %v; want the header's 1000 items", in, err)
	}
	for i := range chunks {
		h.ok(&Command{Op: OpLoadChunk, Family: FamilyCF, Key: "dst", Iter: iters[i], Data: chunks[i]})
	}
	if !h.exists(FamilyCF, "dst", "i-999") || h.ok(del(FamilyCF, "dst", "i-1")).Ints[0] != 1 {
		t.Error("the complete copy does not answer and delete as its source")
	}

	h.ok(&Command{Op: OpLoadChunk, Family: FamilyCF, Key: "gone", Iter: 1, Data: header})
	h.ok(&Command{Op: OpDelKeys, Keys: []string{"gone"}})
	h.ok(add(FamilyCF, "gone", "fresh"))
}

// TestInconsistentLastChunkRefused: a dump whose payload contradicts its
// header's counters is refused at its last chunk; the key stays as it was, and
// the faithful chunk completes it.
func TestInconsistentLastChunkRefused(t *testing.T) {
	h := newHarness(t)
	h.ok(reserve(FamilyCF, "src", cfSpec(1000, 4, 1)))
	for i := range 300 {
		h.ok(add(FamilyCF, "src", fmt.Sprint("i-", i)))
	}
	header, iters, chunks := dumpOf(t, h, FamilyCF, "src")
	if len(chunks) != 1 {
		t.Fatalf("%d chunks", len(chunks))
	}
	h.ok(&Command{Op: OpLoadChunk, Family: FamilyCF, Key: "dst", Iter: 1, Data: header})
	body := append([]byte(nil), chunks[0][:len(chunks[0])-4]...)
	for i := range body {
		if body[i] != 0 {
			body[i] = 0 // one fingerprint fewer than the header's count
			break
		}
	}
	if r := h.apply(&Command{Op: OpLoadChunk, Family: FamilyCF, Key: "dst", Iter: iters[0],
		Data: sealings(header, iters[0], body)[0]}); !errors.Is(r.Err, ErrBadData) {
		t.Fatalf("a fingerprint short: %v, want ErrBadData", r.Err)
	}
	h.ok(&Command{Op: OpLoadChunk, Family: FamilyCF, Key: "dst", Iter: iters[0], Data: chunks[0]})
	if string(h.encoding(FamilyCF, "dst")) != string(h.encoding(FamilyCF, "src")) {
		t.Fatal("the faithful chunk did not complete the copy")
	}
}

// TestLoadAcrossSnapshot: a replica restored from a snapshot taken in the middle
// of a load answers every later command as the replica that took it.
func TestLoadAcrossSnapshot(t *testing.T) {
	a := newHarness(t)
	a.ok(reserve(FamilyBF, "src", bfSpec(2_000_000, 0.001, 2)))
	for i := range 2000 {
		a.ok(add(FamilyBF, "src", fmt.Sprint("i-", i)))
	}
	header, iters, chunks := dumpOf(t, a, FamilyBF, "src")
	if len(chunks) < 3 {
		t.Fatalf("%d chunks", len(chunks))
	}
	a.ok(&Command{Op: OpLoadChunk, Family: FamilyBF, Key: "dst", Iter: 1, Data: header})
	a.ok(&Command{Op: OpLoadChunk, Family: FamilyBF, Key: "dst", Iter: iters[1], Data: chunks[1]})
	b := &harness{t: t, f: restored(t, snapshotBytes(t, a.f)), index: a.index, now: a.now}

	bad := append([]byte(nil), chunks[0]...)
	bad[0] ^= 1
	cmds := []*Command{
		add(FamilyBF, "dst", "x"),
		{Op: OpLoadChunk, Family: FamilyBF, Key: "dst", Iter: iters[0], Data: bad},
	}
	for i := range chunks {
		cmds = append(cmds, &Command{Op: OpLoadChunk, Family: FamilyBF, Key: "dst", Iter: iters[i], Data: chunks[i]})
	}
	cmds = append(cmds, add(FamilyBF, "dst", "x"))
	for i, c := range cmds {
		ra, rb := a.apply(c), b.apply(c)
		if !reflect.DeepEqual(ra, rb) {
			t.Fatalf("command %d: %+v on the original, %+v on the restored replica", i, ra, rb)
		}
	}
	if string(a.encoding(FamilyBF, "dst")) != string(b.encoding(FamilyBF, "dst")) {
		t.Fatal("the replicas ended apart")
	}
}

// fzSources are the filters FuzzApplyLoadChunk loads dumps of, one per family
// and kind, each with a few items.
func fzSources(t testing.TB) (*harness, []fzSource) {
	h := newHarness(t)
	srcs := []fzSource{
		{FamilyBF, "bf", reserve(FamilyBF, "bf", bfSpec(300, 0.01, 2))},
		{FamilyCF, "cf", reserve(FamilyCF, "cf", cfSpec(64, 2, 1))},
		{FamilyCF, "cf4", reserve(FamilyCF, "cf4", cfSpec(40, 4, 2))},
		{FamilyCBF, "cbf", reserve(FamilyCBF, "cbf", cbfSpec(filters.KindCounting, 50))},
		{FamilyCBF, "dleft", reserve(FamilyCBF, "dleft", cbfSpec(filters.KindDLeft, 50))},
		{FamilyBF, "wbf", reserve(FamilyBF, "wbf", wbSpec(300, 0.01, 7e9, 0))},
		{FamilyCF, "wcf", reserve(FamilyCF, "wcf", wcSpec(64, 7e9))},
	}
	for _, s := range srcs {
		h.ok(s.reserve)
		for i := range 30 {
			h.ok(add(s.fam, s.key, fmt.Sprint("item-", i%20)))
		}
	}
	return h, srcs
}

type fzSource struct {
	fam     Family
	key     string
	reserve *Command
}

// FuzzApplyLoadChunk loads into a fresh key the dump of a small filter whose
// payload the fuzzer patches, each chunk sealed for the dump, then applies the
// adds and deletes it picks, on a replica and on a copy restored from a snapshot
// taken after the load. After every command the replicas agree, a delete that
// succeeds takes the count down by exactly one, and INFO stays in bounds: a
// cuckoo filter holds no more items than slots, a Bloom filter no more than its
// capacity.
func FuzzApplyLoadChunk(f *testing.F) {
	src, srcs := fzSources(f)
	f.Add(uint8(1), []byte{}, []byte{1, 2, 3, 4})
	f.Add(uint8(1), []byte{0, 0xFF, 0x7F, 0x01}, []byte{0x81, 0x82, 0x83})
	f.Add(uint8(0), []byte{5, 0xFF}, []byte{9, 0x99})
	f.Add(uint8(3), []byte{2, 0x11, 7, 0xF0}, []byte{0x80, 1, 0x80})
	f.Add(uint8(4), []byte{1, 0x10}, []byte{3, 0x83})
	f.Add(uint8(5), []byte{9, 0x01}, []byte{3, 4, 5})
	f.Add(uint8(6), []byte{2, 0x10}, []byte{3, 0x83, 0x84})
	f.Fuzz(func(t *testing.T, which uint8, patch, ops []byte) {
		s := srcs[int(which)%len(srcs)]
		header, iters, chunks := dumpOf(t, src, s.fam, s.key)
		a := newHarness(t)
		a.ok(&Command{Op: OpLoadChunk, Family: s.fam, Key: "k", Iter: 1, Data: header})
		for i, c := range chunks {
			body := append([]byte(nil), c[:len(c)-4]...)
			for p := patch; len(p) >= 2; p = p[2:] {
				body[int(p[0])%len(body)] ^= p[1]
			}
			// Refused or not, every replica must agree; the invariants below
			// hold either way.
			a.apply(&Command{Op: OpLoadChunk, Family: s.fam, Key: "k", Iter: iters[i],
				Data: sealings(header, iters[i], body)[0]})
		}
		b := &harness{t: t, f: restored(t, snapshotBytes(t, a.f)), index: a.index, now: a.now}
		for i, op := range ops[:min(len(ops), 200)] {
			item := fmt.Sprint("item-", op&0x1F)
			if op&0x20 != 0 {
				item = fmt.Sprint("never-", op)
			}
			c := add(s.fam, "k", item)
			if op&0x80 != 0 && s.fam != FamilyBF {
				c = del(s.fam, "k", item)
			}
			before, _ := a.f.Info(s.fam, "k")
			ra, rb := a.apply(c), b.apply(c)
			if !reflect.DeepEqual(ra, rb) {
				t.Fatalf("op %d: the replicas answered %+v and %+v", i, ra, rb)
			}
			after, err := a.f.Info(s.fam, "k")
			if err != nil {
				t.Fatal(err)
			}
			if c.Op == OpDelete && ra.Err == nil && ra.Ints[0] == 1 && (before.Items == 0 || after.Items != before.Items-1) {
				t.Fatalf("op %d: a delete took the count from %d to %d", i, before.Items, after.Items)
			}
			if (s.fam == FamilyCF || s.fam == FamilyBF) && after.Items > after.Capacity {
				t.Fatalf("op %d: %d items, capacity %d", i, after.Items, after.Capacity)
			}
		}
		if string(a.encoding(s.fam, "k")) != string(b.encoding(s.fam, "k")) {
			t.Fatal("the replicas ended apart")
		}
	})
}

// TestCheckLoadChunk: the whole-chunk check says what LoadChunk would, for
// both of RedisBloom's layouts, and changes nothing.
func TestCheckLoadChunk(t *testing.T) {
	h := newHarness(t)
	f := h.f
	h.ok(reserve(FamilyBF, "bf", Spec{Kind: filters.KindRBChain, Capacity: 1000, ErrorRate: 0.01, Expansion: 2}))
	h.ok(reserve(FamilyCF, "cf", Spec{Kind: filters.KindRBCuckoo, Capacity: 1000, BucketSize: 2, MaxIterations: 20, Expansion: 1}))
	before, _ := f.Info(FamilyBF, "bf")
	cases := []struct {
		fam  Family
		key  string
		iter int64
		n    int
		want error
	}{
		{FamilyBF, "bf", 101, 100, nil},
		{FamilyBF, "bf", 100, 200, ErrBadData},               // the cursor before the chunk's start
		{FamilyBF, "bf", 1 << 40, 10, ErrChunkOutside},       // no link there
		{FamilyBF, "bf", 1 << 20, 1<<20 - 1, ErrChunkTooBig}, // runs past the link
		{FamilyCF, "cf", 101, 99, nil},
		{FamilyCF, "cf", 1 << 30, 1<<30 - 2, ErrBadData},
		{FamilyBF, "nope", 2, 1, ErrNotFound},
		{FamilyCF, "bf", 2, 1, ErrWrongType},
	}
	for i, c := range cases {
		err := f.CheckLoadChunk(&Command{Op: OpLoadChunk, Family: c.fam, Key: c.key, Iter: c.iter, Data: make([]byte, c.n)})
		if !errors.Is(err, c.want) && !(err == nil && c.want == nil) {
			t.Errorf("case %d: %v, want %v", i, err, c.want)
		}
	}
	if after, _ := f.Info(FamilyBF, "bf"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("a check changed the filter")
	}
	// Our own layout takes no chunk this big: the check says what applying it does.
	h.ok(reserve(FamilyBF, "own", bfSpec(100_000, 0.01, 2)))
	n := filters.DumpChunkBytes + 100
	for _, iter := range []int64{int64(n) + 1, 1 << 40, 5, int64(n) + 100} {
		c := &Command{Op: OpLoadChunk, Family: FamilyBF, Key: "own", Iter: iter, Data: make([]byte, n)}
		checked := f.CheckLoadChunk(c)
		if checked == nil {
			t.Fatalf("iter %d: a chunk of %d bytes passed the check", iter, n)
		}
		if r := h.apply(c); !errors.Is(checked, r.Err) {
			t.Fatalf("iter %d: checked %v, applied %v", iter, checked, r.Err)
		}
		var size *ChunkSizeError
		if !errors.As(checked, &size) || size.Max != MaxOwnChunkBytes || size.Got != uint64(n) {
			t.Fatalf("iter %d: %v does not name the chunk's size and the %d the filter takes", iter, checked, MaxOwnChunkBytes)
		}
	}
	// A chunk larger than every link of a RedisBloom chain is refused naming
	// the largest link; one that fits a link is judged by its place alone.
	big := uint64(0)
	_ = f.read(FamilyBF, "bf", func(flt filters.Filter) {
		for _, l := range flt.(*filters.RBChain).Links() {
			big = max(big, l.Bytes)
		}
	})
	n2 := uint64(MaxOwnChunkBytes) + big
	var size *ChunkSizeError
	if err := f.CheckChunkSize(FamilyBF, "bf", int64(n2)+1, n2); !errors.As(err, &size) || size.Max != max(big, MaxOwnChunkBytes) {
		t.Fatalf("a chunk of %d bytes into a chain whose largest link holds %d: %v", n2, big, err)
	}
	if err := f.CheckChunkSize(FamilyBF, "missing", 2, n2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a chunk into a missing key: %v", err)
	}
	if _, known := f.ChunkLimit(FamilyBF, "missing", 2); known {
		t.Fatal("a replica judged a chunk into a key it does not hold")
	}
}
