package opscmd

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/cmd/node/internal/command"
	"github.com/rookerydb/rookery/cmd/node/internal/flagerr"
)

// Shards is `rookery shards`.
func Shards() command.Command {
	return command.Command{Name: "shards", Synopsis: "the shards of a sharded cluster: slots, replicas, leader, size", Run: shardsCommand}
}

// Node is `rookery node drain [--undo] ID`.
func Node() command.Command {
	return command.Command{Name: "node", Synopsis: "drain ID: move every replica off a node before it is retired", Run: nodeCommand}
}

// shardsCommand is `rookery shards`: GET /v1/shards as a table, a shard a
// line: its slots, leader, commit index, filters and bytes, and each replica
// with its state.
func shardsCommand(args []string, env func(string) (string, bool), stdout, stderr io.Writer) int {
	c, code := parseOps("shards", args, env, stdout, stderr, 0, 0)
	if c == nil {
		return code
	}
	var shards []cluster.ShardReport
	if done, err := c.call(http.MethodGet, "/v1/shards", &shards); done || err != nil {
		return exitOf(c, err)
	}
	tw := c.table()
	fmt.Fprintln(tw, "Shard\tSlots\tLeader\tIndex\tFilters\tBytes\tReplicas")
	for _, s := range shards {
		var reps []string
		for _, r := range s.Replicas {
			st := s.Status[r.ID]
			reps = append(reps, fmt.Sprintf("%s(%s)", r.ID, st.State))
		}
		sort.Strings(reps)
		fmt.Fprintf(tw, "%d\t%d-%d\t%s\t%d\t%d\t%d\t%s\n", s.ID, s.First, s.Last, orDash(s.Leader), s.Index, s.Filters, s.Bytes,
			strings.Join(reps, " "))
	}
	return exitOf(c, tw.Flush())
}

const nodeUsage = `usage:
  rookery node drain [flags] ID        move every replica and leadership off node ID
  rookery node drain --undo [flags] ID  let node ID hold replicas again

` + opsFlagsUsage

// nodeCommand is `rookery node drain [--undo] ID`.
func nodeCommand(args []string, env func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "drain" {
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") && args[0] != "help" {
			fmt.Fprintf(stderr, "rookery node: %v\n", flagerr.UnknownCommand(args[0], []string{"drain"}))
		}
		fmt.Fprint(stderr, nodeUsage)
		return 2
	}
	args = args[1:]
	undo := false
	for i, a := range args {
		if a == "--undo" || a == "-undo" {
			undo = true
			args = append(args[:i:i], args[i+1:]...)
			break
		}
	}
	c, code := parseOps("node drain", args, env, stdout, stderr, 1, 1)
	if c == nil {
		return code
	}
	id := c.args[0]
	path := "/v1/drain?id=" + url.QueryEscape(id)
	if undo {
		path += "&undo=1"
	}
	var res struct {
		Draining bool  `json:"draining"`
		Holds    []int `json:"holds"`  // nil from a node that does not say
		Fenced   []int `json:"fenced"` // shards a recovery fenced the node off
	}
	if done, err := c.call(http.MethodPost, path, &res); done || err != nil {
		return exitOf(c, err)
	}
	if undo {
		fmt.Fprintf(stdout, "%s may hold replicas again; the cluster moves some back to it\n", id)
		return 0
	}
	if res.Holds != nil && len(res.Holds) == 0 {
		fmt.Fprintf(stdout, "%s holds no replica: nothing to move", id)
		if len(res.Fenced) > 0 {
			fmt.Fprintf(stdout, " (a recovery cut it off shard %s; it holds their old files until they are removed)", intList(res.Fenced))
		}
		fmt.Fprintln(stdout)
		return 0
	}
	fmt.Fprintf(stdout, "draining %s: its replicas and leadership move to the other nodes; `rookery shards` shows when none is left\n", id)
	return 0
}

// intList renders ints as "1, 2 and 3".
func intList(is []int) string {
	var b strings.Builder
	for i, v := range is {
		switch {
		case i == 0:
		case i == len(is)-1:
			b.WriteString(" and ")
		default:
			b.WriteString(", ")
		}
		fmt.Fprint(&b, v)
	}
	return b.String()
}
