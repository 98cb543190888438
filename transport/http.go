package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rookerydb/rookery/cluster"
)

// leaveTimeout bounds POST /v1/leave.
const leaveTimeout = 30 * time.Second

// Bounds on an HTTP connection, so that a stranger can neither hold one open
// for ever nor make the server buffer huge headers.
const (
	// httpReadHeaderTimeout bounds reading a request's headers (slowloris).
	httpReadHeaderTimeout = 10 * time.Second
	// httpReadTimeout bounds reading a whole request; no route takes a large
	// body but a backup's restore, which pushes its own deadline out as bytes
	// arrive (http_snapshot.go).
	httpReadTimeout = 30 * time.Second
	// httpWriteTimeout bounds a handler and its reply. It covers POST /v1/leave
	// (leaveTimeout) with room to spare; pprof's profile and trace push their
	// own deadline out by the ?seconds they are asked for, so a 30 s profile
	// (the default) still completes.
	httpWriteTimeout = leaveTimeout + 30*time.Second
	// httpIdleTimeout closes a kept-alive connection that sends nothing.
	httpIdleTimeout = 2 * time.Minute
	// httpMaxHeaderBytes bounds a request's headers.
	httpMaxHeaderBytes = 64 << 10
)

// HTTPServer serves health, status and metrics over HTTP:
//
//	GET  /healthz     200 while the process serves
//	GET  /readyz      200 once the node does its part (cluster.Readiness), else 503;
//	                  a sharded node's body has a line per shard
//	GET  /readyz?shard=N  200 if shard N has a leader and this node holds a
//	                  caught-up replica of it, else 503; 400 or 404 for a bad N
//	GET  /v1/status   the node's cluster.Status as JSON
//	GET  /v1/nodes    the cluster's members as JSON
//	GET  /v1/filters  every filter: name, kind, items, capacity, memory, estimated FPP
//	POST /v1/leave    leave the cluster for good
//	POST /v1/snapshot          raft snapshots this node now (http_snapshot.go)
//	GET  /v1/snapshot          a backup file of the cluster, from the leader
//	POST /v1/snapshot/restore  restore the cluster to the backup in the body
//	GET  /v1/users, POST /v1/users/restore  the cluster's users, for a sharded backup (http_users.go)
//	GET  /v1/raft/peers, POST /v1/raft/remove-peer, /v1/raft/transfer-leader (http_raft.go)
//	GET  /metrics     Prometheus text format (when Config.Registry is set)
//	GET  /debug/pprof/ Go profiles (when Config.Pprof is set)
//
// Every route but the two probes asks who the client is, as one of the node's
// users (Config.Users; see httpAuth and DESIGN.md): basic auth user:password,
// the default user's password as a bearer token, or a verified client
// certificate for the default user when Config.ClientCerts is set. Status,
// nodes, filters, shards, raft peers and metrics are for any user that is on;
// every other route (changes, backups, pprof, fault injection) needs a user
// allowed every command of @admin. With no credentials asked for, reads are
// open and admin routes are accepted from loopback only.
type HTTPServer struct {
	be  Backend
	log *slog.Logger
	srv *http.Server
}

// NewHTTP returns an HTTP server for be.
func NewHTTP(cfg Config, be Backend) *HTTPServer {
	cfg = cfg.withDefaults()
	h := &HTTPServer{be: be, log: cfg.Logger}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", h.readyz)
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, be.Status())
	})
	mux.HandleFunc("GET /v1/nodes", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, be.Nodes())
	})
	mux.HandleFunc("GET /v1/filters", h.filters)
	mux.HandleFunc("POST /v1/leave", h.leave)
	mux.HandleFunc("POST /v1/snapshot", h.takeSnapshot)
	mux.HandleFunc("GET /v1/snapshot", h.saveBackup)
	mux.HandleFunc("POST /v1/snapshot/restore", h.restoreBackup)
	h.registerRaftRoutes(mux)  // GET /v1/raft/peers, POST remove-peer, transfer-leader (http_raft.go)
	h.registerShardRoutes(mux) // GET /v1/shards, POST /v1/drain (http_shards.go)
	h.registerUsersRoutes(mux) // GET /v1/users, POST /v1/users/restore (http_users.go)
	if cfg.Registry != nil {
		newMetrics(cfg.Registry, be) // the node gauges, even with no RESP server
		mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{}))
	}
	for pattern, handler := range cfg.Routes {
		mux.Handle(pattern, handler)
	}
	if cfg.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	h.srv = &http.Server{
		Handler:           newHTTPAuth(cfg, be, mux),
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		WriteTimeout:      httpWriteTimeout,
		IdleTimeout:       httpIdleTimeout,
		MaxHeaderBytes:    httpMaxHeaderBytes,
	}
	return h
}

// Handler returns the server's routes behind their authentication (for tests
// and embedding).
func (h *HTTPServer) Handler() http.Handler { return h.srv.Handler }

// Serve serves HTTP on ln until Close; it then returns ErrServerClosed.
func (h *HTTPServer) Serve(ln net.Listener) error {
	err := h.srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return ErrServerClosed
	}
	return err
}

// Close stops the server, letting requests in progress finish within ctx.
func (h *HTTPServer) Close(ctx context.Context) error {
	err := h.srv.Shutdown(ctx)
	if err != nil {
		h.srv.Close()
	}
	return err
}

func (h *HTTPServer) readyz(w http.ResponseWriter, r *http.Request) {
	rd := h.be.Readiness()
	// The reasons are for the operator at 3 a.m.: a corrupt log entry, a
	// full disk, no leader. They name no key and no credential.
	var body strings.Builder
	code := http.StatusOK
	if q, ok := r.URL.Query()["shard"]; ok {
		s, err := strconv.Atoi(q[0])
		if err != nil || s < 0 || len(q) != 1 {
			http.Error(w, fmt.Sprintf("bad shard %q: want one shard number, 0 or more", strings.Join(q, ",")), http.StatusBadRequest)
			return
		}
		switch err := rd.ShardReady(s); {
		case errors.Is(err, cluster.ErrNoSuchShard):
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		case err != nil:
			code = http.StatusServiceUnavailable
			fmt.Fprintf(&body, "shard %d not ready: %v\n", s, err)
		default:
			fmt.Fprintf(&body, "shard %d ready\n", s)
		}
		if s < len(rd.Shards) {
			body.WriteString(rd.Shards[s].Line() + "\n")
		}
	} else {
		if rd.Ready {
			body.WriteString("ready\n")
		} else {
			code = http.StatusServiceUnavailable
			body.WriteString("not ready")
			if rd.Problem != "" {
				body.WriteString(": " + rd.Problem)
			}
			body.WriteString("\n")
		}
		for _, l := range rd.Lines() {
			body.WriteString(l + "\n")
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write([]byte(body.String()))
}

// filterJSON is one entry of /v1/filters.
type filterJSON struct {
	Name         string  `json:"name"`
	Kind         string  `json:"kind"`
	Items        uint64  `json:"items"`
	Capacity     uint64  `json:"capacity"`
	Memory       uint64  `json:"memory_bytes"`
	EstimatedFPP float64 `json:"estimated_fpp"`
}

// filters lists the node's filters from its local state.
func (h *HTTPServer) filters(w http.ResponseWriter, r *http.Request) {
	out := []filterJSON{}
	for _, r := range h.be.Replicas() {
		for _, in := range r.FSM().List() {
			out = append(out, filterJSON{Name: in.Key, Kind: in.Kind.String(), Items: in.Items,
				Capacity: in.Capacity, Memory: in.Size, EstimatedFPP: in.EstimatedFPP})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *HTTPServer) leave(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), leaveTimeout)
	defer cancel()
	if err := h.be.Leave(ctx); err != nil {
		h.log.Warn("leave", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	h.log.Info("left the cluster")
	writeJSON(w, http.StatusOK, map[string]bool{"left": true})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
