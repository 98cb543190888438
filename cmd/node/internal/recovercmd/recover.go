// Package recovercmd is `rookery recover`: it works on a stopped node's data
// directory (under the same lock a running node holds, internal/datadir) to
// recover a damaged log, or a cluster that lost its quorum.
package recovercmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/cmd/node/internal/command"
	"github.com/rookerydb/rookery/cmd/node/internal/datadir"
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
  rookery recover --data-dir DIR --peers ID[=RAFTADDR],...
  rookery recover --data-dir DIR --peers-file FILE
      lost quorum: a majority of the voters is gone for good; rewrite the raft
      configuration of this stopped survivor to the peers given (itself among
      them), so that started as before it leads alone (or with the other
      survivors, each recovered with the same peers); new nodes then --join it.
      A peer's raft address may be left out when it is in the node's last
      configuration. FILE is JSON as Consul's peers.json:
        [{"id": "n1", "address": "10.0.0.1:6481", "non_voter": false}]

  Every form takes --shard S in a sharded cluster: it then works on the node's
  replica of shard S (DIR/shards/S+1) rather than on the cluster's map group.
`

// Command is `rookery recover`.
func Command() command.Command {
	return command.Command{Name: "recover", Synopsis: "recover a node whose log is damaged, or a cluster that lost its quorum",
		Run: func(args []string, _ func(string) (string, bool), stdout, stderr io.Writer) int {
			return recoverCommand(args, stdout, stderr)
		}}
}

// recoverCommand is `rookery recover`; it returns the exit code.
func recoverCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rookery recover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, recoverUsage) }
	dir := fs.String("data-dir", "", "the stopped node's data directory")
	id := fs.String("id", "", "the node's id (default: the one its data directory records, else the host name)")
	at := fs.Uint64("truncate-at", 0, "delete the log from this entry on")
	check := fs.Bool("check", false, "only check the log")
	peersFlag := fs.String("peers", "", "lost quorum: the new configuration, ID[=RAFTADDR],...")
	peersFile := fs.String("peers-file", "", "lost quorum: the new configuration as a JSON file (as Consul's peers.json)")
	shard := fs.Int("shard", -1, "work on the node's replica of this shard of a sharded cluster")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	var peers []cluster.RecoveryPeer
	if *peersFlag != "" || *peersFile != "" {
		var err error
		if peers, err = recoveryPeers(*peersFlag, *peersFile); err != nil || *check || *at > 0 {
			if err == nil {
				err = errors.New("--peers and --peers-file go without --check and --truncate-at")
			}
			fmt.Fprintln(stderr, "rookery recover:", err)
			return 2
		}
		if *id == "" && len(peers) == 1 {
			*id = peers[0].ID // the survivor recovered to lead alone
		}
	}
	if *id == "" {
		*id = datadir.StoredID(*dir) // the node the directory belongs to
	}
	if *id == "" {
		*id, _ = os.Hostname()
	}
	// A running node holds the directory: recovering under it would race its
	// writes. Refuse as a second node would be refused.
	unlock, err := datadir.Lock(*dir)
	if err != nil {
		fmt.Fprintln(stderr, "rookery recover:", err)
		return 1
	}
	defer unlock()
	if *shard >= 0 {
		sd := cluster.ShardDir(*dir, *shard)
		if _, err := os.Stat(sd); err != nil {
			fmt.Fprintf(stderr, "rookery recover: this node holds no replica of shard %d (%v)\n", *shard, err)
			return 1
		}
		*dir = sd
	}
	err = cluster.CheckDataDir(*dir, *id)
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
	case peers != nil:
		if dmg != nil {
			fmt.Fprintf(stderr, "rookery recover: the log is damaged; with no quorum to rejoin from, truncate it first "+
				"(rookery recover --data-dir %s --truncate-at %d), then recover the peers\n", *dir, dmg.Index)
			return 1
		}
		return recoverPeers(*dir, *id, peers, stdout, stderr)
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

// recoveryPeers reads the configuration of a lost-quorum recovery from
// --peers (ID[=RAFTADDR],...) or --peers-file (JSON, as Consul's peers.json).
func recoveryPeers(list, file string) ([]cluster.RecoveryPeer, error) {
	if list != "" && file != "" {
		return nil, errors.New("give --peers or --peers-file, not both")
	}
	var peers []cluster.RecoveryPeer
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&peers); err != nil {
			return nil, fmt.Errorf("%s: want a JSON array of {\"id\": ..., \"address\": ..., \"non_voter\": false}: %v", file, err)
		}
	} else {
		for _, f := range strings.Split(list, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			id, addr, _ := strings.Cut(f, "=")
			peers = append(peers, cluster.RecoveryPeer{ID: id, Raft: addr})
		}
	}
	if len(peers) == 0 {
		return nil, errors.New("no peers given")
	}
	for _, p := range peers {
		if p.ID == "" {
			return nil, errors.New("a peer without an id")
		}
		if p.Raft != "" {
			if _, _, err := net.SplitHostPort(p.Raft); err != nil {
				return nil, fmt.Errorf("peer %s: raft address %q: %v", p.ID, p.Raft, err)
			}
		}
	}
	return peers, nil
}

// recoverPeers rewrites the configuration and says what to do next.
func recoverPeers(dir, id string, peers []cluster.RecoveryPeer, stdout, stderr io.Writer) int {
	rc, err := cluster.RecoverPeers(dir, id, peers)
	if err != nil {
		fmt.Fprintln(stderr, "rookery recover:", err)
		return 1
	}
	fmt.Fprintf(stdout, "rewrote the raft configuration of %s (node %s)\n", dir, id)
	fmt.Fprintf(stdout, "  was: %s\n", describePeers(rc.Previous))
	fmt.Fprintf(stdout, "  now: %s\n", describePeers(rc.Servers))
	fmt.Fprintf(stdout, "the node's whole log is applied and kept as a snapshot at index %d (term %d): %d filters\n", rc.Index, rc.Term, rc.Filters)
	fmt.Fprintln(stdout, "next:")
	if len(rc.Servers) == 1 {
		fmt.Fprintln(stdout, "  1. start the node as before (its flags unchanged): it elects itself and leads alone")
	} else {
		fmt.Fprintln(stdout, "  1. recover every other survivor with the same peers, then start them all as before: they elect a leader among themselves")
	}
	fmt.Fprintln(stdout, "  2. start new nodes on empty data directories with --join <this node's gossip address>; the leader adds them and promotes them to voters once caught up")
	var lost []string
	in := map[string]bool{}
	for _, p := range rc.Servers {
		in[p.ID] = true
	}
	for _, p := range rc.Previous {
		if !in[p.ID] {
			lost = append(lost, p.ID)
		}
	}
	if len(lost) > 0 {
		fmt.Fprintf(stdout, "  never start %s again on their old data directories: wipe them first, then they may join as new members\n", strings.Join(lost, ", "))
	}
	return 0
}

func describePeers(ps []cluster.RecoveryPeer) string {
	if len(ps) == 0 {
		return "(none)"
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		kind := "voter"
		if p.NonVoter {
			kind = "non-voter"
		}
		out[i] = fmt.Sprintf("%s (%s, %s)", p.ID, p.Raft, kind)
	}
	return strings.Join(out, ", ")
}
