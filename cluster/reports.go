package cluster

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// Every node tells every other node, about once a second and at once when
// something that matters changes (a leadership, a group opened or closed,
// the node stopping or leaving), what its groups are doing and how much of
// its memory they hold: a report, pushed over the Raft port (opReport).
// Each node keeps the newest report of every peer in its report table. The
// deciders read the table and never ask a peer while they decide:
//
//   - the controller (controller.go): which shards are created, settled,
//     drained; which replicas are retired;
//   - each group's leader (groupplan.go): how far each replica has applied;
//   - liveness (liveness.go): a report that arrives is the peer answering on
//     its Raft port;
//   - memory admission (budget.go): what every node's groups hold;
//   - operators (ShardReports).
//
// A report carries the boot time of the process that sent it and a sequence
// number, so that a late report never replaces a newer one.

// reportEvery is how often a node pushes its report to every peer.
const reportEvery = time.Second

// reportFresh is how old a peer's report may be and still count as the peer
// answering on its Raft port.
const reportFresh = 3 * reportEvery

// nodeReport is what one node says of itself.
type nodeReport struct {
	ID   string `json:"id"`
	Boot int64  `json:"boot"` // when the sending process started, unix nanoseconds
	Seq  uint64 `json:"seq"`
	// Stopping is set by a node shutting down (it is coming back: not gone,
	// but no group should hand it leadership); Leaving by one leaving for
	// good.
	Stopping bool `json:"stopping,omitempty"`
	Leaving  bool `json:"leaving,omitempty"`
	// MemLimit is the node's --max-memory (0: none); MemUsed what its groups'
	// filters hold, with what admission has reserved and not yet applied.
	MemLimit uint64 `json:"mem_limit,omitempty"`
	MemUsed  uint64 `json:"mem_used"`
	// Groups are the node's open groups, by id.
	Groups []groupReport `json:"groups,omitempty"`
	// Fenced lists shard groups this node holds data of and must not open:
	// recovery of the shard left this replica out (fence.go).
	Fenced []int `json:"fenced,omitempty"`
	// Map is the version of the cluster map Fenced was read against (0:
	// none, or a node from before reports said so).
	Map uint64 `json:"map,omitempty"`
}

// groupReport is one replica of a group as its node sees it.
type groupReport struct {
	ID      int    `json:"id"`
	Leader  string `json:"leader,omitempty"` // the leader this replica knows
	Term    uint64 `json:"term"`
	Commit  uint64 `json:"commit"`
	Applied uint64 `json:"applied"`
	Last    uint64 `json:"last"`
	// Voters and Nonvoters are the latest configuration this replica holds.
	Voters    []string `json:"voters,omitempty"`
	Nonvoters []string `json:"nonvoters,omitempty"`
	Filters   int      `json:"filters"`
	Bytes     uint64   `json:"bytes"`
}

// leads reports whether the replica says it leads its group.
func (g groupReport) leads(self string) bool { return g.Leader == self }

// has reports whether the replica's configuration holds id.
func (g groupReport) has(id string) bool {
	return slices.Contains(g.Voters, id) || slices.Contains(g.Nonvoters, id)
}

// group returns the report's entry for group id.
func (r *nodeReport) group(id int) (groupReport, bool) {
	i, ok := slices.BinarySearchFunc(r.Groups, id, func(g groupReport, id int) int { return g.ID - id })
	if !ok {
		return groupReport{}, false
	}
	return r.Groups[i], true
}

// received is a report and when it arrived.
type received struct {
	r  nodeReport
	at time.Time
}

// reportTable holds the newest report of every node, this one included.
type reportTable struct {
	mu   sync.Mutex
	byID map[string]received
}

func newReportTable() *reportTable { return &reportTable{byID: map[string]received{}} }

// put keeps r unless the table holds a newer report of the same node; it
// reports whether it kept it.
func (t *reportTable) put(r nodeReport, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.byID[r.ID]; ok && (r.Boot < old.r.Boot || r.Boot == old.r.Boot && r.Seq <= old.r.Seq) {
		return false
	}
	t.byID[r.ID] = received{r: r, at: now}
	return true
}

// get returns node id's newest report and when it arrived.
func (t *reportTable) get(id string) (received, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.byID[id]
	return r, ok
}

// snapshot copies the table.
func (t *reportTable) snapshot() map[string]received {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]received, len(t.byID))
	for id, r := range t.byID {
		out[id] = r
	}
	return out
}

// groupLeader is what the table says of group gid's leader: the report of a
// node that says it leads gid, the one of the highest term if several do
// (a deposed leader that has not heard yet). ok is false when no node says
// it leads.
func groupLeader(tab map[string]received, gid int) (id string, g groupReport, ok bool) {
	for nid, rc := range tab {
		gr, has := rc.r.group(gid)
		if !has || !gr.leads(nid) {
			continue
		}
		if !ok || gr.Term > g.Term || gr.Term == g.Term && nid < id {
			id, g, ok = nid, gr, true
		}
	}
	return id, g, ok
}

// localReport is this node's report now.
func (n *Node) localReport() nodeReport {
	m := n.clusterMap()
	r := nodeReport{ID: n.cfg.ID, Boot: n.boot, Seq: n.reportSeq.Add(1), Stopping: n.stopping.Load(),
		Leaving: n.heal.leaving.Load(), MemLimit: n.cfg.MaxMemory, Fenced: n.fencedGroups(m)}
	if m != nil {
		r.Map = m.Version
	}
	for _, g := range n.openGroups() {
		if g.raft == nil || g.closed() {
			continue
		}
		gr := g.report()
		r.MemUsed += gr.Bytes
		r.Groups = append(r.Groups, gr)
	}
	r.MemUsed += n.budget.reservedBytes()
	return r
}

// report is this node's replica of the group, for its report.
func (g *group) report() groupReport {
	lid, _ := g.Leader()
	gr := groupReport{ID: g.id, Leader: lid, Term: g.raft.CurrentTerm(), Commit: g.raft.CommitIndex(),
		Applied: g.fsm.AppliedIndex(), Last: g.raft.LastIndex(), Filters: g.fsm.Len(), Bytes: g.fsm.MemoryBytes()}
	if servers, err := latestServers(g.raft); err == nil {
		for _, s := range servers {
			if s.Suffrage == raft.Voter {
				gr.Voters = append(gr.Voters, string(s.ID))
			} else {
				gr.Nonvoters = append(gr.Nonvoters, string(s.ID))
			}
		}
	}
	return gr
}

// reportLoop pushes this node's report to every peer gossip knows alive,
// every reportEvery and whenever kickReport is called.
func (n *Node) reportLoop() {
	defer n.wg.Done()
	tick := time.NewTicker(reportEvery)
	defer tick.Stop()
	// At once: a node started again replaces what its former process last
	// said (its groups, before this one has opened them, are not there).
	n.pushReport(nil)
	for {
		select {
		case <-tick.C:
		case <-n.reportKick:
			// Changes come in bursts (a node leading several groups loses
			// them together): one report for the burst.
			select {
			case <-time.After(20 * time.Millisecond):
			case <-n.stop:
				return
			}
		case <-n.stop:
			return
		}
		if n.closing() {
			return
		}
		n.pushReport(nil)
	}
}

// kickReport has the report loop push a report soon.
func (n *Node) kickReport() {
	select {
	case n.reportKick <- struct{}{}:
	default:
	}
}

// pushReport sends this node's report to every peer gossip knows alive (and
// keeps it in its own table). With acked, it returns a channel per peer that
// gets the peer's answer.
func (n *Node) pushReport(acked *[]<-chan rpcResp) {
	r := n.localReport()
	n.reports.put(r, time.Now())
	body, err := json.Marshal(r)
	if err != nil {
		return
	}
	for _, m := range n.members() {
		if m.ID == n.cfg.ID || m.Raft == "" || m.state != memberlist.StateAlive {
			continue
		}
		ch, err := n.peer(m.ID, m.Raft).send(opReport, body)
		if err != nil {
			continue
		}
		if acked != nil {
			*acked = append(*acked, ch)
		}
	}
}

// pushReportNow pushes this node's report and waits, until ctx ends or half
// a second passes, for every peer to have it: a node about to stop or leave
// says so before it acts.
func (n *Node) pushReportNow(ctx context.Context) {
	var acks []<-chan rpcResp
	n.pushReport(&acks)
	timer := time.NewTimer(500 * time.Millisecond)
	defer timer.Stop()
	for _, ch := range acks {
		select {
		case <-ch:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// noteReport keeps a report a peer pushed. The sender is the node its
// certificate names, when there is one (serveRPC has checked): a node
// reports only for itself.
func (n *Node) noteReport(body []byte, peer string) error {
	var r nodeReport
	if err := json.Unmarshal(body, &r); err != nil {
		return err
	}
	if r.ID == "" || peer != "" && r.ID != peer || r.ID == n.cfg.ID {
		return errBadReport
	}
	slices.SortFunc(r.Groups, func(a, b groupReport) int { return a.ID - b.ID })
	if n.reports.put(r, time.Now()) {
		if r.Stopping || r.Leaving {
			n.kickShards()
		}
	}
	return nil
}

// errBadReport answers a report that names no node, or another node than
// its sender.
const errBadReport = rpcError("bad report")
