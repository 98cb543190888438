package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
)

// ms is the harness's clock (1e18 ns) in Unix milliseconds.
const ms = int64(1e12)

func expire(key string, ttl int64, cond ExpireCond) *Command {
	return &Command{Op: OpExpire, Key: key, Expire: ttl, ExpireIf: cond}
}

func expireAt(key string, deadline int64, cond ExpireCond) *Command {
	return &Command{Op: OpExpire, Key: key, Expire: deadline, ExpireAt: true, ExpireIf: cond}
}

func persist(key string) *Command { return &Command{Op: OpPersist, Key: key} }

// tick is the leader's expiry tick at t ns.
func tick(t int64) *Command { return &Command{Op: OpExpireTick, Time: t} }

// expiredLog records what OnExpire reports.
type expiredLog struct{ keys []string }

func (l *expiredLog) note(key string, index uint64) {
	l.keys = append(l.keys, fmt.Sprintf("%s@%d", key, index))
}

func newExpireHarness(t *testing.T) (*harness, *expiredLog) {
	l := &expiredLog{}
	return &harness{t: t, f: New(Options{OnExpire: l.note}), now: 1e18}, l
}

func (h *harness) deadline(key string) int64 {
	d, _ := h.f.Expiry(key)
	return d
}

// TestExpireReplies: EXPIRE and PERSIST answer as Redis 7 does, conditions
// included (the same sequence gives the same answers against redis-server).
func TestExpireReplies(t *testing.T) {
	h, _ := newExpireHarness(t)
	h.ok(add(FamilyBF, "k", "a"))
	h.ok(add(FamilyBF, "j", "a"))
	steps := []struct {
		c        *Command
		want     int64
		deadline int64 // k's afterwards, 0 for none
	}{
		{expire("missing", 10_000, 0), 0, 0},
		{persist("missing"), 0, 0},
		{persist("k"), 0, 0},
		{expire("k", 10_000, ExpireXX), 0, 0},
		{expire("k", 10_000, ExpireXX|ExpireGT), 0, 0},
		{expire("k", 10_000, ExpireGT), 0, 0}, // no deadline counts as infinite
		{expire("k", 10_000, ExpireNX), 1, ms + 10_000},
		{expire("k", 20_000, ExpireNX), 0, ms + 10_000},
		{expire("k", 5_000, ExpireGT), 0, ms + 10_000},
		{expire("k", 10_000, ExpireGT), 0, ms + 10_000},
		{expire("k", 30_000, ExpireGT), 1, ms + 30_000},
		{expire("k", 40_000, ExpireLT), 0, ms + 30_000},
		{expire("k", 5_000, ExpireLT|ExpireXX), 1, ms + 5_000},
		{expire("k", 7_000, ExpireXX), 1, ms + 7_000},
		{expireAt("k", ms+60_000, 0), 1, ms + 60_000},
		{expireAt("k", math.MaxInt64, 0), 1, math.MaxInt64},
		{persist("k"), 1, 0},
		{persist("k"), 0, 0},
		{expire("k", 1, ExpireLT), 1, ms + 1}, // LT with no deadline sets one
	}
	for i, s := range steps {
		r := h.ok(s.c)
		if len(r.Ints) != 1 || r.Ints[0] != s.want {
			t.Fatalf("step %d %+v: %v, want %d", i, s.c, r.Ints, s.want)
		}
		if d := h.deadline("k"); d != s.deadline {
			t.Fatalf("step %d: deadline %d, want %d", i, d, s.deadline)
		}
	}
	// A time to live that overflows the clock is refused and changes nothing;
	// an absolute deadline cannot overflow.
	if r := h.apply(expire("k", math.MaxInt64-ms+1, 0)); !errors.Is(r.Err, ErrBadExpire) {
		t.Fatalf("overflowing EXPIRE: %+v", r)
	}
	if r := h.apply(expire("missing", math.MaxInt64, 0)); !errors.Is(r.Err, ErrBadExpire) {
		t.Fatalf("overflowing EXPIRE of a missing key: %+v (Redis checks before the key)", r)
	}
	if r := h.ok(expire("k", math.MaxInt64-ms, 0)); r.Ints[0] != 1 || h.deadline("k") != math.MaxInt64 {
		t.Fatalf("largest EXPIRE: %+v, deadline %d", r, h.deadline("k"))
	}
	if h.f.Expires() != 1 || h.f.NextDeadline() != math.MaxInt64 {
		t.Fatalf("expires %d, next %d", h.f.Expires(), h.f.NextDeadline())
	}
}

// TestExpireInThePastDeletes: a deadline at or before the log's clock removes
// the key at once and answers 1, counted as expired.
func TestExpireInThePastDeletes(t *testing.T) {
	for _, c := range []*Command{
		expire("k", 0, 0), expire("k", -1, 0), expire("k", math.MinInt64, 0),
		expireAt("k", ms, 0), expireAt("k", 1, 0), expireAt("k", -5, 0),
		expire("k", 0, ExpireLT), expire("k", -10, ExpireNX),
	} {
		h, log := newExpireHarness(t)
		h.ok(add(FamilyCF, "k", "a"))
		mem := h.f.MemoryBytes()
		if r := h.ok(c); r.Ints[0] != 1 {
			t.Fatalf("%+v: %v", c, r.Ints)
		}
		if _, ok := h.f.KindOf("k"); ok || h.f.MemoryBytes() != 0 || h.f.ExpiredKeys() != 1 || mem == 0 {
			t.Fatalf("%+v left the key (memory %d, expired %d)", c, h.f.MemoryBytes(), h.f.ExpiredKeys())
		}
		if !reflect.DeepEqual(log.keys, []string{"k@2"}) {
			t.Fatalf("%+v: expired %v", c, log.keys)
		}
	}
	h, _ := newExpireHarness(t)
	h.ok(add(FamilyCF, "k", "a"))
	if r := h.ok(expire("k", -1, ExpireGT)); r.Ints[0] != 0 {
		t.Fatal("GT with no deadline deleted the key")
	}
	if _, ok := h.f.KindOf("k"); !ok {
		t.Fatal("a refused EXPIRE removed the key")
	}
}

// TestExpiryFollowsTheLogClock: a key goes when a command's time passes its
// deadline, whatever the command (a tick, a write to another key, a replay),
// before that command applies; keys due together go in (deadline, key)
// order; a command stamped by a slower clock neither brings one back nor
// shortens what a relative EXPIRE gives.
func TestExpiryFollowsTheLogClock(t *testing.T) {
	h, log := newExpireHarness(t)
	for _, k := range []string{"c", "b", "a", "later"} {
		h.ok(add(FamilyBF, k, "x"))
	}
	h.ok(expire("c", 1000, 0))
	h.ok(expire("b", 1000, 0))
	h.ok(expire("a", 2000, 0))
	h.ok(expire("later", 5000, 0))
	if h.f.NextDeadline() != ms+1000 || h.f.Expires() != 4 {
		t.Fatalf("next %d, expires %d", h.f.NextDeadline(), h.f.Expires())
	}
	h.ok(tick(1e18 + 999_999_999)) // 999.999 ms after: not yet
	if h.f.Len() != 4 {
		t.Fatal("a key went before its deadline")
	}
	h.ok(tick(1e18 + 1e9)) // at the deadline
	if !reflect.DeepEqual(log.keys, []string{"b@10", "c@10"}) {
		t.Fatalf("expired %v, want b and c at index 10 in key order", log.keys)
	}
	if _, ok := h.f.KindOf("a"); !ok || h.f.NextDeadline() != ms+2000 {
		t.Fatal("a went before its deadline")
	}
	// A write stamped at a's deadline removes a first, then creates it anew,
	// without a deadline.
	h.ok(&Command{Op: OpAdd, Family: FamilyBF, Key: "a", Items: items("y"), Spec: bfSpec(100, 0.01, 2), Time: 1e18 + 2e9})
	if h.exists(FamilyBF, "a", "x") || !h.exists(FamilyBF, "a", "y") || h.deadline("a") != 0 {
		t.Fatal("a write after the deadline saw the expired key")
	}
	// A slower leader: the log's clock stays where it was.
	h.ok(add(FamilyBF, "slow", "x"))
	h.ok(&Command{Op: OpExpire, Key: "slow", Expire: 1000, Time: 1e18})
	if d := h.deadline("slow"); d != ms+3000 {
		t.Fatalf("relative EXPIRE under a slower clock: deadline %d, want %d (log clock + 1 s)", d, ms+3000)
	}
	h.ok(tick(1e18 + 1e9))
	if _, ok := h.f.KindOf("slow"); !ok {
		t.Fatal("a tick from a slower clock expired a key")
	}
	h.ok(tick(1e18 + 5e9))
	if !reflect.DeepEqual(log.keys, []string{"b@10", "c@10", "a@11", "slow@15", "later@15"}) {
		t.Fatalf("expired %v", log.keys)
	}
	if h.f.Expires() != 0 || h.f.NextDeadline() != 0 || h.f.ExpiredKeys() != 5 || h.f.Len() != 1 {
		t.Fatalf("after every deadline: expires %d, next %d, expired %d, keys %d",
			h.f.Expires(), h.f.NextDeadline(), h.f.ExpiredKeys(), h.f.Len())
	}
}

// TestDeadlineFollowsTheKey: DEL, FLUSHALL and re-creation clear a deadline,
// RENAME moves it (dropping the target's), RESERVE of an existing key keeps
// it, LOADCHUNK creates a key without one; memory counts each deadline.
func TestDeadlineFollowsTheKey(t *testing.T) {
	h, _ := newExpireHarness(t)
	h.ok(add(FamilyBF, "a", "x"))
	h.ok(add(FamilyCF, "b", "x"))
	base := h.f.MemoryBytes()
	h.ok(expire("a", 10_000, 0))
	if got := h.f.MemoryBytes(); got != base+expiryBytes {
		t.Fatalf("memory %d with one deadline, want %d", got, base+expiryBytes)
	}
	h.ok(expire("a", 20_000, 0)) // replacing one costs nothing more
	h.ok(expire("b", 5_000, 0))
	if got := h.f.MemoryBytes(); got != base+2*expiryBytes {
		t.Fatalf("memory %d with two deadlines, want %d", got, base+2*expiryBytes)
	}
	if r := h.apply(reserve(FamilyBF, "a", bfSpec(100, 0.01, 2))); !errors.Is(r.Err, ErrExists) || h.deadline("a") != ms+20_000 {
		t.Fatalf("RESERVE of an existing key: %v, deadline %d", r.Err, h.deadline("a"))
	}
	h.ok(add(FamilyBF, "a", "more")) // a write keeps the deadline
	if h.deadline("a") != ms+20_000 {
		t.Fatal("a write dropped the deadline")
	}
	// RENAME a onto b: b's deadline goes with b, a's moves to the new name.
	h.ok(rename("a", "b", false))
	if h.deadline("b") != ms+20_000 || h.f.Expires() != 1 || h.f.NextDeadline() != ms+20_000 {
		t.Fatalf("after RENAME: deadline %d, expires %d, next %d", h.deadline("b"), h.f.Expires(), h.f.NextDeadline())
	}
	h.ok(&Command{Op: OpDelKeys, Keys: []string{"b"}})
	h.ok(add(FamilyBF, "b", "x"))
	if h.deadline("b") != 0 || h.f.Expires() != 0 || h.f.NextDeadline() != 0 {
		t.Fatal("a key made again after DEL kept the old deadline")
	}
	// LOADCHUNK of a dump of b into c: no deadline.
	h.ok(expire("b", 1000, 0))
	iter, data, err := h.f.ScanDump(FamilyBF, "b", 0)
	if err != nil {
		t.Fatal(err)
	}
	h.ok(&Command{Op: OpLoadChunk, Family: FamilyBF, Key: "c", Iter: iter, Data: data})
	if d, ok := h.f.Expiry("c"); !ok || d != 0 {
		t.Fatalf("LOADCHUNK made c with deadline %d (exists %v)", d, ok)
	}
	h.ok(&Command{Op: OpFlush})
	if h.f.Expires() != 0 || h.f.NextDeadline() != 0 || h.f.MemoryBytes() != 0 {
		t.Fatal("FLUSHALL left deadlines behind")
	}
	h.ok(add(FamilyBF, "b", "x"))
	h.ok(tick(1e18 + 5e9))
	if _, ok := h.f.KindOf("b"); !ok {
		t.Fatal("a deadline from before FLUSHALL removed a new key")
	}
}

// TestExpireIsDeduplicated: a retried EXPIRE answers its first answer and is
// not applied again.
func TestExpireIsDeduplicated(t *testing.T) {
	h, _ := newExpireHarness(t)
	h.ok(add(FamilyBF, "k", "x"))
	if r := h.ok(withSession(expire("k", 10_000, ExpireNX), 7, 1)); r.Ints[0] != 1 {
		t.Fatal(r.Ints)
	}
	h.ok(persist("k"))
	if r := h.ok(withSession(expire("k", 10_000, ExpireNX), 7, 1)); r.Ints[0] != 1 || h.deadline("k") != 0 {
		t.Fatalf("replayed EXPIRE: %v, deadline %d", r.Ints, h.deadline("k"))
	}
	h.ok(expire("k", 1, 0))
	if r := h.ok(withSession(expire("k", 10_000, 0), 7, 1)); r.Ints[0] != 1 || h.deadline("k") != ms+1 {
		t.Fatalf("replayed EXPIRE: %v, deadline %d", r.Ints, h.deadline("k"))
	}
	// A replay still moves the clock: it removes what is due.
	if r := h.ok(withSession(expire("k", 10_000, 0), 7, 1).withTime(1e18 + 1e6)); r.Ints[0] != 1 {
		t.Fatal(r.Ints)
	}
	if _, ok := h.f.KindOf("k"); ok {
		t.Fatal("a replayed command at a later time did not expire the key")
	}
}

func (c *Command) withTime(ns int64) *Command { c.Time = ns; return c }

// TestExpirySnapshotRoundTrip: deadlines travel in snapshots (version 2),
// expire on time after a restore, and a state without any is written as
// version 1, which is still read.
func TestExpirySnapshotRoundTrip(t *testing.T) {
	h, _ := newExpireHarness(t)
	for i := range 50 {
		k := fmt.Sprint("k", i)
		h.ok(add(FamilyBF, k, "x"))
		if i%5 != 0 {
			h.ok(expire(k, int64(1000*(i%7+1)), 0))
		}
	}
	data := snapshotBytes(t, h.f)
	if v := data[len(snapMagic)]; v != snapVersion {
		t.Fatalf("snapshot version %d with deadlines, want %d", v, snapVersion)
	}
	g := restored(t, data)
	if a, b := stateOf(t, h.f), stateOf(t, g); a != b {
		t.Fatalf("restored state differs:\n%s\n%s", a, b)
	}
	if !bytes.Equal(snapshotBytes(t, g), data) {
		t.Fatal("a snapshot of the restored state differs")
	}
	sum, err := VerifySnapshot(bytes.NewReader(data))
	if err != nil || sum.Expires != 40 || sum.MemoryBytes != h.f.MemoryBytes() {
		t.Fatalf("VerifySnapshot: %+v %v; state memory %d", sum, err, h.f.MemoryBytes())
	}
	// Both expire the same keys at the same ticks from here.
	var logs [2]expiredLog
	for i, f := range []*FSM{h.f, g} {
		f.onExpire = logs[i].note
		hh := &harness{t: t, f: f, index: h.index, now: h.now}
		for s := int64(1); s <= 8; s++ {
			hh.ok(tick(1e18 + s*1e9))
		}
		if f.Len() != 10 || f.Expires() != 0 {
			t.Fatalf("replica %d after every deadline: %d keys, %d deadlines", i, f.Len(), f.Expires())
		}
	}
	if !reflect.DeepEqual(logs[0], logs[1]) || len(logs[0].keys) != 40 {
		t.Fatalf("expired differently after a restore:\n%v\n%v", logs[0].keys, logs[1].keys)
	}

	// No deadlines: version 1, which builds before expiry read.
	v1 := snapshotBytes(t, g)
	if v := v1[len(snapMagic)]; v != snapV1 {
		t.Fatalf("snapshot version %d without deadlines, want %d", v, snapV1)
	}
	if a, b := stateOf(t, g), stateOf(t, restored(t, v1)); a != b {
		t.Fatal("version 1 snapshot did not restore")
	}
}

// TestRestoreReplacesDeadlines: restoring over a state with deadlines leaves
// only the snapshot's.
func TestRestoreReplacesDeadlines(t *testing.T) {
	src, _ := newExpireHarness(t)
	src.ok(add(FamilyBF, "s", "x"))
	src.ok(expire("s", 3000, 0))
	data := snapshotBytes(t, src.f)
	dst, _ := newExpireHarness(t)
	dst.ok(add(FamilyBF, "d", "x"))
	dst.ok(expire("d", 1000, 0))
	if err := dst.f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if dst.f.Expires() != 1 || dst.f.NextDeadline() != ms+3000 || dst.deadline("s") != ms+3000 {
		t.Fatalf("after restore: %d deadlines, next %d", dst.f.Expires(), dst.f.NextDeadline())
	}
}

// randomExpiryLog makes n entries of writes, deadlines, renames, deletes and
// ticks on a few keys, some batched, stamped by a clock that sometimes steps
// back.
func randomExpiryLog(r *rand.Rand, n int) []*raft.Log {
	keys := []string{"a", "b", "c", "d", "e", "f"}
	conds := []ExpireCond{0, 0, 0, ExpireNX, ExpireXX, ExpireGT, ExpireLT, ExpireXX | ExpireGT, ExpireXX | ExpireLT}
	now := int64(1e18)
	var entries []*raft.Log
	for i := 1; i <= n; i++ {
		now += int64(r.IntN(300e6)) - 50e6
		var cs []*Command
		for range 1 + r.IntN(3)*r.IntN(2) {
			k := keys[r.IntN(len(keys))]
			var c *Command
			switch x := r.IntN(20); {
			case x < 7:
				c = add(FamilyBF, k, fmt.Sprint(r.IntN(100)))
			case x < 11:
				c = expire(k, int64(r.IntN(4000))-200, conds[r.IntN(len(conds))])
			case x < 13:
				c = expireAt(k, now/1e6+int64(r.IntN(3000)), conds[r.IntN(len(conds))])
			case x == 13:
				c = persist(k)
			case x == 14:
				c = rename(k, keys[r.IntN(len(keys))], r.IntN(2) == 0)
			case x == 15:
				c = &Command{Op: OpDelKeys, Keys: []string{k}}
			case x == 16:
				c = withSession(expire(k, int64(r.IntN(2000)), 0), 1, uint64(1+r.IntN(400)))
			default:
				c = &Command{Op: OpExpireTick}
			}
			c.Time = now
			cs = append(cs, c)
		}
		data := EncodeCommand(cs[0])
		if len(cs) > 1 {
			data = EncodeBatch(cs)
		}
		entries = append(entries, &raft.Log{Index: uint64(i), Type: raft.LogCommand, Data: data})
	}
	return entries
}

// TestReplicasExpireAtTheSameIndex: replicas fed the same random log of
// writes, deadlines, renames, deletes and ticks (some entries batched, clocks
// that sometimes go back) remove the same keys at the same indexes and end
// byte-identical, whether they apply entries one by one, in batches, or from
// a snapshot of another replica taken half way.
func TestReplicasExpireAtTheSameIndex(t *testing.T) {
	entries := randomExpiryLog(rand.New(rand.NewPCG(11, 5)), 3000)
	half := len(entries) / 2
	var logs [3]expiredLog
	var snaps [3][]byte
	var halfway []byte
	for i := range 3 {
		f := New(Options{OnExpire: logs[i].note})
		switch i {
		case 0:
			for j, e := range entries {
				if j == half {
					halfway = snapshotBytes(t, f)
				}
				f.Apply(e)
			}
		case 1:
			for j := 0; j < len(entries); j += 7 {
				f.ApplyBatch(entries[j:min(j+7, len(entries))])
			}
		case 2:
			if err := f.Restore(io.NopCloser(bytes.NewReader(halfway))); err != nil {
				t.Fatal(err)
			}
			f.ApplyBatch(entries[half:])
		}
		if f.Halted() != nil {
			t.Fatal(f.Halted())
		}
		snaps[i] = snapshotBytes(t, f)
	}
	if len(logs[0].keys) < 100 {
		t.Fatalf("only %d keys expired: the log does not exercise expiry", len(logs[0].keys))
	}
	if !reflect.DeepEqual(logs[0], logs[1]) {
		t.Fatal("replicas applying entries one by one and in batches expired keys differently")
	}
	// The restored replica saw the second half only.
	var second []string
	for _, k := range logs[0].keys {
		var idx int
		fmt.Sscanf(k[bytes.IndexByte([]byte(k), '@')+1:], "%d", &idx)
		if idx > half {
			second = append(second, k)
		}
	}
	if !reflect.DeepEqual(second, logs[2].keys) {
		t.Fatal("a replica restored half way expired keys differently")
	}
	if !bytes.Equal(snaps[0], snaps[1]) || !bytes.Equal(snaps[0], snaps[2]) {
		t.Fatal("replicas diverged")
	}
}

// TestHeldNodeRefusesExpiry: a node held at log format 4 halts at an EXPIRE
// entry as a format 4 build would, and reads one written in format 4 (as a
// follower may forward it) as an op it does not know.
func TestHeldNodeRefusesExpiry(t *testing.T) {
	old := New(Options{MaxFormat: CodecV4})
	old.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: EncodeCommandVersion(add(FamilyBF, "k", "a"), CodecV4)})
	old.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: EncodeCommand(expire("k", 10, 0))})
	h := old.Halted()
	if h == nil || !errors.Is(h, ErrNewerFormat) || old.AppliedIndex() != 1 {
		t.Fatalf("format 5 entry on a format 4 node: %v, applied %d", h, old.AppliedIndex())
	}
	for _, c := range []*Command{expire("k", 10, 0), persist("k"), tick(5)} {
		var fe *FormatError
		_, _, err := decodeEntry(EncodeCommandVersion(c, CodecV4), CodecV4)
		if !errors.As(err, &fe) || fe.What != fmt.Sprintf("unknown op %d", c.Op) {
			t.Errorf("op %d in a format 4 entry on a format 4 node: %v", c.Op, err)
		}
		if _, got, err := DecodeEntry(EncodeCommandVersion(c, CodecV4)); err != nil || !reflect.DeepEqual(normalize(got[0]), normalize(c)) {
			t.Errorf("op %d forwarded in format 4 to a current node: %v", c.Op, err)
		}
	}
}

// TestExpiryKeepsMemoryHonest: what a deadline is counted as covers what it
// takes on the heap.
func TestExpiryKeepsMemoryHonest(t *testing.T) {
	f := New(Options{})
	const keys = 20000
	for i := range keys {
		f.ApplyCommand(uint64(i+1), add(FamilyBF, fmt.Sprint("user:", i), "x"))
	}
	before, counted := heapInUse(), f.MemoryBytes()
	for i := range keys {
		c := expire(fmt.Sprint("user:", i), int64(1000+i%5000), 0)
		c.Time = 1e18
		f.ApplyCommand(uint64(keys+i+1), c)
	}
	grew, added := heapInUse()-before, f.MemoryBytes()-counted
	if added != keys*expiryBytes || float64(added) < 0.8*float64(grew) || float64(added) > 1.5*float64(grew) {
		t.Errorf("deadlines counted as %d bytes, the heap grew %d", added, grew)
	}
	t.Logf("%d deadlines: counted %d bytes, the heap grew %d", keys, added, grew)
}
