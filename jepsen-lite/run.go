package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/rookerydb/rookery/client"
	"github.com/rookerydb/rookery/internal/nodeproc"
)

// Config is one run.
type Config struct {
	Binary string // the rookery binary
	Dir    string // data directories go under it
	Nodes  int    // cluster size
	// Shards, above 1, starts the cluster with --shards Shards --replicas 3
	// (shards.go): keys spread over the shards' Raft groups, faults aim at
	// shard leaders, and the final checks read each shard's replicas.
	Shards    int
	Workers   int           // concurrent clients
	Duration  time.Duration // of the workload with faults
	Faults    []string      // of allFaults; none for a run without faults
	Interval  time.Duration // between faults
	Hold      time.Duration // how long a fault lasts
	OpTimeout time.Duration // per client operation, retries included
	Seed      uint64
	NodeFlags []string // extra flags for every node
	// Mutant, if set, plants that bug (internal/mutant) in the nodes, which
	// must be built with -tags rookery_mutants: the bugs of one replica in one
	// node, the others in all.
	Mutant string
	// TLS secures the cluster as in production: mutual TLS between the nodes, a
	// gossip key, a password, RESP and HTTP over TLS; the clients use them.
	TLS bool
	Log func(format string, args ...any)
}

// Report is what a run found. OK is false if any check failed.
type Report struct {
	OK          bool
	Ops, Failed int64
	Unknown     int64
	Faults      int
	Linear      map[string]porcupine.CheckResult // per group of keys
	AckedBloom  int                              // Bloom items expected present
	AckedCuckoo int                              // cuckoo and counting items expected held
	HeldRange   [2]int64
	// The transactional workload (txns.go): transactions run, sequence
	// transactions WATCH aborted and retried, and those of unknown outcome.
	Transactions, TxAborted, TxUnknown int64
	Held                               map[string]int64 // per node
	ClientCuts                         int64
	Problems                           []string
	FailedChecks                       []string // of the checks below, those that failed, each once
	CheckDuration                      time.Duration
	WorkloadDuration                   time.Duration

	// For the artifacts.
	History  []op              // every operation, failed ones included, as the clients saw them
	Keys     []keyCheck        // the linearizability check of each group of keys
	Events   []faultEvent      // the faults injected
	Slow     []slowStop        // nodes that did not exit in time after SIGTERM
	NodeDirs map[string]string // each node's data directory
	NodeLogs map[string]string // each node's log, over all its restarts

	perCheck map[string]int // problems found, by check
}

// The checks of a run; main maps each to an exit code.
const (
	checkLinearizable  = "linearizable"      // every history is linearizable
	checkAckedKept     = "acknowledged-kept" // every acknowledged write is on every node (sharded: every replica of its shard)
	checkCount         = "item-count"        // no write applied twice
	checkRecovery      = "recovery"          // every node recovered and answered the final reads
	checkReplicas      = "replicas-agree"    // every node (sharded: every replica of a shard) holds the same filters
	checkReadOnlyReads = "readonly"          // READONLY reads kept their promise
	checkWindowed      = "windowed"          // windowed filters hold items for their window, then forget them
	// checkTransactions (txns.go): every transaction applied all or nothing, once, and WATCH lost no update.
)

// problemsPerCheck is how many problems of one check the report lists; the
// rest are counted.
const problemsPerCheck = 20

func (r *Report) fail(check, format string, args ...any) {
	r.OK = false
	if r.perCheck == nil {
		r.perCheck = map[string]int{}
	}
	if r.perCheck[check]++; r.perCheck[check] <= problemsPerCheck {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
	if !slices.Contains(r.FailedChecks, check) {
		r.FailedChecks = append(r.FailedChecks, check)
	}
}

// more lists how many problems of each check were left out.
func (r *Report) more() []string {
	var out []string
	for _, c := range r.FailedChecks {
		if n := r.perCheck[c] - problemsPerCheck; n > 0 {
			out = append(out, fmt.Sprintf("%s: %d more problems", c, n))
		}
	}
	return out
}

// replicaMutants are planted in one node only: a replica that diverges.
var replicaMutants = []string{"delete-twice", "add-twice"}

// nodeFlags are the flags every node runs with: snapshots every few hundred
// entries with a short log behind them, so a node that falls behind or
// restarts catches up from a snapshot (installed by the leader, or its own).
func nodeFlags(cfg Config) []string {
	flags := append([]string{"--snapshot-threshold", "200", "--trailing-logs", "50", "--snapshot-interval", "500ms"},
		cfg.NodeFlags...)
	if len(cfg.Faults) > 0 {
		flags = append(flags, "--fault-injection")
	}
	if cfg.Shards > 1 {
		flags = append(flags, "--shards", fmt.Sprint(cfg.Shards), "--replicas", fmt.Sprint(shardReplicas))
	}
	if cfg.Mutant != "" && !slices.Contains(replicaMutants, cfg.Mutant) {
		flags = append(flags, "--mutant", cfg.Mutant)
	}
	return flags
}

// Run starts a cluster, runs the workload with the nemesis, heals the cluster,
// and checks the history and the final state. Once the cluster has started,
// the report it returns holds the nodes' logs and data directories even with
// an error; the nodes are stopped when it returns.
func Run(cfg Config) (*Report, error) {
	rep := &Report{OK: true}
	if cfg.Shards <= 1 {
		for _, f := range cfg.Faults {
			if slices.Contains(shardedOnly, f) {
				return nil, fmt.Errorf("fault %s moves shard replicas: it needs Shards > 1", f)
			}
		}
	}
	sec, err := security(cfg)
	if err != nil {
		return nil, err
	}
	cl, err := startCluster(cfg, sec)
	if err != nil {
		return nil, err
	}
	topo := &topology{cl: cl, nextID: cfg.Nodes, sharded: cfg.Shards > 1}
	logs := &nodeLogs{}
	defer func() {
		cl.Close()
		rep.NodeDirs, rep.NodeLogs = map[string]string{}, map[string]string{}
		for _, m := range cl.Nodes {
			logs.save(m)
			rep.NodeDirs[m.ID] = m.Dir
		}
		for id, l := range logs.all() {
			rep.NodeLogs[id] = l
		}
	}()
	if topo.sharded {
		// Every shard created, led and on its three replicas before the
		// first write.
		if _, err := waitSettled(cl.Nodes, shardReplicas, 2*time.Minute); err != nil {
			return rep, err
		}
	}
	ctx := context.Background()
	cut := newCutter(cfg.Seed)
	c, err := client.New(ctx, client.Options{Addrs: cl.RESPAddrs(), RetryBackoff: 20 * time.Millisecond,
		Password: sec.Password, TLS: sec.RESPTLSConfig(), Dialer: cut.dial, RefreshInterval: time.Second,
		ReadTimeout: 2 * time.Second})
	if err != nil {
		return rep, err
	}
	defer c.Close()
	if err := createFilters(ctx, c); err != nil {
		return rep, err
	}

	h := newHistory()
	var n counts
	acked := newRecent(4096)
	wctx, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	nc := nodeConn{addr: topo.addr, id: topo.id, password: sec.Password, tls: sec.RESPTLSConfig(), dial: cut.dial}
	if err := createTxFilters(ctx, nc); err != nil {
		return rep, err
	}
	txl := &txLog{committed: map[int64]bool{}, errs: map[string]int{}}
	progress := make([]*atomic.Int64, cfg.Workers)
	var wg sync.WaitGroup
	for i := range cfg.Workers {
		progress[i] = &atomic.Int64{}
		w := &worker{id: i, c: c, h: h, opTimeout: cfg.OpTimeout, n: &n, acked: acked, progress: progress[i]}
		wg.Add(1)
		go func() { defer wg.Done(); w.run(wctx) }()
	}
	var watch *shardWatch
	watchDone := make(chan struct{})
	if topo.sharded {
		watch = &shardWatch{}
		go watch.run(watchDone, topo, 250*time.Millisecond)
	}
	for slot := range cfg.Nodes {
		wg.Add(2)
		go func() { defer wg.Done(); pinnedReader(wctx, slot, nc, h, acked, &n, cfg.Seed) }()
		go func() { defer wg.Done(); readOnlyReader(wctx, slot, nc, h, acked, progress, &n, cfg.Seed, watch) }()
		wg.Add(1)
		go func() { defer wg.Done(); txWorker(wctx, slot, slot, nc, cfg.OpTimeout, txl) }()
	}
	nem := &nemesis{topo: topo, bin: cfg.Binary, faults: cfg.Faults, interval: cfg.Interval, hold: cfg.Hold,
		rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed)), log: cfg.Log, h: h, logs: logs, cut: cut, nc: nc,
		acked: acked, n: &n}
	nemErr := make(chan error, 1)
	if len(cfg.Faults) > 0 {
		go func() { nemErr <- nem.run(wctx) }()
	} else {
		nemErr <- nil
	}
	nemesisErr := <-nemErr
	wg.Wait()
	close(watchDone)
	end := h.now()
	rep.Faults, rep.Events, rep.WorkloadDuration, rep.History = nem.injected, nem.events, time.Duration(end), h.all()
	rep.ClientCuts, rep.Slow = cut.cuts.Load(), nem.slow
	if nemesisErr != nil {
		return rep, fmt.Errorf("nemesis: %w", nemesisErr)
	}
	rep.Ops, rep.Failed, rep.Unknown = n.ok.Load(), n.failed.Load(), n.unknown.Load()

	// Heal: every node running and ready.
	for _, m := range cl.Nodes {
		_ = m.Resume()
		_ = m.Heal()
		if !m.Alive() {
			logs.save(m)
			if err := m.Restart(); err != nil {
				return rep, err
			}
		}
		if err := m.WaitReady(30 * time.Second); err != nil {
			rep.fail(checkRecovery, "%s did not recover: %v", m.ID, err)
		}
	}
	// Sharded: the replicas to check are those the map places once the
	// controller has nothing left to move.
	var final shardMap
	if topo.sharded {
		if final, err = waitSettled(cl.Nodes, shardReplicas, 3*time.Minute); err != nil {
			rep.fail(checkRecovery, "%v", err)
			if final, err = anyShards(cl.Nodes); err != nil {
				return rep, err
			}
		}
		cfg.Log("shards after healing: %v", placement(final))
	}

	start := time.Now()
	ops := closed(rep.History, end+1)
	exact, err := exactItems(ops)
	if err != nil {
		return rep, err
	}
	rep.Keys = checkKeys(ops, exact, 2*time.Minute)
	rep.Linear = map[string]porcupine.CheckResult{}
	for _, k := range rep.Keys {
		rep.Linear[k.key] = k.result
		if k.result != porcupine.Ok {
			rep.fail(checkLinearizable, "%s history not linearizable: %s", k.key, k.result)
		}
	}
	for _, p := range checkReadOnly(rep.History) {
		rep.fail(checkReadOnlyReads, "%s", p)
	}
	checkWindows(ops, h.start.UnixNano(), rep)
	// The windowed filters empty before the replicas are compared, so that
	// no tick changes them between one node's reads and the next's.
	checkWindowFinal(cl, ops, rep)
	checkFinal(cl, final, expect(ops), exact, rep)
	checkTxFinal(cl, final, txl, rep)
	if errs := txl.errorsSeen(5); len(errs) > 0 {
		cfg.Log("transactions' errors: %s", strings.Join(errs, "; "))
	}
	rep.CheckDuration = time.Since(start)
	return rep, nil
}

// startCluster starts the nodes; a replica mutant goes into the last one.
func startCluster(cfg Config, sec nodeproc.Security) (*nodeproc.Cluster, error) {
	flags := nodeFlags(cfg)
	if slices.Contains(replicaMutants, cfg.Mutant) {
		return nodeproc.StartSecureClusterEach(cfg.Binary, filepath.Join(cfg.Dir, "data"), cfg.Nodes, sec,
			func(i int) []string {
				if i == cfg.Nodes-1 {
					return append(slices.Clone(flags), "--mutant", cfg.Mutant)
				}
				return flags
			})
	}
	return nodeproc.StartSecureCluster(cfg.Binary, filepath.Join(cfg.Dir, "data"), cfg.Nodes, sec, flags...)
}

// createFilters makes the long-lived filters, with the parameters the
// oracles rebuild, and checks that the cuckoo filter's shape is the oracle's.
func createFilters(ctx context.Context, c *client.Client) error {
	if err := c.BFReserve(ctx, bloomKey, bloomErrorRate, bloomCapacity, &client.BFReserveOptions{NonScaling: true}); err != nil {
		return fmt.Errorf("create %s: %w", bloomKey, err)
	}
	if err := c.BFReserve(ctx, scalableKey, scalableRate, scalableCapacity, &client.BFReserveOptions{Expansion: 2}); err != nil {
		return fmt.Errorf("create %s: %w", scalableKey, err)
	}
	if err := c.CFReserve(ctx, cuckooKey, cuckooCapacity, &client.CFReserveOptions{BucketSize: cuckooBucketSize,
		MaxIterations: cuckooMaxIter, Expansion: 1}); err != nil {
		return fmt.Errorf("create %s: %w", cuckooKey, err)
	}
	if err := c.CBFReserve(ctx, countingKey, countingRate, countingCapacity, &client.CBFReserveOptions{CounterBits: countingBits}); err != nil {
		return fmt.Errorf("create %s: %w", countingKey, err)
	}
	return createWindowed(ctx, c)
}

// maxReplacements is how many nodes membership changes may add in a TLS run.
const maxReplacements = 40

// security makes the certificates of a TLS run (one per node, n1 to nN) and
// says how the nodes are secured; without TLS, nothing.
func security(cfg Config) (nodeproc.Security, error) {
	if !cfg.TLS {
		return nodeproc.Security{}, nil
	}
	dir := filepath.Join(cfg.Dir, "certs")
	// Nodes added by membership changes take the next ids.
	names := make([]string, cfg.Nodes+maxReplacements)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i+1)
	}
	if err := nodeproc.MakeCerts(cfg.Binary, dir, names...); err != nil {
		return nodeproc.Security{}, err
	}
	return nodeproc.Security{CertDir: dir, GossipKey: "amVwc2VuLWxpdGUtZ29zc2lwLWtleS0zMi1ieXRlcyE=",
		Password: "jepsen-lite", RESPTLS: true, HTTPTLS: true}, nil
}
