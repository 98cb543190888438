package cluster

import (
	"github.com/hashicorp/raft"
)

// A leader handing its leadership over (leader balance, a drain, SIGTERM, an
// operator's transfer) refuses every write raft is given meanwhile
// (ErrLeadershipTransferInProgress: TRYAGAIN). A client sent to the leader on
// purpose (a cluster client after MOVED, the Go client by the slot map) would
// meet that refusal where a write reaching a follower waits in its group's
// hold queue for the new leader. So the group counts its transfers under way,
// and while one is, its writes wait in the hold queue too, in order, then go
// to whoever leads once it is over (still this node, if the transfer failed).

// LeadershipTransfer is raft's, counted while under way.
func (r *groupRaft) LeadershipTransfer() raft.Future {
	return r.track(r.future(r.Raft.LeadershipTransfer()))
}

// LeadershipTransferToServer is raft's, counted while under way.
func (r *groupRaft) LeadershipTransferToServer(id raft.ServerID, addr raft.ServerAddress) raft.Future {
	return r.track(r.future(r.Raft.LeadershipTransferToServer(id, addr)))
}

// transferring reports whether a transfer of r's leadership is under way.
func (r *groupRaft) transferring() bool { return r != nil && r.transfers.Load() > 0 }

// track counts f until it completes and returns a future that completes
// with it once it is no longer counted: whoever waits on the transfer finds
// the group's writes no longer held when it hears the answer.
func (r *groupRaft) track(f raft.Future) raft.Future {
	r.transfers.Add(1)
	t := &doneFuture{done: make(chan struct{})}
	go func() {
		t.err = f.Error()
		r.transfers.Add(-1)
		close(t.done)
	}()
	return t
}

// doneFuture is a raft.Future that any number of goroutines may wait on.
type doneFuture struct {
	done chan struct{}
	err  error
}

func (d *doneFuture) Error() error {
	<-d.done
	return d.err
}
