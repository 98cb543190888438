package client

import (
	"context"
	"errors"
)

// Pipeline queues commands and sends them together: Exec writes them all in
// one go on one connection and reads their answers in order, one round trip
// in all. With a write among them they go to the leader (the shard's, when
// every command is on a key of one shard), each write under its
// own session and sequence number (consecutive ones in a session the pipeline
// holds while it runs), so a pipeline retried after a lost connection or a
// leader change still applies each write exactly once, and its reads (then
// linearizable, whatever the context's level) see its earlier writes. Without
// writes they go to the next node of the read rotation (the shard's
// replicas, when every command is on a key of one shard) at the context's
// read level.
//
// The node applies a pipeline's writes in order but not atomically: another
// client's writes may come in between, and after a failure some may have been
// applied and others not. Each queued command returns a Result that holds its
// own answer or error once Exec returns. A Pipeline is not safe for concurrent
// use; after Exec it is empty and may queue the next batch.
type Pipeline struct {
	c       *Client
	reqs    []*request
	settles []func() error
}

// Pipeline returns an empty pipeline.
func (c *Client) Pipeline() *Pipeline { return &Pipeline{c: c} }

// Result is the answer of a queued command, valid once Exec has returned.
type Result[T any] struct {
	val T
	err error
}

// Val is the answer (the zero value if Err is not nil).
func (r *Result[T]) Val() T { return r.val }

// Err is the command's error: nil, a domain error (ErrNotFound...), or, when the
// pipeline gave up on it, ErrIndeterminate or ErrUnavailable as for a single
// call.
func (r *Result[T]) Err() error { return r.err }

// Result returns Val and Err.
func (r *Result[T]) Result() (T, error) { return r.val, r.err }

var errNotExecuted = errors.New("rookery: pipeline not executed")

// queue adds o to p and returns its Result.
func queue[T any](p *Pipeline, o op[T]) *Result[T] {
	req := &request{args: o.args, write: o.write}
	res := &Result[T]{err: errNotExecuted}
	p.reqs = append(p.reqs, req)
	p.settles = append(p.settles, func() error {
		if req.err != nil {
			res.err = req.err
		} else {
			res.val, res.err = o.decode(req.rep)
		}
		return res.err
	})
	return res
}

// Len is the number of queued commands.
func (p *Pipeline) Len() int { return len(p.reqs) }

// Exec sends the queued commands and waits for their answers, retrying as a
// single call does (see the package documentation). It returns the first
// error of the commands in queue order, or nil if every one succeeded; each
// Result holds its own. A context given a Key (WithKey) is refused: a
// pipeline numbers its own writes.
func (p *Pipeline) Exec(ctx context.Context) error {
	reqs, settles := p.reqs, p.settles
	p.reqs, p.settles = nil, nil
	if len(reqs) == 0 {
		return nil
	}
	if _, ok := keyOf(ctx); ok {
		err := errors.New("rookery: WithKey names one write; a pipeline numbers its own")
		for _, r := range reqs {
			r.err = err
		}
	} else {
		p.c.runNumbered(ctx, reqs)
	}
	var first error
	for _, settle := range settles {
		if err := settle(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// runNumbered gives each write of reqs a sequence number in a session of the
// pool (at most perSession per session, held until the call ends) and runs
// them in one call.
func (c *Client) runNumbered(ctx context.Context, reqs []*request) {
	write := false
	var s *session
	used := 0
	for _, r := range reqs {
		if !r.write {
			continue
		}
		write = true
		if s == nil || used == perSession {
			s, used = c.sessions.get(), 0
			defer c.sessions.put(s)
		}
		r.key = Key{Session: s.id, Seq: s.next()}
		used++
	}
	c.run(ctx, c.routeFor(ctx, write, reqs), reqs)
}

// BFAdd queues BF.ADD (Client.BFAdd).
func (p *Pipeline) BFAdd(key, item string) *Result[bool] { return queue(p, bfAdd(key, item)) }

// BFMAdd queues BF.MADD (Client.BFMAdd).
func (p *Pipeline) BFMAdd(key string, items ...string) *Result[[]bool] {
	return queue(p, bfMAdd(key, items))
}

// BFExists queues BF.EXISTS (Client.BFExists).
func (p *Pipeline) BFExists(key, item string) *Result[bool] { return queue(p, bfExists(key, item)) }

// BFMExists queues BF.MEXISTS (Client.BFMExists).
func (p *Pipeline) BFMExists(key string, items ...string) *Result[[]bool] {
	return queue(p, bfMExists(key, items))
}

// BFReserve queues BF.RESERVE (Client.BFReserve).
func (p *Pipeline) BFReserve(key string, errorRate float64, capacity int64, o *BFReserveOptions) *Result[struct{}] {
	return queue(p, bfReserve(key, errorRate, capacity, o))
}

// CFReserve queues CF.RESERVE (Client.CFReserve).
func (p *Pipeline) CFReserve(key string, capacity int64, o *CFReserveOptions) *Result[struct{}] {
	return queue(p, cfReserve(key, capacity, o))
}

// CFAdd queues CF.ADD (Client.CFAdd).
func (p *Pipeline) CFAdd(key, item string) *Result[struct{}] { return queue(p, cfAdd(key, item)) }

// CFAddNX queues CF.ADDNX (Client.CFAddNX).
func (p *Pipeline) CFAddNX(key, item string) *Result[bool] { return queue(p, cfAddNX(key, item)) }

// CFInsert queues CF.INSERT (Client.CFInsert).
func (p *Pipeline) CFInsert(key string, items ...string) *Result[[]bool] {
	return queue(p, cfInsert(key, items))
}

// CFDel queues CF.DEL (Client.CFDel).
func (p *Pipeline) CFDel(key, item string) *Result[bool] { return queue(p, cfDel(key, item)) }

// CFExists queues CF.EXISTS (Client.CFExists).
func (p *Pipeline) CFExists(key, item string) *Result[bool] { return queue(p, cfExists(key, item)) }

// CFMExists queues CF.MEXISTS (Client.CFMExists).
func (p *Pipeline) CFMExists(key string, items ...string) *Result[[]bool] {
	return queue(p, cfMExists(key, items))
}

// CFCount queues CF.COUNT (Client.CFCount).
func (p *Pipeline) CFCount(key, item string) *Result[int64] { return queue(p, cfCount(key, item)) }

// CBFAdd queues CBF.ADD (Client.CBFAdd).
func (p *Pipeline) CBFAdd(key, item string) *Result[bool] { return queue(p, cbfAdd(key, item)) }

// CBFMAdd queues CBF.MADD (Client.CBFMAdd).
func (p *Pipeline) CBFMAdd(key string, items ...string) *Result[[]bool] {
	return queue(p, cbfMAdd(key, items))
}

// CBFDel queues CBF.DEL (Client.CBFDel).
func (p *Pipeline) CBFDel(key, item string) *Result[bool] { return queue(p, cbfDel(key, item)) }

// CBFExists queues CBF.EXISTS (Client.CBFExists).
func (p *Pipeline) CBFExists(key, item string) *Result[bool] { return queue(p, cbfExists(key, item)) }

// CBFCount queues CBF.COUNT (Client.CBFCount).
func (p *Pipeline) CBFCount(key, item string) *Result[int64] { return queue(p, cbfCount(key, item)) }
