package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// Ports of RedisBloom's own flow tests (tests/flow in its repository) that a
// node must pass in both layouts: the same commands, in the same order, and
// the same checks of the replies (a RedisBloom test passes when no command
// raises, or raises only the errors it names). go-redis gives error replies as
// Redis sends them; redis-py, which RedisBloom's tests use, drops a leading
// "ERR " from the text it compares, and pyErr does the same.

// flowNode starts a node in layout for a flow test. Its --max-memory is set
// high: RedisBloom's tests create filters of gigabytes that RedisBloom, as
// Rookery, allocates only as they are written, and a node of --max-memory auto
// on a small machine would refuse them, rightly. The binary is built without
// the race detector: the tests push gigabytes through the node.
func flowNode(t *testing.T, layout string) *redis.Client {
	t.Helper()
	args := append([]string{"--id", "n1", "--data-dir", t.TempDir(), "--bootstrap-expect", "1",
		"--filter-layout", layout, "--max-memory", "16gb"}, nodeproc.EphemeralAddrs()...)
	p, err := nodeproc.Start(plainBinary(t), nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	if err := p.WaitReady(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: p.RESP, Protocol: 2, MaxRetries: -1,
		DialTimeout: 5 * time.Second, ReadTimeout: 2 * time.Minute, WriteTimeout: 2 * time.Minute})
	t.Cleanup(func() { c.Close() })
	return c
}

// pyErr is the text redis-py gives a ResponseError: the reply without a
// leading "ERR " (redis-py strips it; the flows compare against its texts).
func pyErr(err error) string {
	reply := err.Error()
	return strings.TrimPrefix(reply, "ERR ")
}

// forLayouts runs a flow test against a node of each layout.
func forLayouts(t *testing.T, test func(t *testing.T, c *redis.Client)) {
	for _, layout := range []string{"rookery", "redisbloom"} {
		t.Run(layout, func(t *testing.T) { test(t, flowNode(t, layout)) })
	}
}

// must runs a command that the Python test runs with self.cmd: it must not
// raise. Error elements of an array reply do not raise in redis-py.
func must(t *testing.T, c *redis.Client, args ...any) any {
	t.Helper()
	v, err := c.Do(context.Background(), args...).Result()
	if err != nil {
		t.Fatalf("%.60v: %v", args, err)
	}
	return v
}

// test_cuckoo.py, test_number_of_buckets_does_not_overflow: a header of one
// sub-filter of 2^32 buckets, of size 1, expansion 1, then ten inserts of one
// item, which need more sub-filters of 2^32 buckets.
func TestRedisBloomNumberOfBucketsDoesNotOverflow(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *redis.Client) {
		must(t, c, "FLUSHALL")
		must(t, c, "CF.LOADCHUNK", "cf", "1",
			"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x01\x00\x01\x00")
		start := time.Now()
		must(t, c, "CF.INSERT", "cf", "ITEMS", "1", "1", "1", "1", "1", "1", "1", "1", "1", "1")
		t.Logf("CF.INSERT answered in %v", time.Since(start))
	})
}

// test_cuckoo.py, test_counter_overflow_with_large_number_of_items: 140,000
// copies of one item into a filter of two one-slot buckets that grows by one
// such sub-filter at a time.
func TestRedisBloomCounterOverflowWithLargeNumberOfItems(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *redis.Client) {
		must(t, c, "FLUSHALL")
		must(t, c, "CF.RESERVE", "cf", 2, "BUCKETSIZE", 1, "EXPANSION", 1)
		args := []any{"CF.INSERT", "cf", "ITEMS"}
		for range 140000 {
			args = append(args, "1 ")
		}
		must(t, c, args...)
	})
}

// loadBigChunks is how many random chunks the scandump_load_big tests load
// into each layout's filter. RedisBloom's tests load 100; each of 1 KB to
// 36 MB goes into the log as 1 MB pieces when it fits, so 100 wrote about
// 1.8 GB per layout and took CI nearly two minutes a test. 25 go through
// the same refusals and fits, at random positions, with the same seed.
const loadBigChunks = 25

// test_cuckoo.py, test_scandump_load_big: a cuckoo filter grown to a
// sub-filter of 16 M buckets, then chunks of 1 KB to 36 MB of random bytes
// loaded at random positions (loadBigChunks of them): each is taken or
// refused with "Couldn't load chunk!".
func TestRedisBloomCFScandumpLoadBig(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *redis.Client) {
		ctx := context.Background()
		src := rand.NewChaCha8([32]byte{1, 2})
		rnd := rand.New(src)
		must(t, c, "FLUSHALL")
		must(t, c, "cf.reserve", "cf", 1024, "EXPANSION", 30000)
		fillBig(t, c, "cf.insert", "cf")
		size := infoSize(t, c, "CF.INFO", "cf")
		for range loadBigChunks {
			b := randBytes(src, rnd, 1024, 36*1024*1024)
			err := c.Do(ctx, "cf.loadchunk", "cf", randInt(rnd, 2, size), b).Err()
			if err != nil && pyErr(err) != "Couldn't load chunk!" {
				t.Fatalf("cf.loadchunk of %d bytes: %v", len(b), err)
			}
		}
	})
}

// test_overall.py, test_scandump_load_big: the same for a Bloom filter, whose
// chunks are refused with "invalid offset - no link found", "invalid chunk -
// Too big for current filter" or "received bad data".
func TestRedisBloomBFScandumpLoadBig(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *redis.Client) {
		ctx := context.Background()
		src := rand.NewChaCha8([32]byte{3, 4})
		rnd := rand.New(src)
		must(t, c, "FLUSHALL")
		must(t, c, "bf.reserve", "bf", 0.01, 1024, "EXPANSION", 30000)
		fillBig(t, c, "bf.insert", "bf")
		size := infoSize(t, c, "BF.INFO", "bf")
		for range loadBigChunks {
			b := randBytes(src, rnd, 1024, 36*1024*1024)
			err := c.Do(ctx, "bf.loadchunk", "bf", randInt(rnd, 0, size), b).Err()
			if err != nil {
				switch pyErr(err) {
				case "invalid offset - no link found", "invalid chunk - Too big for current filter", "received bad data":
				default:
					t.Fatalf("bf.loadchunk of %d bytes: %v", len(b), err)
				}
			}
		}
	})
}

// fillBig inserts up to 100 batches of 1,000 items ('x' + i + j), stopping
// early at "Maximum expansions reached", as both scandump tests do.
func fillBig(t *testing.T, c *redis.Client, cmd, key string) {
	t.Helper()
	for i := range 100 {
		args := []any{cmd, key, "ITEMS"}
		for j := range 1000 {
			args = append(args, fmt.Sprint("x", i, j))
		}
		if err := c.Do(context.Background(), args...).Err(); err != nil {
			if pyErr(err) == "Maximum expansions reached" {
				break
			}
			t.Fatalf("%s: %v", cmd, err)
		}
	}
}

// infoSize is the Size field of an INFO reply.
func infoSize(t *testing.T, c *redis.Client, cmd, key string) int64 {
	t.Helper()
	info := must(t, c, cmd, key).([]any)
	for i := 0; i+1 < len(info); i += 2 {
		if info[i] == "Size" {
			return info[i+1].(int64)
		}
	}
	t.Fatalf("%s %s: no Size in %v", cmd, key, info)
	return 0
}

// randInt is Python's random.randint(lo, hi): both ends included.
func randInt(rnd *rand.Rand, lo, hi int64) int64 { return lo + rnd.Int64N(hi-lo+1) }

// randBytes is os.urandom(random.randint(lo, hi)), from the test's
// generator: its length from rnd, its bytes from src in bulk (byte by byte,
// the race detector made these 3.6 GB take minutes).
func randBytes(src *rand.ChaCha8, rnd *rand.Rand, lo, hi int64) []byte {
	b := make([]byte, randInt(rnd, lo, hi))
	_, _ = src.Read(b)
	return b
}
