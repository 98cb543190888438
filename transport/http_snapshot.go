package transport

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/rookerydb/rookery/cluster"
)

// Snapshots and backups over HTTP (the file's format and what a restore does
// are in cluster/backup.go; DESIGN.md says why the routes behave as they do):
//
//	POST /v1/snapshot          raft snapshots this node now; its index, term, size
//	GET  /v1/snapshot          a backup file, taken on the leader
//	GET  /v1/snapshot?stale=1  a backup of this node's own state, leader or not
//	POST /v1/snapshot/restore  the body is a backup file; the leader restores it
//
// A follower answers the leader-only routes with 307 Temporary Redirect to the
// leader's HTTP address, which `rookery snapshot` follows. In a sharded
// cluster every shard is backed up and restored on its own: the routes take
// ?shard=S and run on that shard's leader (a 307 to it from elsewhere);
// `rookery snapshot save` bundles every shard's backup into one file
// (cluster/bundle.go) and restore sends each part back to its shard.

const (
	// backupIdle drops a backup transfer that moves no byte for this long.
	// The server's whole-request limits are meant for small requests; a
	// transfer instead pushes its deadline out as bytes move.
	backupIdle = 30 * time.Second
	// backupPrepare bounds taking the snapshot before its first byte goes out:
	// a barrier, raft writing the snapshot, and its checksum pass on opening.
	backupPrepare = 10 * time.Minute
	// deadlineStep is how often a busy transfer pushes its deadline out.
	deadlineStep = time.Second
)

// snapshotJSON answers POST /v1/snapshot.
type snapshotJSON struct {
	ID    string `json:"id"`
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	Size  int64  `json:"size_bytes"`
}

// restoredJSON answers POST /v1/snapshot/restore.
type restoredJSON struct {
	Restored    bool   `json:"restored"`
	Index       uint64 `json:"index"` // where the restored state sits in this cluster's log
	BackupIndex uint64 `json:"backup_index"`
	BackupTerm  uint64 `json:"backup_term"`
	BackupNode  string `json:"backup_node"`
	Created     string `json:"backup_created"`
	Filters     int    `json:"filters"`
	Memory      uint64 `json:"memory_bytes"`
	FileBytes   int64  `json:"file_bytes"`
}

// takeSnapshot is POST /v1/snapshot.
func (h *HTTPServer) takeSnapshot(w http.ResponseWriter, r *http.Request) {
	s, err := h.be.TakeSnapshot()
	if err != nil {
		h.log.Warn("snapshot", "err", err)
		code, msg := backupStatus(err)
		writeJSON(w, code, map[string]string{"error": msg})
		return
	}
	h.log.Info("snapshot taken", "index", s.Index, "term", s.Term, "bytes", s.Size)
	writeJSON(w, http.StatusOK, snapshotJSON{ID: s.ID, Index: s.Index, Term: s.Term, Size: s.Size})
}

// saveBackup is GET /v1/snapshot: the backup file as the body.
func (h *HTTPServer) saveBackup(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodHead {
		// A HEAD would take a whole snapshot only to throw it away.
		w.Header().Set("Allow", "GET")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	stale := false
	if q := r.URL.Query(); q.Has("stale") {
		v := q.Get("stale")
		b, err := strconv.ParseBool(v)
		stale = v == "" || (err == nil && b)
	}
	shard, ok := h.shardParam(w, r)
	if !ok {
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(backupPrepare))
	b, err := onReplica(h, shard, func(rep Replica) (*cluster.Backup, error) { return rep.OpenBackup(r.Context(), stale) })
	if errors.Is(err, cluster.ErrNotLeader) || errors.Is(err, cluster.ErrNotHosted) {
		h.redirectToShardLeader(w, r, shard)
		return
	}
	if err != nil {
		h.log.Warn("backup", "err", err)
		code, msg := backupStatus(err)
		writeJSON(w, code, map[string]string{"error": msg})
		return
	}
	defer b.Close()
	m := b.Meta()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(b.Size(), 10))
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="rookery-%d.backup"`, m.Index))
	w.Header().Set("X-Rookery-Index", strconv.FormatUint(m.Index, 10))
	w.Header().Set("X-Rookery-Term", strconv.FormatUint(m.Term, 10))
	w.WriteHeader(http.StatusOK)
	n, err := b.WriteTo(&deadlineWriter{w: w, rc: rc})
	if err != nil {
		// The client sees a short body, and its checks refuse the file.
		h.log.Warn("backup transfer failed", "index", m.Index, "sent", n, "of", b.Size(), "remote", r.RemoteAddr, "err", err)
		return
	}
	h.log.Info("backup sent", "index", m.Index, "term", m.Term, "bytes", n, "remote", r.RemoteAddr)
}

// restoreBackup is POST /v1/snapshot/restore with a backup file as the body.
func (h *HTTPServer) restoreBackup(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	// The upload and the restore may take longer than any fixed limit: reads
	// push their own deadline out, and the reply gets a fresh one below.
	_ = rc.SetWriteDeadline(time.Time{})
	shard, ok := h.shardParam(w, r)
	if !ok {
		return
	}
	body := &deadlineReader{r: r.Body, rc: rc}
	res, err := onReplica(h, shard, func(rep Replica) (*cluster.Restored, error) {
		return rep.RestoreBackup(r.Context(), body, r.ContentLength)
	})
	_ = rc.SetWriteDeadline(time.Now().Add(backupIdle))
	if errors.Is(err, cluster.ErrNotLeader) || errors.Is(err, cluster.ErrNotHosted) {
		h.redirectToShardLeader(w, r, shard)
		return
	}
	if err != nil {
		code, msg := backupStatus(err)
		if body.err != nil {
			code, msg = http.StatusBadRequest, fmt.Sprintf("upload interrupted after %d bytes: %v", body.n, body.err)
		}
		h.log.Warn("restore refused", "remote", r.RemoteAddr, "err", msg)
		writeJSON(w, code, map[string]string{"error": msg})
		return
	}
	h.log.Info("restored the cluster from a backup", "remote", r.RemoteAddr, "index", res.Index,
		"backup_index", res.Meta.Index, "filters", len(res.State.Filters))
	writeJSON(w, http.StatusOK, restoredJSON{Restored: true, Index: res.Index, BackupIndex: res.Meta.Index,
		BackupTerm: res.Meta.Term, BackupNode: res.Meta.Node, Created: res.Meta.Created.Format(time.RFC3339),
		Filters: len(res.State.Filters), Memory: res.State.MemoryBytes, FileBytes: res.FileBytes})
}

// shardParam reads ?shard=S. A cluster of several shards needs one (each
// shard is backed up on its own); a cluster of one shard takes none, or 0.
func (h *HTTPServer) shardParam(w http.ResponseWriter, r *http.Request) (shard int, ok bool) {
	n := h.be.ShardCount()
	q := r.URL.Query()
	if !q.Has("shard") {
		if n > 1 {
			writeJSON(w, http.StatusConflict, map[string]string{"error": fmt.Sprintf(
				"the cluster has %d shards: back each up with ?shard=0 to %d (rookery snapshot save and restore do)", n, n-1)})
			return 0, false
		}
		return 0, true
	}
	s, err := strconv.Atoi(q.Get("shard"))
	if err != nil || s < 0 || s >= n {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("bad shard %q: the cluster has %d", q.Get("shard"), n)})
		return 0, false
	}
	return s, true
}

// onReplica runs f on this node's replica of shard s (cluster.ErrNotHosted
// when it holds none).
func onReplica[T any](h *HTTPServer, s int, f func(Replica) (T, error)) (T, error) {
	rep, err := h.be.Replica(s)
	if err != nil {
		var zero T
		return zero, err
	}
	return f(rep)
}

// redirectToShardLeader sends the client to the same path on the HTTP address
// of shard s's leader (of the cluster's leader when it has one group).
func (h *HTTPServer) redirectToShardLeader(w http.ResponseWriter, r *http.Request, s int) {
	if !h.be.Sharded() {
		h.redirectToLeader(w, r)
		return
	}
	leader := ""
	for _, sh := range h.be.Shards() {
		if sh.ID == s {
			leader = sh.Leader
		}
	}
	addr := ""
	for _, n := range h.be.Nodes() {
		if n.ID == leader {
			addr = n.HTTPAddr
		}
	}
	if addr == "" || leader == h.be.Status().ID {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": fmt.Sprintf("no leader of shard %d known; try again", s)})
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	w.Header().Set("Location", scheme+"://"+addr+r.URL.RequestURI())
	writeJSON(w, http.StatusTemporaryRedirect, map[string]string{"error": "not the shard's leader",
		"leader_id": leader, "leader_http_addr": addr})
}

// redirectToLeader sends the client to the same path on the leader's HTTP
// address, assumed to speak the same scheme as this node. A 307 keeps the
// method and body; the client must send its credentials again, as it would
// to any other host.
func (h *HTTPServer) redirectToLeader(w http.ResponseWriter, r *http.Request) {
	st := h.be.Status()
	addr := ""
	if st.LeaderID != "" {
		for _, n := range h.be.Nodes() {
			if n.ID == st.LeaderID {
				addr = n.HTTPAddr
			}
		}
	}
	if addr == "" || st.LeaderID == st.ID {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "no leader known; try again"})
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	w.Header().Set("Location", scheme+"://"+addr+r.URL.RequestURI())
	writeJSON(w, http.StatusTemporaryRedirect, map[string]string{"error": "not the leader",
		"leader_id": st.LeaderID, "leader_http_addr": addr})
}

// backupStatus is the HTTP status and message of a snapshot, backup or
// restore error.
func backupStatus(err error) (int, string) {
	switch {
	case errors.Is(err, cluster.ErrBadBackup):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, cluster.ErrBackupTooLarge), errors.Is(err, cluster.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, err.Error()
	case errors.Is(err, cluster.ErrRestoreInProgress), errors.Is(err, cluster.ErrNothingToSnapshot):
		return http.StatusConflict, err.Error()
	}
	return contractStatus(err), err.Error()
}

// deadlineWriter pushes the connection's write deadline out as bytes go.
type deadlineWriter struct {
	w    io.Writer
	rc   *http.ResponseController
	last time.Time
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	if now := time.Now(); now.Sub(d.last) >= deadlineStep {
		_ = d.rc.SetWriteDeadline(now.Add(backupIdle))
		d.last = now
	}
	return d.w.Write(p)
}

// deadlineReader pushes the connection's read deadline out as bytes come, and
// remembers how the body ended if it ended badly.
type deadlineReader struct {
	r    io.Reader
	rc   *http.ResponseController
	last time.Time
	n    int64
	err  error
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	if now := time.Now(); now.Sub(d.last) >= deadlineStep {
		_ = d.rc.SetReadDeadline(now.Add(backupIdle))
		d.last = now
	}
	n, err := d.r.Read(p)
	d.n += int64(n)
	if err != nil && err != io.EOF {
		d.err = err
	}
	return n, err
}
