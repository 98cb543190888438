package transport

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/internal/slot"
)

// Redis Cluster's view of the cluster (docs/SHARDING.md, "Routing"): each
// shard's slot range, with its leader as master and its other replicas as
// replicas, so go-redis's ClusterClient, redis-cli -c and redis-cli
// --cluster check route and inspect without a proxy hop. Asking for any of
// these maps makes the connection a cluster client, which is answered MOVED
// for a key this node does not serve (redirect.go); other connections are
// forwarded.

var clusterHelpRedis = []string{
	"SLOTS",
	"    Return each slot range with its master (the shard's leader) and replicas.",
	"SHARDS",
	"    Return each shard: its slot ranges and its nodes with role and health.",
	"NODES",
	"    Return the cluster's nodes in Redis Cluster's format.",
	"MEMBERS",
	"    Return the cluster's members, one per line: id, RESP, HTTP and Raft",
	"    addresses, role, voter or nonvoter, and health.",
	"KEYSLOT <key>",
	"    Return the hash slot of <key>.",
	"INFO",
	"    Return the state of the cluster, as Redis Cluster's CLUSTER INFO.",
	"MYID",
	"    Return this node's id (40 hex characters).",
	"COUNTKEYSINSLOT <slot>",
	"    Return the number of keys in <slot>.",
	"GETKEYSINSLOT <slot> <count>",
	"    Return key names stored by this node in <slot>.",
}

// redisNodeID is the 40-hex id Redis Cluster's formats give a node: the
// SHA-1 of its Rookery id, the same on every node.
func redisNodeID(id string) string {
	sum := sha1.Sum([]byte(id))
	return hex.EncodeToString(sum[:])
}

// hostPort splits a RESP address; a bad one gives ("", 0).
func hostPort(addr string) (string, int) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0
	}
	return h, port
}

// ordered lists a shard's replicas that clients can reach (a RESP address),
// its leader first.
func ordered(sh cluster.ShardInfo) []cluster.ShardReplica {
	var out []cluster.ShardReplica
	for _, r := range sh.Replicas {
		if r.RESPAddr == "" {
			continue
		}
		if r.ID == sh.Leader {
			out = append([]cluster.ShardReplica{r}, out...)
		} else {
			out = append(out, r)
		}
	}
	return out
}

// parseClusterSlots: CLUSTER SLOTS, one entry per shard: first slot, last
// slot, then [host, port, id, {}] of its leader and of each other replica.
// A shard with no leader known is listed with its replicas all the same, its
// first as master: clients try it and are told CLUSTERDOWN, as they would be.
func parseClusterSlots(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) {
		c.markClusterClient()
		shards := s.be.Shards()
		w.array(len(shards))
		for _, sh := range shards {
			reps := ordered(sh)
			w.array(2 + len(reps))
			w.int(int64(sh.First))
			w.int(int64(sh.Last))
			for _, r := range reps {
				host, port := hostPort(r.RESPAddr)
				w.array(4)
				w.bulkString(host)
				w.int(int64(port))
				w.bulkString(redisNodeID(r.ID))
				w.mapHeader(0)
			}
		}
	}), nil
}

// parseClusterShards: CLUSTER SHARDS, Redis 7's map per shard: "slots" (a
// flat list of range ends) and "nodes" (id, port, ip, endpoint, role,
// replication-offset, health).
func parseClusterShards(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) {
		c.markClusterClient()
		shards := s.be.Shards()
		w.array(len(shards))
		for _, sh := range shards {
			reps := ordered(sh)
			w.mapHeader(2)
			w.bulkString("slots")
			w.array(2)
			w.int(int64(sh.First))
			w.int(int64(sh.Last))
			w.bulkString("nodes")
			w.array(len(reps))
			for _, r := range reps {
				host, port := hostPort(r.RESPAddr)
				role, health := "replica", "online"
				if r.ID == sh.Leader {
					role = "master"
				}
				if r.Health != "alive" {
					health = "failed"
				}
				w.mapHeader(7)
				w.bulkString("id")
				w.bulkString(redisNodeID(r.ID))
				w.bulkString("port")
				w.int(int64(port))
				w.bulkString("ip")
				w.bulkString(host)
				w.bulkString("endpoint")
				w.bulkString(host)
				w.bulkString("role")
				w.bulkString(role)
				w.bulkString("replication-offset")
				w.int(0)
				w.bulkString("health")
				w.bulkString(health)
			}
		}
	}), nil
}

// parseClusterNodes: CLUSTER NODES in Redis Cluster's format, one line per
// member: "id host:port@raftport flags master ping pong epoch link slots...",
// the masters and slaves of the projection for Redis Cluster's tools
// (rediscluster_nodes.go; CLUSTER SLOTS and SHARDS say exactly who leads).
func parseClusterNodes(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) {
		c.markClusterClient()
		w.bulkString(clusterNodesText(s))
	}), nil
}

func clusterNodesText(s *Server) string {
	self := s.selfID()
	nodes := s.be.Nodes()
	nv := projectNodes(s.be.Shards(), nodes)
	var b strings.Builder
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	for _, n := range nodes {
		if n.RESPAddr == "" {
			continue
		}
		_, cport := hostPort(n.RaftAddr)
		var flags []string
		if n.ID == self {
			flags = append(flags, "myself")
		}
		master, epoch := "-", 0
		if m, ok := nv.replicaOf[n.ID]; ok {
			flags = append(flags, "slave")
			master = redisNodeID(m)
		} else {
			flags = append(flags, "master")
			if owns := nv.owns[n.ID]; len(owns) > 0 {
				epoch = owns[0].ID + 1
			}
		}
		link := "connected"
		if n.Health != "alive" && n.ID != self {
			flags = append(flags, "fail")
			link = "disconnected"
		}
		fmt.Fprintf(&b, "%s %s@%d %s %s 0 0 %d %s", redisNodeID(n.ID), n.RESPAddr, cport,
			strings.Join(flags, ","), master, epoch, link)
		for _, sh := range nv.owns[n.ID] {
			if sh.First == sh.Last {
				fmt.Fprintf(&b, " %d", sh.First)
			} else {
				fmt.Fprintf(&b, " %d-%d", sh.First, sh.Last)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// parseClusterKeyslot: CLUSTER KEYSLOT key, the key's hash slot.
func parseClusterKeyslot(s *Server, args [][]byte) (op, error) {
	n := slot.Of(args[2])
	return localOp(func(c *session, w *reply) { w.int(int64(n)) }), nil
}

// parseClusterMyID: CLUSTER MYID, this node's Redis Cluster id.
func parseClusterMyID(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) { w.bulkString(redisNodeID(s.be.Status().ID)) }), nil
}

// parseClusterInfo: CLUSTER INFO, as Redis Cluster words it: the cluster is
// "ok" when every shard has a leader.
func parseClusterInfo(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) {
		st := s.be.Status()
		shards := s.be.Shards()
		ok, leaders := 0, map[string]bool{}
		for _, sh := range shards {
			if sh.Leader != "" {
				ok += sh.Last - sh.First + 1
				leaders[sh.Leader] = true
			}
		}
		state := "ok"
		if ok < slot.Count {
			state = "fail"
		}
		var b strings.Builder
		field := func(k string, v any) { fmt.Fprintf(&b, "%s:%v\r\n", k, v) }
		field("cluster_enabled", 1)
		field("cluster_state", state)
		field("cluster_slots_assigned", slot.Count)
		field("cluster_slots_ok", ok)
		field("cluster_slots_pfail", 0)
		field("cluster_slots_fail", slot.Count-ok)
		field("cluster_known_nodes", len(s.be.Nodes()))
		field("cluster_size", len(leaders))
		field("cluster_current_epoch", st.Term)
		field("cluster_my_epoch", st.Term)
		field("cluster_stats_messages_sent", 0)
		field("cluster_stats_messages_received", 0)
		field("total_cluster_links_buffer_limit_exceeded", 0)
		w.verbatim(b.String())
	}), nil
}
