package cluster

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// pipelinedTransport is raft's NetworkTransport with two changes to its
// append pipelines: it keeps them, so that closing a group can close them,
// and it holds back the empty appends that would tell a follower nothing.
// Every request goes through namedTransport, which dials each server as
// itself (dialname.go).
//
// Closing. hashicorp/raft can leave a replication goroutine waiting for ever
// in a pipeline's AppendEntries: when the follower answers with a newer term,
// the goroutine that reads the pipeline's responses stops, so the pipeline's
// slots of responses and of requests in flight fill, and the goroutine
// sending the next entry waits for a slot, or for the pipeline to be closed,
// which only that goroutine itself would do. raft's Shutdown waits for every
// replication goroutine, so a node stopping then hung until killed. Closing
// the pipelines from outside releases it (AppendEntries returns
// ErrPipelineShutdown); nothing else calls into them once raft is down.
//
// Idle groups. A leader sends each follower an append every CommitTimeout
// whether or not there is anything to send, so that a follower learns the
// commit index soon after a write: hundreds of requests a second per
// follower per group, doing nothing while the group is idle. An append with
// no entries that says what the last one sent already said (the same term,
// the same last entry, the same commit index) is not sent: it is answered
// with the next answer the follower gives this leader's group, to a
// heartbeat or to the next append sent, which the follower gave after the
// held append was made. Raft learns from such an answer only that the
// follower is in the term and holds the log it held (its last contact, and
// whether to step down); both were true when the follower answered, later
// than when the append was held. The first append after a write carries the
// new commit index, so it is sent; so is the next one after a heartbeat to
// the follower failed, and one every resendAfter.
//
// Commit nudges. A follower learns that an entry committed from the next
// append, sent at the latest CommitTimeout after the commit. A follower
// serving a linearizable read waits for the commit index the leader gives
// it; nudge sends, to each follower that has not been told it, an append of
// no entries carrying that commit index (capped at the last entry sent to
// the follower, so that it never commits entries it holds from an older
// leader), at once rather than on the timer. Raft never sees the answers to
// these; they answer held appends like any other.
type pipelinedTransport struct {
	namedTransport             // every request dialled to the server it is for (dialname.go)
	hb             *heartbeats // the node's (heartbeats.go); nil: every heartbeat goes out
	gid            int
	handler        func(raft.RPC) // raft's handler of heartbeats

	realSent  map[raft.ServerAddress]time.Time // when this group's last real heartbeat to a follower was sent (under mu)
	realHeard atomic.Int64                     // when this group last had a real heartbeat from its leader, unix nanos

	mu     sync.Mutex
	open   map[*trackedPipeline]struct{}
	closed bool
}

func newPipelinedTransport(t *raft.NetworkTransport, hb *heartbeats, gid int) *pipelinedTransport {
	return &pipelinedTransport{namedTransport: namedTransport{t}, hb: hb, gid: gid, open: map[*trackedPipeline]struct{}{},
		realSent: map[raft.ServerAddress]time.Time{}}
}

// sentLately reports whether this group sent target a real heartbeat within
// ownHeartbeatEvery of now: a heartbeat answered in a follower's name must
// not keep standing in for the group's own for long, because the follower
// passes shared heartbeats on only to groups that heard their leader lately
// (heartbeats.go).
func (t *pipelinedTransport) sentLately(target raft.ServerAddress, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return now.Sub(t.realSent[target]) < ownHeartbeatEvery
}

// heardLately reports whether this group had a real heartbeat from its
// leader within heardFor.
func (t *pipelinedTransport) heardLately(now time.Time) bool {
	return now.UnixNano()-t.realHeard.Load() < int64(heardFor)
}

// SetHeartbeatHandler passes raft's handler of heartbeats on, and has each
// heartbeat it handles passed on to the node's other groups that follow the
// same leader (heartbeats.go).
func (t *pipelinedTransport) SetHeartbeatHandler(cb func(rpc raft.RPC)) {
	t.mu.Lock()
	t.handler = cb
	t.mu.Unlock()
	if cb == nil || t.hb == nil {
		t.NetworkTransport.SetHeartbeatHandler(cb)
		return
	}
	t.NetworkTransport.SetHeartbeatHandler(func(rpc raft.RPC) {
		t.realHeard.Store(time.Now().UnixNano())
		cb(rpc)
		if req, ok := rpc.Command.(*raft.AppendEntriesRequest); ok {
			t.hb.passOn(req, t.gid)
		}
	})
}

// AppendEntriesPipeline opens a pipeline as raft's transport does, and keeps it.
func (t *pipelinedTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.namedTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	tp := &trackedPipeline{AppendPipeline: p, t: t, target: target,
		out: make(chan raft.AppendFuture, 256), stop: make(chan struct{}), mine: map[*raft.AppendEntriesRequest]bool{}}
	t.mu.Lock()
	closed := t.closed
	if !closed {
		t.open[tp] = struct{}{}
	}
	t.mu.Unlock()
	if closed {
		_ = p.Close()
		close(tp.stop)
		return tp, nil
	}
	go tp.forward()
	return tp, nil
}

// AppendEntries sends an append (a heartbeat, or raft's replication outside
// a pipeline) as raft's transport does; the follower's answer also answers
// the appends held back in pipelines to it.
func (t *pipelinedTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	heartbeat := isHeartbeat(args)
	sent := time.Now()
	if heartbeat && t.hb.vouched(target) && t.sentLately(target, sent) {
		// The node answered another group's heartbeat a moment ago.
		*resp = raft.AppendEntriesResponse{Term: args.Term, Success: true}
	} else {
		if err := t.namedTransport.AppendEntries(id, target, args, resp); err != nil {
			// The follower may be restarting: it forgets the commit index
			// it was told, so the next append to it goes out.
			for _, p := range t.pipelinesTo(target) {
				p.forget()
			}
			return err
		}
		if heartbeat && resp.Success {
			t.hb.answered(target, sent)
			t.mu.Lock()
			t.realSent[target] = sent
			t.mu.Unlock()
		}
	}
	for _, p := range t.pipelinesTo(target) {
		p.answerHeld(sent, args.Term, resp)
	}
	return nil
}

// pipelinesTo lists the open pipelines to target.
func (t *pipelinedTransport) pipelinesTo(target raft.ServerAddress) []*trackedPipeline {
	t.mu.Lock()
	defer t.mu.Unlock()
	var to []*trackedPipeline
	for p := range t.open {
		if p.target == target {
			to = append(to, p)
		}
	}
	return to
}

// nudge tells every follower this leader has a pipeline to that entries up
// to commit are committed, unless it has been told already.
func (t *pipelinedTransport) nudge(commit uint64) {
	t.mu.Lock()
	open := make([]*trackedPipeline, 0, len(t.open))
	for p := range t.open {
		open = append(open, p)
	}
	t.mu.Unlock()
	for _, p := range open {
		p.nudge(commit)
	}
}

// heartbeatHandler is raft's handler of heartbeats, once raft has set it.
func (t *pipelinedTransport) heartbeatHandler() func(raft.RPC) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.handler
}

// closePipelines closes every pipeline open now, and any opened from now on.
func (t *pipelinedTransport) closePipelines() {
	t.mu.Lock()
	t.closed = true
	open := t.open
	t.open = map[*trackedPipeline]struct{}{}
	t.mu.Unlock()
	for p := range open {
		_ = p.Close()
	}
}

type trackedPipeline struct {
	raft.AppendPipeline
	t      *pipelinedTransport
	target raft.ServerAddress
	out    chan raft.AppendFuture // what raft consumes: held and sent appends, answered
	stop   chan struct{}
	once   sync.Once

	send sync.Mutex // one append at a time into the pipeline: its requests and answers pair in order

	mu   sync.Mutex
	last struct { // what the last append sent said
		ok                  bool
		header              raft.RPCHeader
		at                  time.Time // when it was sent
		term, index, commit uint64
		indexTerm           uint64 // the term of the entry at index
	}
	held []*heldAppend                       // held back, oldest first
	mine map[*raft.AppendEntriesRequest]bool // nudges in flight: their answers are not raft's
}

// AppendEntries sends args down the pipeline, or holds it back when it
// would tell the follower nothing the last one sent did not.
func (p *trackedPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	p.mu.Lock()
	if len(args.Entries) == 0 && p.last.ok && args.Term == p.last.term &&
		args.PrevLogEntry == p.last.index && args.LeaderCommitIndex == p.last.commit &&
		time.Since(p.last.at) < resendAfter {
		h := &heldAppend{start: time.Now(), req: args, resp: resp, done: make(chan struct{})}
		p.held = append(p.held, h)
		p.mu.Unlock()
		return h, nil
	}
	p.mu.Unlock()
	return p.sendAppend(args, resp, false)
}

// sendAppend puts an append into the pipeline and records what it said.
func (p *trackedPipeline) sendAppend(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, mine bool) (raft.AppendFuture, error) {
	p.send.Lock()
	defer p.send.Unlock()
	if mine {
		p.mu.Lock()
		p.mine[args] = true
		p.mu.Unlock()
	}
	f, err := p.AppendPipeline.AppendEntries(args, resp)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		delete(p.mine, args)
		return nil, err
	}
	if args.Term != p.last.term || !p.last.ok {
		p.last.commit = 0
	}
	p.last.ok, p.last.term, p.last.header, p.last.at = true, args.Term, args.RPCHeader, time.Now()
	p.last.commit = max(p.last.commit, args.LeaderCommitIndex)
	p.last.index, p.last.indexTerm = args.PrevLogEntry, args.PrevLogTerm
	if n := len(args.Entries); n > 0 {
		p.last.index, p.last.indexTerm = args.Entries[n-1].Index, args.Entries[n-1].Term
	}
	return f, nil
}

// nudge sends the follower an append of no entries carrying commit, capped
// at the last entry sent to it, if it has not been told as much.
func (p *trackedPipeline) nudge(commit uint64) {
	p.mu.Lock()
	c := min(commit, p.last.index)
	if !p.last.ok || c <= p.last.commit {
		p.mu.Unlock()
		return
	}
	req := &raft.AppendEntriesRequest{RPCHeader: p.last.header, Term: p.last.term,
		PrevLogEntry: p.last.index, PrevLogTerm: p.last.indexTerm, LeaderCommitIndex: c}
	p.mu.Unlock()
	_, _ = p.sendAppend(req, new(raft.AppendEntriesResponse), true)
}

// resendAfter is how long appends are held back after the last one sent. A
// follower that restarted forgot the commit index it was told, and a
// pipeline whose connection broke shows it only when something is sent: a
// failed heartbeat to the follower ends the holding at once (forget); this
// bounds it when no heartbeat failed (a restart quicker than the heartbeat
// window), at one append per follower per resendAfter in an idle group.
const resendAfter = 5 * time.Second

// forget has the next append sent, whatever it says.
func (p *trackedPipeline) forget() {
	p.mu.Lock()
	p.last.ok = false
	p.mu.Unlock()
}

// Consumer is where raft reads the answers.
func (p *trackedPipeline) Consumer() <-chan raft.AppendFuture { return p.out }

// forward passes on the answers of sent appends, each after the held ones
// made before it was sent, answered with its answer.
func (p *trackedPipeline) forward() {
	in := p.AppendPipeline.Consumer()
	for {
		select {
		case f := <-in:
			if f.Error() == nil {
				p.answerHeld(f.Start(), f.Request().Term, f.Response())
			}
			p.mu.Lock()
			mine := p.mine[f.Request()]
			delete(p.mine, f.Request())
			p.mu.Unlock()
			if mine {
				continue
			}
			select {
			case p.out <- f:
			case <-p.stop:
				return
			}
		case <-p.stop:
			return
		}
	}
}

// answerHeld answers, with a follower's answer to an append of term sent at
// sent, every held append made before sent, in order.
func (p *trackedPipeline) answerHeld(sent time.Time, term uint64, resp *raft.AppendEntriesResponse) {
	p.mu.Lock()
	n := 0
	for n < len(p.held) && !p.held[n].start.After(sent) {
		n++
	}
	if n == 0 {
		p.mu.Unlock()
		return
	}
	ready := p.held[:n:n]
	p.held = p.held[n:]
	p.mu.Unlock()
	for _, h := range ready {
		*h.resp = raft.AppendEntriesResponse{RPCHeader: resp.RPCHeader, Term: resp.Term, LastLog: resp.LastLog,
			Success: resp.Success && resp.Term <= term, NoRetryBackoff: resp.NoRetryBackoff}
		close(h.done)
		select {
		case p.out <- h:
		case <-p.stop:
			return
		}
	}
}

func (p *trackedPipeline) Close() error {
	p.t.mu.Lock()
	delete(p.t.open, p)
	p.t.mu.Unlock()
	p.once.Do(func() { close(p.stop) })
	return p.AppendPipeline.Close()
}

// heldAppend is an append held back, as raft's AppendFuture.
type heldAppend struct {
	start time.Time
	req   *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	done  chan struct{}
}

func (h *heldAppend) Error() error                          { <-h.done; return nil }
func (h *heldAppend) Start() time.Time                      { return h.start }
func (h *heldAppend) Request() *raft.AppendEntriesRequest   { return h.req }
func (h *heldAppend) Response() *raft.AppendEntriesResponse { return h.resp }
