package transport

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/fsm"
)

// TestParseExpire: the setters carry the number as given (milliseconds; a
// relative time is counted from the log's clock by the state machine, never
// turned into a deadline here by this node's clock) and their options.
func TestParseExpire(t *testing.T) {
	s := mustNewParser(t, Config{})
	for line, want := range map[string]fsm.Command{
		"EXPIRE k 10":                         {Op: fsm.OpExpire, Key: "k", Expire: 10_000},
		"expire k -3 nx":                      {Op: fsm.OpExpire, Key: "k", Expire: -3000, ExpireIf: fsm.ExpireNX},
		"PEXPIRE k 1500 XX gt":                {Op: fsm.OpExpire, Key: "k", Expire: 1500, ExpireIf: fsm.ExpireXX | fsm.ExpireGT},
		"EXPIREAT k 4102444800 LT lt xx":      {Op: fsm.OpExpire, Key: "k", Expire: 4102444800_000, ExpireAt: true, ExpireIf: fsm.ExpireLT | fsm.ExpireXX},
		"PEXPIREAT k 9223372036854775807":     {Op: fsm.OpExpire, Key: "k", Expire: math.MaxInt64, ExpireAt: true},
		"EXPIREAT k -9223372036854775":        {Op: fsm.OpExpire, Key: "k", Expire: -9223372036854775000, ExpireAt: true},
		"EXPIRE k 0 NX NX":                    {Op: fsm.OpExpire, Key: "k", Expire: 0, ExpireIf: fsm.ExpireNX},
		"PERSIST k":                           {Op: fsm.OpPersist, Key: "k"},
		"PEXPIRE k -9223372036854775808":      {Op: fsm.OpExpire, Key: "k", Expire: math.MinInt64},
		"EXPIREAT k 9223372036854775 GT":      {Op: fsm.OpExpire, Key: "k", Expire: 9223372036854775000, ExpireAt: true, ExpireIf: fsm.ExpireGT},
		"PEXPIREAT k -1 XX LT":                {Op: fsm.OpExpire, Key: "k", Expire: -1, ExpireAt: true, ExpireIf: fsm.ExpireXX | fsm.ExpireLT},
		"pexpireat k 4102444800499 Nx":        {Op: fsm.OpExpire, Key: "k", Expire: 4102444800499, ExpireAt: true, ExpireIf: fsm.ExpireNX},
		"EXPIRE seen:2026-11-25 86400 nx":     {Op: fsm.OpExpire, Key: "seen:2026-11-25", Expire: 86400_000, ExpireIf: fsm.ExpireNX},
		"EXPIREAT seen:2026-11-25 1764115200": {Op: fsm.OpExpire, Key: "seen:2026-11-25", Expire: 1764115200_000, ExpireAt: true},
	} {
		o, err := parseLine(s, line)
		if err != nil || o.kind != opWrite {
			t.Errorf("%s: %v", line, err)
			continue
		}
		if !reflect.DeepEqual(*o.cmd, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", line, *o.cmd, want)
		}
	}
	for line, want := range map[string]string{
		"expire k":                           "ERR wrong number of arguments for 'expire' command",
		"PExpire k":                          "ERR wrong number of arguments for 'PExpire' command",
		"ttl":                                "ERR wrong number of arguments for 'ttl' command",
		"ttl a b":                            "ERR wrong number of arguments for 'ttl' command",
		"persist":                            "ERR wrong number of arguments for 'persist' command",
		"expiretime a b":                     "ERR wrong number of arguments for 'expiretime' command",
		"EXPIRE k abc":                       "ERR value is not an integer or out of range",
		"EXPIRE k 10.5":                      "ERR value is not an integer or out of range",
		"EXPIRE k +10":                       "ERR value is not an integer or out of range",
		"EXPIRE k 010":                       "ERR value is not an integer or out of range",
		"EXPIRE k 9223372036854775808":       "ERR value is not an integer or out of range",
		"EXPIRE k 10 foo":                    "ERR Unsupported option foo",
		"EXPIRE k abc foo":                   "ERR Unsupported option foo",
		"EXPIRE k abc NX XX":                 "ERR NX and XX, GT or LT options at the same time are not compatible",
		"EXPIRE k 10 nx gt":                  "ERR NX and XX, GT or LT options at the same time are not compatible",
		"PEXPIRE k 10 LT NX":                 "ERR NX and XX, GT or LT options at the same time are not compatible",
		"EXPIRE k 10 GT LT":                  "ERR GT and LT options at the same time are not compatible",
		"EXPIRE k 10 xx gt lt":               "ERR GT and LT options at the same time are not compatible",
		"EXPIRE k 9223372036854776":          "ERR invalid expire time in 'expire' command",
		"EXPIRE k 9223372036854775 gt":       "ERR invalid expire time in 'expire' command",
		"EXPIRE k -9223372036854776":         "ERR invalid expire time in 'expire' command",
		"EXPIRE k 9223372036854775807":       "ERR invalid expire time in 'expire' command",
		"PEXPIRE k 9223372036854775807":      "ERR invalid expire time in 'pexpire' command",
		"EXPIREAT k 9223372036854775807":     "ERR invalid expire time in 'expireat' command",
		"expireat k -9223372036854775807 nx": "ERR invalid expire time in 'expireat' command",
	} {
		_, err := parseLine(s, line)
		if err == nil || renderErr(err) != want {
			t.Errorf("%s: %v, want %q", line, err, want)
		}
	}
}

// TestExpireWithGoRedis drives every expiry command with go-redis v9's own
// methods under RESP2 and RESP3 and pins each reply.
func TestExpireWithGoRedis(t *testing.T) {
	bothProtocols(t, func(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
		isTrue := func(what string, cmd *redis.BoolCmd, want bool) {
			t.Helper()
			if got := res(cmd.Result()).must(t); got != want {
				t.Errorf("%s: %v, want %v", what, got, want)
			}
		}
		dur := func(what string, cmd *redis.DurationCmd, want time.Duration) {
			t.Helper()
			if got := res(cmd.Result()).must(t); got != want {
				t.Errorf("%s: %v, want %v", what, got, want)
			}
		}
		// A missing key.
		isTrue("EXPIRE missing", c.Expire(ctx, "missing", time.Minute), false)
		isTrue("PEXPIREAT missing", c.PExpireAt(ctx, "missing", time.Now().Add(time.Minute)), false)
		isTrue("PERSIST missing", c.Persist(ctx, "missing"), false)
		dur("TTL missing", c.TTL(ctx, "missing"), -2)
		dur("PTTL missing", c.PTTL(ctx, "missing"), -2)
		dur("EXPIRETIME missing", c.ExpireTime(ctx, "missing"), -2)
		dur("PEXPIRETIME missing", c.PExpireTime(ctx, "missing"), -2)

		// A key with no deadline, then one.
		res(c.BFAdd(ctx, "day", "https://example.com/").Result()).must(t)
		dur("TTL without a deadline", c.TTL(ctx, "day"), -1)
		dur("PEXPIRETIME without a deadline", c.PExpireTime(ctx, "day"), -1)
		isTrue("PERSIST without a deadline", c.Persist(ctx, "day"), false)
		isTrue("EXPIRE XX without a deadline", c.ExpireXX(ctx, "day", time.Minute), false)
		isTrue("EXPIRE GT without a deadline", c.ExpireGT(ctx, "day", time.Minute), false)
		isTrue("EXPIRE NX", c.ExpireNX(ctx, "day", 100*time.Second), true)
		isTrue("EXPIRE NX again", c.ExpireNX(ctx, "day", 200*time.Second), false)
		dur("TTL", c.TTL(ctx, "day"), 100*time.Second)
		if got := res(c.PTTL(ctx, "day").Result()).must(t); got > 100*time.Second || got < 99*time.Second {
			t.Errorf("PTTL %v", got)
		}
		isTrue("EXPIRE GT shorter", c.ExpireGT(ctx, "day", 50*time.Second), false)
		isTrue("EXPIRE GT longer", c.ExpireGT(ctx, "day", 300*time.Second), true)
		isTrue("EXPIRE LT longer", c.ExpireLT(ctx, "day", 400*time.Second), false)
		isTrue("EXPIRE LT shorter", c.ExpireLT(ctx, "day", 30*time.Second), true)
		isTrue("EXPIRE XX", c.ExpireXX(ctx, "day", 40*time.Second), true)
		dur("TTL", c.TTL(ctx, "day"), 40*time.Second)

		// Absolute deadlines, read back, rounded to the nearest second. The
		// deadline is ten years from now on a whole second, so it never passes
		// while the test runs, whatever the date.
		sec := time.Now().AddDate(10, 0, 0).Unix()
		at := time.UnixMilli(sec*1000 + 499)
		isTrue("PEXPIREAT", c.PExpireAt(ctx, "day", at), true)
		dur("PEXPIRETIME", c.PExpireTime(ctx, "day"), time.Duration(sec*1000+499)*time.Millisecond)
		dur("EXPIRETIME", c.ExpireTime(ctx, "day"), time.Duration(sec)*time.Second)
		isTrue("PEXPIREAT", c.PExpireAt(ctx, "day", at.Add(time.Millisecond)), true)
		dur("EXPIRETIME rounds up", c.ExpireTime(ctx, "day"), time.Duration(sec+1)*time.Second)
		isTrue("EXPIREAT", c.ExpireAt(ctx, "day", time.Unix(sec, 0)), true)
		dur("PEXPIRETIME", c.PExpireTime(ctx, "day"), time.Duration(sec*1000)*time.Millisecond)
		if n := res(c.Do(ctx, "PEXPIREAT", "day", "9223372036854775807").Int64()).must(t); n != 1 {
			t.Errorf("PEXPIREAT at the largest time: %d", n)
		}
		if n := res(c.Do(ctx, "EXPIRETIME", "day").Int64()).must(t); n != 9223372036854776 {
			t.Errorf("EXPIRETIME at the largest time: %d, Redis answers 9223372036854776", n)
		}
		isTrue("PERSIST", c.Persist(ctx, "day"), true)
		dur("TTL after PERSIST", c.TTL(ctx, "day"), -1)

		// RENAME takes the deadline along; a new key has none.
		isTrue("EXPIRE", c.Expire(ctx, "day", time.Hour), true)
		res(c.Rename(ctx, "day", "yesterday").Result()).must(t)
		dur("TTL after RENAME", c.TTL(ctx, "yesterday"), time.Hour)
		dur("TTL of the old name", c.TTL(ctx, "day"), -2)
		res(c.Del(ctx, "yesterday").Result()).must(t)
		res(c.BFAdd(ctx, "yesterday", "x").Result()).must(t)
		dur("TTL of a key made again", c.TTL(ctx, "yesterday"), -1)

		// In the past: the key goes at once, answering 1.
		isTrue("EXPIRE -1", c.Expire(ctx, "yesterday", -time.Second), true)
		if n := res(c.Exists(ctx, "yesterday").Result()).must(t); n != 0 {
			t.Error("EXPIRE -1 left the key")
		}
		res(c.CFAdd(ctx, "cf", "x").Result()).must(t)
		isTrue("EXPIREAT in 1970", c.ExpireAt(ctx, "cf", time.Unix(1, 0)), true)
		dur("TTL after EXPIREAT in the past", c.TTL(ctx, "cf"), -2)

		// Errors, as Redis words them.
		wantErr(t, c.Do(ctx, "EXPIRE", "k", "abc").Err(), "ERR value is not an integer or out of range")
		wantErr(t, c.Do(ctx, "EXPIRE", "k", "10", "foo").Err(), "ERR Unsupported option foo")
		wantErr(t, c.Do(ctx, "EXPIRE", "k", "10", "NX", "XX").Err(), "ERR NX and XX, GT or LT options at the same time are not compatible")
		wantErr(t, c.Do(ctx, "EXPIRE", "k", "10", "GT", "LT").Err(), "ERR GT and LT options at the same time are not compatible")
		wantErr(t, c.Do(ctx, "PEXPIRE", "k", "9223372036854775807").Err(), "ERR invalid expire time in 'pexpire' command")
		wantErr(t, c.Do(ctx, "ttl").Err(), "ERR wrong number of arguments for 'ttl' command")
		if proto == 3 {
			// Integers in RESP3 too, as Redis.
			if v, err := c.Do(ctx, "TTL", "missing").Result(); err != nil || v != int64(-2) {
				t.Errorf("RESP3 TTL: %#v %v", v, err)
			}
		}
	})
}

// TestTTLOfAKeyPastItsDeadline: until the leader's tick removes it, a key
// past its deadline answers a time left of 0, never less; the next command
// stamped after the deadline removes it first.
func TestTTLOfAKeyPastItsDeadline(t *testing.T) {
	ts := mustStartServer(t, Config{})
	ctx := context.Background()
	c := newGoRedis(t, ts.addr, 2, "")
	res(c.BFAdd(ctx, "k", "x").Result()).must(t)
	if !res(c.PExpire(ctx, "k", 20*time.Millisecond).Result()).must(t) {
		t.Fatal("PEXPIRE")
	}
	time.Sleep(50 * time.Millisecond)
	if got := res(c.PTTL(ctx, "k").Result()).must(t); got != 0 {
		t.Errorf("PTTL past the deadline: %v, want 0", got)
	}
	if got := res(c.TTL(ctx, "k").Result()).must(t); got != 0 {
		t.Errorf("TTL past the deadline: %v, want 0", got)
	}
	res(c.BFAdd(ctx, "other", "x").Result()).must(t) // any write moves the log's clock
	if got := res(c.TTL(ctx, "k").Result()).must(t); got != -2 {
		t.Errorf("TTL after a later write: %v, want -2", got)
	}
	if n := ts.be.fsm.ExpiredKeys(); n != 1 {
		t.Errorf("%d keys expired, want 1", n)
	}
	// INFO says so as Redis does: expired_keys in stats, expires= per database.
	res(c.Expire(ctx, "other", time.Hour).Result()).must(t)
	info := res(c.Info(ctx, "stats", "keyspace").Result()).must(t)
	if !strings.Contains(info, "expired_keys:1\r\n") || !strings.Contains(info, "db0:keys=1,expires=1,") {
		t.Errorf("INFO does not count the expiry:\n%s", info)
	}
}

// TestExpireCountsFromTheLeadersClock: a relative EXPIRE is counted from the
// time the leader stamps into the command, not from the serving node's
// clock, which only TTL reads.
func TestExpireCountsFromTheLeadersClock(t *testing.T) {
	ts := mustStartServer(t, Config{})
	ctx := context.Background()
	c := newGoRedis(t, ts.addr, 2, "")
	ts.be.set(func(b *fakeBackend) { b.clock = func() time.Time { return time.Now().Add(-time.Hour) } })
	res(c.BFAdd(ctx, "k", "x").Result()).must(t)
	res(c.Expire(ctx, "k", 90*time.Minute).Result()).must(t)
	d, _ := ts.be.fsm.Expiry("k")
	if ahead := time.Until(time.UnixMilli(d)); ahead < 29*time.Minute || ahead > 30*time.Minute {
		t.Errorf("deadline %v from now, want 30 minutes (90 from a leader an hour behind)", ahead)
	}
	if got := res(c.TTL(ctx, "k").Result()).must(t); got < 29*time.Minute || got > 30*time.Minute {
		t.Errorf("TTL %v", got)
	}
}

// TestExpireRefusedBeforeFormat5: while the cluster writes an older log
// format the setters answer an error that says so and were not applied.
func TestExpireRefusedBeforeFormat5(t *testing.T) {
	ts := mustStartServer(t, Config{})
	ctx := context.Background()
	c := newGoRedis(t, ts.addr, 2, "")
	ts.be.set(func(b *fakeBackend) {
		b.submitErr = fmt.Errorf("%w: it needs log format 5 and a member reads only up to 4; upgrade every node", cluster.ErrNeedsUpgrade)
	})
	want := "ERR not every node of the cluster can apply this command: it needs log format 5 and a member reads only up to 4; upgrade every node"
	wantErr(t, c.Expire(ctx, "k", time.Minute).Err(), want)
	wantErr(t, c.Persist(ctx, "k").Err(), want)
}

// TestExpireIsIdempotentUnderIDEM: a retried EXPIRE answers its first answer.
func TestExpireIsIdempotentUnderIDEM(t *testing.T) {
	ts := mustStartServer(t, Config{})
	ctx := context.Background()
	c := newGoRedis(t, ts.addr, 2, "")
	res(c.BFAdd(ctx, "k", "x").Result()).must(t)
	for i := range 2 {
		if n := res(c.Do(ctx, "IDEM", "7", "1", "EXPIRE", "k", "100", "NX").Int64()).must(t); n != 1 {
			t.Fatalf("IDEM EXPIRE NX, try %d: %d", i+1, n)
		}
	}
	if n := res(c.Do(ctx, "EXPIRE", "k", "100", "NX").Int64()).must(t); n != 0 {
		t.Fatalf("EXPIRE NX without IDEM: %d", n)
	}
}
