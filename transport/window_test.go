package transport

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
)

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]int64{
		"500ms": 500, "90s": 90_000, "15m": 900_000, "2h": 7_200_000, "7d": 604_800_000, "60": 60_000,
		"1MS": 1, "30D": 2_592_000_000, "0": 0,
	} {
		if got, ok := parseDuration([]byte(in)); !ok || got != want {
			t.Errorf("parseDuration(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "ms", "s", "-5s", "+5s", "1.5h", "5 s", "05s", "7w", "5sm", "99999999999999999999d", "9223372036854775807d"} {
		if got, ok := parseDuration([]byte(in)); ok {
			t.Errorf("parseDuration(%q) = %d, accepted", in, got)
		}
	}
}

// TestWindowReserveParsing: what WINDOW and LAST make, and every refusal,
// before anything is proposed.
func TestWindowReserveParsing(t *testing.T) {
	s := mustNewParser(t, Config{})
	for line, want := range map[string]fsm.Spec{
		"BF.RESERVE k 0.01 1000 WINDOW 7d":            {Kind: filters.KindWindowBloom, Capacity: 1000, ErrorRate: 0.01, Window: 7 * 86400e9},
		"BF.RESERVE k 0.001 50 window 500ms":          {Kind: filters.KindWindowBloom, Capacity: 50, ErrorRate: 0.001, Window: 500e6},
		"BF.RESERVE k 0.01 1000 LAST 5000 NONSCALING": {Kind: filters.KindWindowBloom, Capacity: 1000, ErrorRate: 0.01, Last: 5000},
		"BF.RESERVE k 0.5 10 WINDOW 60":               {Kind: filters.KindWindowBloom, Capacity: 10, ErrorRate: 0.25, Window: 60e9},
		"CF.RESERVE k 1000 WINDOW 30d":                {Kind: filters.KindWindowCuckoo, Capacity: 1000, MaxIterations: 500, Window: 30 * 86400e9},
		"CF.RESERVE k 7 MAXITERATIONS 50 WINDOW 15m":  {Kind: filters.KindWindowCuckoo, Capacity: 7, MaxIterations: 50, Window: 900e9},
	} {
		o, err := parseLine(s, line)
		if err != nil || o.cmd == nil || o.cmd.Op != fsm.OpReserve || o.cmd.Spec != want {
			t.Errorf("%s: %+v %v; want %+v", line, o.cmd, err, want)
			continue
		}
		if fsm.MinCodec(o.cmd) != fsm.CodecV6 {
			t.Errorf("%s: needs log format %d", line, fsm.MinCodec(o.cmd))
		}
	}
	for line, want := range map[string]string{
		"BF.RESERVE k 0.01 1000 WINDOW":                "ERR wrong number of arguments for 'BF.RESERVE' command",
		"BF.RESERVE k 0.01 1000 WINDOW 7x":             errBadWindow,
		"CF.RESERVE k 1000 WINDOW 1.5d":                errBadWindow,
		"BF.RESERVE k 0.01 1000 WINDOW 0ms":            "ERR window must be in the range [1ms, 3650d]",
		"BF.RESERVE k 0.01 1000 WINDOW 3651d":          "ERR window must be in the range [1ms, 3650d]",
		"BF.RESERVE k 0.01 1000 LAST 0":                "ERR window count must be in the range [1, 1073741824]",
		"BF.RESERVE k 0.01 1000 LAST many":             "ERR bad window count",
		"BF.RESERVE k 0.01 1000 LAST 5 WINDOW":         "ERR WINDOW and LAST cannot be combined",
		"BF.RESERVE k 0.01 1000 WINDOW 1d EXPANSION":   "ERR windowed filters cannot expand",
		"BF.RESERVE k 0.01 1000 WINDOW 1d EXPANSION 2": "ERR wrong number of arguments for 'BF.RESERVE' command",
		"BF.RESERVE k 1e-7 1000 WINDOW 1d":             "ERR could not create filter: error rate 1e-07 of a windowed filter must lie in [1e-06, 1)",
		"BF.RESERVE k x 1000 WINDOW 1d":                "ERR bad error rate",
		"CF.RESERVE k 1000 LAST 5":                     "ERR a windowed cuckoo filter takes WINDOW duration, not LAST",
		"CF.RESERVE k 1000 WINDOW 1d BUCKETSIZE 2":     "ERR windowed cuckoo filters have buckets of 4",
		"CF.RESERVE k 1000 EXPANSION 2 WINDOW 1d":      "ERR windowed filters cannot expand",
		"CF.RESERVE k 0 WINDOW 1d":                     "Capacity must be in the range [1, 1073741824]",
		"CF.RESERVE k 100 WINDOW 1d MAXITERATIONS 0":   "MAXITERATIONS: value must be in the range [1, 65535]",
		"CF.INFO k WINDOW x":                           "ERR wrong number of arguments for 'CF.INFO' command",
	} {
		if _, err := parseLine(s, line); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", line, err, want)
		}
	}
}

// TestGoRedisWindowed drives windowed filters with go-redis v9's own BF* and
// CF* methods, under RESP2 and RESP3: they work unchanged, BFInfo and CFInfo
// included, and BF.INFO / CF.INFO key WINDOW describe the window. The
// backend's clock, stamped into each write as a leader's is, then moves past
// the window and slack: the items answer absent.
func TestGoRedisWindowed(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			ts := mustStartServer(t, Config{})
			start := time.Now()
			ts.be.set(func(b *fakeBackend) { b.clock = func() time.Time { return start } })
			ctx, c := context.Background(), newGoRedis(t, ts.addr, proto, "")
			goRedisWindowedBloom(t, ctx, c)
			goRedisWindowedCuckoo(t, ctx, c)
			// 7 s later plus the slack (1 s): every generation retired.
			ts.be.set(func(b *fakeBackend) {
				b.clock = func() time.Time { return start.Add(8*time.Second + time.Millisecond) }
			})
			res(c.BFAdd(ctx, "clock", "tick").Result()).must(t)
			if res(c.BFExists(ctx, "seen", "a").Result()).must(t) || res(c.CFExists(ctx, "coupons", "C-2").Result()).must(t) {
				t.Error("an item answers present after its window and slack")
			}
			if n := res(c.BFCard(ctx, "seen").Result()).must(t); n != 0 {
				t.Errorf("BF.CARD %d after the window emptied", n)
			}
		})
	}
}

func goRedisWindowedBloom(t *testing.T, ctx context.Context, c *redis.Client) {
	res(c.Do(ctx, "BF.RESERVE", "seen", "0.01", "1000", "WINDOW", "7s").Result()).must(t)
	wantErr(t, c.Do(ctx, "BF.RESERVE", "seen", "0.01", "1000", "WINDOW", "7s").Err(), "ERR item exists")
	if !res(c.BFAdd(ctx, "seen", "a").Result()).must(t) || res(c.BFAdd(ctx, "seen", "a").Result()).must(t) {
		t.Error("BF.ADD: first and second add")
	}
	if got := res(c.BFMAdd(ctx, "seen", "b", "c", "a").Result()).must(t); !reflect.DeepEqual(got, []bool{true, true, false}) {
		t.Errorf("BF.MADD %v", got)
	}
	if got := res(c.BFInsert(ctx, "seen", &redis.BFInsertOptions{NoCreate: true}, "d").Result()).must(t); !reflect.DeepEqual(got, []bool{true}) {
		t.Errorf("BF.INSERT NOCREATE %v", got)
	}
	if got := res(c.BFMExists(ctx, "seen", "a", "d", "zzz").Result()).must(t); !reflect.DeepEqual(got, []bool{true, true, false}) {
		t.Errorf("BF.MEXISTS %v", got)
	}
	if n := res(c.BFCard(ctx, "seen").Result()).must(t); n != 4 {
		t.Errorf("BF.CARD %d", n)
	}
	info := res(c.BFInfo(ctx, "seen").Result()).must(t)
	if info.Capacity != 1000 || info.ItemsInserted != 4 || info.Filters != 1 || info.Size == 0 {
		t.Errorf("BF.INFO %+v", info)
	}
	win := res(c.Do(ctx, "BF.INFO", "seen", "WINDOW").Result()).must(t)
	if s := fmt.Sprint(win); !(reflect.DeepEqual(flat(win), []any{"Window type", "time", "Window", int64(7000), "Slack", int64(1000),
		"Generations", int64(8), "Current generation", flat(win)[9], "Items per generation", []any{int64(0), int64(0), int64(0),
			int64(0), int64(0), int64(0), int64(0), int64(4)}})) {
		t.Errorf("BF.INFO WINDOW %s", s)
	}
	dbg := res(c.Do(ctx, "BF.DEBUG", "seen").StringSlice()).must(t)
	if len(dbg) != 11 || dbg[0] != "size:4" || dbg[1] != "window:7s slack:1s generations:8" ||
		!strings.HasSuffix(dbg[9], " items:4") || !strings.HasPrefix(dbg[10], "bytes:") {
		t.Errorf("BF.DEBUG %q", dbg)
	}
	wantErr(t, c.Do(ctx, "BF.INFO", "plain", "WINDOW").Err(), "ERR not found")
	res(c.BFAdd(ctx, "plain", "x").Result()).must(t)
	wantErr(t, c.Do(ctx, "BF.INFO", "plain", "WINDOW").Err(), "ERR not a windowed filter")
	// SCANDUMP into LOADCHUNK copies it.
	for iter := int64(0); ; {
		d := res(c.BFScanDump(ctx, "seen", iter).Result()).must(t)
		if d.Iter == 0 {
			break
		}
		res(c.BFLoadChunk(ctx, "copy", d.Iter, d.Data).Result()).must(t)
		iter = d.Iter
	}
	if got := res(c.BFMExists(ctx, "copy", "a", "b", "c", "d").Result()).must(t); !reflect.DeepEqual(got, []bool{true, true, true, true}) {
		t.Errorf("the loaded copy: %v", got)
	}
	if typ := res(c.Type(ctx, "seen").Result()).must(t); typ != "MBbloom--" {
		t.Errorf("TYPE %s", typ)
	}
}

func goRedisWindowedCuckoo(t *testing.T, ctx context.Context, c *redis.Client) {
	res(c.Do(ctx, "CF.RESERVE", "coupons", "1000", "WINDOW", "7s").Result()).must(t)
	if !res(c.CFAdd(ctx, "coupons", "C-1").Result()).must(t) || !res(c.CFAddNX(ctx, "coupons", "C-2").Result()).must(t) {
		t.Error("CF.ADD / CF.ADDNX")
	}
	if res(c.CFAddNX(ctx, "coupons", "C-2").Result()).must(t) {
		t.Error("CF.ADDNX of a held coupon")
	}
	if got := res(c.CFInsert(ctx, "coupons", &redis.CFInsertOptions{NoCreate: true}, "C-3", "C-3").Result()).must(t); !reflect.DeepEqual(got, []bool{true, true}) {
		t.Errorf("CF.INSERT %v", got)
	}
	if n := res(c.CFCount(ctx, "coupons", "C-3").Result()).must(t); n != 2 {
		t.Errorf("CF.COUNT %d", n)
	}
	if !res(c.CFDel(ctx, "coupons", "C-1").Result()).must(t) || res(c.CFDel(ctx, "coupons", "C-1").Result()).must(t) {
		t.Error("CF.DEL: redeem once")
	}
	info := res(c.CFInfo(ctx, "coupons").Result()).must(t)
	if info.NumItemsInserted != 3 || info.NumItemsDeleted != 1 || info.BucketSize != 4 || info.NumFilters != 1 || info.ExpansionRate != 0 {
		t.Errorf("CF.INFO %+v", info)
	}
	win := flat(res(c.Do(ctx, "CF.INFO", "coupons", "WINDOW").Result()).must(t))
	if len(win) != 12 || win[1] != "time" || win[3] != int64(7000) || win[5] != int64(1000) {
		t.Errorf("CF.INFO WINDOW %v", win)
	}
	if d := res(c.Do(ctx, "CF.DEBUG", "coupons").Text()).must(t); !strings.HasSuffix(d, " expansion:0 window:7s slack:1s generations:8") {
		t.Errorf("CF.DEBUG %q", d)
	}
	if typ := res(c.Type(ctx, "coupons").Result()).must(t); typ != "MBbloomCF" {
		t.Errorf("TYPE %s", typ)
	}
	res(c.Do(ctx, "CF.COMPACT", "coupons").Result()).must(t)
	for iter := int64(0); ; {
		d, err := c.CFScanDump(ctx, "coupons", iter).Result()
		if errors.Is(err, redis.Nil) {
			break // a cuckoo dump ends with [0, nil], which go-redis reads as redis.Nil
		}
		if d = res(d, err).must(t); d.Iter == 0 {
			break
		}
		res(c.CFLoadChunk(ctx, "coupons-copy", d.Iter, d.Data).Result()).must(t)
		iter = d.Iter
	}
	if n := res(c.CFCount(ctx, "coupons-copy", "C-3").Result()).must(t); n != 2 {
		t.Errorf("the loaded copy counts %d", n)
	}
}

// flat turns a RESP3 map reply into the flat list RESP2 gives, in the
// server's order: go-redis hands maps back as Go maps.
func flat(v any) []any {
	switch m := v.(type) {
	case []any:
		return m
	case map[any]any:
		order := []string{"Window type", "Window", "Slack", "Generations", "Current generation", "Items per generation"}
		var out []any
		for _, k := range order {
			out = append(out, k, m[k])
		}
		return out
	}
	return nil
}

// TestBadWindowListsTheUnits is issue 29's point 6: the answer to a window
// that does not parse keeps RedisBloom-style "ERR bad window" at its start and
// lists the units a duration takes.
func TestBadWindowListsTheUnits(t *testing.T) {
	s := mustNewParser(t, Config{})
	for _, line := range []string{"BF.RESERVE k 0.01 1000 WINDOW 7x", "BF.RESERVE k 0.01 1000 WINDOW 7days", "CF.RESERVE k 1000 WINDOW -1s"} {
		_, err := parseLine(s, line)
		if err == nil || !strings.HasPrefix(err.Error(), "ERR bad window") ||
			!strings.Contains(err.Error(), "ms, s, m, h or d") || !strings.Contains(err.Error(), "a bare number is seconds") {
			t.Errorf("%s: %v", line, err)
		}
	}
}
