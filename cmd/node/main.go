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
//	rookery shards | node drain ID               a sharded cluster's shards; move replicas off a node
//	rookery import --key NAME [FILE...]          load keys, one per line, into a filter
//	rookery migrate --from URL                   copy the filters of a Redis with RedisBloom
//	rookery version                              version, commit and Go version
//
// Every flag can also be set as ROOKERY_<FLAG> in the environment.
//
// This file only wires the parts together: a command named by the first
// argument runs from the table below; anything else is the node's flags to
// an options value, then run (run.go) until a signal. The node's own parts
// stay in this package (run.go, flags.go, help.go, reload.go, security.go,
// faults.go, version.go); each tool lives in a package of its own under
// internal/:
//
//	internal/opscmd       members, status, raft, shards, node, wait
//	internal/snapshotcmd  snapshot save|restore|inspect
//	internal/migratecmd   migrate
//	internal/importcmd    import
//	internal/recovercmd   recover
//	internal/tlscmd       tls ca|cert|init
//	internal/probecmd     probe
//
// and share internal/command (what a command is), internal/flagerr (flag
// errors that say what to do), internal/respconn (a RESP target's flags and
// TLS), internal/datadir (the data directory's lock and identity, which
// recover honours as the node does) and internal/humanize.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/rookerydb/rookery/cmd/node/internal/command"
	"github.com/rookerydb/rookery/cmd/node/internal/flagerr"
	"github.com/rookerydb/rookery/cmd/node/internal/importcmd"
	"github.com/rookerydb/rookery/cmd/node/internal/migratecmd"
	"github.com/rookerydb/rookery/cmd/node/internal/opscmd"
	"github.com/rookerydb/rookery/cmd/node/internal/probecmd"
	"github.com/rookerydb/rookery/cmd/node/internal/recovercmd"
	"github.com/rookerydb/rookery/cmd/node/internal/snapshotcmd"
	"github.com/rookerydb/rookery/cmd/node/internal/tlscmd"
)

// commands are the binary's commands besides the node itself, in the order
// `rookery -h` lists them, then the aliases it does not list.
func commands() command.Table {
	version, help := versionCommand(), helpCommand()
	return command.Table{
		opscmd.Members(),
		opscmd.Status(),
		opscmd.Raft(),
		opscmd.Shards(),
		opscmd.Node(),
		opscmd.Wait(),
		snapshotcmd.Command(),
		migratecmd.Command(),
		importcmd.Command(),
		recovercmd.Command(),
		tlscmd.Command(),
		probecmd.Command(),
		version,
		command.Alias("--version", version),
		command.Alias("-version", version),
		help,
		command.Alias("-h", help),
		command.Alias("--help", help),
		command.Alias("-help", help),
	}
}

// helpCommand is `rookery help` (and -h, --help): the node's help, which
// lists the commands.
func helpCommand() command.Command {
	return command.Command{Name: "help", Run: func(_ []string, _ func(string) (string, bool), stdout, _ io.Writer) int {
		writeHelp(stdout)
		return 0
	}}
}

func main() {
	if len(os.Args) > 1 {
		cmds := commands()
		if cmd, ok := cmds.Lookup(os.Args[1]); ok {
			os.Exit(cmd.Run(os.Args[2:], os.LookupEnv, os.Stdout, os.Stderr))
		}
		// The node takes only flags: a first word is a command mistyped.
		if a := os.Args[1]; a != "" && !strings.HasPrefix(a, "-") {
			fmt.Fprintf(os.Stderr, "rookery: %v\nRun 'rookery -h' for the commands and the node's flags.\n",
				flagerr.UnknownCommand(a, cmds.Names()))
			os.Exit(2)
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
