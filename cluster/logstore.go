package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/rookerydb/rookery/internal/logengine"
)

// One log engine per node (docs/SHARDING.md, "Where a node keeps what"). The
// Raft log and the stable store (term, vote) of every group on the node live
// in one Pebble database, DATA_DIR/raftlog, under keys prefixed by the group:
// a commit of each group is a synced batch, and Pebble folds the batches that
// groups commit at the same time into one write-ahead-log write and one fsync.
// Before, each group had a raft-boltdb file (raft.db) of its own, whose every
// commit paid two fsyncs; a group whose directory still holds one (a data
// directory of an earlier release) has it moved into the engine, in one synced
// batch, the first time it opens, and the file removed. Snapshots stay in each
// group's directory.

// EngineDir is the log engine's directory under a node's data directory.
const EngineDir = "raftlog"

// boltLog is the file a group's log lived in before the log engine.
const boltLog = "raft.db"

// logHome maps a group's directory to its node's data directory and group
// id: DATA_DIR is group 0, DATA_DIR/shards/<g> is group g (groupDir).
func logHome(dir string) (dataDir string, gid int) {
	parent := filepath.Dir(dir)
	if filepath.Base(parent) == "shards" {
		if g, err := strconv.Atoi(filepath.Base(dir)); err == nil && g > 0 && g <= maxGroupID {
			return filepath.Dir(parent), g
		}
	}
	return dir, 0
}

// openEngine opens the log engine of a node's data directory. A node
// running there holds it: tools get ErrInUse.
func openEngine(dataDir string, log *slog.Logger) (*logengine.Engine, error) {
	e, err := logengine.Open(filepath.Join(dataDir, EngineDir), log)
	if errors.Is(err, logengine.ErrLocked) {
		return nil, fmt.Errorf("%w (%s)", ErrInUse, dataDir)
	}
	return e, err
}

// groupLog returns group gid's log in e, first moving the group's raft.db in
// dir into it if there is one.
func groupLog(e *logengine.Engine, gid int, dir string, log *slog.Logger) (*logengine.Log, error) {
	l, err := e.Group(uint32(gid))
	if err != nil {
		return nil, fmt.Errorf("open the log of group %d: %w", gid, err)
	}
	if err := moveBoltLog(l, dir, log); err != nil {
		return nil, err
	}
	return l, nil
}

// moveBoltLog moves the raft.db of dir, if any, into l: every entry, the
// term and the vote in one synced batch, then the file goes. Stopped between
// the two, the next start finds the move done and only removes the file.
func moveBoltLog(l *logengine.Log, dir string, log *slog.Logger) error {
	path := filepath.Join(dir, boltLog)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("look for %s: %w", path, err)
	}
	done, err := l.Imported()
	if err != nil {
		return fmt.Errorf("read the log engine: %w", err)
	}
	if !done {
		start := time.Now()
		bolt, err := raftboltdb.New(raftboltdb.Options{Path: path, NoSync: true,
			BoltOptions: &bbolt.Options{Timeout: 2 * time.Second, ReadOnly: true}})
		if errors.Is(err, bbolt.ErrTimeout) {
			return fmt.Errorf("%w (%s)", ErrInUse, dir)
		}
		if err != nil {
			return fmt.Errorf("open %s to move it into the log engine: %w", path, err)
		}
		first, _ := bolt.FirstIndex()
		last, _ := bolt.LastIndex()
		err = l.Import(bolt, bolt)
		bolt.Close()
		if err != nil {
			return fmt.Errorf("move %s into the log engine: %w", path, err)
		}
		log.Info("moved a group's log into the node's log engine", "from", path, "first", first, "last", last,
			"took", time.Since(start).Round(time.Millisecond))
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove %s after moving it into the log engine: %w", path, err)
	}
	return nil
}

// offlineLog is the log of one group of a stopped node, opened by a tool.
type offlineLog struct {
	*logengine.Log
	e       *logengine.Engine
	dataDir string // the node's
	gid     int
}

// openOffline opens, for a tool run while the node is stopped, the log of
// the group whose directory is dir. A log whose bounds cannot be read (its
// first or last entry is in a damaged block) opens; its FirstIndex and
// LastIndex say so.
func openOffline(dir string) (*offlineLog, error) {
	dataDir, gid := logHome(dir)
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("no log store in %s: %w", dir, err)
	}
	quiet := slog.New(slog.DiscardHandler)
	e, err := openEngine(dataDir, quiet)
	if err != nil {
		return nil, err
	}
	l, err := groupLog(e, gid, dir, quiet)
	if err != nil {
		e.Close()
		return nil, err
	}
	last, err := l.LastIndex()
	if err == nil && last == 0 {
		if _, serr := os.Stat(filepath.Join(dir, "snapshots")); serr != nil {
			err = fmt.Errorf("no log store in %s: the group holds no log and no snapshots", dir)
		}
	}
	if err != nil && !errors.Is(err, logengine.ErrDamaged) {
		e.Close()
		return nil, err
	}
	return &offlineLog{Log: l, e: e, dataDir: dataDir, gid: gid}, nil
}

func (o *offlineLog) close() { o.e.Close() }

// cut deletes the group's entries from index from on (from 0: all it
// holds) by rewriting the engine without them (logengine.Rewrite).
func (o *offlineLog) cut(from uint64) error {
	return o.e.Rewrite(nodeGroups(o.dataDir), uint32(o.gid), from)
}

// nodeGroups lists the groups whose directories a node's data directory
// holds: group 0 and each DATA_DIR/shards/<g>.
func nodeGroups(dataDir string) []uint32 {
	ids := []uint32{0}
	entries, _ := os.ReadDir(filepath.Join(dataDir, "shards"))
	for _, e := range entries {
		if g, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() && g > 0 && g <= maxGroupID {
			ids = append(ids, uint32(g))
		}
	}
	return ids
}
