// Package opscmd holds the operator's commands: members, status, raft,
// shards, node drain and wait. They speak to a node's HTTP API
// (internal/toolclient) with the same flags and credentials as `rookery
// snapshot`, and print its answers as aligned text or, with --format json,
// as the node gave them.
package opscmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/cmd/node/internal/command"
	"github.com/rookerydb/rookery/cmd/node/internal/flagerr"
	"github.com/rookerydb/rookery/internal/toolclient"
)

// Members is `rookery members`.
func Members() command.Command {
	return command.Command{Name: "members", Synopsis: "the cluster's members, as gossip and raft see them", Run: membersCommand}
}

// Status is `rookery status`.
func Status() command.Command {
	return command.Command{Name: "status", Synopsis: "a node's view of itself", Run: statusCommand}
}

// Raft is `rookery raft list-peers|remove-peer|transfer-leader`.
func Raft() command.Command {
	return command.Command{Name: "raft", Synopsis: "list-peers, remove-peer ID, transfer-leader [ID]", Run: raftCommand}
}

const opsFlagsUsage = "flags:\n" + toolclient.FlagsUsage + `  --format text|json output as aligned text (default) or the node's JSON
` + opsAccess

// opsAccess says which user each command needs (transport's httpAuth).
const opsAccess = `
Each command acts as one user of the nodes (--user; the default user without
it). members, status, raft list-peers and shards need a user that is on;
raft remove-peer, raft transfer-leader and node drain one allowed every
command of @admin (+@admin); wait needs none.
`

const opsUsage = `usage:
  rookery members                    the cluster's members, as gossip and raft see them
  rookery status                     the node's view of itself
  rookery raft list-peers            the raft configuration: voters, non-voters, leader
  rookery raft remove-peer ID        remove server ID from the raft configuration
                                     (a running member removed so reports itself removed)
  rookery raft transfer-leader [ID]  hand leadership to ID, or to any other voter
                                     (raft commands act on the cluster's membership, or
                                     with --shard S on shard S's group)
  rookery wait [--timeout 30s]       wait until the node is ready (/readyz answers 200):
                                     each node of --addr; with no --addr, the first
                                     of the local defaults to be ready

` + opsFlagsUsage

// opsTimeout bounds one command's exchange with the node.
const opsTimeout = 30 * time.Second

// opsCmd is one operator command being run.
type opsCmd struct {
	name           string
	conn           toolclient.Config
	format         string
	timeout        time.Duration
	args           []string
	shard          int // --shard of the raft commands; -1: group 0
	stdout, stderr io.Writer
}

// parseOps reads the flags (before or after the positional arguments) of
// command name; minArgs and maxArgs bound the positional arguments.
func parseOps(name string, args []string, env func(string) (string, bool), stdout, stderr io.Writer, minArgs, maxArgs int) (*opsCmd, int) {
	c := &opsCmd{name: name, stdout: stdout, stderr: stderr, shard: -1}
	fs := flag.NewFlagSet("rookery "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var conn toolclient.Flags
	conn.Register(fs, env)
	if strings.HasPrefix(name, "raft ") {
		fs.IntVar(&c.shard, "shard", -1, "act on this shard's group rather than the cluster's membership")
	}
	fs.StringVar(&c.format, "format", "text", "text or json")
	fs.DurationVar(&c.timeout, "timeout", opsTimeout, "how long to wait")
	watch := flagerr.Watch(fs)
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stderr, opsUsage)
			} else {
				fmt.Fprintf(stderr, "rookery %s: %v (rookery %s -h for help)\n", name, watch.Explain(args, err), name)
			}
			return nil, 2
		}
		if fs.NArg() == 0 {
			break
		}
		c.args = append(c.args, fs.Arg(0))
		args = fs.Args()[1:]
	}
	var err error
	c.conn, err = conn.Config()
	switch {
	case err != nil:
	case len(c.args) < minArgs || len(c.args) > maxArgs:
		err = fmt.Errorf("want %s", argCount(minArgs, maxArgs))
	case c.format != "text" && c.format != "json":
		err = fmt.Errorf("--format %q: want text or json", c.format)
	case c.timeout <= 0:
		err = fmt.Errorf("--timeout %v: want a positive duration", c.timeout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "rookery %s: %v\n%s", name, err, opsUsage)
		return nil, 2
	}
	return c, 0
}

// client is the command's connection to the nodes; notes of addresses passed
// over go to stderr.
func (c *opsCmd) client() (*toolclient.Client, error) {
	cfg := c.conn
	cfg.Notes, cfg.HeaderTimeout = c.stderr, c.timeout
	return toolclient.New(cfg)
}

func argCount(lo, hi int) string {
	switch {
	case hi == 0:
		return "no arguments"
	case lo == hi:
		return fmt.Sprintf("exactly %d argument", lo)
	case lo == 0:
		return fmt.Sprintf("at most %d argument", hi)
	}
	return fmt.Sprintf("%d to %d arguments", lo, hi)
}

// call sends method path to the node (following a follower's redirect to the
// leader) and decodes its 200 answer into v; with --format json it copies the
// answer to stdout instead and returns handled.
func (c *opsCmd) call(method, path string, v any) (handled bool, err error) {
	cl, err := c.client()
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	resp, err := cl.Do(ctx, method, path, nil)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if c.format == "json" {
		_, err := io.Copy(c.stdout, resp.Body)
		return true, err
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return false, fmt.Errorf("%s answered %s with unreadable JSON: %v", resp.Request.URL.Host, path, err)
	}
	return false, nil
}

// fail reports err and returns the exit code 1.
func (c *opsCmd) fail(err error) int {
	fmt.Fprintf(c.stderr, "rookery %s: %v\n", c.name, err)
	return 1
}

func (c *opsCmd) table() *tabwriter.Writer { return tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0) }

// orDash shows an empty field as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// membersCommand is `rookery members`: GET /v1/nodes as a table.
func membersCommand(args []string, env func(string) (string, bool), stdout, stderr io.Writer) int {
	c, code := parseOps("members", args, env, stdout, stderr, 0, 0)
	if c == nil {
		return code
	}
	var nodes []cluster.NodeInfo
	if done, err := c.call(http.MethodGet, "/v1/nodes", &nodes); done || err != nil {
		return exitOf(c, err)
	}
	tw := c.table()
	fmt.Fprintln(tw, "Node\tRaft Address\tStatus\tRole\tSuffrage\tRESP Address\tHTTP Address")
	for _, n := range nodes {
		suffrage := "voter"
		switch {
		case n.Role == "none":
			suffrage = "none"
		case !n.Voter:
			suffrage = "nonvoter"
		}
		role := n.Role
		if role == "nonvoter" {
			role = "follower"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, orDash(n.RaftAddr), n.Health, role, suffrage, orDash(n.RESPAddr), orDash(n.HTTPAddr))
	}
	return exitOf(c, tw.Flush())
}

// statusCommand is `rookery status`: GET /v1/status, one field a line.
func statusCommand(args []string, env func(string) (string, bool), stdout, stderr io.Writer) int {
	c, code := parseOps("status", args, env, stdout, stderr, 0, 0)
	if c == nil {
		return code
	}
	var st cluster.Status
	if done, err := c.call(http.MethodGet, "/v1/status", &st); done || err != nil {
		return exitOf(c, err)
	}
	ready := "yes"
	if !st.Ready {
		ready = "no"
		if st.Problem != "" {
			ready += ": " + st.Problem
		}
	}
	leader := orDash(st.LeaderID)
	if st.LeaderRESP != "" {
		leader += " (RESP " + st.LeaderRESP + ")"
	}
	// On a sharded node the role, leader, term and indexes are the map
	// group's (group 0): say so, and list the shards after them.
	group := ""
	if st.Sharded || len(st.Shards) > 0 {
		group = " (map group)"
	}
	tw := c.table()
	fmt.Fprintf(tw, "Node\t%s\n", st.ID)
	fmt.Fprintf(tw, "Role%s\t%s\n", group, st.Role)
	fmt.Fprintf(tw, "Ready\t%s\n", ready)
	fmt.Fprintf(tw, "Leader%s\t%s\n", group, leader)
	fmt.Fprintf(tw, "Term%s\t%d\n", group, st.Term)
	fmt.Fprintf(tw, "Commit Index%s\t%d\n", group, st.CommitIndex)
	fmt.Fprintf(tw, "Applied Index%s\t%d\n", group, st.AppliedIndex)
	fmt.Fprintf(tw, "Last Contact%s\t%s\n", group, orDash(st.LastContact))
	fmt.Fprintf(tw, "Filters\t%d\n", st.Filters)
	fmt.Fprintf(tw, "Memory\t%d bytes\n", st.MemoryBytes)
	if group != "" {
		for _, l := range shardLines(c, st.Shards) {
			fmt.Fprintln(tw, l)
		}
	}
	return exitOf(c, tw.Flush())
}

// shardLines are status's lines of a sharded node, a shard a line: its
// replica here (role, leader, term, indexes, size), or for a shard it does
// not hold the shard's leader, from GET /v1/shards (a node too old to
// answer it gets the lines of its own replicas alone).
func shardLines(c *opsCmd, held []cluster.ShardStatus) []string {
	var all []cluster.ShardReport
	if _, err := c.call(http.MethodGet, "/v1/shards", &all); err != nil {
		all = nil
	}
	resp := map[string]string{} // node id -> RESP address
	for _, s := range all {
		for _, r := range s.Replicas {
			if r.RESPAddr != "" {
				resp[r.ID] = r.RESPAddr
			}
		}
	}
	leaderOf := func(id string) string {
		if id == "" {
			return "no leader"
		}
		if a := resp[id]; a != "" {
			return "leader " + id + " (RESP " + a + ")"
		}
		return "leader " + id
	}
	lines := map[int]string{}
	for _, s := range all {
		lines[s.ID] = fmt.Sprintf("Shard %d\tnot held here, %s", s.ID, leaderOf(s.Leader))
	}
	for _, s := range held {
		if s.Problem != "" {
			lines[s.Shard] = fmt.Sprintf("Shard %d\t%s: %s", s.Shard, s.Role, s.Problem)
			continue
		}
		lines[s.Shard] = fmt.Sprintf("Shard %d\t%s, %s, term %d, commit %d, applied %d, %d filters, %d bytes", s.Shard, s.Role,
			leaderOf(s.LeaderID), s.Term, s.CommitIndex, s.AppliedIndex, s.Filters, s.MemoryBytes)
	}
	out := make([]string, 0, len(lines))
	for _, s := range slices.Sorted(maps.Keys(lines)) {
		out = append(out, lines[s])
	}
	return out
}

const raftUsage = `usage:
  rookery raft list-peers [flags]
  rookery raft remove-peer [flags] ID
  rookery raft transfer-leader [flags] [ID]

` + opsFlagsUsage + `  --shard S          act on shard S's group (default: group 0, the cluster's membership)
`

// raftCommand is `rookery raft list-peers|remove-peer|transfer-leader`.
func raftCommand(args []string, env func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, raftUsage)
		return 2
	}
	switch args[0] {
	case "list-peers":
		return listPeers(args[1:], env, stdout, stderr)
	case "remove-peer":
		return removePeer(args[1:], env, stdout, stderr)
	case "transfer-leader":
		return transferLeader(args[1:], env, stdout, stderr)
	}
	fmt.Fprintf(stderr, "rookery raft: %v\n%s", flagerr.UnknownCommand(args[0], []string{"list-peers", "remove-peer", "transfer-leader"}), raftUsage)
	return 2
}

func listPeers(args []string, env func(string) (string, bool), stdout, stderr io.Writer) int {
	c, code := parseOps("raft list-peers", args, env, stdout, stderr, 0, 0)
	if c == nil {
		return code
	}
	var peers cluster.RaftPeers
	if done, err := c.call(http.MethodGet, c.withShard("/v1/raft/peers"), &peers); done || err != nil {
		return exitOf(c, err)
	}
	tw := c.table()
	fmt.Fprintln(tw, "Node\tAddress\tState\tVoter\tLast Index\tApplied Index\tLast Contact")
	for _, p := range peers.Servers {
		last, applied := "-", "-"
		if p.Reachable {
			last, applied = fmt.Sprint(p.LastIndex), fmt.Sprint(p.AppliedIndex)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%s\t%s\t%s\n", p.ID, p.Address, p.State, p.Voter, last, applied, orDash(p.LastContact))
	}
	return exitOf(c, tw.Flush())
}

func removePeer(args []string, env func(string) (string, bool), stdout, stderr io.Writer) int {
	c, code := parseOps("raft remove-peer", args, env, stdout, stderr, 1, 1)
	if c == nil {
		return code
	}
	id := c.args[0]
	var res struct {
		Removed string `json:"removed"`
	}
	if done, err := c.call(http.MethodPost, c.withShard("/v1/raft/remove-peer?id="+url.QueryEscape(id)), &res); done || err != nil {
		return exitOf(c, err)
	}
	fmt.Fprintf(stdout, "removed %s from the raft configuration\n", id)
	// A member gossip still reports alive stays out and says it was removed;
	// tell the operator what that node needs.
	var nodes []cluster.NodeInfo
	if _, err := c.call(http.MethodGet, "/v1/nodes", &nodes); err == nil {
		for _, n := range nodes {
			if n.ID == id && n.Health == "alive" {
				fmt.Fprintf(stderr, "note: gossip still reports %s alive: if it is running, it now reports itself removed; "+
					"stop it, and to bring it back move its data directory aside and start it with --join\n", id)
			}
		}
	}
	return 0
}

func transferLeader(args []string, env func(string) (string, bool), stdout, stderr io.Writer) int {
	c, code := parseOps("raft transfer-leader", args, env, stdout, stderr, 0, 1)
	if c == nil {
		return code
	}
	path := "/v1/raft/transfer-leader"
	if len(c.args) == 1 {
		path += "?id=" + url.QueryEscape(c.args[0])
	}
	path = c.withShard(path)
	var res struct {
		Leader string `json:"leader"`
		Moved  *bool  `json:"moved"` // nil from a node that does not say
	}
	if done, err := c.call(http.MethodPost, path, &res); done || err != nil {
		return exitOf(c, err)
	}
	if res.Moved != nil && !*res.Moved {
		fmt.Fprintf(stdout, "%s leads already: nothing moved\n", res.Leader)
		return 0
	}
	if res.Leader == "" {
		fmt.Fprintln(stdout, "leadership transferred; the new leader is not known yet")
		return 0
	}
	fmt.Fprintf(stdout, "leadership transferred: %s leads now\n", res.Leader)
	return 0
}

// withShard adds the --shard of a raft command to path.
func (c *opsCmd) withShard(path string) string {
	if c.shard < 0 {
		return path
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return fmt.Sprintf("%s%sshard=%d", path, sep, c.shard)
}

// exitOf is the exit code of a command that ended with err.
func exitOf(c *opsCmd, err error) int {
	if err != nil {
		return c.fail(err)
	}
	return 0
}
