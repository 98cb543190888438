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
	CheckDuration    time.Duration
	WorkloadDuration time.Duration
}

func (r *Report) fail(format string, args ...any) {
	r.OK = false
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// Run starts a cluster, runs the workload with the nemesis, heals the cluster,
// and checks the history and the final state.
func Run(cfg Config) (*Report, error) {
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
	defer cl.Close()
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Addrs: cl.RESPAddrs(), RetryBackoff: 20 * time.Millisecond,
		Password: sec.Password, TLS: sec.RESPTLSConfig()})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.CFReserve(ctx, cuckooKey, 1<<20, &client.CFReserveOptions{BucketSize: 4}); err != nil {
		return nil, err
	}
	if err := c.BFReserve(ctx, bloomKey, 0.001, 1<<20, nil); err != nil {
		return nil, err
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
		rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed)), log: cfg.Log}
	nemErr := make(chan error, 1)
	if len(cfg.Faults) > 0 {
		go func() { nemErr <- nem.run(wctx) }()
	} else {
		nemErr <- nil
	}
	wg.Wait()
	if err := <-nemErr; err != nil {
		return nil, fmt.Errorf("nemesis: %w", err)
	}
	end := h.now()
	rep := &Report{OK: true, Faults: nem.injected, WorkloadDuration: time.Duration(end)}
	rep.Ops, rep.Failed, rep.Unknown = n.ok.Load(), n.failed.Load(), n.unknown.Load()

	// Heal: every node running and ready.
	for _, m := range cl.Nodes {
		_ = m.Resume()
		if !m.Alive() {
			if err := m.Restart(); err != nil {
				return nil, err
			}
		}
		if err := m.WaitReady(30 * time.Second); err != nil {
			rep.fail("%s did not recover: %v", m.ID, err)
		}
	}

	start := time.Now()
	ops := h.closed(end + 1)
	rep.BloomLinear, rep.CuckooLinear = linearizable(ops, 2*time.Minute)
	if rep.BloomLinear != porcupine.Ok {
		rep.fail("Bloom history not linearizable: %s", rep.BloomLinear)
	}
	if rep.CuckooLinear != porcupine.Ok {
		rep.fail("cuckoo history not linearizable: %s", rep.CuckooLinear)
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
			rep.fail("%s: BF.MEXISTS: %v", id, err)
			return
		}
		for i, ok := range got {
			if !ok {
				rep.fail("%s: acknowledged BF.ADD %v lost", id, batch[i])
			}
		}
	}
	for _, batch := range chunks(e.cuckooPresent, 1000) {
		got, err := r.CFMExists(ctx, cuckooKey, batch...).Result()
		if err != nil {
			rep.fail("%s: CF.MEXISTS: %v", id, err)
			return
		}
		for i, ok := range got {
			if !ok {
				rep.fail("%s: acknowledged CF.ADD %v lost", id, batch[i])
			}
		}
	}
	info, err := r.CFInfo(ctx, cuckooKey).Result()
	if err != nil {
		rep.fail("%s: CF.INFO: %v", id, err)
		return
	}
	rep.Held[id] = info.NumItemsInserted
	if info.NumItemsInserted < e.minHeld || info.NumItemsInserted > e.maxHeld {
		rep.fail("%s: cuckoo filter holds %d items, the history allows [%d, %d]: a write was lost or applied twice",
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
