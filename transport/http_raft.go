package transport

import (
	"context"
	"errors"
	"net/http"
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
// The changes are made by the leader: a follower answers 307 Temporary
// Redirect to the leader's HTTP address, as the backup routes do. Like every
// POST they need credentials (httpAuth): the password, a client certificate,
// or, with neither configured, a loopback peer.

// raftOpTimeout bounds one remove or transfer.
const raftOpTimeout = 15 * time.Second

// RaftOperator is what the Raft routes need from a node; cluster.Node
// implements it. A Backend that does not answers them 501.
type RaftOperator interface {
	RaftPeers(ctx context.Context) (cluster.RaftPeers, error)
	RemovePeer(ctx context.Context, id string) error
	TransferLeader(ctx context.Context, id string) (string, error)
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
	peers, err := op.RaftPeers(r.Context())
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
	ctx, cancel := context.WithTimeout(r.Context(), raftOpTimeout)
	defer cancel()
	err := op.RemovePeer(ctx, id)
	if errors.Is(err, cluster.ErrNotLeader) {
		h.redirectToLeader(w, r)
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
	ctx, cancel := context.WithTimeout(r.Context(), raftOpTimeout)
	defer cancel()
	leader, err := op.TransferLeader(ctx, id)
	if errors.Is(err, cluster.ErrNotLeader) {
		h.redirectToLeader(w, r)
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
