package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// TestSmallestMemoryLimit: three nodes with --max-memory 3gb, 64mb and 64mb.
// A BF.RESERVE of 200 M items (about 240 MB) sent to the leader, or through a
// follower, is refused with an OOM that names a 64 MB node and its limit, and
// so is RedisBloom's cuckoo header of 2^32 buckets; a cuckoo filter fed until
// it cannot grow stops within 64 MB on every node (its inserts answer -1
// where RedisBloom's answer it when it cannot allocate). The small nodes' RSS
// stays under 100 MB through the refusals. The binary is built without the
// race detector, whose shadow memory would swamp the figure.
func TestSmallestMemoryLimit(t *testing.T) {
	limits := []string{"3gb", "64mb", "64mb"}
	nc, err := nodeproc.StartSecureClusterEach(plainBinary(t), t.TempDir(), 3, nodeproc.Security{},
		func(i int) []string { return []string{"--max-memory", limits[i]} })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	lc := &localCluster{Cluster: nc, t: t}
	leader := lc.leader(30 * time.Second)
	followers := lc.followers()
	for _, m := range append([]*nodeproc.Member{leader}, followers...) {
		c := client(t, m.RESP, 2)
		for range 2 {
			err := c.Do(bg(), "BF.RESERVE", "big", "0.01", "200000000").Err()
			if err == nil || !strings.HasPrefix(err.Error(), "OOM ") || !strings.Contains(err.Error(), "past its limit of 67108864 bytes") ||
				!(strings.Contains(err.Error(), "node n2") || strings.Contains(err.Error(), "node n3")) {
				t.Fatalf("BF.RESERVE of 200M items through %s: %v", m.ID, err)
			}
		}
		hdr := "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x01\x00\x01\x00"
		if err := c.Do(bg(), "CF.LOADCHUNK", "cf-huge", 1, hdr).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM ") {
			t.Fatalf("a cuckoo header of 2^32 buckets through %s: %v", m.ID, err)
		}
	}
	for _, m := range nc.Nodes[1:] {
		rss := rssOf(t, m.Pid())
		if rss > 100<<20 {
			t.Fatalf("%s (64 MB limit): RSS %d MB after the refused filters", m.ID, rss>>20)
		}
		t.Logf("%s: RSS %d MB after the refused filters", m.ID, rss>>20)
	}
	// Growth: a cuckoo filter that grows fourfold from 64 Ki slots.
	c := client(t, leader.RESP, 2)
	if err := c.Do(bg(), "CF.RESERVE", "cf", 1<<16, "BUCKETSIZE", 1, "MAXITERATIONS", 1, "EXPANSION", 4).Err(); err != nil {
		t.Fatal(err)
	}
	full := false
	for round := 0; round < 200 && !full; round++ {
		args := []any{"CF.INSERT", "cf", "ITEMS"}
		for i := range 50_000 {
			args = append(args, fmt.Sprint(round, ":", i))
		}
		res, err := c.Do(bg(), args...).Slice()
		switch {
		case err != nil && strings.HasPrefix(err.Error(), "OOM "):
			full = true // admission foresaw the next sub-filter
		case err != nil && (strings.HasPrefix(err.Error(), "CLUSTERDOWN") || strings.HasPrefix(err.Error(), "INDETERMINATE") ||
			strings.HasPrefix(err.Error(), "TRYAGAIN")):
			time.Sleep(200 * time.Millisecond) // a loaded machine: an election; copies of items do no harm here
		case err != nil:
			t.Fatal(err)
		}
		for _, v := range res {
			if v == int64(-1) {
				full = true
			}
		}
	}
	if !full {
		t.Fatal("the cuckoo filter grew without end")
	}
	for _, m := range nc.Nodes {
		var filters []struct {
			Memory uint64 `json:"memory_bytes"`
		}
		resp, err := m.HTTPDo("GET", "/v1/filters")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&filters)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		total := uint64(0)
		for _, f := range filters {
			total += f.Memory
		}
		if total > 64<<20 {
			t.Fatalf("%s holds %d bytes of filters", m.ID, total)
		}
		// RSS is reported, not asserted: besides the filters it holds the
		// recent log entries (raft's cache of 512, here of 50,000 items each).
		t.Logf("%s: filters %d bytes, RSS %d MB", m.ID, total, rssOf(t, m.Pid())>>20)
	}
}

var (
	plainOnce sync.Once
	plainBin  string
	plainErr  error
)

// plainBinary is the binary built without the race detector, once, beside
// the race-built one (and removed with it): for tests that measure memory,
// which the detector's shadow memory would swamp, or that push hundreds of
// megabytes through a node, which it slows sixfold.
func plainBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test drives the rookery binary as real processes")
	}
	plainOnce.Do(func() {
		dir := filepath.Join(filepath.Dir(binary), "plain")
		if plainErr = os.MkdirAll(dir, 0o755); plainErr == nil {
			plainBin, plainErr = nodeproc.Build(dir, false)
		}
	})
	if plainErr != nil {
		t.Fatal(plainErr)
	}
	return plainBin
}
