package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// peerTable answers node-to-node requests for a reader under test: each
// address answers confirm requests with its error (nil: yes), after an
// optional hold, and counts what it was asked.
type peerTable struct {
	mu       sync.Mutex
	confirm  map[string]error
	hold     map[string]chan struct{}
	index    uint64 // what opReadIndex answers
	indexErr error
	asked    map[string]int
	terms    []uint64 // the term of each confirm request
}

func newPeerTable() *peerTable {
	return &peerTable{confirm: map[string]error{}, hold: map[string]chan struct{}{}, asked: map[string]int{}}
}

func (p *peerTable) call(ctx context.Context, _, addr string, op byte, body []byte) ([]byte, error) {
	p.mu.Lock()
	p.asked[addr]++
	hold := p.hold[addr]
	p.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch op {
	case opConfirm:
		p.terms = append(p.terms, binary.BigEndian.Uint64(body))
		err, ok := p.confirm[addr]
		if !ok {
			return nil, errConnLost
		}
		return nil, err
	case opReadIndex:
		if p.indexErr != nil {
			return nil, p.indexErr
		}
		return binary.BigEndian.AppendUint64(nil, p.index), nil
	}
	return nil, errUnknownOp
}

func (p *peerTable) askedOf(addr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.asked[addr]
}

// setHold makes the peers at addrs answer only once hold is closed.
func (p *peerTable) setHold(hold chan struct{}, addrs ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range addrs {
		p.hold[a] = hold
	}
}

func newTestReader(fr *fakeRaft, peers *peerTable) *reader {
	return &reader{r: fr, self: "n1", call: peers.call}
}

// TestConfirmLeadership: a round needs a quorum of voters in term, the
// leader's own vote counted; peers of an older build complete a quorum only
// through raft's VerifyLeader.
func TestConfirmLeadership(t *testing.T) {
	errNo := ErrNotLeader                                 // a peer that has moved to another term
	legacy := errOf(codeError, []byte("unknown request")) // as a peer of an older build answers
	for _, tc := range []struct {
		name      string
		voters    []string
		nonvoters []string
		answers   map[string]error // absent: connection lost
		verifyErr error
		want      error
		verifies  int
	}{
		{name: "a sole voter confirms itself", voters: []string{"n1"}},
		{name: "one yes of two peers makes a quorum of three", voters: []string{"n1", "n2", "n3"},
			answers: map[string]error{"n2:raft": nil, "n3:raft": errNo}},
		{name: "both peers in another term: deposed", voters: []string{"n1", "n2", "n3"},
			answers: map[string]error{"n2:raft": errNo, "n3:raft": errNo}, want: ErrNotLeader},
		{name: "unreachable peers count against", voters: []string{"n1", "n2", "n3"}, want: ErrNotLeader},
		{name: "two of four peers are not a quorum of five", voters: []string{"n1", "n2", "n3", "n4", "n5"},
			answers: map[string]error{"n2:raft": nil, "n3:raft": errNo, "n4:raft": errNo, "n5:raft": errNo}, want: ErrNotLeader},
		{name: "non-voters are not asked and do not count", voters: []string{"n1", "n2", "n3"}, nonvoters: []string{"n4", "n5"},
			answers: map[string]error{"n2:raft": nil, "n4:raft": nil, "n5:raft": nil}},
		{name: "an older peer completes a quorum through VerifyLeader", voters: []string{"n1", "n2", "n3"},
			answers: map[string]error{"n2:raft": legacy, "n3:raft": errNo}, verifies: 1},
		{name: "VerifyLeader refusing: not the leader", voters: []string{"n1", "n2", "n3"},
			answers: map[string]error{"n2:raft": legacy, "n3:raft": legacy}, verifyErr: raft.ErrNotLeader, want: ErrNotLeader, verifies: 1},
		{name: "the leader is not a voter of its configuration", voters: []string{"n2", "n3"},
			answers: map[string]error{"n2:raft": nil}, want: ErrNotLeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fr := newFakeRaft("n1", tc.voters...)
			for _, id := range tc.nonvoters {
				fr.servers = append(fr.servers, nonvoter(id))
			}
			fr.verifyErr = tc.verifyErr
			peers := newPeerTable()
			for addr, err := range tc.answers {
				peers.confirm[addr] = err
			}
			err := newTestReader(fr, peers).confirm(context.Background(), 7)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("confirm: %v, want %v", err, tc.want)
			}
			if fr.verifies != tc.verifies {
				t.Fatalf("VerifyLeader called %d times, want %d", fr.verifies, tc.verifies)
			}
			for _, id := range tc.nonvoters {
				if peers.askedOf(id+":raft") != 0 {
					t.Fatalf("non-voter %s was asked", id)
				}
			}
			peers.mu.Lock()
			terms := append([]uint64(nil), peers.terms...)
			peers.mu.Unlock()
			for _, term := range terms {
				if term != 7 {
					t.Fatalf("a confirm request carried term %d, want the round's 7", term)
				}
			}
		})
	}
}

// A round ends as soon as a quorum has answered: a slow peer does not hold it,
// and a round whose context ends first is "no leader", safe to retry.
func TestConfirmDoesNotWaitForTheSlowest(t *testing.T) {
	fr := newFakeRaft("n1", "n1", "n2", "n3")
	peers := newPeerTable()
	peers.confirm["n2:raft"] = nil
	peers.confirm["n3:raft"] = nil
	peers.setHold(make(chan struct{}), "n3:raft") // never answers
	if err := newTestReader(fr, peers).confirm(context.Background(), 1); err != nil {
		t.Fatalf("confirm with one peer hanging: %v", err)
	}
	peers.setHold(make(chan struct{}), "n2:raft")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := newTestReader(fr, peers).confirm(ctx, 1); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("confirm with every peer hanging and the context ended: %v, want ErrNoLeader", err)
	}
}

// TestLeaderRound: the barrier is committed once per term, the index handed
// out is the commit index read before leadership was confirmed, and a term
// that moves during the round refuses it.
func TestLeaderRound(t *testing.T) {
	fr := newFakeRaft("n1", "n1", "n2", "n3")
	fr.commit = 40
	peers := newPeerTable()
	peers.confirm["n2:raft"] = nil
	peers.confirm["n3:raft"] = nil
	x := newTestReader(fr, peers)
	for i := 0; i < 3; i++ {
		idx, err := x.leaderRound(context.Background())
		if err != nil || idx != 40 {
			t.Fatalf("round %d: %d %v, want 40", i, idx, err)
		}
	}
	if fr.barriers != 1 {
		t.Fatalf("%d barriers in one term, want 1", fr.barriers)
	}
	fr.mu.Lock()
	fr.term = 2
	fr.mu.Unlock()
	if _, err := x.leaderRound(context.Background()); err != nil || fr.barriers != 2 {
		t.Fatalf("a new term: %v, %d barriers, want 2", err, fr.barriers)
	}

	// The commit index moves while the peers answer: the round hands out
	// the one it read before asking.
	hold := make(chan struct{})
	peers.setHold(hold, "n2:raft", "n3:raft")
	done := make(chan uint64)
	go func() {
		idx, _ := x.leaderRound(context.Background())
		done <- idx
	}()
	waitFor(t, func() bool {
		peers.mu.Lock()
		defer peers.mu.Unlock()
		return peers.asked["n2:raft"] == 5 && peers.asked["n3:raft"] == 5
	})
	fr.mu.Lock()
	fr.commit = 99
	fr.mu.Unlock()
	close(hold)
	if idx := <-done; idx != 40 {
		t.Fatalf("round handed out %d, want the index read before confirming, 40", idx)
	}

	// Deposed during the round: its term moved on.
	hold = make(chan struct{})
	peers.setHold(hold, "n2:raft", "n3:raft")
	errc := make(chan error)
	go func() {
		_, err := x.leaderRound(context.Background())
		errc <- err
	}()
	waitFor(t, func() bool {
		peers.mu.Lock()
		defer peers.mu.Unlock()
		return peers.asked["n2:raft"] == 6 && peers.asked["n3:raft"] == 6
	})
	fr.mu.Lock()
	fr.term = 3
	fr.mu.Unlock()
	close(hold)
	if err := <-errc; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("term moved during the round: %v, want ErrNotLeader", err)
	}

	fr.mu.Lock()
	fr.state = raft.Follower
	fr.mu.Unlock()
	if _, err := x.leaderRound(context.Background()); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a follower's leader round: %v", err)
	}
	fr.mu.Lock()
	fr.state, fr.term, fr.barrierErr = raft.Leader, 4, raft.ErrLeadershipLost
	fr.mu.Unlock()
	if _, err := x.leaderRound(context.Background()); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a barrier lost to an election: %v", err)
	}
}

// TestSoleVoterIndex: only a leader that is the one voter of its
// configuration, with this term's barrier applied, skips the round.
func TestSoleVoterIndex(t *testing.T) {
	fr := newFakeRaft("n1", "n1")
	fr.commit = 12
	x := newTestReader(fr, newPeerTable())
	if _, ok := x.soleVoterIndex(); ok {
		t.Fatal("served before this term's barrier was applied")
	}
	x.barrierTerm.Store(1)
	if idx, ok := x.soleVoterIndex(); !ok || idx != 12 {
		t.Fatalf("sole voter: %d %v", idx, ok)
	}
	fr.servers = append(fr.servers, nonvoter("n2"))
	if _, ok := x.soleVoterIndex(); ok {
		t.Fatal("served while another server is in the configuration")
	}
	fr.servers = []raft.Server{voter("n2")}
	if _, ok := x.soleVoterIndex(); ok {
		t.Fatal("served by a leader that is not the configuration's voter")
	}
	fr.servers, fr.state = []raft.Server{voter("n1")}, raft.Follower
	if _, ok := x.soleVoterIndex(); ok {
		t.Fatal("served by a follower")
	}
}

// TestRemoteIndex: a follower asks the leader it knows; no leader, or no
// answer, is "no leader" (a read is safe to retry).
func TestRemoteIndex(t *testing.T) {
	fr := newFakeRaft("n2", "n1", "n2", "n3")
	fr.state = raft.Follower
	peers := newPeerTable()
	peers.index = 77
	x := newTestReader(fr, peers)
	if idx, err := x.remoteIndex(context.Background()); err != nil || idx != 77 {
		t.Fatalf("remote index: %d %v", idx, err)
	}
	peers.indexErr = errConnLost
	if _, err := x.remoteIndex(context.Background()); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("leader unreachable: %v", err)
	}
	fr.leaderAddr = ""
	if _, err := x.remoteIndex(context.Background()); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("no leader known: %v", err)
	}
}

// TestGateSharesRounds: readers waiting while a round runs share the next
// one; a round's error reaches every reader of it; a reader whose context ends
// leaves without its answer.
func TestGateSharesRounds(t *testing.T) {
	var rounds atomic.Int64
	release := make(chan uint64)
	g := newGate(func(ctx context.Context) (uint64, error) {
		rounds.Add(1)
		idx := <-release
		if idx == 0 {
			return 0, ErrNotLeader
		}
		return idx, nil
	})
	first := make(chan uint64)
	go func() {
		idx, _ := g.wait(context.Background())
		first <- idx
	}()
	waitFor(t, func() bool { return rounds.Load() == 1 })
	// Ten readers arrive while the first round runs: they share the second.
	var wg sync.WaitGroup
	got := make(chan uint64, 10)
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			idx, _ := g.wait(context.Background())
			got <- idx
		}()
	}
	waitFor(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.waiting) == 10 })
	release <- 5
	if idx := <-first; idx != 5 {
		t.Fatalf("first reader got %d", idx)
	}
	release <- 6
	wg.Wait()
	close(got)
	for idx := range got {
		if idx != 6 {
			t.Fatalf("a reader who arrived during round 1 got %d, want round 2's 6", idx)
		}
	}
	if n := rounds.Load(); n != 2 {
		t.Fatalf("%d rounds for 11 readers, want 2", n)
	}
	errc := make(chan error)
	go func() {
		_, err := g.wait(context.Background())
		errc <- err
	}()
	release <- 0
	if err := <-errc; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a failed round: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, err := g.wait(ctx)
		errc <- err
	}()
	waitFor(t, func() bool { return rounds.Load() == 4 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("a reader whose context ended: %v", err)
	}
	release <- 1 // the abandoned round ends; nobody is left waiting
}

// waitFor polls cond (an event in another goroutine of the test) for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
