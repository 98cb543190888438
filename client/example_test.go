package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/rookerydb/rookery/client"
)

// The examples run under go test against real nodes (example_nodes_test.go):
// nodeAddr is a node's RESP address, such as "127.0.0.1:6479"; secureAddr is a
// node started with --resp-tls and --requirepass s3cret, and caFile the
// cluster's ca.pem.

// Connect to a cluster through any of its nodes; the client finds the others
// and the leader.
func ExampleNew() {
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Addrs: []string{nodeAddr}})
	if err != nil {
		log.Fatal(err) // wraps ErrUnavailable when no node answered
	}
	defer c.Close()

	added, err := c.BFAdd(ctx, "example:new", "alice")
	fmt.Println(added, err)
	// Output: true <nil>
}

// Connect to nodes that serve RESP over TLS (--resp-tls) and want a password
// (--requirepass). Options.TLS takes a *tls.Config instead of the files.
func ExampleNew_tls() {
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{
		Addrs:    []string{secureAddr},
		CAFile:   caFile,   // the cluster's ca.pem, from `rookery tls ca`
		Password: "s3cret", // the nodes' --requirepass
		// CertFile and KeyFile: a client certificate, for --tls-client-auth.
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	added, err := c.CFAddNX(ctx, "example:tls", "C-1")
	fmt.Println(added, err)

	// The wrong password is refused at once, and nothing is applied.
	_, err = client.New(ctx, client.Options{Addrs: []string{secureAddr}, CAFile: caFile, Password: "guess"})
	fmt.Println(errors.Is(err, client.ErrAuth))
	// Output:
	// true <nil>
	// true
}

// A Bloom filter answers "definitely not" or "probably yes".
func ExampleClient_BFAdd() {
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Addrs: []string{nodeAddr}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// Size the filter for what it will hold; BF.ADD would create a small one.
	if err := c.BFReserve(ctx, "example:users", 0.001, 100000, nil); err != nil {
		log.Fatal(err)
	}
	added, _ := c.BFAdd(ctx, "example:users", "alice")
	again, _ := c.BFAdd(ctx, "example:users", "alice")
	seen, _ := c.BFExists(ctx, "example:users", "alice")
	unseen, _ := c.BFExists(ctx, "example:users", "mallory")
	fmt.Println(added, again, seen, unseen)
	// Output: true false true false
}

// Redeem a coupon: the cuckoo filter holds the coupons issued and not yet
// used, so a "no" needs no database lookup; a "yes" is checked against the
// store of record, which decides, and then the coupon leaves the filter.
func ExampleClient_CFDel() {
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Addrs: []string{nodeAddr}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	const filter = "example:coupons"
	store := map[string]bool{} // code -> used; a database in a real service
	for _, code := range []string{"C-1001", "C-1002"} {
		store[code] = false
		// ADDNX: issuing again after a retry stores no second copy.
		if _, err := c.CFAddNX(ctx, filter, code); err != nil {
			log.Fatal(err)
		}
	}
	redeem := func(code string) string {
		if ok, err := c.CFExists(ctx, filter, code); err != nil {
			return "try again later" // ErrUnavailable: a read is never indeterminate
		} else if !ok {
			return "unknown" // never issued, or already used: no store lookup
		}
		used, issued := store[code]
		switch {
		case !issued:
			return "unknown" // a false positive of the filter
		case used:
			return "already redeemed"
		}
		// Mark it used in the store, with a key for the filter's delete kept
		// alongside; then delete. Only codes the store issued are deleted: a
		// forged code could share a fingerprint with a valid one.
		store[code] = true
		key := c.NewKey()
		_, err := c.CFDel(client.WithKey(ctx, key), filter, code)
		switch {
		case errors.Is(err, client.ErrIndeterminate):
			// The delete may have happened. The store has decided; retry the
			// delete later under the same key: it deletes at most once.
		case errors.Is(err, client.ErrUnavailable):
			// Not deleted; retry later. Until then the filter says "yes" and
			// the store says "already redeemed".
		case err != nil:
			log.Fatal(err)
		}
		return "redeemed"
	}
	fmt.Println(redeem("C-1001"))
	fmt.Println(redeem("C-1001"))
	fmt.Println(redeem("C-1002"))
	fmt.Println(redeem("C-9999"))
	// Output:
	// redeemed
	// unknown
	// redeemed
	// unknown
}

// A write that may have to be retried in a later call, or by another process,
// goes out under a Key: every attempt under it is applied at most once in all
// and answered with the first answer.
func ExampleWithKey() {
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Addrs: []string{nodeAddr}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	const filter = "example:keyed"
	_ = c.CFAdd(ctx, filter, "C-1")
	_ = c.CFAdd(ctx, filter, "C-1") // a multiset: two copies

	key := c.NewKey()
	stored := key.String() // keep it with the record the write belongs to
	first, _ := c.CFDel(client.WithKey(ctx, key), filter, "C-1")

	// Later, perhaps after ErrIndeterminate or a restart: the same delete.
	again, _ := client.ParseKey(stored)
	second, _ := c.CFDel(client.WithKey(ctx, again), filter, "C-1")
	copies, _ := c.CFCount(ctx, filter, "C-1")
	fmt.Println(first, second, copies)
	// Output: true true 1
}

// A counting Bloom filter can forget what it was told.
func ExampleClient_CBFAdd() {
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Addrs: []string{nodeAddr}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	const filter = "example:sessions"
	if err := c.CBFReserve(ctx, filter, 0.001, 10000, nil); err != nil {
		log.Fatal(err)
	}
	first, _ := c.CBFAdd(ctx, filter, "user-7")
	_, _ = c.CBFAdd(ctx, filter, "user-7")
	n, _ := c.CBFCount(ctx, filter, "user-7")
	_, _ = c.CBFDel(ctx, filter, "user-7")
	still, _ := c.CBFExists(ctx, filter, "user-7")
	_, _ = c.CBFDel(ctx, filter, "user-7")
	gone, _ := c.CBFExists(ctx, filter, "user-7")
	fmt.Println(first, n, still, gone)
	// Output: true 2 true false
}

// Add many items at once: AddAll cuts them into chunks (one write each,
// exactly once) and keeps several in flight.
func ExampleClient_AddAll() {
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Addrs: []string{nodeAddr}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	if err := c.BFReserve(ctx, "example:batch", 0.001, 100000, nil); err != nil {
		log.Fatal(err)
	}
	added, err := c.AddAll(ctx, client.KindBloom, "example:batch",
		[]string{"a", "b", "c", "a"}, &client.BulkOptions{NoCreate: true})
	fmt.Println(added, err)
	// Output: [true true true false] <nil>
}

// Stream items of unknown number into a filter, as an importer does; Acked is
// where to resume after a failure.
func ExampleClient_NewBulk() {
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Addrs: []string{nodeAddr}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	if err := c.CFReserve(ctx, "example:bulk", 20000, &client.CFReserveOptions{BucketSize: 4}); err != nil {
		log.Fatal(err)
	}
	added := 0
	b := c.NewBulk(ctx, client.KindCuckoo, "example:bulk", client.BulkOptions{
		Chunk: 1000, InFlight: 4, NoCreate: true,
		NX: true, // CF.INSERTNX: loading the same items again adds nothing
		OnChunk: func(r client.ChunkResult) {
			for _, a := range r.Added {
				if a {
					added++
				}
			}
		},
	})
	for i := range 10000 {
		if err := b.Add(fmt.Sprint("item-", i)); err != nil {
			break // Close returns it too
		}
	}
	err = b.Close()
	fmt.Println(b.Acked(), err, added > 9500)
	// Output: 10000 <nil> true
}

// Queue commands and send them in one round trip; each write is still
// applied exactly once, and the reads see the writes before them.
func ExampleClient_Pipeline() {
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Addrs: []string{nodeAddr}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	p := c.Pipeline()
	add := p.BFAdd("example:pipe", "alice")
	madd := p.BFMAdd("example:pipe", "bob", "alice")
	seen := p.BFMExists("example:pipe", "bob", "carol")
	if err := p.Exec(ctx); err != nil {
		log.Fatal(err) // the first command's error; each Result has its own
	}
	fmt.Println(add.Val(), madd.Val(), seen.Val())
	// Output: true [true false] [true false]
}

// On a sharded cluster (--shards), keys that share a {hash tag} share a slot
// and so a shard: a pipeline over them goes straight to that shard's leader,
// one round trip and no forwarding hop, where one over keys of several shards
// goes to the cluster's leader, which forwards each command to its shard.
func ExamplePipeline_hashTag() {
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Addrs: []string{nodeAddr}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	p := c.Pipeline()
	following := p.BFAdd("{user1000}.following", "user2000")
	followers := p.BFAdd("{user1000}.followers", "user3000")
	if err := p.Exec(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(following.Val(), followers.Val())
	// Output: true true
}

// Reads are linearizable unless the context asks for the serving node's local
// state, which costs no round trip to the leader and may miss the latest
// writes.
func ExampleWithReadLevel() {
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Addrs: []string{nodeAddr}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	_, _ = c.BFAdd(ctx, "example:levels", "alice")
	lin, _ := c.BFExists(ctx, "example:levels", "alice")
	stale, _ := c.BFExists(client.WithReadLevel(ctx, client.ReadStale), "example:levels", "alice")
	// On this single node, the write is applied before it is acknowledged.
	fmt.Println(lin, stale)
	// Output: true true
}

// What a caller does after each kind of error.
func Example_errors() {
	ctx := context.Background()

	// Nothing listens at 127.0.0.1:1: no node can be reached, nothing is sent.
	_, err := client.New(ctx, client.Options{Addrs: []string{"127.0.0.1:1"}, DialTimeout: time.Second})
	fmt.Println(errors.Is(err, client.ErrUnavailable), errors.Is(err, client.ErrIndeterminate))

	c, err := client.New(ctx, client.Options{Addrs: []string{nodeAddr}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	key := c.NewKey()
	var added bool
	for attempt := 1; ; attempt++ {
		wctx, cancel := context.WithTimeout(client.WithKey(ctx, key), 5*time.Second)
		added, err = c.CFAddNX(wctx, "example:errors", "C-1")
		cancel()
		if err == nil {
			break
		}
		switch {
		case errors.Is(err, client.ErrIndeterminate) && attempt < 3:
			// It may have been applied. Under the same key, a retry is
			// applied at most once in all and returns the first answer.
		case errors.Is(err, client.ErrUnavailable) && attempt < 3:
			// Not applied: the cluster could not take it now. Safe to retry.
			time.Sleep(time.Second)
		default:
			// Any other error is an answer (ErrNotFound, ErrFull, ErrAuth...):
			// not applied, and a retry would not change it. After the last
			// attempt, ErrIndeterminate stays unknown: keep the key and retry
			// later (within client.KeyLifetime), or read the state.
			log.Fatal(err)
		}
	}
	fmt.Println("added:", added)
	// Output:
	// true false
	// added: true
}
