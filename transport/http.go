package transport

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
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
//	GET  /readyz      200 once the node has a leader and has caught up, else 503
//	GET  /v1/status   the node's cluster.Status as JSON
//	GET  /v1/nodes    the cluster's members as JSON
//	GET  /v1/filters  every filter: name, kind, items, capacity, memory, estimated FPP
//	POST /v1/leave    leave the cluster for good
//	POST /v1/snapshot          raft snapshots this node now (http_snapshot.go)
//	GET  /v1/snapshot          a backup file of the cluster, from the leader
//	POST /v1/snapshot/restore  restore the cluster to the backup in the body
//	GET  /v1/raft/peers, POST /v1/raft/remove-peer, /v1/raft/transfer-leader (http_raft.go)
//	GET  /metrics     Prometheus text format (when Config.Registry is set)
//	GET  /debug/pprof/ Go profiles (when Config.Pprof is set)
//
// Every route but the two probes asks for credentials (see httpAuth and
// DESIGN.md): the node's password as a bearer token or basic auth password, or
// a verified client certificate when Config.ClientCerts is set. With none
// configured, reads are open and changes are accepted from loopback only.
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
		Handler:           newHTTPAuth(cfg, mux),
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
	if !h.be.Ready() {
		// The reason is for the operator at 3 a.m.: a corrupt log entry, a
		// full disk, no leader. It names no key and no credential.
		msg := "not ready"
		if p := h.be.Status().Problem; p != "" {
			msg += ": " + p
		}
		http.Error(w, msg, http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ready\n"))
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
