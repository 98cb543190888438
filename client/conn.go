package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"
)

// The client keeps its own connections rather than a general Redis client's,
// because what it promises depends on knowing, for every request, whether any
// of it can have reached the node: a dial, TLS handshake or AUTH that fails, a
// pooled connection found closed before use, or a write the kernel refused,
// all mean "not sent"; only a request written and then left without its reply
// is "may have been applied".

// conn is one connection to a node.
type conn struct {
	nc   net.Conn
	raw  net.Conn // the connection under TLS, for the liveness check
	br   *bufio.Reader
	wbuf []byte
}

// dialError is a failure before a request was written: nothing was sent.
type dialError struct {
	err  error
	auth bool // the node refused the password: retrying cannot help
}

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// pool holds the connections to one node at one read level.
type pool struct {
	c     *Client
	addr  string
	stale bool          // connections said READONLY
	slots chan struct{} // one per open connection

	mu     sync.Mutex
	idle   []*conn
	closed bool
}

func newPool(c *Client, addr string, stale bool) *pool {
	return &pool{c: c, addr: addr, stale: stale, slots: make(chan struct{}, c.opts.PoolSize)}
}

// get returns an idle connection that is still open, or dials one. Its error is
// a *dialError: nothing was sent.
func (p *pool) get(ctx context.Context) (*conn, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, &dialError{err: fmt.Errorf("waiting for a connection: %w", ctx.Err())}
	}
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			<-p.slots
			return nil, &dialError{err: ErrClosed}
		}
		var cn *conn
		if n := len(p.idle); n > 0 {
			cn = p.idle[n-1]
			p.idle = p.idle[:n-1]
		}
		p.mu.Unlock()
		if cn == nil {
			break
		}
		// A node that closed the connection while it sat idle (it died or
		// restarted) is found here, before anything is written to it.
		if alive(cn.raw) {
			return cn, nil
		}
		cn.nc.Close()
	}
	cn, err := p.c.dial(ctx, p.addr, p.stale)
	if err != nil {
		<-p.slots
		return nil, err
	}
	return cn, nil
}

// put returns a healthy connection to the pool.
func (p *pool) put(cn *conn) {
	p.mu.Lock()
	if p.closed || len(p.idle) >= cap(p.slots) {
		p.mu.Unlock()
		cn.nc.Close()
	} else {
		p.idle = append(p.idle, cn)
		p.mu.Unlock()
	}
	<-p.slots
}

// drop closes a connection that failed.
func (p *pool) drop(cn *conn) {
	cn.nc.Close()
	<-p.slots
}

func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, cn := range p.idle {
		cn.nc.Close()
	}
	p.idle = nil
}

// outcome is what became of one request of an exchange: a reply, or an error
// and whether the request may have reached the node.
type outcome struct {
	rep  reply
	err  error
	sent bool
}

// aLongTimeAgo unblocks a connection's reads and writes at once.
var aLongTimeAgo = time.Unix(1, 0)

// exchange writes reqs in one go on one connection and reads their replies in
// order, filling outs.
func (p *pool) exchange(ctx context.Context, reqs []*request, outs []outcome) {
	cn, err := p.get(ctx)
	if err != nil {
		for i := range outs {
			outs[i] = outcome{err: err}
		}
		return
	}
	now := time.Now()
	wd, rd := now.Add(p.c.opts.WriteTimeout), now.Add(p.c.opts.ReadTimeout)
	if d, ok := ctx.Deadline(); ok {
		wd, rd = earliest(wd, d), earliest(rd, d)
	}
	_ = cn.nc.SetWriteDeadline(wd)
	_ = cn.nc.SetReadDeadline(rd)
	// A context cancelled without a deadline unblocks the connection too.
	stop := context.AfterFunc(ctx, func() { _ = cn.nc.SetDeadline(aLongTimeAgo) })

	size := 0
	for _, r := range reqs {
		size += encodedSize(r.args)
	}
	b := slices.Grow(cn.wbuf[:0], size)
	ends := make([]int, len(reqs))
	for i, r := range reqs {
		b = r.appendTo(b)
		ends[i] = len(b)
	}
	n, err := cn.nc.Write(b)
	if cap(b) <= 64<<10 {
		cn.wbuf = b[:0]
	} else {
		cn.wbuf = nil // keep no huge buffer on an idle connection
	}
	ok := err == nil
	if err != nil {
		// The kernel took the first n bytes: a request entirely within them
		// may have arrived; the node can execute no other.
		for i := range outs {
			outs[i] = outcome{err: withCtx(ctx, err), sent: ends[i] <= n}
		}
	} else {
		for i := range outs {
			rep, err := readReply(cn.br)
			if err != nil {
				for j := i; j < len(outs); j++ {
					outs[j] = outcome{err: withCtx(ctx, err), sent: true}
				}
				ok = false
				break
			}
			outs[i] = outcome{rep: rep}
		}
	}
	if !stop() || !ok {
		// The connection failed, or the cancellation may be setting its
		// deadline now: it is not used again.
		p.drop(cn)
		return
	}
	p.put(cn)
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// withCtx names the context's error alongside a network error it caused, so
// that errors.Is(err, context.DeadlineExceeded) holds.
func withCtx(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%w)", err, cerr)
	}
	return err
}

// dial opens a connection to addr: TCP (or the Options' Dialer), TLS if
// configured, AUTH with the user and password, READONLY for stale reads; all
// within the dial timeout. Every error is a *dialError.
func (c *Client) dial(ctx context.Context, addr string, stale bool) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	var raw net.Conn
	var err error
	if c.opts.Dialer != nil {
		raw, err = c.opts.Dialer(ctx, "tcp", addr)
	} else {
		d := net.Dialer{KeepAlive: 30 * time.Second}
		raw, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, &dialError{err: withCtx(ctx, err)}
	}
	nc := raw
	if c.tls != nil {
		cfg := c.tls
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, &dialError{err: fmt.Errorf("tls handshake: %w", withCtx(ctx, err))}
		}
		nc = tc
	}
	cn := &conn{nc: nc, raw: raw, br: bufio.NewReaderSize(nc, 16<<10)}
	if err := cn.setup(ctx, c.opts.Username, c.opts.Password, stale); err != nil {
		nc.Close()
		return nil, err
	}
	return cn, nil
}

// setup sends AUTH and READONLY as needed, in one round trip: AUTH user
// password with a user (even with an empty password, which a nopass user
// takes), AUTH password with a password alone.
func (cn *conn) setup(ctx context.Context, user, password string, stale bool) error {
	var b []byte
	var want []string
	switch {
	case user != "":
		b = appendCommand(b, []string{"AUTH", user, password})
		want = append(want, "AUTH")
	case password != "":
		b = appendCommand(b, []string{"AUTH", password})
		want = append(want, "AUTH")
	}
	if stale {
		b = appendCommand(b, []string{"READONLY"})
		want = append(want, "READONLY")
	}
	if len(b) == 0 {
		return nil
	}
	d, _ := ctx.Deadline()
	_ = cn.nc.SetDeadline(d)
	defer cn.nc.SetDeadline(time.Time{})
	if _, err := cn.nc.Write(b); err != nil {
		return &dialError{err: withCtx(ctx, err)}
	}
	for _, name := range want {
		rep, err := readReply(cn.br)
		if err != nil {
			return &dialError{err: fmt.Errorf("%s: %w", name, withCtx(ctx, err))}
		}
		if rep.isError() {
			auth := name == "AUTH" && !hasNotAppliedPrefix(rep.str)
			err := fmt.Errorf("%s: %s", name, rep.str)
			if auth {
				err = fmt.Errorf("%w: %s", ErrAuth, rep.str)
			}
			return &dialError{err: err, auth: auth}
		}
	}
	return nil
}
