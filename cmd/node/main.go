// Command rookery runs one Rookery node: a Raft replica of every filter, served
// over RESP (redis-cli, any Redis client) and HTTP (health, status, metrics).
//
//	rookery --dev                      a single node, data in a temporary directory
//	rookery --id n1 --data-dir /var/lib/rookery --bootstrap-expect 3 ...
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
