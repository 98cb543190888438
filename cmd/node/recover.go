package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rookerydb/rookery/cluster"
)

const recoverUsage = `usage:
  rookery recover --data-dir DIR [--id ID]
      check the stopped node's log; if it is damaged, move the log and snapshots aside
      so that, started again as before, the node leaves the configuration and rejoins
      from its peers with a snapshot from the leader
  rookery recover --data-dir DIR --truncate-at N
      delete the log from entry N on (a single node, or no peer left to recover from),
      after printing exactly what that loses
  rookery recover --data-dir DIR --check
      only check the log, and say what is damaged
`

// recoverCommand is `rookery recover`; it returns the exit code.
func recoverCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rookery recover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, recoverUsage) }
	dir := fs.String("data-dir", "", "the stopped node's data directory")
	id := fs.String("id", "", "the node's id (default: the host name, as the node takes it)")
	at := fs.Uint64("truncate-at", 0, "delete the log from this entry on")
	check := fs.Bool("check", false, "only check the log")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	if *id == "" {
		*id, _ = os.Hostname()
	}
	err := cluster.CheckDataDir(*dir, *id)
	var dmg *cluster.LogDamage
	switch {
	case errors.As(err, &dmg):
		fmt.Fprintln(stdout, dmg.Error())
	case err != nil:
		fmt.Fprintln(stderr, "rookery recover:", err)
		return 1
	default:
		fmt.Fprintf(stdout, "the log in %s reads back whole\n", *dir)
	}
	switch {
	case *check:
		if dmg != nil {
			return 1
		}
		return 0
	case *at > 0:
		return truncate(*dir, *at, stdout, stderr)
	}
	reason := "rookery recover"
	if dmg != nil {
		reason = strings.SplitN(dmg.Error(), "\n", 2)[0]
	}
	rj, err := cluster.Recover(*dir, *id, reason)
	if err != nil {
		fmt.Fprintln(stderr, "rookery recover:", err)
		return 1
	}
	fmt.Fprintf(stdout, "moved the log and snapshots to %s\n", rj.Moved)
	fmt.Fprintf(stdout, "start the node as before: it asks the leader (one of %s) to remove it, then rejoins as a new member "+
		"and installs a snapshot from the leader; nothing a majority acknowledged is lost\n", peerIDs(rj.Peers))
	return 0
}

func truncate(dir string, at uint64, stdout, stderr io.Writer) int {
	t, err := cluster.Truncate(dir, at)
	if err != nil {
		fmt.Fprintln(stderr, "rookery recover:", err)
		return 1
	}
	fmt.Fprintf(stdout, "deleted log entries %d..%d: %d entries holding %d writes", t.From, t.To, t.Entries, t.Writes)
	if t.Unreadable > 0 {
		fmt.Fprintf(stdout, ", and %d of them too damaged to read", t.Unreadable)
	}
	fmt.Fprintf(stdout, "; the log now ends at %d\n", t.Remaining)
	for i, k := range t.Keys() {
		if i == 20 {
			fmt.Fprintf(stdout, "  ... and %d more keys\n", len(t.ByKey)-20)
			break
		}
		fmt.Fprintf(stdout, "  %q: %d writes lost\n", k, t.ByKey[k])
	}
	return 0
}

func peerIDs(ps []cluster.Peer) string {
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	return strings.Join(ids, ", ")
}
