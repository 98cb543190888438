package transport

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
)

// TestDebugCommands: BF.DEBUG and CF.DEBUG show a filter's layout in
// RedisBloom's format.
func TestDebugCommands(t *testing.T) {
	ts := mustStartServer(t, Config{})
	ctx := context.Background()
	c := newGoRedis(t, ts.addr, 2, "")
	res(c.BFAdd(ctx, "b", "x").Result()).must(t)
	res(c.Do(ctx, "BF.RESERVE", "chain", "0.01", "100", "EXPANSION", "2").Result()).must(t)
	added := uint64(0) // an add answered 0 (a false positive) is not counted, as in RedisBloom
	for i := range 150 {
		if res(c.BFAdd(ctx, "chain", fmt.Sprint("item-", i)).Result()).must(t) {
			added++
		}
	}
	lines := res(c.Do(ctx, "BF.DEBUG", "chain").StringSlice()).must(t)
	if len(lines) != 3 || lines[0] != fmt.Sprint("size:", added) {
		t.Fatalf("BF.DEBUG: %q, want size:%d and two links", lines, added)
	}
	link := regexp.MustCompile(`^bytes:(\d+) bits:(\d+) hashes:(\d+) hashwidth:64 capacity:(\d+) size:(\d+) ratio:(\S+)$`)
	var sizes uint64
	last := 1.0
	for i, l := range lines[1:] {
		m := link.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("link %d: %q", i, l)
		}
		n := func(j int) uint64 { v, _ := strconv.ParseUint(m[j], 10, 64); return v }
		ratio, err := strconv.ParseFloat(m[6], 64)
		if err != nil || ratio >= last || ratio > 0.01 {
			t.Errorf("link %d: ratio %s after %g", i, m[6], last)
		}
		last = ratio
		if n(1)*8 != n(2) || n(3) == 0 || n(4) != 100<<i {
			t.Errorf("link %d: %q", i, l)
		}
		sizes += n(5)
	}
	if sizes != added {
		t.Errorf("links hold %d items, want %d", sizes, added)
	}

	res(c.Do(ctx, "CF.RESERVE", "cf", "1000", "BUCKETSIZE", "4").Result()).must(t)
	for _, it := range []string{"a", "b", "c"} {
		res(c.CFAdd(ctx, "cf", it).Result()).must(t)
	}
	res(c.CFDel(ctx, "cf", "a").Result()).must(t)
	got := res(c.Do(ctx, "CF.DEBUG", "cf").Text()).must(t)
	if want := "bktsize:4 buckets:250 items:2 deletes:1 filters:1 max_iterations:20 expansion:1"; got != want {
		t.Errorf("CF.DEBUG: %q, want %q", got, want)
	}

	wantErr(t, c.Do(ctx, "BF.DEBUG", "missing").Err(), "ERR not found")
	wantErr(t, c.Do(ctx, "CF.DEBUG", "missing").Err(), "ERR not found")
	wantErr(t, c.Do(ctx, "BF.DEBUG", "cf").Err(), "WRONGTYPE Operation against a key holding the wrong kind of value")
	wantErr(t, c.Do(ctx, "CF.DEBUG", "b").Err(), "WRONGTYPE Operation against a key holding the wrong kind of value")
	wantErr(t, c.Do(ctx, "CF.DEBUG").Err(), "ERR wrong number of arguments for 'CF.DEBUG' command")
}
