// Command coupons redeems coupons exactly once against a Rookery cluster: a
// coupon is issued by adding it to a cuckoo filter and redeemed by deleting it,
// so a redeemed coupon is refused, even if the redeem request had to be retried
// across a leader change.
//
//	go run ./cmd/node --dev &
//	go run ./examples/coupons -addr 127.0.0.1:6479
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/rookerydb/rookery/client"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6479", "RESP address of any node")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c, err := client.New(ctx, client.Options{Addrs: []string{*addr}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	if err := c.CFReserve(ctx, "coupons", 100000, &client.CFReserveOptions{BucketSize: 4}); err != nil &&
		!errors.Is(err, client.ErrExists) {
		log.Fatal(err)
	}
	for _, code := range []string{"C-1001", "C-1002"} {
		if err := c.CFAdd(ctx, "coupons", code); err != nil {
			log.Fatal(err)
		}
		fmt.Println("issued", code)
	}
	for _, code := range []string{"C-1001", "C-1001", "C-1002"} {
		// CF.DEL goes out with a session and sequence number: retried after a
		// lost reply or a leader change, it still deletes one copy at most.
		ok, err := c.CFDel(ctx, "coupons", code)
		switch {
		case errors.Is(err, client.ErrIndeterminate):
			fmt.Println(code, "outcome unknown after every retry; it was redeemed at most once")
		case err != nil:
			log.Fatal(err)
		case ok:
			fmt.Println("redeemed", code)
		default:
			fmt.Println("refused", code, "(unknown or already redeemed)")
		}
	}
}
