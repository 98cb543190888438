package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/client"
	"github.com/rookerydb/rookery/internal/nodeproc"
)

// Config is one run.
type Config struct {
	Binary    string        // the rookery binary
	Dir       string        // data directories go under it
	Nodes     int           // cluster size
	Workers   int           // concurrent clients
	Duration  time.Duration // of the workload with faults
	Faults    []string      // kill, pause, term; none for a run without faults
	Interval  time.Duration // between faults
	Hold      time.Duration // how long a fault lasts
	OpTimeout time.Duration // per client operation, retries included
	Seed      uint64
	NodeFlags []string // extra flags for every node
	// TLS secures the cluster as in production: mutual TLS between the nodes, a
	// gossip key, a password, RESP and HTTP over TLS; the clients use them.
	TLS bool
	Log func(format string, args ...any)
}

// Report is what a run found. OK is false if any check failed.
type Report struct {
	OK               bool
	Ops, Failed      int64
	Unknown          int64
	Faults           int
	BloomLinear      porcupine.CheckResult
	CuckooLinear     porcupine.CheckResult
	AckedBloom       int
	AckedCuckoo      int
	HeldRange        [2]int64
	Held             map[string]int64 // per node
	Problems         []string
	FailedChecks     []string // of the checks below, those that failed, each once
	CheckDuration    time.Duration
	WorkloadDuration time.Duration

	// For the artifacts.
	History  []op              // every operation, failed ones included, as the clients saw them
	Keys     []keyCheck        // the linearizability check of each filter
	Events   []faultEvent      // the faults injected
	NodeDirs map[string]string // each node's data directory
	NodeLogs map[string]string // each node's log, over all its restarts
}

// The checks of a run; main maps each to an exit code.
const (
	checkLinearizable = "linearizable"      // every filter's history is linearizable
	checkAckedKept    = "acknowledged-kept" // every acknowledged write is on every node
	checkCount        = "item-count"        // no write lost or applied twice
	checkRecovery     = "recovery"          // every node recovered and answered the final reads
)

func (r *Report) fail(check, format string, args ...any) {
	r.OK = false
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	if !slices.Contains(r.FailedChecks, check) {
		r.FailedChecks = append(r.FailedChecks, check)
	}
}

// Run starts a cluster, runs the workload with the nemesis, heals the cluster,
// and checks the history and the final state. Once the cluster has started,
// the report it returns holds the nodes' logs and data directories even with
// an error; the nodes are stopped when it returns.
func Run(cfg Config) (*Report, error) {
	rep := &Report{OK: true}
	flags := cfg.NodeFlags
	if slices.Contains(cfg.Faults, faultPartition) {
		flags = append(flags, "--fault-injection")
	}
	sec, err := security(cfg)
	if err != nil {
		return nil, err
	}
	cl, err := nodeproc.StartSecureCluster(cfg.Binary, filepath.Join(cfg.Dir, "data"), cfg.Nodes, sec, flags...)
	if err != nil {
		return nil, err
	}
	logs := &nodeLogs{}
	defer func() {
		cl.Close()
		rep.NodeDirs, rep.NodeLogs = map[string]string{}, map[string]string{}
		for _, m := range cl.Nodes {
			logs.save(m)
			rep.NodeDirs[m.ID], rep.NodeLogs[m.ID] = m.Dir, logs.get(m.ID)
		}
	}()
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Addrs: cl.RESPAddrs(), RetryBackoff: 20 * time.Millisecond,
		Password: sec.Password, TLS: sec.RESPTLSConfig()})
	if err != nil {
		return rep, err
	}
	defer c.Close()
	if err := c.CFReserve(ctx, cuckooKey, 1<<20, &client.CFReserveOptions{BucketSize: 4}); err != nil {
		return rep, err
	}
	if err := c.BFReserve(ctx, bloomKey, 0.001, 1<<20, nil); err != nil {
		return rep, err
	}

	h := newHistory()
	var n counts
	wctx, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	var wg sync.WaitGroup
	for w := 0; w < cfg.Workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			worker(wctx, w, c, h, cfg.OpTimeout, &n)
		}(w)
	}
	nem := &nemesis{cluster: cl, faults: cfg.Faults, interval: cfg.Interval, hold: cfg.Hold,
		rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed)), log: cfg.Log, now: h.now, logs: logs}
	nemErr := make(chan error, 1)
	if len(cfg.Faults) > 0 {
		go func() { nemErr <- nem.run(wctx) }()
	} else {
		nemErr <- nil
	}
	wg.Wait()
	nemesisErr := <-nemErr
	end := h.now()
	rep.Faults, rep.Events, rep.WorkloadDuration, rep.History = nem.injected, nem.events, time.Duration(end), h.all()
	if nemesisErr != nil {
		return rep, fmt.Errorf("nemesis: %w", nemesisErr)
	}
	rep.Ops, rep.Failed, rep.Unknown = n.ok.Load(), n.failed.Load(), n.unknown.Load()

	// Heal: every node running and ready.
	for _, m := range cl.Nodes {
		_ = m.Resume()
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

	start := time.Now()
	ops := h.closed(end + 1)
	rep.Keys = checkKeys(ops, 2*time.Minute)
	rep.BloomLinear, rep.CuckooLinear = rep.Keys[0].result, rep.Keys[1].result
	if rep.BloomLinear != porcupine.Ok {
		rep.fail(checkLinearizable, "Bloom history not linearizable: %s", rep.BloomLinear)
	}
	if rep.CuckooLinear != porcupine.Ok {
		rep.fail(checkLinearizable, "cuckoo history not linearizable: %s", rep.CuckooLinear)
	}
	checkFinal(cl, expect(ops), rep)
	rep.CheckDuration = time.Since(start)
	return rep, nil
}

// security makes the certificates of a TLS run (one per node, n1 to nN) and
// says how the nodes are secured; without TLS, nothing.
func security(cfg Config) (nodeproc.Security, error) {
	if !cfg.TLS {
		return nodeproc.Security{}, nil
	}
	dir := filepath.Join(cfg.Dir, "certs")
	names := make([]string, cfg.Nodes)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i+1)
	}
	if err := nodeproc.MakeCerts(cfg.Binary, dir, names...); err != nil {
		return nodeproc.Security{}, err
	}
	return nodeproc.Security{CertDir: dir, GossipKey: "amVwc2VuLWxpdGUtZ29zc2lwLWtleS0zMi1ieXRlcyE=",
		Password: "jepsen-lite", RESPTLS: true, HTTPTLS: true}, nil
}

// checkFinal reads every node directly: every acknowledged write is there, and
// the cuckoo filter holds as many items as the history allows, on every node.
func checkFinal(cl *nodeproc.Cluster, e expectation, rep *Report) {
	ctx := context.Background()
	rep.AckedBloom, rep.AckedCuckoo = len(e.bloomPresent), len(e.cuckooPresent)
	rep.HeldRange = [2]int64{e.minHeld, e.maxHeld}
	rep.Held = map[string]int64{}
	for _, m := range cl.Nodes {
		r := redis.NewClient(&redis.Options{Addr: m.RESP, MaxRetries: 3, ReadTimeout: 15 * time.Second,
			Password: cl.Sec.Password, TLSConfig: cl.Sec.RESPTLSConfig()})
		checkNode(ctx, r, m.ID, e, rep)
		r.Close()
	}
}

func checkNode(ctx context.Context, r *redis.Client, id string, e expectation, rep *Report) {
	for _, batch := range chunks(e.bloomPresent, 1000) {
		got, err := r.BFMExists(ctx, bloomKey, batch...).Result()
		if err != nil {
			rep.fail(checkRecovery, "%s: BF.MEXISTS: %v", id, err)
			return
		}
		for i, ok := range got {
			if !ok {
				rep.fail(checkAckedKept, "%s: acknowledged BF.ADD %v lost", id, batch[i])
			}
		}
	}
	for _, batch := range chunks(e.cuckooPresent, 1000) {
		got, err := r.CFMExists(ctx, cuckooKey, batch...).Result()
		if err != nil {
			rep.fail(checkRecovery, "%s: CF.MEXISTS: %v", id, err)
			return
		}
		for i, ok := range got {
			if !ok {
				rep.fail(checkAckedKept, "%s: acknowledged CF.ADD %v lost", id, batch[i])
			}
		}
	}
	info, err := r.CFInfo(ctx, cuckooKey).Result()
	if err != nil {
		rep.fail(checkRecovery, "%s: CF.INFO: %v", id, err)
		return
	}
	rep.Held[id] = info.NumItemsInserted
	if info.NumItemsInserted < e.minHeld || info.NumItemsInserted > e.maxHeld {
		rep.fail(checkCount, "%s: cuckoo filter holds %d items, the history allows [%d, %d]: a write was lost or applied twice",
			id, info.NumItemsInserted, e.minHeld, e.maxHeld)
	}
}

func chunks(items []string, n int) [][]any {
	var out [][]any
	for len(items) > 0 {
		k := min(n, len(items))
		b := make([]any, k)
		for i := range b {
			b[i] = items[i]
		}
		out = append(out, b)
		items = items[k:]
	}
	return out
}
