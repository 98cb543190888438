package transport

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
)

func TestConfigGet(t *testing.T) {
	ts := mustStartServer(t, Config{MaxMemory: 1 << 30, MaxClients: 50})
	c := dialRaw(t, ts.addr)
	m := func(kv ...string) string {
		s := "*" + strconv.Itoa(len(kv)) + "\r\n"
		for _, x := range kv {
			s += "$" + strconv.Itoa(len(x)) + "\r\n" + x + "\r\n"
		}
		return s
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"maxmemory"}, m("maxmemory", "1073741824")},
		{[]string{"MAXMEMORY*"}, m("maxmemory", "1073741824", "maxmemory-policy", "noeviction")},
		{[]string{"databases", "maxclients", "databases"}, m("databases", "1", "maxclients", "50")},
		{[]string{"bf-*"}, m("bf-error-rate", "0.01", "bf-initial-size", "100", "bf-expansion-factor", "2")},
		{[]string{"cf-*"}, m("cf-bucket-size", "2", "cf-initial-size", "1024", "cf-max-iterations", "20",
			"cf-expansion-factor", "1", "cf-max-expansions", "32")},
		{[]string{"*expansion*", "save"}, m("save", "", "bf-expansion-factor", "2", "cf-expansion-factor", "1",
			"cf-max-expansions", "32")},
		{[]string{"?f-[bi]*"}, m("bf-initial-size", "100", "cf-bucket-size", "2", "cf-initial-size", "1024")},
		{[]string{"nothing"}, "*0\r\n"},
	} {
		if got := c.do(append([]string{"CONFIG", "GET"}, tc.args...)...); got != tc.want {
			t.Errorf("CONFIG GET %v:\n got %q\nwant %q", tc.args, got, tc.want)
		}
	}
	if got := c.do("CONFIG", "GET"); got != "-ERR wrong number of arguments for 'config|get' command\r\n" {
		t.Errorf("CONFIG GET alone: %q", got)
	}
	c.do("HELLO", "3")
	if got := c.do("CONFIG", "GET", "cf-max-expansions"); got != "%1\r\n$17\r\ncf-max-expansions\r\n$2\r\n32\r\n" {
		t.Errorf("CONFIG GET in RESP3: %q", got)
	}
	// go-redis reads it as a map.
	rc := newGoRedis(t, ts.addr, 3, "")
	got := res(rc.ConfigGet(context.Background(), "bf-error-rate").Result()).must(t)
	if len(got) != 1 || got["bf-error-rate"] != "0.01" {
		t.Errorf("go-redis ConfigGet %v", got)
	}
}

func TestConfigSet(t *testing.T) {
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	get := func(name string) string {
		r := c.do("CONFIG", "GET", name)
		parts := strings.Split(r, "\r\n")
		if len(parts) < 5 {
			t.Fatalf("CONFIG GET %s: %q", name, r)
		}
		return parts[4]
	}
	ok := []struct{ name, value, reads string }{
		{"bf-error-rate", "0.02", "0.02"}, {"bf-error-rate", "1e-3", "1e-3"}, {"BF-ERROR-RATE", "0.5", "0.25"},
		{"bf-initial-size", "200", "200"}, {"bf-expansion-factor", "0", "0"}, {"bf-expansion-factor", "3", "3"},
		{"cf-bucket-size", "3", "3"}, {"cf-initial-size", "2048", "2048"}, {"cf-max-iterations", "30", "30"},
		{"cf-expansion-factor", "2", "2"}, {"cf-max-expansions", "64", "64"}, {"cf-max-expansions", "3", "3"},
	}
	for _, tc := range ok {
		if got := c.do("CONFIG", "SET", tc.name, tc.value); got != "+OK\r\n" {
			t.Fatalf("CONFIG SET %s %s: %q", tc.name, tc.value, got)
		}
		if got := get(strings.ToLower(tc.name)); got != tc.reads {
			t.Errorf("after CONFIG SET %s %s, CONFIG GET answers %q, want %q", tc.name, tc.value, got, tc.reads)
		}
	}
	fail := func(name, why string) string {
		return "-ERR CONFIG SET failed (possibly related to argument '" + name + "') - " + why + "\r\n"
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bf-error-rate", "0"}, fail("bf-error-rate", "Value for `bf-error-rate` must be in the range (0.000000, 1.000000)")},
		{[]string{"bf-error-rate", "1"}, fail("bf-error-rate", "Value for `bf-error-rate` must be in the range (0.000000, 1.000000)")},
		{[]string{"bf-error-rate", "abc"}, fail("bf-error-rate", "Invalid value for `bf-error-rate`")},
		{[]string{"bf-initial-size", "0"}, fail("bf-initial-size", "Value for `bf-initial-size` must be in the range [1, 1073741824]")},
		{[]string{"bf-initial-size", "4294967296"}, fail("bf-initial-size", "Value for `bf-initial-size` must be in the range [1, 1073741824]")},
		{[]string{"bf-expansion-factor", "-1"}, fail("bf-expansion-factor", "Value for `bf-expansion-factor` must be in the range [0, 32768]")},
		{[]string{"bf-expansion-factor", "32769"}, fail("bf-expansion-factor", "Value for `bf-expansion-factor` must be in the range [0, 32768]")},
		{[]string{"cf-bucket-size", "0"}, fail("cf-bucket-size", "Value for `cf-bucket-size` must be in the range [1, 255]")},
		{[]string{"cf-bucket-size", "1.5"}, fail("cf-bucket-size", "Invalid value for `cf-bucket-size`")},
		{[]string{"cf-initial-size", "5"}, fail("cf-initial-size", "Value for `cf-initial-size` must be in the range [6, 1073741824]")}, // 2 * cf-bucket-size 3
		{[]string{"cf-max-iterations", "65536"}, fail("cf-max-iterations", "Value for `cf-max-iterations` must be in the range [1, 65535]")},
		{[]string{"cf-expansion-factor", "32769"}, fail("cf-expansion-factor", "Value for `cf-expansion-factor` must be in the range [0, 32768]")},
		{[]string{"cf-max-expansions", "0"}, fail("cf-max-expansions", "Value for `cf-max-expansions` must be in the range [1, 65536]")},
		{[]string{"cf-max-expansions", "65537"}, fail("cf-max-expansions", "Value for `cf-max-expansions` must be in the range [1, 65536]")},
		{[]string{"nosuch", "1"}, "-ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'\r\n"},
		{[]string{"bf-initial-size", "7", "nosuch", "1"}, "-ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'\r\n"},
		{[]string{"MaxMemory", "1"}, fail("MaxMemory", "can't set immutable config")},
		{[]string{"bf-initial-size", "7", "bf-initial-size", "8"}, fail("bf-initial-size", "duplicate parameter")},
		// All or nothing: bf-initial-size 7 is not kept.
		{[]string{"bf-initial-size", "7", "cf-bucket-size", "999"}, fail("cf-bucket-size", "Value for `cf-bucket-size` must be in the range [1, 255]")},
		{[]string{"bf-initial-size"}, "-ERR wrong number of arguments for 'config|set' command\r\n"},
		{[]string{"bf-initial-size", "7", "cf-bucket-size"}, "-ERR syntax error\r\n"},
	} {
		if got := c.do(append([]string{"CONFIG", "SET"}, tc.args...)...); got != tc.want {
			t.Errorf("CONFIG SET %v:\n got %q\nwant %q", tc.args, got, tc.want)
		}
	}
	if got := get("bf-initial-size"); got != "200" {
		t.Errorf("a refused CONFIG SET changed bf-initial-size to %s", got)
	}
	// cf-initial-size bounds cf-bucket-size from above: half of it, at most 255.
	if got := c.do("CONFIG", "SET", "cf-bucket-size", "2", "cf-initial-size", "100"); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET two settings: %q", got)
	}
	if got := c.do("CONFIG", "SET", "cf-bucket-size", "51"); got != fail("cf-bucket-size", "Value for `cf-bucket-size` must be in the range [1, 50]") {
		t.Errorf("cf-bucket-size above half cf-initial-size: %q", got)
	}
	if got := c.do("CF.RESERVE", "c", "1000", "BUCKETSIZE", "60"); got != "-BUCKETSIZE: value must be in the range [1, 50]\r\n" {
		t.Errorf("CF.RESERVE with a bucket size over the setting's range: %q", got)
	}
}

// TestConfigDefaultsOfNewFilters: the filters BF/CF commands create take the
// node's settings, fixed in the command the log carries.
func TestConfigDefaultsOfNewFilters(t *testing.T) {
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	if got := c.do("CONFIG", "SET", "bf-error-rate", "0.02", "bf-initial-size", "200", "bf-expansion-factor", "3",
		"cf-bucket-size", "4", "cf-initial-size", "2000", "cf-max-iterations", "30", "cf-expansion-factor", "3",
		"cf-max-expansions", "5"); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET: %q", got)
	}
	bf := fsm.Spec{Kind: filters.KindScalable, Capacity: 200, ErrorRate: 0.02, Expansion: 3}
	cf := func(capacity uint64) fsm.Spec {
		return fsm.Spec{Kind: filters.KindCuckoo, Capacity: capacity, BucketSize: 4, MaxIterations: 30, Expansion: 4,
			FingerprintBits: 8}
	}
	reqs := [][]string{
		{"BF.ADD", "b1", "x"}, {"BF.MADD", "b2", "x"}, {"BF.INSERT", "b3", "ITEMS", "x"},
		{"BF.INSERT", "b4", "CAPACITY", "50", "ITEMS", "x"}, {"BF.RESERVE", "b5", "0.1", "10"},
		{"CF.ADD", "c1", "x"}, {"CF.ADDNX", "c2", "x"}, {"CF.INSERT", "c3", "ITEMS", "x"},
		{"CF.INSERTNX", "c4", "CAPACITY", "500", "ITEMS", "x"}, {"CF.RESERVE", "c5", "100"},
		{"CBF.ADD", "n1", "x"}, // CBF keeps its own defaults
	}
	for _, r := range reqs {
		c.do(r...)
	}
	want := []fsm.Spec{bf, bf, bf, {Kind: filters.KindScalable, Capacity: 50, ErrorRate: 0.02, Expansion: 3},
		{Kind: filters.KindScalable, Capacity: 10, ErrorRate: 0.1, Expansion: 3},
		cf(2000), cf(2000), cf(2000), cf(500), cf(100),
		{Kind: filters.KindCounting, Capacity: 100, ErrorRate: 0.01, CounterBits: 4}}
	cmds := ts.be.submitted()
	if len(cmds) != len(reqs) {
		t.Fatalf("%d commands submitted", len(cmds))
	}
	for i, cmd := range cmds {
		if cmd.Spec != want[i] {
			t.Errorf("%v: spec %+v, want %+v", reqs[i], cmd.Spec, want[i])
		}
		adds := cmd.Family == fsm.FamilyCF && cmd.Op == fsm.OpAdd
		if adds && cmd.MaxFilters != 5 || !adds && cmd.MaxFilters != 0 {
			t.Errorf("%v: MaxFilters %d", reqs[i], cmd.MaxFilters)
		}
	}
	// bf-expansion-factor 0 makes new filters non-scaling, and then
	// EXPANSION is refused, as RedisBloom does.
	c.do("CONFIG", "SET", "bf-expansion-factor", "0")
	c.do("BF.ADD", "b6", "x")
	if got := ts.be.submitted()[len(reqs)].Spec; !got.NonScaling || got.Expansion != 0 {
		t.Errorf("BF.ADD with bf-expansion-factor 0: %+v", got)
	}
	if got := c.do("BF.RESERVE", "b7", "0.01", "10", "EXPANSION", "2"); got != "-Nonscaling filters cannot expand\r\n" {
		t.Errorf("BF.RESERVE EXPANSION with bf-expansion-factor 0: %q", got)
	}
	if got := c.do("CF.INSERT", "c6", "CAPACITY", "7", "ITEMS", "x"); got != "-Capacity must be in the range [cf-bucket-size * 2, 1073741824]\r\n" {
		t.Errorf("CF.INSERT under 2 * cf-bucket-size: %q", got)
	}
}

// TestConfigMaxExpansions: cf-max-expansions below 32 refuses every add to a
// filter with that many sub-filters, as RedisBloom does, on every replica
// alike (the limit is in the command); above 32, the filters' own 32 holds.
func TestConfigMaxExpansions(t *testing.T) {
	ts := mustStartServer(t, Config{})
	ctx := context.Background()
	rc := newGoRedis(t, ts.addr, 2, "")
	res(rc.Do(ctx, "CF.RESERVE", "c", "4", "BUCKETSIZE", "1", "EXPANSION", "1").Result()).must(t)
	res(rc.Do(ctx, "CONFIG", "SET", "cf-max-expansions", "2").Result()).must(t)
	var err error
	added := 0
	for i := 0; i < 1000 && err == nil; i++ {
		_, err = rc.Do(ctx, "CF.ADD", "c", "item-"+strconv.Itoa(i)).Result()
		if err == nil {
			added++
		}
	}
	wantErr(t, err, "Maximum expansions reached")
	in := res(rc.CFInfo(ctx, "c").Result()).must(t)
	if in.NumFilters != 2 || int(in.NumItemsInserted) != added {
		t.Errorf("after refusal: %d sub-filters, %d items, %d adds answered", in.NumFilters, in.NumItemsInserted, added)
	}
	wantErr(t, rc.Do(ctx, "CF.INSERT", "c", "ITEMS", "y").Err(), "Maximum expansions reached")
	// Raised again, adds go on.
	res(rc.Do(ctx, "CONFIG", "SET", "cf-max-expansions", "64").Result()).must(t)
	if err := rc.Do(ctx, "CF.ADD", "c", "more").Err(); err != nil {
		t.Errorf("CF.ADD after raising cf-max-expansions: %v", err)
	}
}
