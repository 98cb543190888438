package cluster

import (
	"sync"

	"github.com/hashicorp/raft"
)

// pipelinedTransport is raft's NetworkTransport with the append pipelines it
// opens kept, so that closing a group can close them.
//
// hashicorp/raft can leave a replication goroutine waiting for ever in a
// pipeline's AppendEntries: when the follower answers with a newer term, the
// goroutine that reads the pipeline's responses stops, so the pipeline's
// slots of responses and of requests in flight fill, and the goroutine
// sending the next entry waits for a slot, or for the pipeline to be closed,
// which only that goroutine itself would do. raft's Shutdown waits for every
// replication goroutine, so a node stopping then hung until killed. Closing
// the pipelines from outside releases it (AppendEntries returns
// ErrPipelineShutdown); nothing else calls into them once raft is down.
type pipelinedTransport struct {
	*raft.NetworkTransport

	mu     sync.Mutex
	open   map[*trackedPipeline]struct{}
	closed bool
}

func newPipelinedTransport(t *raft.NetworkTransport) *pipelinedTransport {
	return &pipelinedTransport{NetworkTransport: t, open: map[*trackedPipeline]struct{}{}}
}

// AppendEntriesPipeline opens a pipeline as raft's transport does, and keeps it.
func (t *pipelinedTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	tp := &trackedPipeline{AppendPipeline: p, t: t}
	t.mu.Lock()
	closed := t.closed
	if !closed {
		t.open[tp] = struct{}{}
	}
	t.mu.Unlock()
	if closed {
		_ = p.Close()
	}
	return tp, nil
}

// closePipelines closes every pipeline open now, and any opened from now on.
func (t *pipelinedTransport) closePipelines() {
	t.mu.Lock()
	t.closed = true
	open := t.open
	t.open = map[*trackedPipeline]struct{}{}
	t.mu.Unlock()
	for p := range open {
		_ = p.AppendPipeline.Close()
	}
}

type trackedPipeline struct {
	raft.AppendPipeline
	t *pipelinedTransport
}

func (p *trackedPipeline) Close() error {
	p.t.mu.Lock()
	delete(p.t.open, p)
	p.t.mu.Unlock()
	return p.AppendPipeline.Close()
}
