package transport

import (
	"fmt"
	"strings"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/fsm"
)

func clusterCommands() []*command {
	return []*command{
		{name: "readonly", arity: 1, flags: flagsConn, parse: parseReadOnly},
		{name: "readwrite", arity: 1, flags: flagsConn, parse: parseReadWrite},
		{name: "asking", arity: 1, flags: flagsConn, parse: parseAsking},
		{name: "role", arity: 1, flags: flagsConn, parse: parseRole},
		{name: "cluster", arity: -2, flags: flagsAdminish, subs: []*command{
			{name: "slots", arity: 2, flags: flagsAdminish, parse: parseClusterSlots},
			{name: "shards", arity: 2, flags: flagsAdminish, parse: parseClusterShards},
			{name: "nodes", arity: 2, flags: flagsAdminish, parse: parseClusterNodes},
			{name: "members", arity: 2, flags: flagsAdminish, parse: parseClusterMembers},
			{name: "keyslot", arity: 3, flags: flagsAdminish, parse: parseClusterKeyslot},
			{name: "info", arity: 2, flags: flagsAdminish, parse: parseClusterInfo},
			{name: "myid", arity: 2, flags: flagsAdminish, parse: parseClusterMyID},
			{name: "countkeysinslot", arity: 3, flags: flagsRead, parse: parseClusterCountKeysInSlot},
			{name: "getkeysinslot", arity: 4, flags: flagsRead, parse: parseClusterGetKeysInSlot},
			{name: "help", arity: 2, flags: flagsAdminish, parse: helpParser(clusterHelpRedis)},
		}},
		{name: "idem", arity: -4, flags: flagsWrite, firstKey: 4, lastKey: 4, step: 1, parse: parseIdem},
	}
}

// parseReadOnly: READONLY, this connection reads the node's local state
// (stale). Redis Cluster's clients send it to read from replicas, so it also
// makes the connection a cluster client (redirect.go).
func parseReadOnly(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) {
		c.set(func() { c.level = cluster.ReadStale })
		c.markClusterClient()
		w.ok()
	}), nil
}

// parseReadWrite: READWRITE, back to linearizable reads.
func parseReadWrite(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) { c.set(func() { c.level = cluster.ReadLinearizable }); w.ok() }), nil
}

// parseRole: ROLE, [role, leader id, leader RESP address, term, commit index,
// applied index]. The role is leader, follower or candidate, or "removed" on a
// node out of the configuration it was in (/readyz and /v1/status say what to
// do), so that redis-cli shows it.
func parseRole(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) {
		st := s.be.Status()
		w.array(6)
		w.bulkString(st.Role)
		w.bulkString(st.LeaderID)
		w.bulkString(st.LeaderRESP)
		w.uint(st.Term)
		w.uint(st.CommitIndex)
		w.uint(st.AppliedIndex)
	}), nil
}

// parseClusterMembers: CLUSTER MEMBERS, one line per member:
// "id resp_addr http_addr raft_addr role voter|nonvoter health" (what
// CLUSTER NODES answered before it took Redis Cluster's format).
func parseClusterMembers(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) {
		var b strings.Builder
		for _, n := range s.be.Nodes() {
			voter := "nonvoter"
			if n.Voter {
				voter = "voter"
			}
			fmt.Fprintf(&b, "%s %s %s %s %s %s %s\n", dash(n.ID), dash(n.RESPAddr), dash(n.HTTPAddr),
				dash(n.RaftAddr), dash(n.Role), voter, dash(n.Health))
		}
		w.bulkString(b.String())
	}), nil
}

// dash keeps a node line's fields positional when one is unknown.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// parseIdem: IDEM client_id seq command [args...] runs the command with a
// session, so the state machine applies it at most once and answers a replay
// with the first answer. Reads and connection commands pass through unchanged.
func parseIdem(s *Server, args [][]byte) (op, error) {
	client, ok := parseUint64(args[1])
	if !ok {
		return op{}, redisError("ERR invalid client id")
	}
	seq, ok := parseUint64(args[2])
	if !ok || seq == 0 {
		return op{}, redisError("ERR invalid sequence number")
	}
	inner := args[3:]
	if keyword(inner[0], "IDEM") {
		return op{}, redisError("ERR IDEM cannot wrap IDEM")
	}
	cmd, err := s.resolve(inner)
	if cmd == nil {
		return op{name: "unknown"}, err
	}
	if err != nil {
		return op{name: cmd.name, def: cmd, rejected: true}, err
	}
	o, err := cmd.parse(s, inner)
	o.name, o.def = cmd.name, cmd
	if err == nil && o.kind == opWrite {
		o.cmd.Session = fsm.Session{ClientID: client, Seq: seq}
	}
	return o, err
}
