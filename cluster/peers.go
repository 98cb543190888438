package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/internal/atomicfile"
)

// MembersFile, in the data directory, keeps what a restarting node needs to
// find its cluster again by itself: the members of its last Raft configuration
// with their gossip addresses, and whether this node has been a member (so
// that it can tell, at its next start, that it has been removed since). It is
// not Consul's raft/peers.json: nothing reads it to change a configuration.
const MembersFile = "members.json"

// Retry-join timing: the first retry comes after joinRetryMin, each later one
// after twice the last, up to joinRetryMax (Consul's retry_join keeps trying
// until it joins). Once joined, members of the configuration that gossip lists
// as gone are tried again every reconnectInterval (serf's reconnect), so a
// gossip split that outlived memberlist's memory of the dead still heals.
const (
	joinRetryMin      = time.Second
	joinRetryMax      = 30 * time.Second
	joinWarnEvery     = time.Minute
	reconnectInterval = 15 * time.Second
)

// knownPeer is a member of the configuration as the members file keeps it.
type knownPeer struct {
	ID     string `json:"id"`
	Raft   string `json:"raft"`
	Gossip string `json:"gossip,omitempty"`
}

// membersFile is the content of MembersFile.
type membersFile struct {
	// Member: this node has been in a committed configuration.
	Member bool `json:"member"`
	// Left: this node left the cluster for good (Leave).
	Left  bool        `json:"left,omitempty"`
	Peers []knownPeer `json:"peers"`
}

// peerBook is the node's copy of MembersFile, written through on change.
type peerBook struct {
	mu      sync.Mutex
	path    string
	cur     membersFile
	written bool // cur is what the file holds
}

func (b *peerBook) load(dir string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.path = filepath.Join(dir, MembersFile)
	data, err := os.ReadFile(b.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", b.path, err)
	}
	var f membersFile
	if err := json.Unmarshal(data, &f); err != nil {
		// Only a hint for finding the cluster: a damaged one is replaced.
		return nil
	}
	b.cur, b.written = f, true
	return nil
}

func (b *peerBook) get() membersFile {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.cur
	f.Peers = append([]knownPeer(nil), b.cur.Peers...)
	return f
}

// update applies change to a copy of the content and writes the file if the
// content changed.
func (b *peerBook) update(change func(*membersFile)) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.cur
	f.Peers = append([]knownPeer(nil), b.cur.Peers...)
	change(&f)
	if b.written && reflect.DeepEqual(f, b.cur) {
		return nil
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(b.path, append(data, '\n'), 0o644); err != nil {
		return err
	}
	b.cur, b.written = f, true
	return nil
}

// savePeers records the members of the latest configuration with their gossip
// addresses (from gossip, else as last known), and whether this node has
// been in a committed configuration.
func (n *Node) savePeers(servers []raft.Server, committedMember bool) {
	gossip := make(map[string]string)
	n.memMu.Lock()
	for id, m := range n.memTable {
		if m.gossip != "" {
			gossip[id] = m.gossip
		}
	}
	n.memMu.Unlock()
	err := n.heal.book.update(func(f *membersFile) {
		old := make(map[string]knownPeer, len(f.Peers))
		for _, p := range f.Peers {
			old[p.ID] = p
		}
		var peers []knownPeer
		for _, s := range servers {
			id := string(s.ID)
			if id == n.cfg.ID {
				continue
			}
			p := knownPeer{ID: id, Raft: string(s.Address), Gossip: gossip[id]}
			if p.Gossip == "" {
				p.Gossip = old[id].Gossip
			}
			peers = append(peers, p)
		}
		if len(servers) > 0 {
			f.Peers = peers
		}
		f.Member = f.Member || committedMember
	})
	if err != nil {
		n.warnEvery("members-file", "cannot keep the members file; a restart may not find the cluster by itself", "err", err)
	}
}

// joinLoop joins gossip and keeps it joined. Until joined it tries, with a
// backoff from joinRetryMin to joinRetryMax, every address it knows: --join,
// the members file, and the gossip address each member of the configuration
// gives over its Raft port. Joining any one member is enough: memberlist
// spreads the rest. The node counts as joined too once another member has
// reached it. Afterwards it tries again, quietly, to reach members of the
// configuration that gossip lists as gone.
func (n *Node) joinLoop() {
	defer n.wg.Done()
	wait := joinRetryMin
	var (
		attempt  int
		firstErr time.Time
		lastWarn time.Time
	)
	for !n.joined() {
		addrs := n.joinCandidates(nil)
		if len(addrs) == 0 {
			// Nothing known yet (a new seed): others will join this node.
			if !n.sleep(joinRetryMin) {
				return
			}
			continue
		}
		attempt++
		k, err := n.ml.Join(addrs)
		if k > 0 {
			n.log.Info("joined gossip", "contacted", k, "attempt", attempt)
			break
		}
		if n.joined() {
			break
		}
		now := time.Now()
		if firstErr.IsZero() {
			firstErr, lastWarn = now, now
		}
		msg := oneLine(err)
		if now.Sub(lastWarn) >= joinWarnEvery {
			lastWarn = now
			n.log.Warn("still not joined to gossip; retrying", "attempt", attempt, "addrs", strings.Join(addrs, ","),
				"for", now.Sub(firstErr).Round(time.Second), "last_err", msg)
		} else {
			n.log.Info("join failed; retrying", "attempt", attempt, "addrs", strings.Join(addrs, ","),
				"retry_in", wait, "err", msg)
		}
		if !n.sleep(wait) {
			return
		}
		wait = min(2*wait, joinRetryMax)
	}
	for n.sleep(reconnectInterval) {
		n.reconnect()
	}
}

// joined reports whether gossip knows another live member.
func (n *Node) joined() bool { return n.ml.NumMembers() > 1 }

// reconnect tries the members of the configuration that gossip does not list
// as alive.
func (n *Node) reconnect() {
	alive := make(map[string]bool)
	for _, m := range n.members() {
		alive[m.ID] = m.state == memberlist.StateAlive
	}
	addrs := n.joinCandidates(func(id string) bool { return !alive[id] })
	if len(addrs) == 0 {
		return
	}
	if k, err := n.ml.Join(addrs); k > 0 {
		n.log.Info("reached members gossip had lost", "addrs", strings.Join(addrs, ","))
	} else {
		n.log.Debug("reconnect to lost members failed", "addrs", strings.Join(addrs, ","), "err", oneLine(err))
	}
}

// joinCandidates lists the gossip addresses to join through: --join (unless
// want is set), and the members of the configuration that want accepts (all
// when want is nil), at the gossip address the member gives over its Raft port
// now, else as the members file remembers it. Never this node's own address.
func (n *Node) joinCandidates(want func(id string) bool) []string {
	var out []string
	seen := map[string]bool{}
	if self, ok := n.gossipAdv.Load().(string); ok {
		seen[self] = true
	}
	seen[n.cfg.GossipAddr] = true
	add := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	if want == nil {
		for _, a := range n.cfg.Join {
			add(a)
		}
	}
	known := make(map[string]knownPeer)
	for _, p := range n.heal.book.get().Peers {
		known[p.ID] = p
	}
	if f := n.meta.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			if id := string(s.ID); id != n.cfg.ID {
				if _, ok := known[id]; !ok {
					known[id] = knownPeer{ID: id, Raft: string(s.Address)}
				}
			}
		}
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		live = map[string]string{}
	)
	for id, p := range known {
		if want != nil && !want(id) || p.Raft == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if ps, err := n.peerStatusOf(ctx, id, p.Raft); err == nil && ps.ID == id && ps.Gossip != "" {
				mu.Lock()
				live[id] = ps.Gossip
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for id, p := range known {
		if want != nil && !want(id) {
			continue
		}
		add(live[id])
		add(p.Gossip)
	}
	return out
}

// sleep waits d, or returns false once the node stops.
func (n *Node) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-n.stop:
		return false
	}
}

// oneLine flattens memberlist's multi-line error lists ("1 error occurred:\n\t*
// Failed to join ...") into one line.
func oneLine(err error) string {
	if err == nil {
		return ""
	}
	var parts []string
	for _, l := range strings.Split(err.Error(), "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "*"))
		if l == "" || strings.HasSuffix(l, "occurred:") {
			continue
		}
		parts = append(parts, l)
	}
	return strings.Join(parts, "; ")
}
