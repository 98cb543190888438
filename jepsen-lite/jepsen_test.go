package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// TestCheckerCatchesViolations feeds the checker histories with known faults:
// it must refuse each, and accept the correct ones, so a passing run means
// something.
func TestCheckerCatchesViolations(t *testing.T) {
	w := func(k kind, item string, call, ret int64, out bool) op {
		return op{kind: k, item: item, call: call, ret: ret, out: out}
	}
	unknown := func(k kind, item string, call int64) op {
		return op{kind: k, item: item, call: call, ret: 1000, unknown: true}
	}
	cases := []struct {
		name         string
		ops          []op
		bloom, cucko porcupine.CheckResult
	}{
		{"read after an acknowledged add sees it", []op{
			w(bfAdd, "a", 0, 1, true), w(bfExists, "a", 2, 3, true),
			w(cfAdd, "a", 0, 1, true), w(cfExists, "a", 2, 3, true), w(cfDel, "a", 4, 5, true), w(cfExists, "a", 6, 7, false),
		}, porcupine.Ok, porcupine.Ok},
		{"stale read after an acknowledged add", []op{
			w(bfAdd, "a", 0, 1, true), w(bfExists, "a", 2, 3, false),
			w(cfAdd, "a", 0, 1, true), w(cfExists, "a", 2, 3, false),
		}, porcupine.Illegal, porcupine.Illegal},
		{"concurrent read may miss the add", []op{
			w(bfAdd, "a", 0, 5, true), w(bfExists, "a", 1, 3, false),
			w(cfAdd, "a", 0, 5, true), w(cfExists, "a", 1, 3, false),
		}, porcupine.Ok, porcupine.Ok},
		{"false positives are allowed", []op{
			w(bfExists, "a", 0, 1, true), w(cfExists, "b", 0, 1, true),
		}, porcupine.Ok, porcupine.Ok},
		{"an unknown write may or may not land", []op{
			unknown(bfAdd, "a", 0), w(bfExists, "a", 2, 3, false), w(bfExists, "a", 4, 5, true),
			unknown(cfAdd, "a", 0), w(cfExists, "a", 2, 3, true),
		}, porcupine.Ok, porcupine.Ok},
		{"an unknown delete leaves at most one copy to delete", []op{
			w(cfAdd, "a", 0, 1, true), unknown(cfDel, "a", 2), w(cfDel, "a", 3, 4, true), w(cfDel, "a", 5, 6, true),
		}, porcupine.Ok, porcupine.Illegal},
		{"a delete of a held item must find it", []op{
			w(cfAdd, "a", 0, 1, true), w(cfDel, "a", 2, 3, false),
		}, porcupine.Ok, porcupine.Illegal},
		{"a delete applied twice", []op{
			w(cfAdd, "a", 0, 1, true), w(cfDel, "a", 2, 3, true), w(cfDel, "a", 4, 5, true),
		}, porcupine.Ok, porcupine.Illegal},
	}
	for _, c := range cases {
		b, cf := linearizable(c.ops, 10*time.Second)
		if b != c.bloom || cf != c.cucko {
			t.Errorf("%s: Bloom %s cuckoo %s, want %s %s", c.name, b, cf, c.bloom, c.cucko)
		}
	}

	// The final count catches a write lost or applied twice.
	e := expect([]op{
		w(cfAdd, "a", 0, 1, true), w(cfAdd, "b", 0, 1, true), unknown(cfAdd, "c", 0),
		w(cfDel, "a", 2, 3, true), unknown(cfDel, "b", 2),
	})
	if e.minHeld != 0 || e.maxHeld != 2 {
		t.Errorf("held range [%d, %d], want [0, 2]", e.minHeld, e.maxHeld)
	}
	if len(e.cuckooPresent) != 0 {
		t.Errorf("expected present %v: a and b may have been deleted, c never acknowledged", e.cuckooPresent)
	}
}

// TestRunWithFaults runs the whole suite briefly: a three-node cluster of real
// processes, killed, paused and restarted under a workload, must keep every
// acknowledged write, apply each once and stay linearizable; once in plain
// text and once secured with TLS everywhere.
func TestRunWithFaults(t *testing.T) {
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
		sum, code := runCommand(t, "-bin", bin, "-duration", d.String(), "-faults", "kill,pause,term,partition",
			"-interval", "1.5s", "-hold", "1.5s", "-seed", "42", "-out", out)
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
			Faults: []string{faultKill, faultPause, faultTerm, faultPartition}, Interval: 1500 * time.Millisecond,
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
}
