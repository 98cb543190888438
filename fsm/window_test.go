package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/hashicorp/raft"
)

// Windowed filters in the state machine: time comes from the log (the
// largest Command.Time applied), so replicas, restored snapshots and nodes
// catching up age identically, and a filter that gets no writes still ages
// by the clock other commands and ticks bring.

// A window of 7 s: generations of 1 s, an item held 7 to 8 s.
const (
	wtSecond = int64(1e9)
	wtWindow = 7 * wtSecond
)

// TestWindowAgesByTheLogsClock: an item answers present within the window,
// whatever writes there are; the filter retires it when the log's clock
// passes its generation's end, brought by a write to another key or by a
// tick, not by any write to the filter itself; NextDeadline announces the
// retirement, so the leader ticks when nothing is written.
func TestWindowAgesByTheLogsClock(t *testing.T) {
	h := newHarness(t)
	t0 := h.now - h.now%wtSecond // a generation boundary
	h.ok(reserve(FamilyBF, "seen", wbSpec(1000, 0.01, wtWindow, 0)).withTime(t0))
	if h.f.NextDeadline() != 0 {
		t.Fatalf("an empty window announces a retirement at %d", h.f.NextDeadline())
	}
	h.ok(add(FamilyBF, "seen", "url-1").withTime(t0 + wtSecond/2))
	retire := (t0 + 8*wtSecond) / 1e6
	if got := h.f.NextDeadline(); got != retire {
		t.Fatalf("NextDeadline %d, want the generation's retirement %d", got, retire)
	}
	// Writes elsewhere move the clock; the item stays for the window.
	h.ok(add(FamilyBF, "other", "x").withTime(t0 + wtSecond/2 + wtWindow))
	if !h.exists(FamilyBF, "seen", "url-1") {
		t.Fatal("absent at the end of its window")
	}
	// A tick at the retirement, as the leader proposes it: gone.
	h.ok(tick(retire * 1e6))
	if h.exists(FamilyBF, "seen", "url-1") || h.f.NextDeadline() != 0 {
		t.Fatalf("present after its generation retired; NextDeadline %d", h.f.NextDeadline())
	}
	if n, _ := h.f.Card("seen"); n != 0 {
		t.Fatalf("BF.CARD %d after the window emptied", n)
	}
	// A leader whose clock is behind the log's does not bring it back, and
	// an add stamped in the past lands in the log clock's generation.
	h.ok(add(FamilyBF, "seen", "url-2").withTime(t0))
	in, err := h.f.Info(FamilyBF, "seen")
	if err != nil || in.Window == nil || in.Window.Current != uint64(retire*1e6/wtSecond) || in.Items != 1 {
		t.Fatalf("INFO %+v %v", in.Window, err)
	}
}

// TestWindowCountWindow: BF.RESERVE ... LAST n forgets by insertions, with
// no clock at all.
func TestWindowCountWindow(t *testing.T) {
	h := newHarness(t)
	h.ok(reserve(FamilyBF, "last", wbSpec(70, 0.001, 0, 70)))
	h.ok(add(FamilyBF, "last", "first"))
	for i := range 69 {
		h.ok(add(FamilyBF, "last", fmt.Sprint("fill-", i)))
	}
	if !h.exists(FamilyBF, "last", "first") {
		t.Fatal("absent while among the last 70 insertions")
	}
	for i := range 10 {
		h.ok(add(FamilyBF, "last", fmt.Sprint("more-", i)))
	}
	if h.exists(FamilyBF, "last", "first") {
		t.Fatal("present after 79 later insertions (window 70, slack 9)")
	}
	if h.f.NextDeadline() != 0 {
		t.Fatal("a count window waits for the clock")
	}
}

// TestWindowCuckooCoupon: a coupon valid for the window is counted, deleted
// once on redemption, and expires unredeemed.
func TestWindowCuckooCoupon(t *testing.T) {
	h := newHarness(t)
	t0 := h.now - h.now%wtSecond
	h.ok(reserve(FamilyCF, "coupons", wcSpec(1000, wtWindow)).withTime(t0))
	h.ok(add(FamilyCF, "coupons", "C-1", "C-2").withTime(t0 + 1))
	if h.f.Count(FamilyCF, "coupons", []byte("C-1")) != 1 {
		t.Fatal("CF.COUNT of a coupon just added")
	}
	if r := h.ok(del(FamilyCF, "coupons", "C-1").withTime(t0 + 2*wtSecond)); r.Ints[0] != 1 {
		t.Fatal("redeeming a valid coupon failed")
	}
	if r := h.ok(del(FamilyCF, "coupons", "C-1").withTime(t0 + 3*wtSecond)); r.Ints[0] != 0 {
		t.Fatal("a coupon redeemed twice")
	}
	h.ok(tick(t0 + 8*wtSecond))
	if h.exists(FamilyCF, "coupons", "C-2") || h.f.Count(FamilyCF, "coupons", []byte("C-2")) != 0 {
		t.Fatal("an unredeemed coupon outlived its window and slack")
	}
	if r := h.ok(del(FamilyCF, "coupons", "C-2").withTime(t0 + 8*wtSecond)); r.Ints[0] != 0 {
		t.Fatal("an expired coupon was redeemed")
	}
	in, _ := h.f.Info(FamilyCF, "coupons")
	if in.Items != 0 || in.Deleted != 1 || in.Window == nil || in.Window.Slack != uint64(wtSecond) {
		t.Fatalf("CF.INFO %+v", in)
	}
	if r := h.ok(&Command{Op: OpCompact, Family: FamilyCF, Key: "coupons"}); r.Err != nil {
		t.Fatal("CF.COMPACT of a windowed filter")
	}
}

// windowLog is a random log of windowed filters at work: reserves, adds and
// deletes spread over minutes of leader time in bursts and lulls, ticks,
// RENAME, DEL and expiry, so that generations retire at many entries.
func windowLog(rng *rand.Rand, t0 int64, n int) []*raft.Log {
	var logs []*raft.Log
	now := t0
	keys := []string{"w0", "w1", "c0", "last"}
	specs := map[string]Spec{"w0": wbSpec(200, 0.01, wtWindow, 0), "w1": wbSpec(50, 0.001, 3*wtSecond, 0),
		"c0": wcSpec(200, wtWindow), "last": wbSpec(100, 0.01, 0, 100)}
	for i := 0; i < n; i++ {
		switch rng.IntN(10) {
		case 0:
			now += int64(rng.IntN(12)) * wtSecond // a lull
		default:
			now += int64(rng.IntN(50)) * 1e6
		}
		key := keys[rng.IntN(len(keys))]
		fam := FamilyBF
		if key == "c0" {
			fam = FamilyCF
		}
		var c *Command
		switch r := rng.IntN(100); {
		case r < 3:
			c = reserve(fam, key, specs[key])
		case r < 5:
			c = tick(now)
		case r < 6:
			c = rename(key, keys[rng.IntN(len(keys))], false)
		case r < 7:
			c = &Command{Op: OpDelKeys, Keys: []string{key}}
		case r < 8:
			c = expire(key, int64(rng.IntN(20_000)), 0)
		case r < 25 && fam == FamilyCF:
			c = del(fam, key, fmt.Sprint("i", rng.IntN(300)))
		default:
			its := make([]string, 1+rng.IntN(40))
			for j := range its {
				its[j] = fmt.Sprint("i", rng.IntN(300))
			}
			c = add(fam, key, its...)
			c.NoCreate = true
		}
		c.Time = now
		logs = append(logs, &raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: EncodeCommand(c)})
	}
	return logs
}

// TestWindowReplicasAndRestore: replicas applying the same log end
// byte-identical, whether they apply it in batches or one entry at a time;
// and a replica restored from a snapshot taken mid-window, then given the
// rest of the log, answers and snapshots exactly as the node that took it.
func TestWindowReplicasAndRestore(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 6))
	t0 := int64(1e18)
	logs := windowLog(rng, t0, 3000)
	a, b := New(Options{}), New(Options{})
	for i := 0; i < len(logs); i += 7 {
		a.ApplyBatch(logs[i:min(i+7, len(logs))])
	}
	for _, l := range logs {
		b.Apply(l)
	}
	sa, sb := snapshotBytes(t, a), snapshotBytes(t, b)
	if !bytes.Equal(sa, sb) {
		t.Fatal("replicas differ after the same log")
	}
	// Restore from a snapshot taken at each of several points.
	for _, cut := range []int{500, 1234, 2000, 2999} {
		src := New(Options{})
		src.ApplyBatch(logs[:cut])
		mid := snapshotBytes(t, src)
		dst := restored(t, mid)
		if dst.NextDeadline() != src.NextDeadline() {
			t.Fatalf("cut %d: restored NextDeadline %d, source %d", cut, dst.NextDeadline(), src.NextDeadline())
		}
		for _, key := range []string{"w0", "w1", "c0", "last"} {
			for i := range 300 {
				it := [][]byte{fmt.Append(nil, "i", i)}
				if src.Exists(FamilyBF, key, it)[0] != dst.Exists(FamilyBF, key, it)[0] ||
					src.Exists(FamilyCF, key, it)[0] != dst.Exists(FamilyCF, key, it)[0] {
					t.Fatalf("cut %d: %s answers %q differently after restore", cut, key, it[0])
				}
			}
		}
		src.ApplyBatch(logs[cut:])
		dst.ApplyBatch(logs[cut:])
		if !bytes.Equal(snapshotBytes(t, src), snapshotBytes(t, dst)) || !bytes.Equal(snapshotBytes(t, dst), sa) {
			t.Fatalf("cut %d: the restored replica went on differently", cut)
		}
	}
	if len(a.retires) == 0 && a.NextDeadline() == 0 {
		t.Log("no windowed filter waits for a retirement at the end")
	}
}

// TestWindowMemoryNeverGrows: a windowed filter's memory is counted whole
// when it is created (admission) and stays the same however many items it
// takes.
func TestWindowMemoryNeverGrows(t *testing.T) {
	for _, spec := range []Spec{wbSpec(10_000, 0.01, wtWindow, 0), wcSpec(10_000, wtWindow), wbSpec(1000, 0.01, 0, 1000)} {
		h := newHarness(t)
		c := reserve(familyOf(spec.Kind), "w", spec)
		need := h.f.NeedBytes(c)
		h.ok(c)
		created := h.f.MemoryBytes()
		if created > need {
			t.Fatalf("%v: %d bytes once created, admitted as %d", spec.Kind, created, need)
		}
		for i := range 200 {
			a := add(familyOf(spec.Kind), "w")
			for j := range 500 {
				a.Items = append(a.Items, fmt.Append(nil, i, "-", j))
			}
			a.Multi, a.Time = true, h.now+int64(i)*wtSecond/10
			if g := h.f.NeedBytes(a); g != 0 {
				t.Fatalf("%v: an add would need %d more bytes", spec.Kind, g)
			}
			h.apply(a)
		}
		if h.f.MemoryBytes() != created {
			t.Fatalf("%v: %d bytes after adds, %d when created", spec.Kind, h.f.MemoryBytes(), created)
		}
	}
}

// TestWindowDumpLoads: SCANDUMP and LOADCHUNK move a windowed filter to
// another key; it answers as the original and, once loaded, ages by the log's
// clock. A filter being loaded keeps its header's clock meanwhile.
func TestWindowDumpLoads(t *testing.T) {
	h := newHarness(t)
	t0 := h.now - h.now%wtSecond
	h.ok(reserve(FamilyBF, "src", wbSpec(5000, 0.01, wtWindow, 0)).withTime(t0))
	for i := range 20 {
		a := add(FamilyBF, "src")
		for j := range 200 {
			a.Items = append(a.Items, fmt.Append(nil, i, "-", j))
		}
		a.Multi = true
		h.ok(a.withTime(t0 + int64(i)*wtSecond/4))
	}
	header, iters, chunks := dumpOf(t, h, FamilyBF, "src")
	h.ok(&Command{Op: OpLoadChunk, Family: FamilyBF, Key: "dst", Iter: 1, Data: header, Time: t0 + 5*wtSecond})
	// The clock passes a retirement while the copy is being loaded.
	h.ok(tick(t0 + 9*wtSecond))
	for i := range iters {
		h.ok(&Command{Op: OpLoadChunk, Family: FamilyBF, Key: "dst", Iter: iters[i], Data: chunks[i], Time: t0 + 9*wtSecond})
	}
	for i := range 20 {
		it := [][]byte{fmt.Append(nil, i, "-", 7)}
		if h.f.Exists(FamilyBF, "src", it)[0] != h.f.Exists(FamilyBF, "dst", it)[0] {
			t.Fatalf("item %q answers differently in the loaded copy", it[0])
		}
	}
	if !bytes.Equal(h.encoding(FamilyBF, "src"), h.encoding(FamilyBF, "dst")) {
		t.Fatal("the loaded copy is not the original once both are aged")
	}
	if h.exists(FamilyBF, "dst", "0-7") || !h.exists(FamilyBF, "dst", "19-7") {
		t.Fatal("the loaded copy did not age with the log's clock")
	}
}

// TestWindowSnapshotVersion: a state holding a windowed filter snapshots as
// stream version 3, which a build before windowed filters refuses by its
// version; others keep their versions, and VerifySnapshot reads version 3.
func TestWindowSnapshotVersion(t *testing.T) {
	h := newHarness(t)
	h.ok(add(FamilyBF, "plain", "a"))
	if v := snapshotBytes(t, h.f)[len(snapMagic)]; v != snapV1 {
		t.Fatalf("version %d without windowed filters or deadlines", v)
	}
	h.ok(reserve(FamilyCF, "coupons", wcSpec(100, wtWindow)))
	h.ok(add(FamilyCF, "coupons", "c"))
	data := snapshotBytes(t, h.f)
	if v := data[len(snapMagic)]; v != snapV3 {
		t.Fatalf("version %d with a windowed filter, want %d", v, snapV3)
	}
	sum, err := VerifySnapshot(bytes.NewReader(data))
	if err != nil || len(sum.Filters) != 2 || sum.Filters[0].Window == nil || sum.Filters[0].Items != 1 {
		t.Fatalf("VerifySnapshot: %+v %v", sum, err)
	}
	if !restored(t, data).Exists(FamilyCF, "coupons", items("c"))[0] {
		t.Fatal("the restored windowed filter lost its item")
	}
}
