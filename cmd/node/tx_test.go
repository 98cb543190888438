package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Transactions on real clusters: MULTI/EXEC and WATCH through every node of
// a three-node cluster, and of a sharded one where some node holds no
// replica of the key's shard (its WATCH and EXEC go to one that does).

func TestTransactionsOnAThreeNodeCluster(t *testing.T) {
	c := startCluster(t, 3)
	c.leader(30e9)
	var cs []redis.UniversalClient
	for _, m := range c.Nodes {
		cs = append(cs, client(t, m.RESP, 2))
	}
	checkTransactions(t, cs)
}

func TestTransactionsOnAShardedCluster(t *testing.T) {
	c := startSharded(t, 3, 3, 2) // every node lacks one shard
	var cs []redis.UniversalClient
	for _, m := range c.Nodes {
		cs = append(cs, client(t, m.RESP, 3))
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.RESPAddrs(), MaxRetries: -1})
	t.Cleanup(func() { cc.Close() })
	checkTransactions(t, append(cs, cc))

	// go-redis's ClusterClient runs one transaction per slot.
	ctx := context.Background()
	var a, b *redis.BoolCmd
	if _, err := cc.TxPipelined(ctx, func(p redis.Pipeliner) error {
		a = p.BFAdd(ctx, "{slot-a}k", "x")
		b = p.BFAdd(ctx, "{slot-b}k", "x")
		return nil
	}); err != nil || !a.Val() || !b.Val() {
		t.Fatalf("ClusterClient TxPipelined over two slots: %v %v %v", err, a.Val(), b.Val())
	}
}

// checkTransactions runs the transaction checks through clients cs, each
// connected to a different node (or routing itself).
func checkTransactions(t *testing.T, cs []redis.UniversalClient) {
	ctx := context.Background()
	for i, c := range cs {
		// All or nothing, through every node.
		key := fmt.Sprintf("{tx%d}", i)
		var added, found *redis.BoolCmd
		if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			added = p.BFAdd(ctx, key+"a", "x")
			p.CFAdd(ctx, key+"c", "y")
			found = p.BFExists(ctx, key+"a", "x")
			return nil
		}); err != nil || !added.Val() || !found.Val() {
			t.Fatalf("client %d TxPipelined: %v (%v %v)", i, err, added.Val(), found.Val())
		}
		// A bad command: EXECABORT, nothing applied.
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.BFAdd(ctx, key+"bad", "x")
			p.Do(ctx, "BF.ADD", key+"bad")
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), "EXECABORT") {
			t.Fatalf("client %d transaction with a bad command: %v", i, err)
		}
		if n, err := cs[(i+1)%len(cs)].Exists(ctx, key+"bad").Result(); err != nil || n != 0 {
			t.Fatalf("client %d: a transaction with a bad command applied (%d, %v)", i, n, err)
		}
	}
	// Two slots in one transaction: CROSSSLOT on a plain connection.
	if pc, ok := cs[0].(*redis.Client); ok {
		_, err := pc.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.BFAdd(ctx, "cross-a", "x")
			p.BFAdd(ctx, "cross-b", "x")
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
			t.Fatalf("two slots: %v", err)
		}
		if n, err := cs[1].Exists(ctx, "cross-a", "cross-b").Result(); err != nil || n != 0 {
			t.Fatalf("a CROSSSLOT transaction applied (%d, %v)", n, err)
		}
	}

	// WATCH's optimistic loop from every client at once: each reads how many
	// items the filter holds and adds the item named by that number. A lost
	// update adds a number twice (the add answers false) or leaves the count
	// short.
	const key, each = "{seq}n", 8
	if err := cs[0].BFReserve(ctx, key, 1e-9, 10000).Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	aborts := 0
	errs := make(chan error, len(cs))
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done := 0; done < each; {
				err := c.Watch(ctx, func(tx *redis.Tx) error {
					n, err := tx.BFCard(ctx, key).Result()
					if err != nil {
						return err
					}
					var add *redis.BoolCmd
					_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
						add = p.BFAdd(ctx, key, fmt.Sprint(n))
						return nil
					})
					if err == nil && !add.Val() {
						return fmt.Errorf("client %d: item %d added twice: an update was lost", i, n)
					}
					return err
				}, key)
				switch {
				case errors.Is(err, redis.TxFailedErr):
					mu.Lock()
					aborts++
					mu.Unlock()
				case err != nil:
					errs <- err
					return
				default:
					done++
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, c := range cs {
		if n, err := c.BFCard(ctx, key).Result(); err != nil || n != int64(each*len(cs)) {
			t.Fatalf("client %d reads %d items (%v), want %d", i, n, err, each*len(cs))
		}
	}
	t.Logf("%d transactions committed, %d aborted by WATCH and retried", each*len(cs), aborts)
}
