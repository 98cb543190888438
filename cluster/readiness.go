package cluster

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/fsm"
)

// Readiness (/readyz) answers one question for a load balancer or an
// orchestrator: should this node take clients now? In a sharded cluster any
// node takes any key and forwards it to the key's shard, so a shard without a
// leader is unavailable through every node alike: pulling the nodes that
// hold a replica of it fixes nothing, and the rule before pulled a node that
// led and served another shard (issue 29). So a node is ready when it does
// its own part:
//
//  1. as on every cluster: it is a member (not removed), its disk has room,
//     its map group (group 0; the one group of a cluster without shards) has
//     a leader it hears from, it has applied the group's log it held at
//     start, and that group's state machine has not halted;
//  2. sharded: it knows the cluster's map, and every replica the map places
//     on it is open, created, and not halted (a halted replica answers
//     errors for its keys, which another node would forward and serve);
//  3. sharded, holding replicas as a voter: at least one of them serves,
//     that is its shard has a leader among the map's replicas and this
//     replica has caught up (applied the log it held at start, and within
//     catchUpSlack entries of the commit index it has heard of). A node
//     holding none (just joined, or drained), or only replicas still being
//     added to their groups (non-voters catching up), forwards every key and
//     is ready by 1 and 2.
//
// Rule 3 keeps a node that restarted out of rotation until one of its
// replicas works again, and pulls one cut off from every shard it holds;
// rule 1 already pulls a node cut off from the map group's leader. A shard
// without a leader is reported, one line per shard (Readiness.Lines), and
// answered per shard by /readyz?shard=N (ShardReady), but it does not fail
// a node that serves another. The decision is readyOf, a pure function of
// what the node observed (readyView).

// Readiness is the node's answer to /readyz.
type Readiness struct {
	Ready bool
	// Problem says why the node is not ready ("" when it is).
	Problem string
	// Map is the map group (group 0) of a sharded cluster; nil without shards.
	Map *ShardReadiness
	// Shards is every shard of a sharded cluster, in order; nil without shards.
	Shards []ShardReadiness
}

// ShardReadiness is one shard as this node sees it.
type ShardReadiness struct {
	Shard int
	// Held: the map places a replica of the shard on this node. The fields
	// below Leader describe that replica.
	Held bool
	// Leader is the shard's leader ("" when none is known; for a shard held
	// here, as this replica knows it).
	Leader string
	// Role is this node's: leader, follower, candidate, "not open" (the map
	// places it here and the group is not open yet), "removed" (a recovery
	// cut this node off the shard), or "" (not held).
	Role             string
	Applied, Commit  uint64
	CaughtUp         bool
	Serving          bool   // a leader among the shard's replicas, and this replica caught up
	Problem          string // why it does not serve, when held
	created          bool
	adding           bool   // this node is not (yet) a voter of the shard's group
	halted           string // the halt, when the replica's state machine halted
	leaderIsReplica  bool
	appliedFromStart bool
}

// name is how logs and tools name the shard: "shard 2", or "map" for the
// map group (Shard -1).
func (s ShardReadiness) name() string {
	if s.Shard < 0 {
		return "map"
	}
	return fmt.Sprintf("shard %d", s.Shard)
}

// Line renders the shard for /readyz's body, one line.
func (s ShardReadiness) Line() string {
	name := s.name()
	leader := "no leader"
	if s.Leader != "" {
		leader = "leader " + s.Leader
	}
	if !s.Held {
		if s.Role == "removed" {
			return fmt.Sprintf("%s: %s; this node: removed (%s)", name, leader, s.Problem)
		}
		return fmt.Sprintf("%s: %s; not held here", name, leader)
	}
	caught := "behind"
	if s.CaughtUp {
		caught = "caught up"
	}
	line := fmt.Sprintf("%s: %s; this node: %s, applied %d, commit %d, %s", name, leader, s.Role, s.Applied, s.Commit, caught)
	if s.Problem != "" && s.Leader != "" {
		line += " (" + s.Problem + ")"
	}
	return line
}

// Lines renders every shard's line, the map group first (sharded only).
func (r Readiness) Lines() []string {
	var out []string
	if r.Map != nil {
		out = append(out, r.Map.Line())
	}
	for _, s := range r.Shards {
		out = append(out, s.Line())
	}
	return out
}

// ErrNoSuchShard: a per-shard question named a shard the cluster does not
// have.
var ErrNoSuchShard = errors.New("no such shard")

// ShardReady answers /readyz?shard=N: nil when shard s has a leader and this
// node holds a caught-up replica of it (on a cluster without shards, shard 0
// is the one group), else why not; ErrNoSuchShard for a shard the cluster
// does not have.
func (r Readiness) ShardReady(s int) error {
	if r.Shards == nil {
		// Without shards the one group is shard 0, and the node's
		// readiness is the shard's.
		switch {
		case s != 0:
			return fmt.Errorf("%w: shard %d of a cluster of one group", ErrNoSuchShard, s)
		case !r.Ready:
			return errors.New(r.Problem)
		}
		return nil
	}
	if s < 0 || s >= len(r.Shards) {
		return fmt.Errorf("%w: shard %d of %d", ErrNoSuchShard, s, len(r.Shards))
	}
	sh := r.Shards[s]
	switch {
	case !sh.Held:
		return fmt.Errorf("this node holds no replica of shard %d", s)
	case !sh.Serving:
		return errors.New(sh.Problem)
	}
	return nil
}

// readyView is what readiness observes of the node (Node.readyView).
type readyView struct {
	// NodeProblem is what rule 1 finds ("" for nothing).
	NodeProblem string
	Sharded     bool
	Map         ShardReadiness
	// Shards is every shard of the map, those held here with their
	// replica's facts.
	Shards []ShardReadiness
	// Advice says what to do about a halted replica of shard s.
	Advice func(s int) string
}

// judge fills in what a held replica's observed facts mean: caught up,
// serving, and why not.
func (s *ShardReadiness) judge() {
	if !s.Held {
		return
	}
	s.CaughtUp = s.Role != "not open" && s.halted == "" && s.appliedFromStart && s.Applied+catchUpSlack >= s.Commit
	s.Serving = s.created && s.Leader != "" && s.leaderIsReplica && s.CaughtUp
	switch {
	case s.Serving:
	case s.Role == "not open":
		s.Problem = fmt.Sprintf("%s is not open here yet", s.name())
	case s.halted != "":
		s.Problem = fmt.Sprintf("%s: %s", s.name(), s.halted)
	case !s.created:
		s.Problem = fmt.Sprintf("%s is being created: not every replica votes yet", s.name())
	case s.Leader == "" || !s.leaderIsReplica:
		s.Problem = fmt.Sprintf("%s has no leader among its replicas", s.name())
	default:
		s.Problem = fmt.Sprintf("%s: this replica is catching up (applied %d, commit %d)", s.name(), s.Applied, s.Commit)
	}
}

// readyOf decides readiness from what the node observed (the rules above).
func readyOf(v readyView) Readiness {
	r := Readiness{Ready: true}
	if v.Sharded {
		m := v.Map
		m.Shard = -1
		m.judge()
		r.Map = &m
		r.Shards = make([]ShardReadiness, len(v.Shards))
		for i, s := range v.Shards {
			s.judge()
			r.Shards[i] = s
		}
	}
	fail := func(why string) Readiness {
		r.Ready, r.Problem = false, why
		return r
	}
	if v.NodeProblem != "" {
		return fail(v.NodeProblem)
	}
	if !v.Sharded {
		return r
	}
	voting, serving := 0, 0
	var firstSick string
	for _, s := range r.Shards {
		if !s.Held {
			continue
		}
		switch {
		case s.Role == "not open", !s.created:
			return fail(s.Problem)
		case s.halted != "":
			why := s.Problem
			if v.Advice != nil {
				why += "; " + v.Advice(s.Shard)
			}
			return fail(why)
		case s.adding:
			// A replica being added (a non-voter catching up) is not yet
			// this node's to serve: a node holding only such is as one
			// holding none.
			continue
		}
		voting++
		switch {
		case s.Serving:
			serving++
		case firstSick == "":
			firstSick = s.Problem
		}
	}
	if voting > 0 && serving == 0 {
		return fail("no shard held here serves yet: " + firstSick)
	}
	return r
}

// Readiness is the node's readiness now, with every shard's state (/readyz).
func (n *Node) Readiness() Readiness { return readyOf(n.readyView()) }

// Ready reports whether the node should take clients (/readyz): see
// Readiness.
func (n *Node) Ready() bool { return n.Readiness().Ready }

// nodeProblem is rule 1: what keeps the node itself from serving, on any
// cluster ("" when nothing does).
func (n *Node) nodeProblem() string {
	if why := n.removedWhy(); why != "" {
		return why + "; " + n.rejoinAdvice()
	}
	if h := n.meta.fsm.Halted(); h != nil {
		if errors.Is(h.Err, fsm.ErrNewerFormat) {
			return h.Error() // it says: upgrade this node
		}
		return h.Error() + "; stop the node and run `rookery recover --data-dir " + n.cfg.DataDir + "`"
	}
	if err := n.disk.refuse(); err != nil {
		return err.Error() + "; writes are refused until there is room (they resume by themselves)"
	}
	if id, _ := n.meta.Leader(); id == "" {
		if why := n.cannotForm(); why != "" {
			return why
		}
		return "no leader"
	}
	if !n.meta.appliedThrough(n.meta.startIndex) {
		return "catching up with the log it held at start"
	}
	if n.awaitingMap() {
		return "waiting for the cluster's map of shards"
	}
	return ""
}

// readyView observes what readiness decides on.
func (n *Node) readyView() readyView {
	v := readyView{NodeProblem: n.nodeProblem()}
	m := n.clusterMap()
	if m == nil {
		return v
	}
	v.Sharded = true
	v.Advice = func(s int) string {
		return fmt.Sprintf("stop the node and run `rookery recover --data-dir %s --shard %d`", n.cfg.DataDir, s)
	}
	v.Map = n.meta.replicaReadiness(-1, nil, true)
	fenced := n.fencedGroups(m)
	var others []ShardInfo // leaders of the shards not held here, from the peers' reports
	for s, mg := range m.Groups {
		gid := groupOf(m, s)
		if !slices.Contains(mg.Replicas, n.cfg.ID) {
			if others == nil {
				others = n.mappedShards(m)
			}
			sr := ShardReadiness{Shard: s, Leader: others[s].Leader}
			if slices.Contains(fenced, gid) {
				sr.Role, sr.Problem = "removed", "a recovery cut this node off the shard"
			}
			v.Shards = append(v.Shards, sr)
			continue
		}
		g := n.groupByID(gid)
		if g == nil || g.raft == nil {
			v.Shards = append(v.Shards, ShardReadiness{Shard: s, Held: true, Role: "not open", created: mg.Created})
			continue
		}
		v.Shards = append(v.Shards, g.replicaReadiness(s, mg.Replicas, mg.Created))
	}
	return v
}

// replicaReadiness observes this group's replica for readiness (replicas:
// the map's replicas of its shard; nil for the map group, whose leader is
// any member's).
func (g *group) replicaReadiness(shard int, replicas []string, created bool) ShardReadiness {
	lid, _ := g.Leader()
	halted := ""
	if h := g.fsm.Halted(); h != nil {
		halted = h.Error()
	}
	role := strings.ToLower(g.raft.State().String())
	adding := false
	if replicas != nil {
		adding = true
		if servers, err := latestServers(g.raft); err == nil {
			for _, s := range servers {
				if string(s.ID) == g.n.cfg.ID {
					adding = s.Suffrage != raft.Voter
					if adding && role == "follower" {
						role = "nonvoter"
					}
				}
			}
		}
	}
	return ShardReadiness{Shard: shard, Held: true, Leader: lid, adding: adding,
		Role:    role,
		Applied: g.raft.AppliedIndex(), Commit: g.raft.CommitIndex(),
		created: created, halted: halted,
		leaderIsReplica:  lid != "" && (replicas == nil || slices.Contains(replicas, lid)),
		appliedFromStart: g.appliedThrough(g.startIndex)}
}
