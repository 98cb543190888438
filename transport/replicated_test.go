package transport

import (
	"context"
	"fmt"
	"testing"
)

// TestReplicatedKeyspaceCommands: RENAME, RENAMENX, FLUSHALL, FLUSHDB and
// CF.COMPACT answer as Redis and RedisBloom do.
func TestReplicatedKeyspaceCommands(t *testing.T) {
	ts := mustStartServer(t, Config{})
	ctx := context.Background()
	c := newGoRedis(t, ts.addr, 2, "")
	res(c.BFAdd(ctx, "a", "x").Result()).must(t)
	res(c.CFAdd(ctx, "b", "y").Result()).must(t)
	if got := res(c.Rename(ctx, "a", "a2").Result()).must(t); got != "OK" {
		t.Errorf("RENAME: %q", got)
	}
	if !res(c.BFExists(ctx, "a2", "x").Result()).must(t) || res(c.Exists(ctx, "a").Result()).must(t) != 0 {
		t.Error("RENAME did not move the filter")
	}
	if got := res(c.RenameNX(ctx, "a2", "b").Result()).must(t); got {
		t.Error("RENAMENX onto a taken name said it renamed")
	}
	if got := res(c.RenameNX(ctx, "a2", "c").Result()).must(t); !got {
		t.Error("RENAMENX to a free name did not rename")
	}
	wantErr(t, c.Rename(ctx, "missing", "z").Err(), "ERR no such key")
	wantErr(t, c.RenameNX(ctx, "missing", "z").Err(), "ERR no such key")
	wantErr(t, c.Do(ctx, "RENAME", "a").Err(), "ERR wrong number of arguments for 'RENAME' command")

	// CF.COMPACT: a filter grown by adds and emptied by deletes shrinks back.
	res(c.Do(ctx, "CF.RESERVE", "cf", "8", "BUCKETSIZE", "2", "EXPANSION", "1").Result()).must(t)
	var items []string
	for i := 0; ; i++ {
		it := fmt.Sprint("i", i)
		res(c.CFAdd(ctx, "cf", it).Result()).must(t)
		items = append(items, it)
		if res(c.CFInfo(ctx, "cf").Result()).must(t).NumFilters == 3 {
			break
		}
	}
	for _, it := range items[1:] {
		res(c.CFDel(ctx, "cf", it).Result()).must(t)
	}
	if got := res(c.Do(ctx, "CF.COMPACT", "cf").Text()).must(t); got != "OK" {
		t.Errorf("CF.COMPACT: %q", got)
	}
	in := res(c.CFInfo(ctx, "cf").Result()).must(t)
	if in.NumFilters != 1 || in.NumItemsInserted != 1 || in.NumItemsDeleted != 0 || !res(c.CFExists(ctx, "cf", items[0]).Result()).must(t) {
		t.Errorf("after CF.COMPACT: %+v", in)
	}
	wantErr(t, c.Do(ctx, "CF.COMPACT", "missing").Err(), "Cuckoo filter was not found")
	wantErr(t, c.Do(ctx, "CF.COMPACT", "c").Err(), "Cuckoo filter was not found")

	for _, cmd := range [][]any{{"FLUSHALL"}, {"FLUSHDB", "ASYNC"}, {"FLUSHALL", "SYNC"}} {
		res(c.BFAdd(ctx, "k", "v").Result()).must(t)
		if got := res(c.Do(ctx, cmd...).Text()).must(t); got != "OK" {
			t.Errorf("%v: %q", cmd, got)
		}
		if n := res(c.DBSize(ctx).Result()).must(t); n != 0 {
			t.Errorf("%v left %d keys", cmd, n)
		}
	}
	wantErr(t, c.Do(ctx, "FLUSHALL", "NOW").Err(), "ERR syntax error")
}
