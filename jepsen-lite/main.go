// Command jepsen-lite checks that a Rookery cluster keeps every acknowledged
// write, applies every write once, and answers reads linearizably, while its
// nodes are killed, paused and restarted.
//
//	go run ./jepsen-lite -duration 60s -faults kill,pause,term,partition
//
// It builds the rookery binary (or takes -bin), starts a cluster of real
// processes on 127.0.0.1, and runs concurrent workers through the Go client:
// each adds fresh items to a Bloom and a cuckoo filter, reads them back, and
// deletes every other one from the cuckoo filter. A nemesis injects one fault
// at a time: kill -9 and restart, SIGSTOP and SIGCONT, SIGTERM and restart, or
// a partition that cuts a node's Raft links with all the others while it keeps
// serving clients (the nodes then run with --fault-injection). Afterwards every node is healed and the run is checked:
//
//   - the history of each item is linearizable (porcupine) against a model of a
//     filter that may answer "present" falsely but never "absent" falsely, with
//     writes of unknown outcome free to have happened or not;
//   - every acknowledged add is present on every node;
//   - the cuckoo filter's item count on every node lies in the range the
//     history allows, so no write was lost or applied twice.
//
// It exits 1 if a check failed. The run stops by itself after -duration.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

func main() {
	var cfg Config
	bin := flag.String("bin", "", "rookery binary to run (default: build it)")
	faults := flag.String("faults", "kill,pause,term,partition", "faults to inject: kill, pause, term, partition, or none")
	flag.IntVar(&cfg.Nodes, "nodes", 3, "cluster size")
	flag.IntVar(&cfg.Workers, "workers", 8, "concurrent clients")
	flag.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long the workload runs")
	flag.DurationVar(&cfg.Interval, "interval", 2*time.Second, "pause between faults")
	flag.DurationVar(&cfg.Hold, "hold", 2*time.Second, "how long a fault lasts")
	flag.DurationVar(&cfg.OpTimeout, "op-timeout", 10*time.Second, "per operation, retries included")
	flag.Uint64Var(&cfg.Seed, "seed", uint64(time.Now().UnixNano()), "seed of the nemesis's choices")
	flag.BoolVar(&cfg.TLS, "tls", false, "secure the cluster: mutual TLS between nodes, gossip key, password, RESP and HTTP over TLS")
	nodeFlags := flag.String("node-flags", "", "extra flags for every node, space separated (e.g. to check that the checker catches --read-consistency stale)")
	flag.Parse()
	cfg.NodeFlags = strings.Fields(*nodeFlags)
	if *faults != "none" {
		cfg.Faults = strings.Split(*faults, ",")
		for _, f := range cfg.Faults {
			if f != faultKill && f != faultPause && f != faultTerm && f != faultPartition {
				log.Fatalf("unknown fault %q", f)
			}
		}
	}
	dir, err := os.MkdirTemp("", "jepsen-lite-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cfg.Dir = dir
	cfg.Binary = *bin
	if cfg.Binary == "" {
		if cfg.Binary, err = nodeproc.Build(dir, false); err != nil {
			log.Fatal(err)
		}
	}
	cfg.Log = func(format string, args ...any) { log.Printf(format, args...) }
	log.Printf("jepsen-lite: %d nodes, %d workers, %v, faults %v, seed %d, tls %v", cfg.Nodes, cfg.Workers, cfg.Duration, cfg.Faults, cfg.Seed, cfg.TLS)
	rep, err := Run(cfg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(rep.String())
	if !rep.OK {
		os.Exit(1)
	}
}

// String is the report as a user reads it.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "operations: %d ok, %d unknown, %d failed (not applied) in %v; %d faults injected\n",
		r.Ops, r.Unknown, r.Failed, r.WorkloadDuration.Round(time.Millisecond), r.Faults)
	fmt.Fprintf(&b, "linearizable: Bloom %s, cuckoo %s (checked in %v)\n", r.BloomLinear, r.CuckooLinear,
		r.CheckDuration.Round(time.Millisecond))
	fmt.Fprintf(&b, "acknowledged and expected present: %d Bloom, %d cuckoo\n", r.AckedBloom, r.AckedCuckoo)
	fmt.Fprintf(&b, "cuckoo items held per node %v, allowed [%d, %d]\n", r.Held, r.HeldRange[0], r.HeldRange[1])
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "PROBLEM: %s\n", p)
	}
	if r.OK {
		b.WriteString("result: OK\n")
	} else {
		b.WriteString("result: FAILED\n")
	}
	return b.String()
}
