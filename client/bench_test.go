package client_test

import (
	"crypto/rand"
	be "encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rookerydb/rookery/client"
	"github.com/rookerydb/rookery/internal/nodeproc"
)

// BenchmarkPipelineMAdd loads 16-byte random keys into a Bloom filter through
// a Bulk (BF.MADD chunks, several in flight), on one node and on a three-node
// cluster of real processes; one op is one item. Run it with a fixed count,
// which is the number of keys:
//
//	go test -run XXX -bench PipelineMAdd -benchtime 2000000x ./client/
//
// CLIENTBENCH_NODES, CLIENTBENCH_CHUNK and CLIENTBENCH_INFLIGHT
// (comma-separated lists) change the cluster sizes, chunk sizes and in-flight
// counts tried [1,3; 1000,5000; 8,32].
func BenchmarkPipelineMAdd(b *testing.B) {
	chunks := envInts("CLIENTBENCH_CHUNK", []int{1000, 5000})
	inflight := envInts("CLIENTBENCH_INFLIGHT", []int{8, 32})
	for _, nodes := range envInts("CLIENTBENCH_NODES", []int{1, 3}) {
		cl, err := nodeproc.StartCluster(rookery(b), b.TempDir(), nodes)
		if err != nil {
			b.Fatal(err)
		}
		c, err := client.New(bg, client.Options{Addrs: cl.RESPAddrs()})
		if err != nil {
			cl.Close()
			b.Fatal(err)
		}
		for _, chunk := range chunks {
			for _, fl := range inflight {
				b.Run(fmt.Sprintf("nodes=%d/chunk=%d/inflight=%d", nodes, chunk, fl), func(b *testing.B) {
					benchLoad(b, c, cl, chunk, fl)
				})
			}
		}
		c.Close()
		cl.Close()
	}
}

var benchRun int

func benchLoad(b *testing.B, c *client.Client, cl *nodeproc.Cluster, chunk, inflight int) {
	benchRun++
	key := fmt.Sprint("bench-", benchRun)
	if err := c.BFReserve(bg, key, 0.01, int64(max(b.N, 1000)), nil); err != nil {
		b.Fatal(err)
	}
	var prefix [8]byte
	_, _ = rand.Read(prefix[:])
	items := make([]string, 0, chunk)
	var buf [16]byte
	copy(buf[:8], prefix[:])
	bulk := c.NewBulk(bg, client.KindBloom, key, client.BulkOptions{Chunk: chunk, InFlight: inflight, NoCreate: true})
	b.ResetTimer()
	start := time.Now()
	self0, nodes0 := selfCPU(), nodesCPU(cl)
	for i := range b.N {
		be.BigEndian.PutUint64(buf[8:], uint64(i))
		items = append(items, string(buf[:]))
		if len(items) == chunk {
			if err := bulk.Add(items...); err != nil {
				b.Fatal(err)
			}
			items = items[:0]
		}
	}
	if err := bulk.Add(items...); err != nil {
		b.Fatal(err)
	}
	if err := bulk.Close(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "items/s")
	// Where the CPU went, per item: this process (the client) and the nodes.
	b.ReportMetric(float64((selfCPU()-self0).Nanoseconds())/float64(b.N), "client-cpu-ns/item")
	if n := nodesCPU(cl); n > 0 {
		b.ReportMetric(float64((n-nodes0).Nanoseconds())/float64(b.N), "nodes-cpu-ns/item")
	}
	if _, err := c.Del(bg, key); err != nil {
		b.Fatal(err)
	}
}

func envInts(name string, def []int) []int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	var out []int
	for _, f := range splitComma(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			panic(fmt.Sprintf("%s: bad value %q", name, f))
		}
		out = append(out, n)
	}
	return out
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// selfCPU is the CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// nodesCPU is the CPU time the cluster's processes have used, from
// /proc/PID/stat (0 where there is no /proc).
func nodesCPU(cl *nodeproc.Cluster) time.Duration {
	var total time.Duration
	for _, m := range cl.Nodes {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.Pid()))
		if err != nil {
			return 0
		}
		// Fields after the command name, which ends in ")": state is the
		// first, utime and stime the 12th and 13th (in clock ticks of 10 ms).
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(ut+st) * 10 * time.Millisecond
	}
	return total
}
