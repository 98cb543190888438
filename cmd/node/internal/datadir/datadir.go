// Package datadir guards a node's data directory: it belongs to one node,
// and to one process at a time.
//
// Raft keeps the node's id nowhere in its own files: started with another
// --id on a directory, a node would find itself outside the configuration it
// holds and answer CLUSTERDOWN forever, its data invisible. And a second
// process on a directory in use would bind its ports and then wait on the bolt
// file lock, holding nothing and serving nothing. Both are refused before any
// port is bound or Raft opened. `rookery recover` takes the same lock, so
// that it never works under a running node.
package datadir

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/rookerydb/rookery/internal/atomicfile"
)

const (
	// IdentityFile records the id of the node the directory belongs to,
	// written on the first start.
	IdentityFile = "identity.json"
	// lockFile is flock-ed for as long as a process runs on the directory and
	// holds that process's id; the kernel releases the lock when the process
	// ends, however it ends.
	lockFile = "rookery.lock"
)

// identity is the content of IdentityFile.
type identity struct {
	NodeID string `json:"node_id"`
}

// Claim makes dir the data directory of node id: it records id in a
// directory that has none (a new one, or one from before IdentityFile
// existed), and refuses a directory that belongs to another node.
func Claim(dir, id string, logger *slog.Logger) error {
	path := filepath.Join(dir, IdentityFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		var idn identity
		if err := json.Unmarshal(b, &idn); err != nil || idn.NodeID == "" {
			return fmt.Errorf("data dir %s: %s is damaged (want {\"node_id\": \"ID\"}): %q", dir, IdentityFile, b)
		}
		if idn.NodeID != id {
			return fmt.Errorf("data dir belongs to node %s, not %s (%s): start with --id %s, or give node %s another --data-dir",
				idn.NodeID, id, dir, idn.NodeID, id)
		}
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("data dir %s: %w", dir, err)
	}
	if holdsLog(dir) {
		logger.Info("data dir has no node id yet: recording this node's", "id", id, "file", path)
	}
	b, _ = json.Marshal(identity{NodeID: id})
	return atomicfile.Write(path, append(b, '\n'), 0o644)
}

// StoredID returns the id recorded in dir, or "" if there is none.
func StoredID(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, IdentityFile))
	if err != nil {
		return ""
	}
	var idn identity
	if json.Unmarshal(b, &idn) != nil {
		return ""
	}
	return idn.NodeID
}

// errInUse is the error of a data directory another process holds.
func errInUse(dir string, pid int) error {
	if pid <= 0 {
		return fmt.Errorf("data dir %s in use by another process: stop it, or give this node another --data-dir", dir)
	}
	return fmt.Errorf("data dir in use by pid %d (%s): stop that process, or give this node another --data-dir", pid, dir)
}

// holdsLog says whether dir holds a node's Raft log: the log engine's
// directory, or the raft.db of a release before it.
func holdsLog(dir string) bool {
	for _, name := range []string{"raftlog", "raft.db"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}
