package main

import (
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/mutant"
	"github.com/rookerydb/rookery/internal/nodeproc"
)

// The checker's own test suite: each bug of internal/mutant, planted in the
// nodes, must make a short run fail with a violation, with the faults that
// give the bug its chance; the same run against the real binary must pass.

// mutantRuns are the faults that expose each mutant.
var mutantRuns = map[string][]string{
	mutant.SessionsOff:        {faultClients},
	mutant.FollowerLocalReads: {faultPause, faultPartition},
	mutant.AckAtProposal:      {faultKill},
	mutant.DeleteTwice:        nil,
	mutant.AddTwice:           nil,
	mutant.SkipVerifyLeader:   {faultStaleLeader},
	mutant.RestoreDropsNewest: {faultKill, faultTerm},
	mutant.WindowEarly:        nil,
	mutant.WatchIgnored:       nil,
}

// mutantDuration is how long each mutant's run lasts. A deposed leader that
// skips the check answers stale reads only when the reads waiting for it run
// before raft's own lease check steps it down, a race the reads mostly win on
// an idle machine; on a loaded one it takes a few stale-leader faults.
func mutantDuration(name string) time.Duration {
	if name == mutant.SkipVerifyLeader {
		return 30 * time.Second
	}
	return 12 * time.Second
}

// mutantTries is how many runs a mutant gets to show itself. Every mutant
// but one breaks a promise on every run; the deposed leader of
// skip-verify-leader loses its race with raft's lease check on some faults
// (see mutantDuration), and a run with the workload's transactions beside it
// on a loaded 2-core machine has held as few as two such faults with reads
// waiting, both lost. A second and third run, each with its own seed, make a
// miss that chance cubed; a mutant the checker could not catch at all still
// fails every try.
func mutantTries(name string) int {
	if name == mutant.SkipVerifyLeader {
		return 3
	}
	return 1
}

var (
	buildOnce          sync.Once
	realBin, mutantBin string
	buildErr           error
)

// binaries builds the real node and the one with mutants, once per test run.
func binaries(t *testing.T) (real, mutants string) {
	skipShort(t)
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "jepsen-lite-bins-")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		if realBin, buildErr = nodeproc.Build(dir+"/real", false); buildErr != nil {
			return
		}
		mutantBin, buildErr = nodeproc.BuildTags(dir+"/mutants", false, "rookery_mutants")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return realBin, mutantBin
}

var binDir string

// skipShort skips, with -short, a test that runs real nodes.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test runs real nodes")
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// violations are the checks whose failure means the cluster broke a promise,
// as opposed to a run that could not be carried out.
var violations = []string{checkLinearizable, checkAckedKept, checkCount, checkReplicas, checkReadOnlyReads, checkWindowed, checkTransactions}

func TestCheckerCatchesEveryMutant(t *testing.T) {
	if len(mutantRuns) != len(mutant.Names) {
		t.Fatalf("mutants %v, runs for %d of them", mutant.Names, len(mutantRuns))
	}
	real, mutants := binaries(t)
	run := func(t *testing.T, bin, name string, faults []string, seed uint64) *Report {
		// Four workers: the test shares a 2-core machine with the other
		// packages' tests, and every mutant shows within seconds.
		cfg := Config{Binary: bin, Dir: t.TempDir(), Nodes: 3, Workers: 4, Duration: mutantDuration(name),
			Faults: faults, Interval: 700 * time.Millisecond, Hold: 2 * time.Second, OpTimeout: 8 * time.Second,
			Seed: seed, Mutant: name, Log: t.Logf}
		rep, err := Run(cfg)
		if err != nil {
			t.Fatalf("the run could not be carried out: %v", err)
		}
		t.Log("\n" + rep.String())
		return rep
	}
	for _, name := range mutant.Names {
		t.Run(name, func(t *testing.T) {
			var rep *Report
			for try := range mutantTries(name) {
				if rep = run(t, mutants, name, mutantRuns[name], 7+uint64(try)); !rep.OK {
					break
				}
				t.Logf("mutant %s unnoticed on try %d of %d", name, try+1, mutantTries(name))
			}
			if rep.OK {
				t.Fatalf("mutant %s went unnoticed in %d runs", name, mutantTries(name))
			}
			caught := false
			for _, c := range rep.FailedChecks {
				caught = caught || slices.Contains(violations, c)
			}
			if !caught {
				t.Fatalf("mutant %s: the run failed only on %v, not with a violation", name, rep.FailedChecks)
			}
			t.Logf("mutant %s caught by %v in %d operations", name, rep.FailedChecks, rep.Ops)
		})
	}
	t.Run("real", func(t *testing.T) {
		var all []string
		for _, fs := range mutantRuns {
			for _, f := range fs {
				if !slices.Contains(all, f) {
					all = append(all, f)
				}
			}
		}
		slices.Sort(all)
		if rep := run(t, real, "", all, 7); !rep.OK {
			t.Fatalf("the real node failed the checks: %v", rep.Problems)
		}
	})
}
