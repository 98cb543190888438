package client

import (
	"context"
	"errors"
	"slices"
	"strings"
)

// request is one command of a call and what became of it.
type request struct {
	args  []string
	write bool
	key   Key // the session and sequence number of a write

	rep     reply // the answer
	err     error // why it failed, when it got no answer
	maybe   bool  // an attempt may have applied it
	cause   error // the failure that decided its class, with the node
	cmdName string
}

func (r *request) appendTo(b []byte) []byte {
	if r.write {
		return appendIdem(b, r.key.Session, r.key.Seq, r.args)
	}
	return appendCommand(b, r.args)
}

// name is the command and its key, for error messages.
func (r *request) name() string {
	if r.cmdName == "" {
		r.cmdName = strings.ToUpper(r.args[0])
		if len(r.args) > 1 {
			r.cmdName += " " + r.args[1]
		}
	}
	return r.cmdName
}

// fail settles r as failed: ErrIndeterminate if any attempt may have applied
// it, else ErrUnavailable; stop says why the client gave up.
func (r *request) fail(stop error) {
	class := ErrUnavailable
	if r.maybe {
		class = ErrIndeterminate
	}
	cause := r.cause
	if _, all := stop.(nodeErrors); all && !r.maybe {
		cause = nil // the list of unreachable nodes says it all
	}
	r.err = &callError{class: class, cmd: r.name(), cause: cause, stop: stop}
}

// route is where a call's requests go.
type route struct {
	write bool      // to the leader (writes, and pipelines holding one)
	level ReadLevel // for reads elsewhere
	// slots are the distinct hash slots of the requests' keys when each
	// request has one key: they go to the shard that holds them all, if one
	// does. Empty when a request has no key or several.
	slots []int
}

func (c *Client) routeFor(ctx context.Context, write bool, reqs []*request) route {
	rt := route{write: write, slots: slotsOf(reqs)}
	if write {
		return rt
	}
	rt.level = c.opts.ReadLevel
	if l, ok := ctx.Value(levelKey{}).(ReadLevel); ok {
		rt.level = l
	}
	return rt
}

// slotsOf lists the distinct slots of reqs' keys, or nil if one of them has
// no key or several.
func slotsOf(reqs []*request) []int {
	var slots []int
	for _, r := range reqs {
		key, ok := commandKey(r.args)
		if !ok {
			return nil
		}
		if s := keySlot(key); !slices.Contains(slots, s) {
			slots = append(slots, s)
		}
	}
	return slots
}

// errRetries is why a call stopped when its retries ran out.
var errRetries = errors.New("retries exhausted")

// run sends reqs, all in one exchange per attempt, until each has an answer or
// the client gives up on it. The retry policy:
//
//   - a node that cannot be reached (dial, TLS or AUTH failed, nothing sent)
//     is passed over for the rest of the call and another is tried at once;
//     when every node has been passed over, the call fails at once;
//   - a node's "not applied, try again" (CLUSTERDOWN, TRYAGAIN, SHUTDOWN,
//     LOADING) and a sent request without a reply (lost connection, timeout)
//     are retried after a pause, to another node for reads, with the same
//     session and sequence number for writes, up to Options.Retries times;
//   - the context's end stops everything, at once.
//
// A request that never gets an answer fails with ErrIndeterminate if one
// attempt of it may have been applied, else with ErrUnavailable.
func (c *Client) run(ctx context.Context, rt route, reqs []*request) {
	a := &attempts{c: c, rt: rt, skip: make(map[*node]bool)}
	pending := reqs
	outs := make([]outcome, len(reqs))
	for {
		n, sh, stop := a.pick(ctx)
		if stop != nil {
			failAll(pending, stop)
			return
		}
		p := n.lin
		if !rt.write && rt.level == ReadStale {
			p = n.stale
		}
		p.exchange(ctx, pending, outs[:len(pending)])
		next, lost, dialErr := settle(n.addr, pending, outs[:len(pending)])
		if len(next) == 0 {
			return
		}
		to := movedTo(outs[:len(pending)])
		pending = next
		if dialErr != nil {
			if !a.unreachable(n, dialErr, pending) {
				return
			}
			continue
		}
		if to != "" && !lost && a.follow(n, sh, to) {
			continue
		}
		if err := a.retry(ctx, n, sh, lost); err != nil {
			failAll(pending, err)
			return
		}
	}
}

// attempts is the state of one call across its attempts.
type attempts struct {
	c       *Client
	rt      route
	skip    map[*node]bool // nodes found unreachable in this call
	down    nodeErrors     // and why
	retries int
}

// pick chooses the node of the next attempt, and for a write sent to a
// shard's leader that shard, or says why there is none.
func (a *attempts) pick(ctx context.Context) (*node, *shard, error) {
	switch {
	case a.c.closed.Load():
		return nil, nil, ErrClosed
	case ctx.Err() != nil:
		return nil, nil, ctx.Err()
	}
	var n *node
	var sh *shard
	if a.rt.write {
		n, sh = a.c.pickWrite(a.rt.slots, a.skip)
	} else {
		n = a.c.pickRead(a.rt.slots, a.skip)
	}
	if n == nil {
		return nil, nil, a.down
	}
	return n, sh, nil
}

// unreachable takes in a node that could not be reached (nothing was sent)
// and reports whether to try another: at once, without spending a retry. A
// refused password ends the call.
func (a *attempts) unreachable(n *node, err error, pending []*request) bool {
	var de *dialError
	if errors.As(err, &de) && de.auth {
		// Retrying cannot help; a request an earlier attempt may have
		// applied stays indeterminate.
		authErr := &NodeError{Addr: n.addr, Err: err}
		for _, r := range pending {
			if r.maybe {
				r.fail(authErr)
			} else {
				r.err = authErr
			}
		}
		return false
	}
	a.skip[n] = true
	n.markDown()
	a.c.forgetNode(n.addr)
	a.down = append(a.down, &NodeError{Addr: n.addr, Err: err})
	return true
}

// retry spends a retry after an attempt that reached n without settling
// everything, pausing as the policy says; its error is why the call stops. A
// write's failure drops n as the leader of sh (of the cluster, for nil) and
// a read's has the map refreshed, so that the next attempts follow a leader
// that changed.
func (a *attempts) retry(ctx context.Context, n *node, sh *shard, lost bool) error {
	a.retries++
	if a.retries > a.c.opts.Retries {
		return errRetries
	}
	if a.rt.write {
		a.c.forgetLeader(n.addr, sh)
	} else {
		a.c.kickRefresh()
	}
	if lost || !a.rt.write {
		// A node that took a request and gave no answer (or could not serve
		// a read) is passed over by the next attempts for a moment.
		n.markDown()
	}
	// A read moves to the next node at once, and pauses only when it has been
	// round them all; a write waits for an election to end.
	if a.rt.write || a.retries%a.c.readRound(a.rt.slots) == 0 {
		return a.c.backoff(ctx, a.retries)
	}
	return nil
}

// follow takes in a node's MOVED to addr: the shard's leader is there (a
// write), or n holds no replica of the shard (a read). When addr is a node
// the client knows, the next attempt goes there at once, spending a retry
// but no pause, and n is passed over for the rest of the call (no two nodes
// can send a request back and forth); the map is re-read either way. It
// reports whether it took the redirect.
func (a *attempts) follow(n *node, sh *shard, addr string) bool {
	a.c.kickRefresh()
	if a.retries >= a.c.opts.Retries {
		return false
	}
	a.c.mu.Lock()
	known := a.c.nodes[addr] != nil && addr != n.addr
	if known && a.rt.write && sh != nil {
		sh.leader = addr
	}
	a.c.mu.Unlock()
	if !known || a.rt.write && sh == nil {
		return false
	}
	a.retries++
	a.skip[n] = true
	return true
}

// movedTo is the address of a MOVED answer among an exchange's outcomes
// (MOVED slot host:port), or "".
func movedTo(outs []outcome) string {
	for _, o := range outs {
		if o.err == nil && o.rep.isError() && strings.HasPrefix(o.rep.str, "MOVED ") {
			if f := strings.Fields(o.rep.str); len(f) == 3 {
				return f[2]
			}
		}
	}
	return ""
}

func failAll(reqs []*request, stop error) {
	for _, r := range reqs {
		r.fail(stop)
	}
}

// settle takes in one exchange's outcomes: answered requests are done; it
// returns the others, whether one was sent and left without an answer, and the
// dial error if nothing was sent at all.
func settle(addr string, reqs []*request, outs []outcome) (next []*request, lost bool, dialErr error) {
	for i, r := range reqs {
		o := outs[i]
		if o.err != nil {
			var de *dialError
			if errors.As(o.err, &de) {
				dialErr = o.err
			} else if o.sent {
				lost = true
				r.maybe = r.maybe || r.write
			}
			// A request once sent keeps the failure that made it unknown.
			if !r.maybe || o.sent {
				r.cause = &NodeError{Addr: addr, Err: o.err}
			}
			next = append(next, r)
			continue
		}
		switch classify(o.rep) {
		case answer:
			r.rep = o.rep
			continue
		case unknown:
			if r.write {
				r.maybe = true
			}
			r.cause = &NodeError{Addr: addr, Err: errors.New(o.rep.str)}
		case notApplied:
			if !r.maybe {
				r.cause = &NodeError{Addr: addr, Err: errors.New(o.rep.str)}
			}
		}
		next = append(next, r)
	}
	return next, lost, dialErr
}

// call runs one request: a write under the context's Key or a session of the
// pool, a read at the context's level.
func (c *Client) call(ctx context.Context, r *request) error {
	if r.write {
		if k, ok := keyOf(ctx); ok {
			if err := checkKey(k); err != nil {
				return err
			}
			r.key = k
		} else {
			s := c.sessions.get()
			defer c.sessions.put(s)
			r.key = Key{Session: s.id, Seq: s.next()}
		}
	}
	reqs := []*request{r}
	c.run(ctx, c.routeFor(ctx, r.write, reqs), reqs)
	return r.err
}

// op is one command and how to read its answer.
type op[T any] struct {
	args   []string
	write  bool
	decode func(reply) (T, error)
}

// do runs o as one call.
func do[T any](ctx context.Context, c *Client, o op[T]) (T, error) {
	r := &request{args: o.args, write: o.write}
	if err := c.call(ctx, r); err != nil {
		var zero T
		return zero, err
	}
	return o.decode(r.rep)
}
