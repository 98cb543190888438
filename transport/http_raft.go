package transport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/rookerydb/rookery/cluster"
)

// The operator's Raft routes (`rookery raft ...`, as Consul's `consul
// operator raft`):
//
//	GET  /v1/raft/peers                   the configuration as this node sees it
//	POST /v1/raft/remove-peer?id=ID       remove server ID from the configuration
//	POST /v1/raft/transfer-leader[?id=ID] hand leadership to ID, or to any voter;
//	                                      {"leader": ID, "moved": false} if ID leads already
//
// Each acts on group 0 (the cluster's membership; on a cluster of one group,
// its only shard too), or with ?shard=S on shard S's group, which the node
// must hold. The changes are made by the group's leader: another node answers
// 307 Temporary Redirect to the leader's HTTP address, as the backup routes
// do. Like every
// POST they need a user allowed every command of @admin (httpAuth), or, with
// no credentials configured, a loopback peer; GET /v1/raft/peers needs any
// user.

// raftOpTimeout bounds one remove or transfer.
const raftOpTimeout = 15 * time.Second

// RaftOperator is what the Raft routes need from a node; cluster.Node
// implements it. A Backend that does not answers them 501.
type RaftOperator interface {
	RaftPeers(ctx context.Context, shard int) (cluster.RaftPeers, error)
	RemovePeer(ctx context.Context, shard int, id string) error
	TransferLeader(ctx context.Context, shard int, id string) (string, error)
}

// raftShard reads ?shard=S: -1 (group 0) when absent.
func (h *HTTPServer) raftShard(w http.ResponseWriter, r *http.Request) (int, bool) {
	q := r.URL.Query()
	if !q.Has("shard") {
		return -1, true
	}
	s, err := strconv.Atoi(q.Get("shard"))
	if n := h.be.ShardCount(); err != nil || s < 0 || s >= n {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("bad shard %q: the cluster has %d", q.Get("shard"), n)})
		return 0, false
	}
	return s, true
}

// redirectRaft sends a raft change to the leader of the group it names.
func (h *HTTPServer) redirectRaft(w http.ResponseWriter, r *http.Request, shard int) {
	if shard < 0 {
		h.redirectToLeader(w, r)
		return
	}
	h.redirectToShardLeader(w, r, shard)
}

// registerRaftRoutes adds the routes to mux.
func (h *HTTPServer) registerRaftRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/raft/peers", h.raftPeers)
	mux.HandleFunc("POST /v1/raft/remove-peer", h.removePeer)
	mux.HandleFunc("POST /v1/raft/transfer-leader", h.transferLeader)
}

func (h *HTTPServer) raftOperator(w http.ResponseWriter) (RaftOperator, bool) {
	op, ok := h.be.(RaftOperator)
	if !ok {
		writeJSON(w, http.StatusNotImplemented, map[string]string{"error": "this node has no raft operations"})
	}
	return op, ok
}

func (h *HTTPServer) raftPeers(w http.ResponseWriter, r *http.Request) {
	op, ok := h.raftOperator(w)
	if !ok {
		return
	}
	shard, ok := h.raftShard(w, r)
	if !ok {
		return
	}
	peers, err := op.RaftPeers(r.Context(), shard)
	if errors.Is(err, cluster.ErrNotHosted) {
		h.redirectRaft(w, r, shard)
		return
	}
	if err != nil {
		writeJSON(w, raftStatus(err), map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, peers)
}

func (h *HTTPServer) removePeer(w http.ResponseWriter, r *http.Request) {
	op, ok := h.raftOperator(w)
	if !ok {
		return
	}
	id := r.URL.Query().Get("id")
	if id == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "missing ?id= of the server to remove"})
		return
	}
	shard, ok := h.raftShard(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), raftOpTimeout)
	defer cancel()
	err := op.RemovePeer(ctx, shard, id)
	if errors.Is(err, cluster.ErrNotLeader) || errors.Is(err, cluster.ErrNotHosted) {
		h.redirectRaft(w, r, shard)
		return
	}
	if err != nil {
		h.log.Warn("remove peer", "id", id, "remote", r.RemoteAddr, "err", err)
		writeJSON(w, raftStatus(err), map[string]string{"error": err.Error()})
		return
	}
	h.log.Info("removed a server from the raft configuration", "id", id, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, map[string]any{"removed": id})
}

func (h *HTTPServer) transferLeader(w http.ResponseWriter, r *http.Request) {
	op, ok := h.raftOperator(w)
	if !ok {
		return
	}
	id := r.URL.Query().Get("id")
	shard, ok := h.raftShard(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), raftOpTimeout)
	defer cancel()
	leader, err := op.TransferLeader(ctx, shard, id)
	if errors.Is(err, cluster.ErrNotLeader) || errors.Is(err, cluster.ErrNotHosted) {
		h.redirectRaft(w, r, shard)
		return
	}
	if err != nil {
		h.log.Warn("transfer leadership", "to", id, "remote", r.RemoteAddr, "err", err)
		writeJSON(w, raftStatus(err), map[string]string{"error": err.Error()})
		return
	}
	// This node led when it took the request: it still leads if nothing moved
	// (ID named it, or it was already the leader).
	moved := leader != h.be.Status().ID
	if moved {
		h.log.Info("leadership transferred", "to", leader, "remote", r.RemoteAddr)
	}
	writeJSON(w, http.StatusOK, map[string]any{"leader": leader, "moved": moved})
}

// raftStatus is the HTTP status of a Raft operation's error.
func raftStatus(err error) int {
	switch {
	case errors.Is(err, cluster.ErrUnknownPeer):
		return http.StatusNotFound
	case errors.Is(err, cluster.ErrLastVoter), errors.Is(err, cluster.ErrNoOtherVoter), errors.Is(err, cluster.ErrNotVoter):
		return http.StatusConflict
	}
	return contractStatus(err)
}

// contractStatus is the HTTP status of an error of cluster's contract, by
// its class: 503 for not applied (for now) and indeterminate, 507 for a
// refusal that lasts (memory, disk, upgrade); 500 for any other error.
func contractStatus(err error) int {
	k, ok := cluster.KindOf(err)
	switch {
	case !ok:
		return http.StatusInternalServerError
	case k.Class == cluster.ClassRefused:
		return http.StatusInsufficientStorage
	}
	return http.StatusServiceUnavailable
}
