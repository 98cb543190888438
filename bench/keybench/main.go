// Command keybench measures whether --max-memory counts what many small
// filters really cost: it creates -keys filters in a state machine, as the log
// would, and compares the memory the node counts (what --max-memory admits
// against) with the growth of the process's heap and RSS.
//
//	cd bench && go run ./keybench -keys 100000
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
)

func main() {
	keys := flag.Int("keys", 100000, "filters to create")
	kind := flag.String("kind", "scalable", "scalable (BF.RESERVE's), bloom, cuckoo or counting")
	capacity := flag.Uint64("capacity", 100, "capacity of each filter")
	flag.Parse()
	f := fsm.New(fsm.Options{})
	spec := fsm.Spec{Capacity: *capacity, ErrorRate: 0.01}
	fam := fsm.FamilyBF
	switch *kind {
	case "bloom":
		spec.Kind = filters.KindBloom
	case "scalable": // what BF.RESERVE and BF.ADD make
		spec.Kind, spec.Expansion = filters.KindScalable, 2
	case "cuckoo":
		spec.Kind, fam, spec.BucketSize, spec.MaxIterations, spec.FingerprintBits, spec.Expansion = filters.KindCuckoo, fsm.FamilyCF, 2, 20, 16, 1
	case "counting":
		spec.Kind, fam, spec.CounterBits = filters.KindCounting, fsm.FamilyCBF, 4
	default:
		fmt.Fprintln(os.Stderr, "unknown kind", *kind)
		os.Exit(2)
	}
	heap0, rss0 := measure()
	for i := 0; i < *keys; i++ {
		r := f.ApplyCommand(uint64(i+1), &fsm.Command{Op: fsm.OpReserve, Family: fam, Key: "user:" + strconv.Itoa(i) + ":seen", Spec: spec})
		if r.Err != nil {
			fmt.Fprintln(os.Stderr, r.Err)
			os.Exit(1)
		}
	}
	heap1, rss1 := measure()
	counted := f.MemoryBytes()
	fmt.Printf("%d %s filters of capacity %d: counted %.1f MB, heap grew %.1f MB (%.2fx counted), RSS grew %.1f MB (%.2fx counted); %.0f bytes per key counted, %.0f by RSS\n",
		*keys, *kind, *capacity, mb(counted), mb(heap1-heap0), float64(heap1-heap0)/float64(counted),
		mb(rss1-rss0), float64(rss1-rss0)/float64(counted), float64(counted)/float64(*keys), float64(rss1-rss0)/float64(*keys))
	runtime.KeepAlive(f)
}

func measure() (heap, rss uint64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			rss = kb << 10
		}
	}
	return ms.HeapInuse, rss
}

func mb(n uint64) float64 { return float64(n) / (1 << 20) }
