// Command rookery runs one Rookery node: a Raft replica of every filter, served
// over RESP (redis-cli, any Redis client) and HTTP (health, status, metrics).
//
//	rookery --dev                      a single node, data in a temporary directory
//	rookery --id n1 --data-dir /var/lib/rookery --bootstrap-expect 3 ...
//	rookery probe http://127.0.0.1:6480/readyz   exit 0 if the URL answers 200
//
// Every flag can also be set as ROOKERY_<FLAG> in the environment. See run.go
// for how the parts are wired together.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "probe" {
		os.Exit(probe(os.Args[2:], os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.LookupEnv, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "rookery:", err)
		os.Exit(1)
	}
}
