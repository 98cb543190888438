// Command rookery runs one Rookery node: a Raft replica of every filter, served
// over RESP (redis-cli, any Redis client) and HTTP (health, status, metrics).
//
//	rookery --dev                      a single node, data in a temporary directory
//	rookery --id n1 --data-dir /var/lib/rookery --bootstrap-expect 3 ...
//	rookery probe http://127.0.0.1:6480/readyz   exit 0 if the URL answers 200
//	rookery tls ca|cert|init ...                 make the cluster's certificates
//	rookery snapshot save|restore|inspect ...    back up and restore the cluster
//	rookery recover --data-dir DIR [...]         recover a damaged node, or a lost quorum (--peers)
//	rookery members | status | wait              the cluster and a node, from its HTTP API
//	rookery raft list-peers|remove-peer|transfer-leader   the Raft configuration
//	rookery import --key NAME [FILE...]          load keys, one per line, into a filter
//	rookery migrate --from URL                   copy the filters of a Redis with RedisBloom
//	rookery version                              version, commit and Go version
//
// Every flag can also be set as ROOKERY_<FLAG> in the environment. See run.go
// for how the parts are wired together.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// subcommand runs one of the binary's tools: its arguments, the environment,
// stdout and stderr in, exit code out.
type subcommand func(args []string, env func(string) (string, bool), stdout, stderr io.Writer) int

// subcommands are the tools besides the node itself, registered by the files
// that implement them (init functions), so that adding one touches no other.
var subcommands = map[string]subcommand{}

func main() {
	if len(os.Args) > 1 {
		if cmd, ok := subcommands[os.Args[1]]; ok {
			os.Exit(cmd(os.Args[2:], os.LookupEnv, os.Stdout, os.Stderr))
		}
		switch os.Args[1] {
		case "probe":
			os.Exit(probe(os.Args[2:], os.Stderr))
		case "tls":
			os.Exit(tlsCommand(os.Args[2:], os.Stdout, os.Stderr))
		case "snapshot":
			os.Exit(snapshotCommand(os.Args[2:], os.LookupEnv, os.Stdout, os.Stderr))
		case "recover":
			os.Exit(recoverCommand(os.Args[2:], os.Stdout, os.Stderr))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first signal asks for a clean shutdown; a second ends the process
	// at once, as the signal's default does.
	go func() { <-ctx.Done(); stop() }()
	if err := run(ctx, os.Args[1:], os.LookupEnv, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "rookery:", err)
		os.Exit(1)
	}
}
