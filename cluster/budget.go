package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/rookerydb/rookery/fsm"
)

// One memory budget per node (docs/SHARDING.md, "Memory"). --max-memory
// bounds the filters of every group a node holds together, not each group.
// Admission on a shard's leader asks every replica's node to reserve what a
// batch of writes may allocate (opReserve); each node decides against its
// own total, atomically, so two shard leaders admitting at once cannot both
// take a node's last bytes. A node that does not answer is judged from its
// last report. A refusal names the node.
//
// Reserved bytes count until the write has applied: the leader releases its
// reservations once its entry has applied (opRelease), and a node keeps a
// released reservation a moment longer, counting its group as the larger of
// what the group holds and what it held when the reservation was made plus
// what is reserved, so that a replica applying later than the leader is
// never counted short. A reservation nobody releases expires.
//
// Growth inside apply (a scalable filter adding a sub-filter) cannot be
// foreseen exactly: every command that may allocate carries, in the log, the
// group's cap, the least room any replica's node leaves the group
// (fsm.Command.MemLimit), and every replica's state machine refuses, at the
// same index, growth past it.

// memMeta is the meta.Mem a node with limit max gossips: the limit in bytes,
// or -1 for none.
func memMeta(max uint64) int64 {
	if max == 0 || max > 1<<62 {
		return -1
	}
	return int64(max)
}

// mayAllocate reports whether applying c may create or grow a filter.
func mayAllocate(c *fsm.Command) bool {
	switch c.Op {
	case fsm.OpReserve, fsm.OpAdd:
		return true
	case fsm.OpLoadChunk:
		return c.Iter == 1
	}
	return false
}

// memBudget is what a batch of proposals is stamped with: the group's cap
// (the least room any replica's node leaves it, budget.go), and the node
// that leaves the least, with its limit.
type memBudget struct {
	cap   uint64
	limit uint64
	who   string
	v     byte // the log format the batch is written in
}

// releaseGrace is how long a node keeps a released reservation.
const releaseGrace = 2 * time.Second

// reservation is bytes a node set aside for a group's write.
type reservation struct {
	gid     int
	bytes   uint64
	base    uint64 // the group's bytes when it was made
	expires time.Time
}

// nodeBudget is a node's reservations.
type nodeBudget struct {
	mu   sync.Mutex
	next uint64
	held map[uint64]reservation
	// engine is what the node's log engine holds in memory (its memtables
	// and block cache, bounded by logengine.MemoryBytes); nil in tests.
	engine func() uint64
}

func newNodeBudget() *nodeBudget { return &nodeBudget{held: map[uint64]reservation{}} }

// usage is the node's total under the budget: each group counted as the
// larger of what it holds and what it held when its oldest live reservation
// was made plus what is reserved for it. b.mu must be held.
func (b *nodeBudget) usage(now time.Time, groups map[int]uint64) (total uint64, perGroup map[int]uint64) {
	perGroup = make(map[int]uint64, len(groups))
	for gid, bytes := range groups {
		perGroup[gid] = bytes
	}
	floors := map[int]uint64{}
	sums := map[int]uint64{}
	for tok, r := range b.held {
		if now.After(r.expires) {
			delete(b.held, tok)
			continue
		}
		if f, ok := floors[r.gid]; !ok || r.base < f {
			floors[r.gid] = r.base
		}
		sums[r.gid] += r.bytes
	}
	for gid, f := range floors {
		perGroup[gid] = max(perGroup[gid], f+sums[gid])
	}
	for _, v := range perGroup {
		total += v
	}
	if b.engine != nil {
		total += b.engine()
	}
	return total, perGroup
}

// reserve sets aside each of needs for group gid, in order, while the node's
// total stays within limit (0: no limit), and answers which it took and the
// room the node leaves the group (its limit less what its other groups
// count). Taken ones share one token.
func (b *nodeBudget) reserve(gid int, needs []uint64, limit uint64, groups map[int]uint64, now time.Time, ttl time.Duration) reserveAnswer {
	b.mu.Lock()
	defer b.mu.Unlock()
	total, per := b.usage(now, groups)
	ans := reserveAnswer{OK: make([]bool, len(needs)), Limit: limit, Used: total}
	if limit == 0 {
		for i := range ans.OK {
			ans.OK[i] = true
		}
		return ans
	}
	others := total - per[gid]
	ans.Room = sub0(limit, others)
	var took uint64
	for i, need := range needs {
		if need == 0 || total+took+need <= limit {
			ans.OK[i] = true
			took += need
		}
	}
	if took > 0 {
		b.next++
		ans.Token = b.next
		b.held[ans.Token] = reservation{gid: gid, bytes: took, base: groups[gid], expires: now.Add(ttl)}
	}
	return ans
}

// release lets reservation tok go after releaseGrace (it has applied, or
// never will).
func (b *nodeBudget) release(tok uint64, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r, ok := b.held[tok]; ok {
		r.expires = minTime(r.expires, now.Add(releaseGrace))
		b.held[tok] = r
	}
}

// reservedBytes is what the node has reserved and not yet let go.
func (b *nodeBudget) reservedBytes() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s uint64
	now := time.Now()
	for _, r := range b.held {
		if now.Before(r.expires) {
			s += r.bytes
		}
	}
	return s
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// reserveRequest is opReserve's body; reserveAnswer its reply.
type reserveRequest struct {
	Group int      `json:"group"`
	Needs []uint64 `json:"needs"`
}

type reserveAnswer struct {
	OK    []bool `json:"ok"`
	Token uint64 `json:"token,omitempty"`
	// Room is the node's limit less what its other groups count: what the
	// group may hold there. Limit and Used are the node's.
	Room  uint64 `json:"room"`
	Limit uint64 `json:"limit"`
	Used  uint64 `json:"used"`
}

// groupsBytes is what each open group's filters hold here.
func (n *Node) groupsBytes() map[int]uint64 {
	out := map[int]uint64{}
	for _, g := range n.openGroups() {
		out[g.id] = g.fsm.MemoryBytes()
	}
	return out
}

// reserveHere reserves needs for group gid against this node's limit.
func (n *Node) reserveHere(gid int, needs []uint64) reserveAnswer {
	return n.budget.reserve(gid, needs, n.cfg.MaxMemory, n.groupsBytes(), time.Now(), n.cfg.ApplyTimeout+releaseGrace)
}

// MemoryUse is a node's filter memory under its budget.
type MemoryUse struct {
	Limit    uint64 // --max-memory, 0 for none
	Used     uint64 // every replica's filters, what admission reserved, and the log engine's memory
	Engine   uint64 // the log engine's memtables and block cache (logstore.go)
	Reserved uint64 // admitted writes not yet applied
	// Shards is each of the node's shard replicas' share of Used, by shard.
	Shards map[int]uint64
}

// Memory reports this node's filter memory: its total under --max-memory
// and each shard replica's share.
func (n *Node) Memory() MemoryUse {
	n.budget.mu.Lock()
	total, per := n.budget.usage(time.Now(), n.groupsBytes())
	n.budget.mu.Unlock()
	mu := MemoryUse{Limit: n.cfg.MaxMemory, Used: total, Reserved: n.budget.reservedBytes(), Shards: map[int]uint64{}}
	if n.budget.engine != nil {
		mu.Engine = n.budget.engine()
	}
	m := n.clusterMap()
	for gid, b := range per {
		if m == nil || gid > 0 {
			mu.Shards[shardOfGroup(m, gid)] = b
		}
	}
	return mu
}

// serveReserve answers opReserve.
func (n *Node) serveReserve(body []byte) ([]byte, error) {
	var req reserveRequest
	if err := json.Unmarshal(body, &req); err != nil || req.Group < 0 || req.Group > maxGroupID || len(req.Needs) > maxBatch {
		return nil, errBadReserve
	}
	return json.Marshal(n.reserveHere(req.Group, req.Needs))
}

// serveRelease answers opRelease: body, the token as JSON.
func (n *Node) serveRelease(body []byte) error {
	var tok uint64
	if err := json.Unmarshal(body, &tok); err != nil {
		return errBadReserve
	}
	n.budget.release(tok, time.Now())
	return nil
}

const errBadReserve = rpcError("bad reservation request")

// replicaBudget is one replica's node as admission sees it.
type replicaBudget struct {
	id    string
	addr  string // Raft address, "" for this node
	limit uint64
}

// budgetPeers lists the nodes of the group's configuration with a memory
// limit, this node first.
func (g *group) budgetPeers() []replicaBudget {
	n := g.n
	out := []replicaBudget{}
	if n.cfg.MaxMemory > 0 {
		out = append(out, replicaBudget{id: n.cfg.ID, limit: n.cfg.MaxMemory})
	}
	servers, err := latestServers(g.raft)
	if err != nil {
		return out
	}
	for _, s := range servers {
		id := string(s.ID)
		if id == n.cfg.ID {
			continue
		}
		if lim := n.memLimitOf(id); lim > 0 {
			out = append(out, replicaBudget{id: id, addr: string(s.Address), limit: lim})
		}
	}
	return out
}

// memLimitOf is node id's --max-memory as gossip or its report says (0:
// none, or not heard).
func (n *Node) memLimitOf(id string) uint64 {
	if rc, ok := n.reports.get(id); ok && rc.r.MemLimit > 0 {
		return rc.r.MemLimit
	}
	n.memMu.Lock()
	m, ok := n.memTable[id]
	n.memMu.Unlock()
	if ok && m.Mem > 0 {
		return uint64(m.Mem)
	}
	return 0
}

// roomFromReport is the room node id's last report leaves group gid, and
// whether it has one.
func (n *Node) roomFromReport(id string, gid int, limit uint64) (uint64, bool) {
	rc, ok := n.reports.get(id)
	if !ok {
		return 0, false
	}
	mine := uint64(0)
	if gr, ok := rc.r.group(gid); ok {
		mine = gr.Bytes
	}
	return sub0(limit, sub0(rc.r.MemUsed, mine)), true
}

// admission is the outcome of admitting one batch: each proposal's error
// (nil: admitted), the cap the batch is stamped with, and the reservations
// to release once it has applied.
type admission struct {
	errs    []error
	budget  memBudget
	release func()
}

// admitBatch reserves, on every replica's node, what the batch's writes may
// allocate, and works out the cap growth inside apply is held to.
func (g *group) admitBatch(ctx context.Context, props []proposal, v byte) admission {
	peers := g.budgetPeers()
	adm := admission{errs: make([]error, len(props)), budget: memBudget{v: v}, release: func() {}}
	if len(peers) == 0 {
		return adm
	}
	needs := make([]uint64, len(props))
	any := false
	// One growth per filter per batch: each add to a filter that is nearly
	// full needs its next sub-filter, but a batch's adds to one filter grow
	// it once in all but freak cases, which the cap stamped on the batch
	// still holds to. Reserving the growth once per add made a fast stream
	// of adds reserve gigabytes that were never allocated.
	seen := map[string]bool{}
	for i, p := range props {
		needs[i] = g.fsm.NeedBytes(p.cmd)
		if needs[i] > 0 && p.cmd.Op == fsm.OpAdd {
			if seen[p.cmd.Key] {
				needs[i] = 0
			}
			seen[p.cmd.Key] = true
		}
		any = any || needs[i] > 0
	}
	type answer struct {
		peer replicaBudget
		ans  reserveAnswer
		ok   bool
	}
	answers := make([]answer, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		answers[i].peer = p
		if p.addr == "" {
			answers[i].ans, answers[i].ok = g.n.reserveHere(g.id, needsOrNone(needs, any)), true
			continue
		}
		if !any {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i].ans, answers[i].ok = g.n.reserveAt(ctx, p.id, p.addr, g.id, needs)
		}()
	}
	wg.Wait()
	var tokens []func()
	cap := uint64(0)
	for _, a := range answers {
		room, heard := a.ans.Room, a.ok
		if !heard {
			// Not asked (nothing to reserve) or no answer: its last report.
			room, heard = g.n.roomFromReport(a.peer.id, g.id, a.peer.limit)
		}
		if !heard {
			room = a.peer.limit
		}
		if cap == 0 || room < cap {
			cap, adm.budget.who, adm.budget.limit = max(room, 1), a.peer.id, a.peer.limit
		}
		if !a.ok {
			continue
		}
		if a.ans.Token != 0 {
			tokens = append(tokens, g.n.releaser(a.peer.id, a.peer.addr, a.ans.Token))
		}
		for i, ok := range a.ans.OK {
			if !ok && i < len(props) && adm.errs[i] == nil {
				adm.errs[i] = fmt.Errorf("%w: %d more bytes of filters would take node %s past its limit of %d bytes "+
					"(--max-memory, every shard it holds together; %d in use)", ErrTooLarge, needs[i], a.peer.id, a.ans.Limit, a.ans.Used)
			}
		}
	}
	adm.budget.cap = cap
	adm.release = func() {
		for _, r := range tokens {
			r()
		}
	}
	return adm
}

// needsOrNone is needs when any is set, else nil (nothing to reserve, only
// the room to learn).
func needsOrNone(needs []uint64, any bool) []uint64 {
	if !any {
		return nil
	}
	return needs
}

// reserveAt asks node id at addr to reserve needs for group gid.
func (n *Node) reserveAt(ctx context.Context, id, addr string, gid int, needs []uint64) (reserveAnswer, bool) {
	body, _ := json.Marshal(reserveRequest{Group: gid, Needs: needs})
	ctx, cancel := context.WithTimeout(ctx, reserveTimeout)
	defer cancel()
	b, err := n.peer(id, addr).call(ctx, opReserve, body)
	if err != nil {
		return reserveAnswer{}, false
	}
	var ans reserveAnswer
	if json.Unmarshal(b, &ans) != nil || len(ans.OK) != len(needs) {
		return reserveAnswer{}, false
	}
	return ans, true
}

// reserveTimeout bounds the wait for a replica's node to answer a
// reservation; one that does not is judged from its last report.
const reserveTimeout = 500 * time.Millisecond

// releaser lets reservation tok go, here (addr "") or on node id at addr.
func (n *Node) releaser(id, addr string, tok uint64) func() {
	return func() {
		if addr == "" {
			n.budget.release(tok, time.Now())
			return
		}
		body, _ := json.Marshal(tok)
		_, _ = n.peer(id, addr).send(opRelease, body)
	}
}

// stampCap carries the group's cap in c when the log format can.
func (b memBudget) stampCap(c *fsm.Command) {
	if b.cap != 0 && b.v >= fsm.CodecV7 && mayAllocate(c) {
		c.MemLimit = b.cap
	}
}
