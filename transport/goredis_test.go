package transport

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Tests in this file drive the server with go-redis v9's own BF*/CF* methods,
// under RESP2 and RESP3, against a fake backend holding a real state machine.

func newGoRedis(t *testing.T, addr string, proto int, password string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: proto, Password: password,
		MaxRetries: -1, PoolSize: 2})
	t.Cleanup(func() { c.Close() })
	return c
}

// bothProtocols runs f under RESP2 and RESP3, each on a fresh server.
func bothProtocols(t *testing.T, f func(t *testing.T, ctx context.Context, c *redis.Client, proto int)) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			ts := mustStartServer(t, Config{})
			f(t, context.Background(), newGoRedis(t, ts.addr, proto, ""), proto)
		})
	}
}

// got holds a call's results, so that res(c.X(...).Result()).must(t) reads well.
type got[V any] struct {
	v   V
	err error
}

func res[V any](v V, err error) got[V] { return got[V]{v, err} }

// must fails the test on an unexpected error.
func (g got[V]) must(t *testing.T) V {
	t.Helper()
	if g.err != nil {
		t.Fatal(g.err)
	}
	return g.v
}

// wantErr asserts err's text.
func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

func TestGoRedisBloom(t *testing.T) {
	bothProtocols(t, func(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
		res(c.BFReserve(ctx, "bf", 0.01, 1000).Result()).must(t)
		wantErr(t, c.BFReserve(ctx, "bf", 0.01, 1000).Err(), "ERR item exists")
		wantErr(t, c.BFReserve(ctx, "x", 0, 1000).Err(), "ERR error rate must be in the range (0.000000, 1.000000)")
		wantErr(t, c.BFReserve(ctx, "x", 0.01, 0).Err(), "ERR capacity must be in the range [1, 1073741824]")
		wantErr(t, c.Do(ctx, "BF.RESERVE", "x", "0.01", "10", "NONSCALING", "EXPANSION", "2").Err(), "Nonscaling filters cannot expand")
		if !res(c.BFAdd(ctx, "bf", "a").Result()).must(t) {
			t.Error("first BF.ADD answered false")
		}
		if res(c.BFAdd(ctx, "bf", "a").Result()).must(t) {
			t.Error("second BF.ADD answered true")
		}
		if got := res(c.BFMAdd(ctx, "bf", "b", "c", "a").Result()).must(t); !reflect.DeepEqual(got, []bool{true, true, false}) {
			t.Errorf("BF.MADD %v", got)
		}
		if !res(c.BFExists(ctx, "bf", "b").Result()).must(t) || res(c.BFExists(ctx, "bf", "zzz").Result()).must(t) {
			t.Error("BF.EXISTS")
		}
		if res(c.BFExists(ctx, "missing", "a").Result()).must(t) {
			t.Error("BF.EXISTS on a missing key")
		}
		if got := res(c.BFMExists(ctx, "bf", "a", "zzz", "c").Result()).must(t); !reflect.DeepEqual(got, []bool{true, false, true}) {
			t.Errorf("BF.MEXISTS %v", got)
		}
		if n := res(c.BFCard(ctx, "bf").Result()).must(t); n != 3 {
			t.Errorf("BF.CARD %d", n)
		}
		if n := res(c.BFCard(ctx, "missing").Result()).must(t); n != 0 {
			t.Errorf("BF.CARD missing %d", n)
		}
		info := res(c.BFInfo(ctx, "bf").Result()).must(t)
		if info.Capacity != 1000 || info.Size <= 0 || info.Filters != 1 || info.ItemsInserted != 3 || info.ExpansionRate != 2 {
			t.Errorf("BF.INFO %+v", info)
		}
		wantErr(t, c.BFInfo(ctx, "missing").Err(), "ERR not found")
		wantErr(t, c.BFInfoArg(ctx, "bf", "nope").Err(), "Invalid information value")
		if proto == 3 {
			if got := res(c.BFInfoCapacity(ctx, "bf").Result()).must(t); got.Capacity != 1000 {
				t.Errorf("BF.INFO CAPACITY %+v", got)
			}
			if got := res(c.BFInfoItems(ctx, "bf").Result()).must(t); got.ItemsInserted != 3 {
				t.Errorf("BF.INFO ITEMS %+v", got)
			}
		} else if got := res(c.Do(ctx, "BF.INFO", "bf", "CAPACITY").Result()).must(t); !reflect.DeepEqual(got, []any{int64(1000)}) {
			t.Errorf("BF.INFO CAPACITY in RESP2: %#v", got)
		}
	})
}

func TestGoRedisBloomInsertAndScaling(t *testing.T) {
	bothProtocols(t, func(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
		got := res(c.BFInsert(ctx, "ins", &redis.BFInsertOptions{Capacity: 50, Error: 0.001, Expansion: 4},
			"a", "b", "a").Result()).must(t)
		if !reflect.DeepEqual(got, []bool{true, true, false}) {
			t.Errorf("BF.INSERT %v", got)
		}
		info := res(c.BFInfo(ctx, "ins").Result()).must(t)
		if info.Capacity != 50 || info.ExpansionRate != 4 {
			t.Errorf("BF.INSERT options ignored: %+v", info)
		}
		wantErr(t, c.BFInsert(ctx, "none", &redis.BFInsertOptions{NoCreate: true}, "a").Err(), "ERR not found")
		wantErr(t, c.Do(ctx, "BF.INSERT", "x", "CAPACITY", "0", "ITEMS", "a").Err(), "Bad capacity")
		wantErr(t, c.Do(ctx, "BF.INSERT", "x", "BOGUS", "ITEMS", "a").Err(), "Unknown argument received")

		// A non-scaling filter refuses items once full; BF.MADD ends its array with the error.
		res(c.BFReserveNonScaling(ctx, "ns", 0.01, 2).Result()).must(t)
		raw := res(c.Do(ctx, "BF.MADD", "ns", "a", "b", "c", "d").Result()).must(t).([]any)
		if len(raw) != 3 || fmt.Sprint(raw[2]) != "ERR non scaling filter is full" {
			t.Errorf("BF.MADD on a full non-scaling filter: %#v", raw)
		}
		wantErr(t, c.BFAdd(ctx, "ns", "e").Err(), "ERR non scaling filter is full")
		exp := res(c.Do(ctx, "BF.INFO", "ns", "EXPANSION").Result()).must(t)
		if proto == 2 && !reflect.DeepEqual(exp, []any{nil}) {
			t.Errorf("BF.INFO EXPANSION of a non-scaling filter, RESP2: %#v", exp)
		}
		if proto == 3 && !reflect.DeepEqual(exp, map[any]any{"Expansion rate": nil}) {
			t.Errorf("BF.INFO EXPANSION of a non-scaling filter, RESP3: %#v", exp)
		}

		// A scaling filter grows past its capacity.
		res(c.BFReserve(ctx, "grow", 0.01, 10).Result()).must(t)
		items := make([]any, 100)
		for i := range items {
			items[i] = fmt.Sprint("g", i)
		}
		res(c.BFMAdd(ctx, "grow", items...).Result()).must(t)
		if info := res(c.BFInfo(ctx, "grow").Result()).must(t); info.Filters < 2 || info.Capacity <= 10 {
			t.Errorf("scaling filter did not grow: %+v", info)
		}
	})
}

func TestGoRedisCuckoo(t *testing.T) {
	bothProtocols(t, func(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
		res(c.CFReserveWithArgs(ctx, "cf", &redis.CFReserveOptions{Capacity: 1000, BucketSize: 4,
			MaxIterations: 50, Expansion: 3}).Result()).must(t)
		info := res(c.CFInfo(ctx, "cf").Result()).must(t)
		if info.BucketSize != 4 || info.MaxIteration != 50 || info.ExpansionRate != 4 || info.NumFilters != 1 ||
			info.NumBuckets <= 0 || info.Size <= 0 {
			t.Errorf("CF.INFO %+v", info)
		}
		wantErr(t, c.CFReserve(ctx, "cf", 1000).Err(), "ERR item exists")
		wantErr(t, c.CFReserve(ctx, "x", 1).Err(), "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]")
		wantErr(t, c.CFReserveBucketSize(ctx, "x", 100, 0).Err(), "BUCKETSIZE: value must be in the range [1, 255]")
		wantErr(t, c.CFReserveMaxIterations(ctx, "x", 100, 0).Err(), "MAXITERATIONS: value must be in the range [1, 65535]")
		wantErr(t, c.CFReserveExpansion(ctx, "x", 100, 40000).Err(), "EXPANSION: value must be in the range [0, 32768]")

		// Twice: a cuckoo filter keeps duplicates, so both adds answer true.
		first := res(c.CFAdd(ctx, "cf", "a").Result()).must(t)
		second := res(c.CFAdd(ctx, "cf", "a").Result()).must(t)
		if !first || !second {
			t.Errorf("CF.ADD twice: %v, %v", first, second)
		}
		if n := res(c.CFCount(ctx, "cf", "a").Result()).must(t); n != 2 {
			t.Errorf("CF.COUNT after two adds: %d", n)
		}
		if res(c.CFAddNX(ctx, "cf", "a").Result()).must(t) || !res(c.CFAddNX(ctx, "cf", "b").Result()).must(t) {
			t.Error("CF.ADDNX")
		}
		if !res(c.CFExists(ctx, "cf", "b").Result()).must(t) || res(c.CFExists(ctx, "cf", "zzz").Result()).must(t) {
			t.Error("CF.EXISTS")
		}
		if got := res(c.CFMExists(ctx, "cf", "a", "zzz").Result()).must(t); !reflect.DeepEqual(got, []bool{true, false}) {
			t.Errorf("CF.MEXISTS %v", got)
		}
		if !res(c.CFDel(ctx, "cf", "a").Result()).must(t) {
			t.Error("CF.DEL of a held item")
		}
		if res(c.CFDel(ctx, "cf", "zzz").Result()).must(t) {
			t.Error("CF.DEL of an absent item")
		}
		wantErr(t, c.CFDel(ctx, "missing", "a").Err(), "Not found")
		info = res(c.CFInfo(ctx, "cf").Result()).must(t)
		if info.NumItemsInserted != 2 || info.NumItemsDeleted != 1 {
			t.Errorf("CF.INFO counts after adds and a delete: %+v", info)
		}
		wantErr(t, c.CFInfo(ctx, "missing").Err(), "ERR not found")

		if got := res(c.CFInsert(ctx, "ins", &redis.CFInsertOptions{Capacity: 500}, "x", "y").Result()).must(t); !reflect.DeepEqual(got, []bool{true, true}) {
			t.Errorf("CF.INSERT %v", got)
		}
		if got := res(c.CFInsertNX(ctx, "ins", nil, "x", "z").Result()).must(t); !reflect.DeepEqual(got, []int64{0, 1}) {
			t.Errorf("CF.INSERTNX %v", got)
		}
		wantErr(t, c.CFInsert(ctx, "none", &redis.CFInsertOptions{NoCreate: true}, "a").Err(), "ERR not found")
	})
}

// TestGoRedisCuckooFull: no room is an error for CF.ADD and -1 (RESP3: false) in
// CF.INSERT's array; CF.INSERTNX stays integers.
func TestGoRedisCuckooFull(t *testing.T) {
	bothProtocols(t, func(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
		res(c.Do(ctx, "CF.RESERVE", "small", "4", "BUCKETSIZE", "2", "EXPANSION", "0").Result()).must(t)
		var fullErr error
		for i := 0; i < 64 && fullErr == nil; i++ {
			fullErr = c.CFAdd(ctx, "small", fmt.Sprint("i", i)).Err()
		}
		wantErr(t, fullErr, "Filter is full")
		raw := res(c.Do(ctx, "CF.INSERT", "small", "ITEMS", "more").Result()).must(t)
		want := []any{int64(-1)}
		if proto == 3 {
			want = []any{false}
		}
		if !reflect.DeepEqual(raw, want) {
			t.Errorf("CF.INSERT into a full filter: %#v, want %#v", raw, want)
		}
		if got := res(c.CFInsertNX(ctx, "small", nil, "more").Result()).must(t); !reflect.DeepEqual(got, []int64{-1}) {
			t.Errorf("CF.INSERTNX into a full filter: %v", got)
		}
	})
}

// TestGoRedisDumpAndLoad moves filters with SCANDUMP / LOADCHUNK into other keys.
func TestGoRedisDumpAndLoad(t *testing.T) {
	bothProtocols(t, func(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
		items := []any{"a", "b", "c", "d"}
		res(c.BFMAdd(ctx, "bf", items...).Result()).must(t)
		res(c.CFInsert(ctx, "cf", nil, items...).Result()).must(t)
		for _, fam := range []string{"bf", "cf"} {
			dump := func(it int64) (redis.ScanDump, error) { return c.BFScanDump(ctx, fam, it).Result() }
			load := func(it int64, data string) error { return c.BFLoadChunk(ctx, fam+"-copy", it, data).Err() }
			if fam == "cf" {
				dump = func(it int64) (redis.ScanDump, error) { return c.CFScanDump(ctx, fam, it).Result() }
				load = func(it int64, data string) error { return c.CFLoadChunk(ctx, fam+"-copy", it, data).Err() }
			}
			chunks := 0
			for it := int64(0); ; chunks++ {
				d, err := dump(it)
				if fam == "cf" && errors.Is(err, redis.Nil) {
					break // RedisBloom ends a cuckoo dump with [0, nil], which go-redis reads as redis.Nil
				}
				d = res(d, err).must(t)
				if d.Iter == 0 {
					if d.Data != "" {
						t.Errorf("%s: last chunk carries %d bytes", fam, len(d.Data))
					}
					break
				}
				if err := load(d.Iter, d.Data); err != nil {
					t.Fatalf("%s LOADCHUNK %d: %v", fam, d.Iter, err)
				}
				it = d.Iter
			}
			if chunks < 2 {
				t.Errorf("%s: %d chunks", fam, chunks)
			}
			for _, it := range items {
				ok := res(c.Do(ctx, strings.ToUpper(fam)+".EXISTS", fam+"-copy", it).Bool()).must(t)
				if !ok {
					t.Errorf("%s copy lost %v", fam, it)
				}
			}
		}
		wantErr(t, c.BFScanDump(ctx, "missing", 0).Err(), "ERR not found")
		wantErr(t, c.CFScanDump(ctx, "cf", -1).Err(), "Invalid position")
		wantErr(t, c.CFLoadChunk(ctx, "x", 0, "data").Err(), "Invalid position")
		// RedisBloom takes iterator 1 on an existing Bloom key for a chunk.
		wantErr(t, c.BFLoadChunk(ctx, "bf-copy", 1, "junk").Err(), "ERR received bad data")
		wantErr(t, c.CFLoadChunk(ctx, "cf-copy", 1, "junk").Err(), "ERR item exists")
		wantErr(t, c.CFLoadChunk(ctx, "cf-new", 1, "junk").Err(), "Invalid header")
		wantErr(t, c.CFLoadChunk(ctx, "cf-copy", 7, "junk").Err(), "Couldn't load chunk!")
		wantErr(t, c.BFLoadChunk(ctx, "bf-copy", 1<<40, "junk").Err(), "ERR received bad data")
		// Any iterator is a position: inside the dump it answers the chunk
		// holding it, past the end the end of the dump ("" for BF, nil for CF).
		if d, err := c.BFScanDump(ctx, "bf-copy", 3).Result(); err != nil || d.Iter == 0 || d.Data == "" {
			t.Errorf("BF.SCANDUMP at an iterator never handed out: %+v, %v", d, err)
		}
		if d, err := c.BFScanDump(ctx, "bf-copy", 1<<40).Result(); err != nil || d.Iter != 0 || d.Data != "" {
			t.Errorf("BF.SCANDUMP past the end: %+v, %v", d, err)
		}
	})
}

// TestGoRedisWrongType: commands on a key of another kind answer as RedisBloom.
func TestGoRedisWrongType(t *testing.T) {
	bothProtocols(t, func(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
		res(c.BFAdd(ctx, "bloom", "a").Result()).must(t)
		res(c.CFAdd(ctx, "cuckoo", "a").Result()).must(t)
		wt := "WRONGTYPE Operation against a key holding the wrong kind of value"
		wantErr(t, c.BFAdd(ctx, "cuckoo", "a").Err(), wt)
		wantErr(t, c.CFAdd(ctx, "bloom", "a").Err(), wt)
		wantErr(t, c.BFInfo(ctx, "cuckoo").Err(), wt)
		wantErr(t, c.CFInfo(ctx, "bloom").Err(), wt)
		wantErr(t, c.BFCard(ctx, "cuckoo").Err(), wt)
		wantErr(t, c.BFReserve(ctx, "cuckoo", 0.01, 10).Err(), wt)
		wantErr(t, c.CFDel(ctx, "bloom", "a").Err(), "Not found")
		if res(c.BFExists(ctx, "cuckoo", "a").Result()).must(t) || res(c.CFExists(ctx, "bloom", "a").Result()).must(t) {
			t.Error("EXISTS on another kind answered true")
		}
		if n := res(c.CFCount(ctx, "bloom", "a").Result()).must(t); n != 0 {
			t.Errorf("CF.COUNT on a Bloom key: %d", n)
		}
	})
}

func TestGoRedisKeyspace(t *testing.T) {
	bothProtocols(t, func(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
		res(c.BFAdd(ctx, "user:1", "a").Result()).must(t)
		res(c.BFAdd(ctx, "user:2", "a").Result()).must(t)
		res(c.CFAdd(ctx, "coupon", "a").Result()).must(t)
		res(c.Do(ctx, "CBF.ADD", "counts", "a").Result()).must(t)
		types := map[string]string{"user:1": "MBbloom--", "coupon": "MBbloomCF", "counts": "MBbloomCBF", "nope": "none"}
		for k, want := range types {
			if got := res(c.Type(ctx, k).Result()).must(t); got != want {
				t.Errorf("TYPE %s = %s", k, got)
			}
		}
		if n := res(c.Exists(ctx, "user:1", "nope", "coupon").Result()).must(t); n != 2 {
			t.Errorf("EXISTS %d", n)
		}
		if n := res(c.DBSize(ctx).Result()).must(t); n != 4 {
			t.Errorf("DBSIZE %d", n)
		}
		keys := res(c.Keys(ctx, "user:*").Result()).must(t)
		if !reflect.DeepEqual(sorted(keys), []string{"user:1", "user:2"}) {
			t.Errorf("KEYS %v", keys)
		}
		var scanned []string
		iter := c.ScanType(ctx, 0, "*", 1, "MBbloomCF").Iterator()
		for iter.Next(ctx) {
			scanned = append(scanned, iter.Val())
		}
		res(0, iter.Err()).must(t)
		if !reflect.DeepEqual(scanned, []string{"coupon"}) {
			t.Errorf("SCAN TYPE %v", scanned)
		}
		if n := res(c.Del(ctx, "user:1", "nope", "coupon").Result()).must(t); n != 2 {
			t.Errorf("DEL %d", n)
		}
		if n := res(c.DBSize(ctx).Result()).must(t); n != 2 {
			t.Errorf("DBSIZE after DEL %d", n)
		}
	})
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestGoRedisCounting(t *testing.T) {
	bothProtocols(t, func(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
		res(c.Do(ctx, "CBF.RESERVE", "c", "0.01", "1000", "COUNTERBITS", "8").Result()).must(t)
		for i := 0; i < 3; i++ {
			res(c.Do(ctx, "CBF.ADD", "c", "x").Result()).must(t)
		}
		if n := res(c.Do(ctx, "CBF.COUNT", "c", "x").Int64()).must(t); n != 3 {
			t.Errorf("CBF.COUNT %d", n)
		}
		if !res(c.Do(ctx, "CBF.DEL", "c", "x").Bool()).must(t) {
			t.Error("CBF.DEL of a held item")
		}
		if n := res(c.Do(ctx, "CBF.COUNT", "c", "x").Int64()).must(t); n != 2 {
			t.Errorf("CBF.COUNT after DEL %d", n)
		}
		if !res(c.Do(ctx, "CBF.EXISTS", "c", "x").Bool()).must(t) || res(c.Do(ctx, "CBF.EXISTS", "c", "y").Bool()).must(t) {
			t.Error("CBF.EXISTS")
		}
		info := res(c.Do(ctx, "CBF.INFO", "c").Result()).must(t)
		var fields map[any]any
		if m, ok := info.(map[any]any); ok {
			fields = m
		} else {
			arr := info.([]any)
			fields = map[any]any{}
			for i := 0; i+1 < len(arr); i += 2 {
				fields[arr[i]] = arr[i+1]
			}
		}
		if fields["Capacity"] != int64(1000) || fields["Counter bits"] != int64(8) || fields["Layout"] != "standard" {
			t.Errorf("CBF.INFO %#v", fields)
		}
		wantErr(t, c.Do(ctx, "CBF.DEL", "missing", "x").Err(), "ERR not found")
	})
}

func TestGoRedisConnection(t *testing.T) {
	ts := mustStartServer(t, Config{RequirePass: "pw"})
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		c := newGoRedis(t, ts.addr, proto, "pw")
		if got := res(c.Ping(ctx).Result()).must(t); got != "PONG" {
			t.Errorf("RESP%d PING %q", proto, got)
		}
		if got := res(c.Echo(ctx, "hi").Result()).must(t); got != "hi" {
			t.Errorf("ECHO %q", got)
		}
		res(c.Do(ctx, "SELECT", 0).Result()).must(t)
		if info := res(c.Info(ctx, "server").Result()).must(t); !strings.Contains(info, "redis_version:") {
			t.Errorf("INFO server %q", info)
		}
		if n := res(c.Do(ctx, "COMMAND", "COUNT").Int64()).must(t); n < 40 {
			t.Errorf("COMMAND COUNT %d", n)
		}
		cmds := res(c.Command(ctx).Result()).must(t)
		if ci := cmds["bf.add"]; ci == nil || ci.Arity != 3 || ci.ReadOnly {
			t.Errorf("COMMAND bf.add %+v", ci)
		}
		if ci := cmds["bf.exists"]; ci == nil || !ci.ReadOnly {
			t.Errorf("COMMAND bf.exists %+v", ci)
		}
	}
	bad := newGoRedis(t, ts.addr, 3, "wrong")
	wantErr(t, bad.Ping(ctx).Err(), "WRONGPASS invalid username-password pair or user is disabled.")
	none := newGoRedis(t, ts.addr, 3, "")
	wantErr(t, none.Get(ctx, "k").Err(), "NOAUTH Authentication required.")
	if err := none.Ping(ctx).Err(); err != nil {
		t.Errorf("PING before AUTH: %v", err) // PROTOCOL.md: a stranger may PING
	}
}
