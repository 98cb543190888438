package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// The node is a store of Raft groups (cluster/DESIGN.md, "The store"): it
// owns the groups it hosts, opens and closes them, and hands out a replica
// handle per shard (replica.go). Group 0, the metadata group, is one of them,
// opened when the node starts and closed when it stops; the others open and
// close as the cluster map places shards here.

// groupSet is the store's registry of open groups. Opening a group takes a
// while (its log is read and checked), so it happens outside the lock, with
// the id marked as opening so that two callers do not open it twice.
type groupSet struct {
	mu      sync.Mutex
	open    map[int]*group
	opening map[int]chan struct{} // closed once the open ends, either way
}

func newGroupSet() *groupSet {
	return &groupSet{open: map[int]*group{}, opening: map[int]chan struct{}{}}
}

// get returns open group id, or nil.
func (s *groupSet) get(id int) *group {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[id]
}

// list returns the open groups by id.
func (s *groupSet) list() []*group {
	s.mu.Lock()
	out := make([]*group, 0, len(s.open))
	for _, g := range s.open {
		out = append(out, g)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b *group) int { return a.id - b.id })
	return out
}

// take removes group id from the set and returns it (nil if not open).
func (s *groupSet) take(id int) *group {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.open[id]
	delete(s.open, id)
	return g
}

// takeAll empties the set and returns what it held.
func (s *groupSet) takeAll() []*group {
	s.mu.Lock()
	out := make([]*group, 0, len(s.open))
	for _, g := range s.open {
		out = append(out, g)
	}
	s.open = map[int]*group{}
	s.mu.Unlock()
	return out
}

// errStopping refuses to open a group on a node that is stopping.
var errStopping = errors.New("the node is stopping")

// openOrGet returns open group id, or opens it with open (outside the lock)
// and adds it. A caller that finds the group being opened waits for that.
func (s *groupSet) openOrGet(id int, stopping func() bool, open func() (*group, error)) (*group, error) {
	for {
		s.mu.Lock()
		if g := s.open[id]; g != nil {
			s.mu.Unlock()
			return g, nil
		}
		if stopping() {
			s.mu.Unlock()
			return nil, errStopping
		}
		wait, busy := s.opening[id]
		if !busy {
			done := make(chan struct{})
			s.opening[id] = done
			s.mu.Unlock()
			g, err := open()
			s.mu.Lock()
			delete(s.opening, id)
			if err == nil {
				s.open[id] = g
			}
			s.mu.Unlock()
			close(done)
			return g, err
		}
		s.mu.Unlock()
		<-wait
	}
}

// groupByID returns this node's open group id, or nil.
func (n *Node) groupByID(id int) *group { return n.groups.get(id) }

// openGroups lists the node's open groups, group 0 first.
func (n *Node) openGroups() []*group { return n.groups.list() }

// groupDir is where group id keeps its files: the data directory itself for
// group 0, as before shards; DATA_DIR/shards/<id> for the others.
func (n *Node) groupDir(id int) string { return groupDir(n.cfg.DataDir, id) }

func groupDir(dataDir string, id int) string {
	if id == 0 {
		return dataDir
	}
	return filepath.Join(dataDir, "shards", fmt.Sprint(id))
}

// ShardDir is where shard s of a sharded cluster keeps its files under a
// node's data directory (its group is s+1: group 0 holds the map). rookery
// recover --shard works there.
func ShardDir(dataDir string, s int) string { return groupDir(dataDir, s+1) }

// openGroup opens group id > 0 on this node (creating its directory), or
// returns it if it is open.
func (n *Node) openGroup(id int) (*group, error) {
	return n.groups.openOrGet(id, n.closing, func() (*group, error) {
		dir := n.groupDir(id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create shard %d's directory: %w", id, err)
		}
		if err := n.rejoinGroup(id, dir); err != nil {
			return nil, err
		}
		g := newGroup(n, id, dir)
		if err := g.open(n.mux.openGroup(id)); err != nil {
			n.mux.closeGroup(id)
			g.close()
			return nil, fmt.Errorf("open shard %d: %w", id, err)
		}
		g.log.Info("shard opened", "dir", dir, "last_index", g.startIndex)
		return g, nil
	})
}

// closeGroup closes group id > 0; with remove, its files go too. Commands
// that hold a replica of it get ErrNotHosted from then on (replica.go).
func (n *Node) closeGroup(id int, remove bool) error {
	if id == 0 {
		return errors.New("group 0 closes only with the node")
	}
	g := n.groups.take(id)
	if g == nil {
		return nil
	}
	err := g.close()
	if remove && err == nil {
		err = n.removeGroupFiles(id)
	}
	return err
}

// removeGroupFiles deletes group id's log from the engine and its directory
// (snapshots, marks).
func (n *Node) removeGroupFiles(id int) error {
	if err := n.engine.Drop(uint32(id)); err != nil {
		return fmt.Errorf("drop the log of group %d: %w", id, err)
	}
	return os.RemoveAll(n.groupDir(id))
}
