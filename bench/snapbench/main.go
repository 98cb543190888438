// Command snapbench measures what a snapshot of a large filter set costs a
// running node: how long it takes and how fast it streams, how much memory the
// process holds meanwhile, and how long writes wait while it runs.
//
//	cd bench && go run ./snapbench -size 1gb -filters 1 -writers 8
//
// It starts one node (cluster.New, a real data directory, real fsyncs), reserves
// Bloom filters adding up to -size, touches every page of them with adds so they
// are resident, then runs -writers goroutines adding items through the log
// without pause and takes a snapshot (the node's TakeSnapshot, as POST
// /v1/snapshot does). It prints the snapshot's duration and bytes per second,
// the RSS before and at its peak during the snapshot against the filters' size,
// and the latency of every write that finished during the snapshot. Compare
// runs on one machine; the disk sets the streaming speed.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/gcpace"
)

func main() {
	size := flag.String("size", "1gb", "total size of the filters")
	nf := flag.Int("filters", 1, "how many Bloom filters share that size")
	writers := flag.Int("writers", 8, "goroutines adding items during the snapshot")
	dir := flag.String("dir", "", "data directory (default: a temporary one)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the snapshot to this file")
	flag.Parse()
	total, err := parseSize(*size)
	if err != nil {
		log.Fatal(err)
	}
	if *dir == "" {
		if *dir, err = os.MkdirTemp("", "snapbench-"); err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(*dir)
	}
	// Pace the collector as the node does (cmd/node/run.go).
	stopPace, _ := gcpace.Pace(100*time.Millisecond, gcpace.DefaultFraction, gcpace.DefaultFloor)
	defer stopPace()
	n, err := cluster.New(cluster.Config{
		ID: "bench", DataDir: filepath.Join(*dir, "data"), RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0",
		BootstrapExpect: 1, SnapshotThreshold: 1 << 40, SnapshotInterval: time.Hour, ApplyTimeout: time.Minute,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer n.Shutdown(context.Background())
	for !n.Ready() {
		time.Sleep(10 * time.Millisecond)
	}

	// Filters of total/nf bytes each: find the capacity at 1% that fits.
	per := total / uint64(*nf)
	spec := fsm.Spec{Kind: filters.KindBloom, ErrorRate: 0.01, Capacity: 1}
	for lo, hi := uint64(1), uint64(1<<30); lo < hi; {
		mid := (lo + hi + 1) / 2
		spec.Capacity = mid
		if b, err := fsm.EstimateBytes(spec); err == nil && b <= per {
			lo = mid
		} else {
			hi = mid - 1
		}
		spec.Capacity = lo
	}
	keys := make([]string, *nf)
	for i := range keys {
		keys[i] = "bench-" + strconv.Itoa(i)
		must(submit(n, &fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyBF, Key: keys[i], Spec: spec}))
	}
	// Touch every OS page: a Bloom add sets bits in one 64-byte block, so adds
	// of about one item per 4 KiB page per filter, several times over.
	start := time.Now()
	items := int(per / 4096 * 3)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, k := range keys {
		for done := 0; done < items; {
			c := &fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyBF, Key: k, Multi: true, NoCreate: true}
			for j := 0; j < 20000 && done < items; j++ {
				c.Items = append(c.Items, []byte(strconv.FormatUint(rng.Uint64(), 36)))
				done++
			}
			must(submit(n, c))
		}
	}
	filterBytes := n.FSM().MemoryBytes()
	fmt.Printf("filters: %d of %s (capacity %d each), %.1f MB, filled in %v\n", *nf, "Bloom 1%", spec.Capacity,
		mb(filterBytes), time.Since(start).Round(time.Millisecond))

	rssBefore := rss()
	var peak atomic.Int64
	peak.Store(rssBefore)
	stopSampling := make(chan struct{})
	go func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if r := rss(); r > peak.Load() {
					peak.Store(r)
				}
			case <-stopSampling:
				return
			}
		}
	}()

	var mu sync.Mutex
	var during []time.Duration
	var snapshotting atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var writes atomic.Int64
	for w := 0; w < *writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for ctx.Err() == nil {
				c := &fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyBF, Key: keys[rng.IntN(len(keys))], NoCreate: true,
					Items: [][]byte{[]byte(strconv.FormatUint(rng.Uint64(), 36))}}
				t0 := time.Now()
				in := snapshotting.Load()
				if err := submit(n, c); err != nil {
					log.Printf("write: %v", err)
					continue
				}
				writes.Add(1)
				if in || snapshotting.Load() {
					mu.Lock()
					during = append(during, time.Since(t0))
					mu.Unlock()
				}
			}
		}(w)
	}
	time.Sleep(time.Second) // steady load first
	before := writes.Load()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		must(err)
		must(pprof.StartCPUProfile(f))
	}
	snapshotting.Store(true)
	t0 := time.Now()
	info, err := n.TakeSnapshot()
	took := time.Since(t0)
	if *cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	snapshotting.Store(false)
	after := writes.Load()
	time.Sleep(200 * time.Millisecond)
	cancel()
	wg.Wait()
	close(stopSampling)
	if err != nil {
		log.Fatalf("snapshot: %v", err)
	}

	slices.Sort(during)
	pct := func(p float64) time.Duration {
		if len(during) == 0 {
			return 0
		}
		return during[min(len(during)-1, int(p*float64(len(during))))]
	}
	fmt.Printf("snapshot: %.1f MB in %v, %.0f MB/s\n", mb(uint64(info.Size)), took.Round(time.Millisecond), mb(uint64(info.Size))/took.Seconds())
	fmt.Printf("RSS: %.1f MB before, %.1f MB at the peak during the snapshot: %.2fx the filters' size\n",
		mb(uint64(rssBefore)), mb(uint64(peak.Load())), float64(peak.Load())/float64(filterBytes))
	fmt.Printf("writes during the snapshot: %d (%.0f/s), latency p50 %v p99 %v max %v\n", after-before,
		float64(after-before)/took.Seconds(), pct(0.5).Round(time.Microsecond), pct(0.99).Round(time.Microsecond),
		pct(1).Round(time.Microsecond))
}

func submit(n *cluster.Node, c *fsm.Command) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := n.Submit(c).Wait(ctx)
	if err == nil && r.Err != nil {
		err = r.Err
	}
	return err
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func mb(n uint64) float64 { return float64(n) / (1 << 20) }

func parseSize(s string) (uint64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := uint64(1)
	for _, u := range []struct {
		suf string
		m   uint64
	}{{"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}} {
		if strings.HasSuffix(t, u.suf) {
			t, mult = strings.TrimSuffix(t, u.suf), u.m
			break
		}
	}
	v, err := strconv.ParseUint(t, 10, 64)
	return v * mult, err
}
