package transport

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/rookerydb/rookery/cluster"
)

// INFO replication maps Raft onto Redis's replication: the leader is the
// master, every other node a replica (slave) of it. Offsets are log indexes:
// a replica's offset is the last entry it has applied, the master's its own
// applied index. The replication id names a leadership: the same on every
// node for one leader in one term, new at each election, as Redis's replid is
// new after a failover.

// replPeersTimeout bounds how long INFO waits for the followers' answers.
const replPeersTimeout = 500 * time.Millisecond

// replica is a follower as the leader's INFO lists it.
type replica struct {
	host       string
	port       int
	offset     uint64
	lagSeconds int64
}

func (s *Server) infoReplication(b *infoBuf) {
	st := s.be.Status()
	replID := replicationID(st)
	if st.Role == "leader" {
		reps := s.replicas(st)
		b.field("role", "master")
		b.field("connected_slaves", len(reps))
		for i, r := range reps {
			b.field("slave"+strconv.Itoa(i), fmt.Sprintf("ip=%s,port=%d,state=online,offset=%d,lag=%d",
				r.host, r.port, r.offset, r.lagSeconds))
		}
	} else {
		s.infoReplicaOf(b, st)
		b.field("connected_slaves", 0)
	}
	b.field("master_failover_state", "no-failover")
	b.field("master_replid", replID)
	b.field("master_replid2", "0000000000000000000000000000000000000000")
	b.field("master_repl_offset", st.AppliedIndex)
	b.field("second_repl_offset", -1)
}

// infoReplicaOf describes a node that is not the leader: a follower, a
// candidate, or a node out of the configuration. Its link to the master is up
// while it follows a known leader; last_io is how long ago it last heard from
// it. A non-voter can never become leader, which Redis says with a priority
// of 0.
func (s *Server) infoReplicaOf(b *infoBuf, st cluster.Status) {
	host, port := splitHostPort(st.LeaderRESP)
	up := st.Role == "follower" && st.LeaderID != ""
	lastIO := int64(-1)
	if d, err := time.ParseDuration(st.LastContact); err == nil {
		lastIO = int64(d / time.Second)
	}
	b.field("role", "slave")
	b.field("master_host", host)
	b.field("master_port", port)
	b.field("master_link_status", map[bool]string{true: "up", false: "down"}[up])
	b.field("master_last_io_seconds_ago", lastIO)
	b.field("master_sync_in_progress", 0)
	b.field("slave_read_repl_offset", st.CommitIndex)
	b.field("slave_repl_offset", st.AppliedIndex)
	if !up {
		b.field("master_link_down_since_seconds", lastIO)
	}
	priority := 100
	for _, n := range s.be.Nodes() {
		if n.ID == st.ID && !n.Voter {
			priority = 0
		}
	}
	b.field("slave_priority", priority)
	b.field("slave_read_only", 1)
	b.field("replica_announced", 1)
}

// replicas are the followers the leader reaches now, each with the index it
// has applied, from the Raft configuration (asking each server, as `rookery
// raft list-peers` does). A backend without Raft operations lists the other
// members gossip reports alive, with offsets it cannot know (0).
func (s *Server) replicas(st cluster.Status) []replica {
	resp := map[string]string{}
	for _, n := range s.be.Nodes() {
		resp[n.ID] = n.RESPAddr
	}
	var out []replica
	op, ok := s.be.(RaftOperator)
	if !ok {
		for _, n := range s.be.Nodes() {
			if n.ID != st.ID && n.Health == "alive" {
				host, port := splitHostPort(n.RESPAddr)
				out = append(out, replica{host: host, port: port})
			}
		}
		return out
	}
	ctx, cancel := context.WithTimeout(s.ctx, replPeersTimeout)
	defer cancel()
	peers, err := op.RaftPeers(ctx, -1)
	if err != nil {
		return nil
	}
	for _, p := range peers.Servers {
		if p.ID == st.ID || !p.Reachable {
			continue
		}
		host, port := splitHostPort(resp[p.ID])
		lag := int64(0)
		if d, err := time.ParseDuration(p.LastContact); err == nil {
			lag = int64(d / time.Second)
		}
		out = append(out, replica{host: host, port: port, offset: p.AppliedIndex, lagSeconds: lag})
	}
	return out
}

// replicationID is 40 hex digits naming the current leadership (leader id and
// term), or zeros when there is no leader.
func replicationID(st cluster.Status) string {
	if st.LeaderID == "" {
		return "0000000000000000000000000000000000000000"
	}
	sum := sha1.Sum([]byte(st.LeaderID + "\x00" + strconv.FormatUint(st.Term, 10)))
	return hex.EncodeToString(sum[:])
}

// splitHostPort splits a RESP address; "" and 0 for one it cannot.
func splitHostPort(addr string) (string, int) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0
	}
	port, _ := strconv.Atoi(p)
	return host, port
}
