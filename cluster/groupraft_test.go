package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// neverFuture is a raft future still queued when raft stopped: raft never
// answers it.
type neverFuture struct{}

func (neverFuture) Error() error  { select {} }
func (neverFuture) Index() uint64 { panic("read before an answer") }
func (neverFuture) Response() any { panic("read before an answer") }

// answered is a future raft has answered.
type answeredFuture struct{ index uint64 }

func (answeredFuture) Error() error    { return nil }
func (a answeredFuture) Index() uint64 { return a.index }
func (answeredFuture) Response() any   { return "applied" }

// TestFuturesAnswerOnceRaftStops: a group's futures answer ErrRaftShutdown
// once its raft is told to stop, where raft would leave a queued one
// unanswered for ever (and the loop waiting on it, and the node's close
// waiting on that loop); one raft answered first keeps its answer.
func TestFuturesAnswerOnceRaftStops(t *testing.T) {
	down := make(chan struct{})
	queued := &stopAwareApply{stopAwareIndex: stopAwareIndex{stopAware: stopAware{f: neverFuture{}, down: down}, xf: neverFuture{}}, af: neverFuture{}}
	transfer := &stopAware{f: neverFuture{}, down: down}
	done := &stopAwareApply{stopAwareIndex: stopAwareIndex{stopAware: stopAware{f: answeredFuture{index: 7}, down: down}, xf: answeredFuture{index: 7}}, af: answeredFuture{index: 7}}
	if err := done.Error(); err != nil || done.Index() != 7 || done.Response() != "applied" {
		t.Fatalf("an answered future: %v, index %d, %v", err, done.Index(), done.Response())
	}
	errs := make(chan error, 2)
	go func() { errs <- queued.Error() }()
	go func() { errs <- transfer.Error() }()
	select {
	case err := <-errs:
		t.Fatalf("a queued future answered before raft stopped: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(down)
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, raft.ErrRaftShutdown) {
				t.Fatalf("a queued future once raft stopped: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a queued future still unanswered after raft stopped")
		}
	}
	// Waited on again, from anywhere: the same answer, and nothing raft
	// might still write is read.
	if err := queued.Error(); !errors.Is(err, raft.ErrRaftShutdown) || queued.Index() != 0 || queued.Response() != nil {
		t.Fatalf("a queued future asked again: %v, index %d, %v", err, queued.Index(), queued.Response())
	}
	if err := done.Error(); err != nil || done.Index() != 7 {
		t.Fatalf("an answered future after raft stopped: %v, index %d", err, done.Index())
	}
}

// TestTransfersCountedUntilRaftStops: a transfer raft never answered stops
// holding the group's writes once raft stops.
func TestTransfersCountedUntilRaftStops(t *testing.T) {
	down := make(chan struct{})
	r := &groupRaft{down: down}
	f := r.track(r.future(neverFuture{}))
	if !r.transferring() {
		t.Fatal("a transfer under way is not counted")
	}
	close(down)
	if err := f.Error(); !errors.Is(err, raft.ErrRaftShutdown) {
		t.Fatalf("transfer after raft stopped: %v", err)
	}
	if r.transferring() {
		t.Fatal("a transfer raft never answered is still counted after it stopped")
	}
}
