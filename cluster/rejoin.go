package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// rejoinTimeout bounds how long a node recovered by Recover tries to have the
// leader remove it before it gives up (and keeps the marker for a retry).
const rejoinTimeout = time.Minute

// rejoin, when the data directory holds a RejoinFile, has the leader remove
// this node from the configuration before Raft starts on the empty log (see
// recover.go for why), and returns the gossip addresses the peers gave, to
// join through. It runs after the Raft port listens and before Raft starts.
func (n *Node) rejoin() ([]string, error) {
	rj, err := readRejoin(n.cfg.DataDir)
	if err != nil || rj == nil {
		return nil, err
	}
	n.log.Warn("rejoining after recovery: leaving the configuration before starting on an empty log",
		"reason", rj.Reason, "moved", rj.Moved, "peers", len(rj.Peers))
	deadline := time.Now().Add(rejoinTimeout)
	var last error
	for {
		gossip, err := leaveThroughLeader(n.cfg.ID, rj.Peers, n.peerStatusOf, func(ctx context.Context, id, addr string) error {
			ctx, cancel := context.WithTimeout(ctx, n.cfg.ApplyTimeout)
			defer cancel()
			_, err := n.peer(id, addr).call(ctx, opRemove, []byte(n.cfg.ID))
			return err
		})
		if err == nil {
			// From here on a new member: the leader adds it rather than
			// tell it it was removed.
			if err := n.heal.book.update(func(m *membersFile) { m.Member, m.Left = false, false }); err != nil {
				return nil, err
			}
			if err := os.Remove(filepath.Join(n.cfg.DataDir, RejoinFile)); err != nil {
				return nil, err
			}
			n.log.Info("left the configuration; joining again as a new member", "via", gossip)
			return gossip, nil
		}
		last = err
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("rejoin: no leader among %d peers removed this node within %v (last: %v); "+
				"%s stays, start the node again to retry", len(rj.Peers), rejoinTimeout, last, RejoinFile)
		}
		select {
		case <-time.After(time.Second):
		case <-n.stop:
			return nil, ErrShutdown
		}
	}
}

// leaveThroughLeader finds the leader among peers (asking each for its
// status) and asks it to remove node self; it returns the peers' gossip
// addresses, to join through afterwards.
func leaveThroughLeader(self string, peers []Peer, status func(ctx context.Context, id, addr string) (peerStatus, error),
	remove func(ctx context.Context, leaderID, leaderAddr string) error) ([]string, error) {
	addr := map[string]string{}
	for _, p := range peers {
		addr[p.ID] = p.Raft
	}
	var gossip []string
	var errs []error
	for _, p := range peers {
		if p.ID == self {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ps, err := status(ctx, p.ID, p.Raft)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.ID, err))
			continue
		}
		if ps.Gossip != "" {
			gossip = append(gossip, ps.Gossip)
		}
		leader, ok := addr[ps.Leader]
		if !ok || ps.Leader == self {
			continue
		}
		if err := remove(context.Background(), ps.Leader, leader); err != nil {
			errs = append(errs, fmt.Errorf("remove through %s: %w", ps.Leader, err))
			continue
		}
		return gossip, nil
	}
	if len(errs) == 0 {
		errs = append(errs, ErrNoLeader)
	}
	return nil, errors.Join(errs...)
}

// rejoinGroup, when group id's directory holds a RejoinFile (rookery recover
// --shard), has the group's leader remove this node before the group starts
// on its empty log, as rejoin does for group 0; the map then places it again
// and the leader adds it as a new member. One try: the shard loop calls
// again.
func (n *Node) rejoinGroup(id int, dir string) error {
	rj, err := readRejoin(dir)
	if err != nil || rj == nil {
		return err
	}
	status := func(ctx context.Context, peer, addr string) (peerStatus, error) {
		var ps peerStatus
		op, body := groupOp(id, opStatus, nil)
		b, err := n.peer(peer, addr).call(ctx, op, body)
		if err == nil {
			err = json.Unmarshal(b, &ps)
		}
		return ps, err
	}
	remove := func(ctx context.Context, leader, addr string) error {
		ctx, cancel := context.WithTimeout(ctx, n.cfg.ApplyTimeout)
		defer cancel()
		op, body := groupOp(id, opRemove, []byte(n.cfg.ID))
		_, err := n.peer(leader, addr).call(ctx, op, body)
		return err
	}
	if _, err := leaveThroughLeader(n.cfg.ID, rj.Peers, status, remove); err != nil {
		return fmt.Errorf("group %d rejoins after recovery: no leader among %d peers removed this node yet: %w", id, len(rj.Peers), err)
	}
	n.log.Info("left a shard's configuration after recovery; it joins again as a new member", n.shardAttr(id))
	return os.Remove(filepath.Join(dir, RejoinFile))
}
