// Command jepsen-lite checks that a Rookery cluster keeps every acknowledged
// write, applies every write once, and answers reads as it promises, while a
// nemesis breaks its nodes, its network and its membership.
//
//	go run ./jepsen-lite -duration 60s
//	go run ./jepsen-lite -duration 15s -faults none -mutant delete-twice
//	go run ./jepsen-lite -duration 60s -shards 4
//
// It builds the rookery binary (or takes -bin), starts a cluster of real
// processes on 127.0.0.1, and runs concurrent workers through the Go client
// (workload.go) against a Bloom, a scalable Bloom, a cuckoo and a counting
// Bloom filter and short-lived keys, with readers pinned to each node, reading
// linearizably and on READONLY connections (readers.go). A nemesis
// (nemesis.go) injects faults on a schedule drawn from -seed: kill, pause,
// term, partition, stale-leader, clients, membership and mix. Afterwards every
// node is healed and the run is checked:
//
//   - every history is linearizable (check.go), exactly for every item with no
//     colliding item (oracle.go);
//   - READONLY reads never run ahead of the writes or back on one connection;
//   - every acknowledged write is on every node, with the count its history
//     allows, and the replicas agree key by key (final.go).
//
// With -shards N above 1 (shards.go) the cluster is five nodes (-nodes)
// started with --shards N --replicas 3, the workload's keys falling on every
// shard. The faults that aim at the leader aim at a node leading a shard
// (stale-leader: the Bloom filter's shard); membership drains the node before
// it removes it; and two more faults move replicas while the writes go on:
// move (a node joins and receives replicas, then another is drained with
// `rookery node drain`, removed and wiped, the new node in its place) and
// drain (a node drained until it holds nothing, then undrained until it holds
// its share again). READONLY readers read only while their node holds a
// voting replica of the key's shard, on a new connection whenever that
// changes. After healing the run waits until placement has settled, then
// "every node" above means every replica of the key's shard as /v1/shards
// places it, and the replicas are compared shard by shard.
//
// "jepsen-lite table DIR..." prints the runs whose -out directories are given
// as the Markdown table of docs/RELIABILITY.md.
//
// -mutant NAME builds the nodes with -tags rookery_mutants and plants one of
// internal/mutant's bugs, to watch the checker catch it.
//
// With -out DIR it keeps, on every run, the history (history.jsonl: one
// operation per line with its worker, kind, key, item, call and return times,
// outcome ok, fail or unknown, and result), a summary (summary.json: operations
// by kind and outcome, the faults with their times and whether they hit the
// leader, the spans of a second or more with no successful operation, latency
// percentiles, the verdict and the checks that failed), and porcupine's
// visualization of each filter's history (KEY.html). A failed run also keeps
// the nodes' data directories and logs in DIR/nodes/; without -out it keeps
// all of these in a temporary directory whose path it prints. Everything else
// it removes, whatever the outcome.
//
// Its exit code says which check failed, the first of them in this order:
//
//	0  every check passed
//	1  setup or infrastructure error (flags, build, cluster start, nemesis, artifacts)
//	2  a history is not linearizable
//	3  an acknowledged write is missing from a node
//	4  a count is above what the history allows: a write applied twice
//	5  a node did not recover after healing, or did not answer the final reads
//	6  the replicas differ
//	7  a READONLY read ran ahead of the writes or went back on its connection
//	8  a windowed filter kept an item past its window or lost one within it
//	9  a transaction applied partly or twice, or WATCH lost an update
//
// The run stops by itself after -duration.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rookerydb/rookery/internal/mutant"
	"github.com/rookerydb/rookery/internal/nodeproc"
)

// Exit codes.
const (
	exitOK           = 0
	exitSetup        = 1
	exitNotLinear    = 2
	exitAckedLost    = 3
	exitCount        = 4
	exitNotRecovered = 5
	exitReplicas     = 6
	exitReadOnly     = 7
	exitWindowed     = 8
	exitTransactions = 9
	failedDirPrefix  = "jepsen-lite-failed-"
	workDirPrefix    = "jepsen-lite-"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// exitCode is the exit code of a report: that of its first failed check in
// the order of the codes.
func exitCode(rep *Report) int {
	for _, c := range []struct {
		check string
		code  int
	}{{checkLinearizable, exitNotLinear}, {checkAckedKept, exitAckedLost}, {checkCount, exitCount},
		{checkRecovery, exitNotRecovered}, {checkReplicas, exitReplicas}, {checkReadOnlyReads, exitReadOnly},
		{checkWindowed, exitWindowed}, {checkTransactions, exitTransactions}} {
		for _, f := range rep.FailedChecks {
			if f == c.check {
				return c.code
			}
		}
	}
	if !rep.OK {
		return exitSetup
	}
	return exitOK
}

// run is the command: it returns the exit code once everything it made is
// cleaned up, except the artifacts it was asked or has reason to keep.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "table" {
		if err := table(args[1:], stdout); err != nil {
			fmt.Fprintln(stderr, err)
			return exitSetup
		}
		return exitOK
	}
	logger := log.New(stderr, "", log.LstdFlags)
	fl := flag.NewFlagSet("jepsen-lite", flag.ContinueOnError)
	fl.SetOutput(stderr)
	var cfg Config
	bin := fl.String("bin", "", "rookery binary to run (default: build it)")
	faults := fl.String("faults", "", "faults to inject, comma separated: "+strings.Join(allFaults, ", ")+" ("+
		strings.Join(shardedOnly, " and ")+" with -shards > 1 only); or none (default: every fault the cluster can take)")
	mutantName := fl.String("mutant", "", "plant this bug in the nodes, to see the checker catch it (builds them with -tags rookery_mutants): "+strings.Join(mutant.Names, ", "))
	out := fl.String("out", "", "directory to keep the history, summary and visualizations in (and, on failure, the nodes' data and logs)")
	fl.IntVar(&cfg.Nodes, "nodes", 3, "cluster size (default 5 with -shards > 1)")
	fl.IntVar(&cfg.Shards, "shards", 1, "shards: above 1, the cluster runs with --shards N --replicas 3 and the checks go per shard")
	fl.IntVar(&cfg.Workers, "workers", 8, "concurrent clients")
	fl.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long the workload runs")
	fl.DurationVar(&cfg.Interval, "interval", 2*time.Second, "pause between faults")
	fl.DurationVar(&cfg.Hold, "hold", 2*time.Second, "how long a fault lasts")
	fl.DurationVar(&cfg.OpTimeout, "op-timeout", 10*time.Second, "per operation, retries included")
	fl.Uint64Var(&cfg.Seed, "seed", uint64(time.Now().UnixNano()), "seed of the nemesis's choices")
	fl.BoolVar(&cfg.TLS, "tls", false, "secure the cluster: mutual TLS between nodes, gossip key, password, RESP and HTTP over TLS")
	nodeFlags := fl.String("node-flags", "", "extra flags for every node, space separated (e.g. to check that the checker catches --read-consistency stale)")
	if err := fl.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		return exitSetup
	}
	cfg.NodeFlags = strings.Fields(*nodeFlags)
	nodesSet := false
	fl.Visit(func(f *flag.Flag) { nodesSet = nodesSet || f.Name == "nodes" })
	if cfg.Shards < 1 {
		logger.Printf("-shards %d: want 1 or more", cfg.Shards)
		return exitSetup
	}
	if cfg.Shards > 1 && !nodesSet {
		cfg.Nodes = 5
	}
	if cfg.Shards > 1 && cfg.Nodes < shardReplicas {
		logger.Printf("-shards %d needs -nodes %d or more (each shard has %d replicas)", cfg.Shards, shardReplicas, shardReplicas)
		return exitSetup
	}
	switch *faults {
	case "none":
	case "":
		cfg.Faults = defaultFaults(cfg.Shards)
	default:
		cfg.Faults = strings.Split(*faults, ",")
		for _, f := range cfg.Faults {
			if !slices.Contains(allFaults, f) {
				logger.Printf("unknown fault %q; the faults are %s", f, strings.Join(allFaults, ", "))
				return exitSetup
			}
			if cfg.Shards == 1 && slices.Contains(shardedOnly, f) {
				logger.Printf("fault %q moves shard replicas: it needs -shards > 1", f)
				return exitSetup
			}
		}
	}
	if cfg.Mutant = *mutantName; cfg.Mutant != "" && !slices.Contains(mutant.Names, cfg.Mutant) {
		logger.Printf("unknown mutant %q; the mutants are %s", cfg.Mutant, strings.Join(mutant.Names, ", "))
		return exitSetup
	}
	dir, err := os.MkdirTemp("", workDirPrefix)
	if err != nil {
		logger.Print(err)
		return exitSetup
	}
	defer os.RemoveAll(dir)
	cfg.Dir = dir
	cfg.Binary = *bin
	if cfg.Binary == "" {
		var tags []string
		if cfg.Mutant != "" {
			tags = append(tags, "rookery_mutants")
		}
		if cfg.Binary, err = nodeproc.BuildTags(dir, false, tags...); err != nil {
			logger.Print(err)
			return exitSetup
		}
	}
	cfg.Log = logger.Printf
	logger.Printf("jepsen-lite: %d nodes, %d shards, %d workers, %v, faults %v, seed %d, tls %v, mutant %q", cfg.Nodes, cfg.Shards,
		cfg.Workers, cfg.Duration, cfg.Faults, cfg.Seed, cfg.TLS, cfg.Mutant)
	rep, err := Run(cfg)
	code := exitSetup
	if err != nil {
		logger.Print(err)
		if rep != nil {
			rep.fail("setup", "%v", err)
		}
	} else {
		fmt.Fprint(stdout, rep.String())
		code = exitCode(rep)
	}
	if rep == nil || (*out == "" && code == exitOK && len(rep.Slow) == 0) {
		return code
	}
	keep := *out
	if keep == "" {
		if keep, err = os.MkdirTemp("", failedDirPrefix); err != nil {
			logger.Print(err)
			return code
		}
	}
	if err := writeArtifacts(keep, cfg, rep, code); err != nil {
		logger.Printf("artifacts: %v", err)
		if code == exitOK {
			code = exitSetup
		}
	}
	fmt.Fprintf(stdout, "artifacts: %s\n", keep)
	return code
}

// String is the report as a user reads it.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "operations: %d ok, %d unknown, %d failed (not applied) in %v; %d faults injected, %d client connections cut\n",
		r.Ops, r.Unknown, r.Failed, r.WorkloadDuration.Round(time.Millisecond), r.Faults, r.ClientCuts)
	var lin []string
	for _, k := range r.Keys {
		lin = append(lin, fmt.Sprintf("%s %s (%d ops)", k.key, k.result, k.ops))
	}
	fmt.Fprintf(&b, "linearizable: %s (checked in %v)\n", strings.Join(lin, ", "), r.CheckDuration.Round(time.Millisecond))
	fmt.Fprintf(&b, "acknowledged and expected present: %d Bloom items, %d cuckoo and counting items\n", r.AckedBloom, r.AckedCuckoo)
	fmt.Fprintf(&b, "cuckoo items held per node %v, allowed [%d, %d]\n", r.Held, r.HeldRange[0], r.HeldRange[1])
	fmt.Fprintf(&b, "transactions: %d, %d aborted by WATCH and retried, %d of unknown outcome\n", r.Transactions, r.TxAborted, r.TxUnknown)
	for _, st := range r.Slow {
		fmt.Fprintf(&b, "WARNING: %s did not exit within 20s of SIGTERM (its stacks are in the artifacts)\n", st.Node)
	}
	for _, p := range append(r.Problems, r.more()...) {
		fmt.Fprintf(&b, "PROBLEM: %s\n", p)
	}
	if r.OK {
		b.WriteString("result: OK\n")
	} else {
		b.WriteString("result: FAILED\n")
	}
	return b.String()
}
