package transport

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/rookerydb/rookery/cluster"
)

// The operator's shard routes (`rookery shards`, `rookery node drain`):
//
//	GET  /v1/shards              every shard: slots, replicas and their state, leader, index, size
//	POST /v1/drain?id=ID[&undo]  move every replica and leadership off node ID (undo: take it back)
//
// A drain is recorded in the cluster map by group 0's leader: a follower
// answers 307 Temporary Redirect to it, as the Raft routes do.

// ShardOperator is what the shard routes need from a node; cluster.Node
// implements it. A Backend that does not answers them 501.
type ShardOperator interface {
	ShardReports(ctx context.Context) ([]cluster.ShardReport, error)
	Drain(ctx context.Context, id string, undo bool) error
}

func (h *HTTPServer) registerShardRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/shards", h.shards)
	mux.HandleFunc("POST /v1/drain", h.drain)
}

func (h *HTTPServer) shardOperator(w http.ResponseWriter) (ShardOperator, bool) {
	op, ok := h.be.(ShardOperator)
	if !ok {
		writeJSON(w, http.StatusNotImplemented, map[string]string{"error": "this node has no shard operations"})
	}
	return op, ok
}

func (h *HTTPServer) shards(w http.ResponseWriter, r *http.Request) {
	op, ok := h.shardOperator(w)
	if !ok {
		return
	}
	reports, err := op.ShardReports(r.Context())
	if err != nil {
		writeJSON(w, shardStatus(err), map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, reports)
}

func (h *HTTPServer) drain(w http.ResponseWriter, r *http.Request) {
	op, ok := h.shardOperator(w)
	if !ok {
		return
	}
	id := r.URL.Query().Get("id")
	if id == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "missing ?id= of the node to drain"})
		return
	}
	undo := r.URL.Query().Has("undo")
	ctx, cancel := context.WithTimeout(r.Context(), raftOpTimeout)
	defer cancel()
	err := op.Drain(ctx, id, undo)
	if errors.Is(err, cluster.ErrNotLeader) {
		h.redirectToLeader(w, r)
		return
	}
	if err != nil {
		h.log.Warn("drain", "id", id, "undo", undo, "remote", r.RemoteAddr, "err", err)
		writeJSON(w, shardStatus(err), map[string]string{"error": err.Error()})
		return
	}
	h.log.Info("drain", "id", id, "undo", undo, "remote", r.RemoteAddr)
	// Which shards the node holds now, and which a recovery fenced it off:
	// draining a node that holds none moves nothing, and says so.
	holds, fenced := []int{}, []int{}
	if reps, err := op.ShardReports(ctx); err == nil {
		for _, sh := range reps {
			for _, rep := range sh.Replicas {
				if rep.ID == id {
					holds = append(holds, sh.ID)
				}
			}
			if slices.Contains(sh.Fenced, id) {
				fenced = append(fenced, sh.ID)
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"draining": !undo, "id": id, "holds": holds, "fenced": fenced})
}

// shardStatus is the HTTP status of a shard operation's error.
func shardStatus(err error) int {
	switch {
	case errors.Is(err, cluster.ErrUnknownNode):
		return http.StatusNotFound
	case errors.Is(err, cluster.ErrNotSharded):
		return http.StatusConflict
	}
	return contractStatus(err)
}
