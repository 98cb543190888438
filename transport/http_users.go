package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/fsm"
)

// The users (Redis ACLs) in and out of a backup. They are state of group 0,
// which the backup of an unsharded cluster holds whole; a sharded cluster's
// backup is its shards' (http_snapshot.go), so `rookery snapshot save` adds
// group 0's users to its bundle and `restore` puts them back:
//
//	GET  /v1/users          group 0's users section (fsm.FSM.UsersSection): empty
//	                        when the cluster never set users; X-Rookery-Users counts them
//	POST /v1/users/restore  the body is such a section; it replaces the cluster's users
//
// Both are admin routes (+@admin, as every route but the reads), and any node
// answers them: GET reads its own replica of group 0 after a linearizable
// read, so the section holds every change acknowledged before the request;
// POST proposes fsm.OpACLRestore to group 0, wherever its leader is. The
// section holds the users' rules and password digests, never a password.

const (
	// maxUsersBody bounds a users section sent to POST /v1/users/restore;
	// a cluster's users take kilobytes.
	maxUsersBody = 64 << 20
	// usersBackupWait bounds the read barrier of GET /v1/users and the
	// commit of a restore: an election of group 0 may come between.
	usersBackupWait = 30 * time.Second
)

// usersRestoredJSON answers POST /v1/users/restore.
type usersRestoredJSON struct {
	Restored bool `json:"restored"`
	Users    int  `json:"users"` // how many users the log now holds (0: none set; each node's --requirepass default)
}

func (h *HTTPServer) registerUsersRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/users", h.saveUsers)
	mux.HandleFunc("POST /v1/users/restore", h.restoreUsers)
}

// saveUsers is GET /v1/users: group 0's users section as the body.
func (h *HTTPServer) saveUsers(w http.ResponseWriter, r *http.Request) {
	rep, err := h.be.UsersReplica()
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "this node holds no replica of the group that keeps the users: " + err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), usersBackupWait)
	defer cancel()
	if err := rep.ReadBarrier(ctx, cluster.ReadLinearizable); err != nil {
		h.log.Warn("users for a backup", "err", err)
		writeJSON(w, usersStatus(err), map[string]string{"error": "could not catch this node's users up with the cluster: " + err.Error()})
		return
	}
	sec := rep.FSM().UsersSection()
	n, err := fsm.CheckUsersSection(sec)
	if err != nil {
		// The section was written by this build a moment ago: cannot happen.
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(sec)))
	w.Header().Set("X-Rookery-Users", strconv.Itoa(n))
	w.WriteHeader(http.StatusOK)
	w.Write(sec)
	h.log.Info("users sent for a backup", "users", n, "bytes", len(sec), "remote", r.RemoteAddr)
}

// restoreUsers is POST /v1/users/restore with a users section as the body
// (empty: the backup's cluster never set users).
func (h *HTTPServer) restoreUsers(w http.ResponseWriter, r *http.Request) {
	sec, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxUsersBody))
	if err != nil {
		code, msg := http.StatusBadRequest, fmt.Sprintf("reading the users section: %v", err)
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			code, msg = http.StatusRequestEntityTooLarge, fmt.Sprintf("a users section is at most %d bytes", maxUsersBody)
		}
		writeJSON(w, code, map[string]string{"error": msg})
		return
	}
	// Damaged data would be refused by the state machine too, but only once
	// in the log: refuse it here first.
	if _, err := fsm.CheckUsersSection(sec); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "not the users of a backup: " + err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), usersBackupWait)
	defer cancel()
	res, err := h.be.SubmitUsers(&fsm.Command{Op: fsm.OpACLRestore, Data: sec}).Wait(ctx)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		h.log.Warn("restore of users refused", "remote", r.RemoteAddr, "err", err)
		writeJSON(w, usersStatus(err), map[string]string{"error": "restoring the users: " + err.Error()})
		return
	}
	n := 0
	if len(res.Ints) == 1 {
		n = int(res.Ints[0])
	}
	h.log.Info("restored the cluster's users from a backup", "remote", r.RemoteAddr, "users", n)
	writeJSON(w, http.StatusOK, usersRestoredJSON{Restored: true, Users: n})
}

// usersStatus is the HTTP status of an error of the users' routes.
func usersStatus(err error) int {
	switch {
	case errors.Is(err, fsm.ErrBadData):
		return http.StatusBadRequest
	case errors.Is(err, fsm.ErrNoUsers), errors.Is(err, cluster.ErrNotHosted):
		return http.StatusConflict
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable
	}
	return contractStatus(err)
}
