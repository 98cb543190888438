package transport

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Transactions (commands_tx.go) against one node's real state machine; the
// cluster tests run them on three nodes and on shards (cmd/node).

func TestTxPipelinedAppliesEveryCommand(t *testing.T) {
	bothProtocols(t, func(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
		var add, exists, cfAdd *redis.BoolCmd
		var count *redis.IntCmd
		var mexists *redis.BoolSliceCmd
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			exists = p.BFExists(ctx, "{tx}a", "x")
			add = p.BFAdd(ctx, "{tx}a", "x")
			mexists = p.BFMExists(ctx, "{tx}a", "x", "y")
			cfAdd = p.CFAdd(ctx, "{tx}c", "y")
			count = p.CFCount(ctx, "{tx}c", "y")
			p.Ping(ctx)
			return nil
		})
		if err != nil {
			t.Fatalf("TxPipelined: %v", err)
		}
		if exists.Val() || !add.Val() || !cfAdd.Val() || count.Val() != 1 {
			t.Fatalf("replies: exists %v, add %v, cf add %v, count %v", exists.Val(), add.Val(), cfAdd.Val(), count.Val())
		}
		if m := mexists.Val(); len(m) != 2 || !m[0] {
			t.Fatalf("MEXISTS inside: %v", m)
		}
		// A runtime error fails that command alone, as in Redis.
		var bad *redis.BoolCmd
		var after *redis.BoolCmd
		_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			bad = p.CFAdd(ctx, "{tx}a", "z") // a Bloom key
			after = p.BFAdd(ctx, "{tx}a", "after")
			return nil
		})
		if err == nil || !strings.Contains(bad.Err().Error(), "WRONGTYPE") || !after.Val() {
			t.Fatalf("runtime error: %v / %v / %v", err, bad.Err(), after.Val())
		}
	})
}

func TestTransactionWithABadCommandAppliesNothing(t *testing.T) {
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	steps := [][2]string{
		{"MULTI", "+OK"},
		{"BF.ADD {tx}b x", "+QUEUED"},
		{"BF.ADD {tx}b", "-ERR wrong number of arguments for 'BF.ADD' command"},
		{"BF.ADD {tx}b y", "+QUEUED"},
		{"EXEC", "-EXECABORT Transaction discarded because of previous errors."},
		{"EXISTS {tx}b", ":0"},
		// A command no transaction carries is refused while queuing, never run.
		{"MULTI", "+OK"},
		{"BF.ADD {tx}b x", "+QUEUED"},
		{"BF.INFO {tx}b", "-ERR Command not allowed inside a transaction"},
		{"FLUSHALL", "-ERR Command not allowed inside a transaction"},
		{"EXEC", "-EXECABORT Transaction discarded because of previous errors."},
		{"EXISTS {tx}b", ":0"},
		// Unknown commands too.
		{"MULTI", "+OK"},
		{"BF.ADD {tx}b x", "+QUEUED"},
		{"NOSUCH {tx}b", "-ERR unknown command 'NOSUCH', with args beginning with: '{tx}b' "},
		{"EXEC", "-EXECABORT Transaction discarded because of previous errors."},
		{"EXISTS {tx}b", ":0"},
		// DISCARD drops what was queued.
		{"MULTI", "+OK"},
		{"MULTI", "-ERR MULTI calls can not be nested"},
		{"BF.ADD {tx}b x", "+QUEUED"},
		{"DISCARD", "+OK"},
		{"EXISTS {tx}b", ":0"},
		{"EXEC", "-ERR EXEC without MULTI"},
		{"DISCARD", "-ERR DISCARD without MULTI"},
		// Keys of two slots: CROSSSLOT, and nothing applies.
		{"MULTI", "+OK"},
		{"BF.ADD a x", "+QUEUED"},
		{"BF.ADD b x", "+QUEUED"},
		{"EXEC", "-CROSSSLOT Keys in request don't hash to the same slot"},
		{"EXISTS a", ":0"},
		{"EXISTS b", ":0"},
		{"MULTI", "+OK"},
		{"DEL a b", "-CROSSSLOT Keys in request don't hash to the same slot"},
		{"EXEC", "-EXECABORT Transaction discarded because of previous errors."},
		// An empty transaction, and one of PING alone.
		{"MULTI", "+OK"},
		{"EXEC", "*0"},
		{"MULTI", "+OK"},
		{"PING", "+QUEUED"},
		{"ECHO hi", "+QUEUED"},
		{"EXEC", "*2\r\n+PONG\r\n$2\r\nhi"},
	}
	// A transaction too large for one log entry is refused while queuing.
	c.do("MULTI")
	for i := range maxTxCommands {
		c.send(encode("BF.ADD", "{tx}big", fmt.Sprint(i)))
	}
	for range maxTxCommands {
		if got := c.reply(); got != "+QUEUED\r\n" {
			t.Fatalf("queuing: %q", got)
		}
	}
	if got := c.do("BF.ADD", "{tx}big", "one too many"); !strings.HasPrefix(got, "-ERR transaction too large") {
		t.Fatalf("command past the bound: %q", got)
	}
	if got := c.do("EXEC"); !strings.HasPrefix(got, "-EXECABORT") {
		t.Fatalf("EXEC of a transaction too large: %q", got)
	}
	if got := c.do("EXISTS", "{tx}big"); got != ":0\r\n" {
		t.Fatalf("a transaction too large applied: %q", got)
	}
	for _, s := range steps {
		if got := strings.TrimSuffix(c.do(strings.Fields(s[0])...), "\r\n"); got != s[1] {
			t.Fatalf("%s: got %q, want %q", s[0], got, s[1])
		}
	}
}

// TestTransactionEmptyKeyAndQueuedUnwatch: "" is a key like any other inside
// a transaction (applied, and in its own slot), and UNWATCH queued inside
// MULTI answers OK at EXEC, as in Redis.
func TestTransactionEmptyKeyAndQueuedUnwatch(t *testing.T) {
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	for _, s := range []struct {
		args []string
		want string
	}{
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"BF.ADD", "", "x"}, "+QUEUED\r\n"},
		{[]string{"UNWATCH"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*2\r\n:1\r\n+OK\r\n"},
		{[]string{"BF.EXISTS", "", "x"}, ":1\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"BF.ADD", "", "y"}, "+QUEUED\r\n"},
		{[]string{"BF.ADD", "x", "y"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "-CROSSSLOT Keys in request don't hash to the same slot\r\n"},
		{[]string{"BF.EXISTS", "", "y"}, ":0\r\n"},
		{[]string{"EXISTS", "x"}, ":0\r\n"},
	} {
		if got := c.do(s.args...); got != s.want {
			t.Fatalf("%q: got %q, want %q", s.args, got, s.want)
		}
	}
}

func TestWatchedKeyChangedMeansNullReply(t *testing.T) {
	for _, proto := range []string{"2", "3"} {
		ts := mustStartServer(t, Config{})
		c, other := dialRaw(t, ts.addr), dialRaw(t, ts.addr)
		c.do("HELLO", proto)
		other.do("BF.ADD", "{w}k", "a")
		if got := c.do("WATCH", "{w}k", "{w}absent"); got != "+OK\r\n" {
			t.Fatalf("WATCH: %q", got)
		}
		other.do("BF.ADD", "{w}k", "b")
		c.do("MULTI")
		c.do("BF.ADD", "{w}k", "mine")
		want := "*-1\r\n"
		if proto == "3" {
			want = "_\r\n"
		}
		if got := c.do("EXEC"); got != want {
			t.Fatalf("RESP%s EXEC after a watched key changed: %q, want %q", proto, got, want)
		}
		if got := c.do("BF.EXISTS", "{w}k", "mine"); got != ":0\r\n" && got != "#f\r\n" {
			t.Fatalf("aborted transaction applied: %q", got)
		}
		// EXEC forgot the watch: the next transaction applies.
		c.do("MULTI")
		c.do("BF.ADD", "{w}k", "mine")
		if got := c.do("EXEC"); !strings.HasPrefix(got, "*1\r\n") {
			t.Fatalf("next EXEC: %q", got)
		}
		// A watched key that did not exist and was created meanwhile.
		c.do("WATCH", "{w}absent")
		other.do("BF.ADD", "{w}absent", "x")
		c.do("MULTI")
		c.do("BF.ADD", "{w}k", "second")
		if got := c.do("EXEC"); got != want {
			t.Fatalf("created key: %q", got)
		}
		// WATCH inside MULTI is refused and aborts the transaction; UNWATCH
		// forgets the keys.
		c.do("WATCH", "{w}k")
		other.do("BF.ADD", "{w}k", "c")
		c.do("UNWATCH")
		c.do("MULTI")
		if got := c.do("WATCH", "{w}k"); got != "-ERR Command not allowed inside a transaction\r\n" {
			t.Fatalf("WATCH inside MULTI: %q", got)
		}
		if got := c.do("EXEC"); !strings.HasPrefix(got, "-EXECABORT") {
			t.Fatalf("EXEC after WATCH inside MULTI: %q", got)
		}
	}
}

// TestWatchRetryLoopLosesNoUpdate runs go-redis's optimistic loop from
// several clients at once: each reads how many items a filter holds and adds
// the item named by that number, inside WATCH. A lost update would add a
// number twice (the second add answers false) or leave the count short.
func TestWatchRetryLoopLosesNoUpdate(t *testing.T) {
	ts := mustStartServer(t, Config{})
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: ts.addr, PoolSize: 8, MaxRetries: -1})
	defer c.Close()
	const key = "{seq}n"
	if err := c.BFReserve(ctx, key, 1e-9, 10000).Err(); err != nil {
		t.Fatal(err)
	}
	const workers, each = 4, 25
	var mu sync.Mutex
	commits, aborts := 0, 0
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				for {
					err := c.Watch(ctx, func(tx *redis.Tx) error {
						n, err := tx.BFCard(ctx, key).Result()
						if err != nil {
							return err
						}
						var added *redis.BoolCmd
						_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
							added = p.BFAdd(ctx, key, fmt.Sprint(n))
							return nil
						})
						if err == nil && !added.Val() {
							return fmt.Errorf("worker %d: item %d added twice: an update was lost", w, n)
						}
						return err
					}, key)
					if errors.Is(err, redis.TxFailedErr) {
						mu.Lock()
						aborts++
						mu.Unlock()
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					commits++
					mu.Unlock()
					break
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n, err := c.BFCard(ctx, key).Result()
	if err != nil || n != workers*each || commits != workers*each {
		t.Fatalf("card %d (%v), %d commits, want %d", n, err, commits, workers*each)
	}
	t.Logf("%d commits, %d aborted and retried", commits, aborts)
}
