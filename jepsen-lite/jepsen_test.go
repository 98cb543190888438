package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/internal/nodeproc"
)

// TestCheckerCatchesViolations feeds the checker histories with known faults:
// it must refuse each, and accept the correct ones, so a passing run means
// something.
func TestCheckerCatchesViolations(t *testing.T) {
	w := func(k kind, key, item string, call, ret int64, out bool) op {
		return op{kind: k, key: key, item: item, call: call, ret: ret, out: out}
	}
	count := func(k kind, key, item string, call, ret, n int64) op {
		return op{kind: k, key: key, item: item, call: call, ret: ret, n: n}
	}
	unknown := func(k kind, key, item string, call int64) op {
		return op{kind: k, key: key, item: item, call: call, ret: 1000, unknown: true}
	}
	bf, cf, cbf, eph := bloomKey, cuckooKey, countingKey, "eph-0-0"
	exactAll := map[string]map[string]bool{cf: {"a": true}, cbf: {"a": true}}
	loose := map[string]map[string]bool{}
	cases := []struct {
		name  string
		exact map[string]map[string]bool
		ops   []op
		ok    bool
	}{
		{"read after an acknowledged add sees it", exactAll, []op{
			w(bfAdd, bf, "a", 0, 1, true), w(bfExists, bf, "a", 2, 3, true),
			w(cfAdd, cf, "a", 0, 1, true), w(cfExists, cf, "a", 2, 3, true), w(cfDel, cf, "a", 4, 5, true),
			w(cfExists, cf, "a", 6, 7, false),
		}, true},
		{"stale Bloom read after an acknowledged add", exactAll, []op{
			w(bfAdd, bf, "a", 0, 1, true), w(bfExists, bf, "a", 2, 3, false)}, false},
		{"stale cuckoo read after an acknowledged add", exactAll, []op{
			w(cfAdd, cf, "a", 0, 1, true), w(cfExists, cf, "a", 2, 3, false)}, false},
		{"a Bloom re-add cannot be new", exactAll, []op{
			w(bfAdd, bf, "a", 0, 1, true), w(bfAdd, bf, "a", 2, 3, true)}, false},
		{"concurrent read may miss the add", exactAll, []op{
			w(bfAdd, bf, "a", 0, 5, true), w(bfExists, bf, "a", 1, 3, false),
			w(cfAdd, cf, "a", 0, 5, true), w(cfExists, cf, "a", 1, 3, false),
		}, true},
		{"Bloom false positives are allowed", exactAll, []op{w(bfExists, bf, "a", 0, 1, true)}, true},
		{"an unknown write may or may not land", exactAll, []op{
			unknown(bfAdd, bf, "a", 0), w(bfExists, bf, "a", 2, 3, false), w(bfExists, bf, "a", 4, 5, true),
			unknown(cfAdd, cf, "a", 0), w(cfExists, cf, "a", 2, 3, true),
		}, true},
		{"an unknown delete leaves at most one copy to delete", exactAll, []op{
			w(cfAdd, cf, "a", 0, 1, true), unknown(cfDel, cf, "a", 2), w(cfDel, cf, "a", 3, 4, true),
			w(cfDel, cf, "a", 5, 6, true)}, false},
		{"a delete of a held item must find it", exactAll, []op{
			w(cfAdd, cf, "a", 0, 1, true), w(cfDel, cf, "a", 2, 3, false)}, false},
		{"a delete applied twice: the second copy is gone", exactAll, []op{
			w(cfAdd, cf, "a", 0, 1, true), w(cfAdd, cf, "a", 2, 3, true), w(cfDel, cf, "a", 4, 5, true),
			w(cfExists, cf, "a", 6, 7, false)}, false},
		{"an add applied twice: present after its only copy was deleted", exactAll, []op{
			w(cfAdd, cf, "a", 0, 1, true), w(cfDel, cf, "a", 2, 3, true), w(cfExists, cf, "a", 4, 5, true)}, false},
		{"the same answer for an item with a collision is a false positive", loose, []op{
			w(cfAdd, cf, "a", 0, 1, true), w(cfDel, cf, "a", 2, 3, true), w(cfExists, cf, "a", 4, 5, true),
			count(cfCount, cf, "a", 6, 7, 1)}, true},
		{"an exact count", exactAll, []op{
			w(cfAdd, cf, "a", 0, 1, true), w(cfAdd, cf, "a", 2, 3, true), count(cfCount, cf, "a", 4, 5, 2)}, true},
		{"a count one too high", exactAll, []op{
			w(cfAdd, cf, "a", 0, 1, true), count(cfCount, cf, "a", 2, 3, 2)}, false},
		{"a count too low even with collisions", loose, []op{
			w(cfAdd, cf, "a", 0, 1, true), w(cfAdd, cf, "a", 2, 3, true), count(cfCount, cf, "a", 4, 5, 1)}, false},
		{"counting Bloom: absent before, then not", exactAll, []op{
			w(cbfAdd, cbf, "a", 0, 1, true), w(cbfAdd, cbf, "a", 2, 3, false), count(cbfCount, cbf, "a", 4, 5, 2),
			w(cbfDel, cbf, "a", 6, 7, true), count(cbfCount, cbf, "a", 8, 9, 1), w(cbfExists, cbf, "a", 10, 11, true)}, true},
		{"counting Bloom: an add applied twice", exactAll, []op{
			w(cbfAdd, cbf, "a", 0, 1, true), count(cbfCount, cbf, "a", 2, 3, 2)}, false},
		{"counting Bloom: a second add said absent before", exactAll, []op{
			w(cbfAdd, cbf, "a", 0, 1, true), w(cbfAdd, cbf, "a", 2, 3, true)}, false},
		{"a short-lived key's life", exactAll, []op{
			w(keyReserve, eph, "", 0, 1, true), w(bfAdd, eph, "x", 2, 3, true), w(bfExists, eph, "x", 4, 5, true),
			w(keyDel, eph, "", 6, 7, true), w(keyExists, eph, "", 8, 9, false), w(bfExists, eph, "x", 10, 11, false),
			w(keyReserve, eph, "", 12, 13, true), w(keyReserve, eph, "", 14, 15, false), w(keyDel, eph, "", 16, 17, true),
			w(bfAdd, eph, "y", 18, 19, true), w(keyExists, eph, "", 20, 21, true)}, true},
		{"a key created twice with no delete between", exactAll, []op{
			w(keyReserve, eph, "", 0, 1, true), w(keyReserve, eph, "", 2, 3, true)}, false},
		{"a deleted key still answers", exactAll, []op{
			w(bfAdd, eph, "x", 0, 1, true), w(keyDel, eph, "", 2, 3, true), w(bfExists, eph, "x", 4, 5, true)}, false},
		{"a delete of a missing key found one", exactAll, []op{w(keyDel, eph, "", 0, 1, true)}, false},
		{"a loaded copy lacks an item of its source", exactAll, []op{
			{kind: keyLoad, key: "copy-0-1", items: []string{"x", "y"}, call: 0, ret: 1, out: true},
			w(bfExists, "copy-0-1", "y", 2, 3, false)}, false},
		{"a loaded copy holds its source's items", exactAll, []op{
			{kind: keyLoad, key: "copy-0-1", items: []string{"x", "y"}, call: 0, ret: 1, out: true},
			w(bfExists, "copy-0-1", "y", 2, 3, true)}, true},
	}
	for _, c := range cases {
		ok := true
		for _, k := range checkKeys(c.ops, c.exact, 10*time.Second) {
			if k.result != porcupine.Ok {
				ok = false
			}
		}
		if ok != c.ok {
			t.Errorf("%s: linearizable %v, want %v", c.name, ok, c.ok)
		}
	}
}

// TestFinalExpectation: the final counts allowed follow the history.
func TestFinalExpectation(t *testing.T) {
	w := func(k kind, item string, out bool) op { return op{kind: k, key: cuckooKey, item: item, out: out} }
	e := expect([]op{
		w(cfAdd, "a", true), w(cfAdd, "b", true), {kind: cfAdd, key: cuckooKey, item: "c", unknown: true},
		w(cfDel, "a", true), {kind: cfDel, key: cuckooKey, item: "b", unknown: true},
		w(cfInsert, "d", false), w(cfInsert, "e", true),
	})
	want := map[string]itemRange{"a": {0, 0}, "b": {0, 1}, "c": {0, 1}, "d": {0, 0}, "e": {1, 1}}
	for it, r := range want {
		if got := e.held[cuckooKey][it]; got != r {
			t.Errorf("%s: held range %v, want %v", it, got, r)
		}
	}
	if tot := e.total[cuckooKey]; tot != (itemRange{1, 3}) {
		t.Errorf("total range %v, want [1, 3]", tot)
	}
}

// TestReadOnlyPromise: READONLY reads may lag, but never run ahead of the
// writes or go back on one connection.
func TestReadOnlyPromise(t *testing.T) {
	ro := func(conn int, item string, call, ret int64, out bool) op {
		return op{kind: roExists, client: readOnlyClient, conn: conn, key: bloomKey, item: item, call: call, ret: ret, out: out}
	}
	add := op{kind: bfAdd, key: bloomKey, item: "a", call: 10, ret: 20}
	cases := []struct {
		name string
		ops  []op
		bad  int
	}{
		{"stale but monotonic", []op{add, ro(0, "a", 30, 31, false), ro(0, "a", 32, 33, true), ro(0, "a", 34, 35, true)}, 0},
		{"ahead of the write", []op{ro(0, "a", 0, 5, true), add}, 1},
		{"back in time on one connection", []op{add, ro(0, "a", 30, 31, true), ro(0, "a", 32, 33, false)}, 1},
		{"a new connection may lag", []op{add, ro(0, "a", 30, 31, true), ro(1, "a", 32, 33, false)}, 0},
	}
	for _, c := range cases {
		if got := checkReadOnly(c.ops); len(got) != c.bad {
			t.Errorf("%s: %d problems %v, want %d", c.name, len(got), got, c.bad)
		}
	}
}

// TestOracleFindsCollisions: the oracle's cuckoo filter is shaped as the
// run's, and an item it calls exact has no other item with its fingerprint
// and buckets.
func TestOracleFindsCollisions(t *testing.T) {
	var ops []op
	for i := range 20000 {
		ops = append(ops, op{kind: cfAdd, key: cuckooKey, item: itemName(0, i)},
			op{kind: cbfAdd, key: countingKey, item: itemName(0, i)})
	}
	exact, err := exactItems(ops)
	if err != nil {
		t.Fatal(err)
	}
	loose := map[string]int{}
	for _, k := range []string{cuckooKey, countingKey} {
		for _, e := range exact[k] {
			if !e {
				loose[k]++
			}
		}
	}
	// 20000 items with 8-bit fingerprints in 2^18 buckets: about 20000 *
	// 19999 * 2/(2^18 * 255) ≈ 12 collide; the counting filter at 1/10000
	// has almost none.
	if loose[cuckooKey] == 0 || loose[cuckooKey] > 60 || loose[countingKey] > 5 {
		t.Errorf("items with collisions: %v", loose)
	}
	// What the model relies on: in filters of the run's shape holding every
	// item, each a few times, an exact item's count is its copies; another's
	// is at least that, and above it for some.
	cf, err := newCuckooOracle()
	if err != nil {
		t.Fatal(err)
	}
	cbf, err := filters.NewCounting(countingCapacity, countingRate, countingBits)
	if err != nil {
		t.Fatal(err)
	}
	copies := func(it string) int { return 1 + len(it)%3 }
	for i := range 20000 {
		it := []byte(itemName(0, i))
		for range copies(string(it)) {
			if err := cf.Add(it); err != nil {
				t.Fatal(err)
			}
			cbf.Add(it)
		}
	}
	over := 0
	for k, f := range map[string]interface{ Count([]byte) uint64 }{cuckooKey: cf, countingKey: cbf} {
		for it, e := range exact[k] {
			got, want := f.Count([]byte(it)), uint64(copies(it))
			switch {
			case e && got != want:
				t.Errorf("%s: exact item %s counts %d, holds %d", k, it, got, want)
			case got < want:
				t.Errorf("%s: %s counts %d, holds %d", k, it, got, want)
			case got > want:
				over++
			}
		}
	}
	if over == 0 {
		t.Error("no item with a collision counted more than its copies: the oracle finds collisions that are not there")
	}
}

// TestRunWithFaults runs the whole suite briefly: a three-node cluster of real
// processes, killed, paused and restarted under a workload, must keep every
// acknowledged write, apply each once and stay linearizable; once in plain
// text and once secured with TLS everywhere; then five nodes of four shards,
// whose replicas move and drain as well.
func TestRunWithFaults(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	bin, err := nodeproc.Build(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	d := 15 * time.Second
	if s := os.Getenv("ROOKERY_JEPSEN_DURATION"); s != "" {
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatal(err)
		}
	}
	// The plain run goes through the command, so its artifacts are checked too.
	t.Run("tls=false", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out")
		sum, code := runCommand(t, "-bin", bin, "-duration", d.String(), "-interval", "1s", "-hold", "1.5s",
			"-seed", "42", "-out", out)
		if code != exitOK || sum.Verdict != "OK" {
			t.Fatalf("exit code %d, verdict %s: %v", code, sum.Verdict, sum.Problems)
		}
		checkArtifacts(t, out, sum)
		if _, err := os.Stat(filepath.Join(out, "nodes")); err == nil {
			t.Error("a passing run kept the nodes' data")
		}
		var faults, ops int
		for _, n := range sum.FaultsByKind {
			faults += n
		}
		for _, by := range sum.Ops {
			ops += by["ok"]
		}
		if faults < 3 || ops < 1000 {
			t.Fatalf("too little happened to prove anything: %d faults, %d operations", faults, ops)
		}
	})
	t.Run("tls=true", func(t *testing.T) {
		rep, err := Run(Config{Binary: bin, Dir: t.TempDir(), Nodes: 3, Workers: 8, Duration: d, TLS: true,
			Faults: defaultFaults(1), Interval: time.Second,
			Hold: 1500 * time.Millisecond, OpTimeout: 10 * time.Second, Seed: 42, Log: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		t.Log("\n" + rep.String())
		if !rep.OK {
			t.Fatal("the run found problems")
		}
		if rep.Faults < 3 || rep.Ops < 1000 {
			t.Fatalf("too little happened to prove anything: %d faults, %d operations", rep.Faults, rep.Ops)
		}
	})
	t.Run("shards=4", func(t *testing.T) {
		rep, err := Run(Config{Binary: bin, Dir: t.TempDir(), Nodes: 5, Shards: 4, Workers: 8, Duration: d,
			Faults: []string{faultMove, faultDrain, faultKill, faultStaleLeader, faultMembership}, Interval: time.Second,
			Hold: 1500 * time.Millisecond, OpTimeout: 10 * time.Second, Seed: 42, Log: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		t.Log("\n" + rep.String())
		if !rep.OK {
			t.Fatal("the run found problems")
		}
		if rep.Faults < 2 || rep.Ops < 1000 {
			t.Fatalf("too little happened to prove anything: %d faults, %d operations", rep.Faults, rep.Ops)
		}
	})
}
