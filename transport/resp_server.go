package transport

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/fsm"
)

// Errors returned by the servers.
var (
	// ErrServerClosed is returned by Serve after Close.
	ErrServerClosed = errors.New("transport: server closed")
)

// writeTimeout bounds one flush of replies, so a client that stops reading
// cannot pin its connection's goroutine.
const writeTimeout = 30 * time.Second

// Server is the RESP server. Serve it on any number of listeners; Close stops
// them all and waits for every connection to end.
type Server struct {
	cfg     Config
	be      Backend
	log     *slog.Logger
	cmds    map[string]*command
	m       *metrics
	started time.Time

	ctx    context.Context // ends when Close gives up waiting; bounds every wait
	cancel context.CancelFunc

	stopping  atomic.Bool
	clients   atomic.Int64
	nextID    atomic.Uint64
	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	wg        sync.WaitGroup // connection goroutines
}

// New returns a RESP server for be.
func New(cfg Config, be Backend) *Server {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		cfg: cfg, be: be, log: cfg.Logger, cmds: commandTable(),
		m: newMetrics(cfg.Registry, be), started: time.Now(),
		ctx: ctx, cancel: cancel,
		listeners: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{},
	}
}

// Serve accepts connections on ln until Close; it then returns ErrServerClosed.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.stopping.Load() {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()
	backoff := time.Duration(0)
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.stopping.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept", "err", err, "retry_in", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		s.accept(nc)
	}
}

// accept starts a connection's goroutine, or refuses it over the client limit.
func (s *Server) accept(nc net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping.Load() {
		nc.Close()
		return
	}
	full := s.clients.Load() >= int64(s.cfg.MaxClients)
	c := &conn{s: s, nc: nc, rd: newReader(nc, s.cfg.MaxRequestBytes, s.cfg.maxArgs()),
		wr: redcon.NewWriter(nc), sess: session{id: s.nextID.Add(1), proto: 2, level: s.cfg.DefaultReadLevel}}
	c.sess.authed = s.cfg.RequirePass == ""
	s.wg.Add(1)
	if full {
		s.m.rejected.Inc()
		go c.refuse()
		return
	}
	s.conns[c] = struct{}{}
	s.clients.Add(1)
	s.m.conns.Inc()
	s.m.accepted.Inc()
	go c.serve()
}

// Close stops accepting, lets every connection finish the batch it is serving
// (bounded by the request timeout), then closes what remains and waits for all
// connection goroutines to end.
func (s *Server) Close() error {
	s.mu.Lock()
	s.stopping.Store(true)
	for ln := range s.listeners {
		ln.Close()
	}
	for c := range s.conns {
		c.nc.SetReadDeadline(time.Now()) // a connection blocked reading ends now
	}
	s.mu.Unlock()

	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.cfg.RequestTimeout + time.Second):
		s.cancel()
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		<-done
	}
	s.cancel()
	return nil
}

// conn is one client connection, served by one goroutine.
type conn struct {
	s    *Server
	nc   net.Conn
	rd   *reader
	wr   *redcon.Writer
	sess session

	out     []byte    // replies of the current batch, in request order
	pending []pending // replies that cannot be written yet

	// The read barrier shared by a run of reads: valid until the connection
	// submits a write or the batch ends.
	barrierDone  bool
	barrierLevel cluster.ReadLevel
	barrierErr   error
}

// pending is a reply that must wait for an earlier write's outcome: a write's own
// future, or an already rendered reply queued behind one.
type pending struct {
	fut    *cluster.Future
	render func(*reply, *fsm.Result)
	pre    []byte
	proto  int
	name   string
	start  time.Time
}

// refuse tells a client over the limit so, then closes it.
func (c *conn) refuse() {
	defer c.s.wg.Done()
	c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	c.wr.WriteError(string(errMaxClients))
	c.wr.Flush()
	c.nc.Close()
}

// serve is the connection's loop: read a batch, execute it, flush once.
func (c *conn) serve() {
	defer c.done()
	for {
		if c.s.cfg.IdleTimeout > 0 {
			c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
		}
		if c.s.stopping.Load() {
			return
		}
		batch, err := c.rd.readBatch()
		if err != nil {
			var pe protocolError
			if errors.As(err, &pe) {
				c.s.m.protoErr.Inc()
				c.s.log.Debug("protocol error", "remote", c.nc.RemoteAddr().String(), "err", err)
				c.wr.WriteError("ERR " + pe.Error())
				c.flush()
			}
			return
		}
		c.exec(batch)
		if c.flush() != nil || c.sess.quit {
			return
		}
	}
}

func (c *conn) done() {
	c.nc.Close()
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.mu.Unlock()
	c.s.clients.Add(-1)
	c.s.m.conns.Dec()
	c.s.wg.Done()
}

func (c *conn) flush() error {
	c.wr.WriteRaw(c.out)
	c.out = c.out[:0]
	if cap(c.out) > 1<<20 {
		c.out = nil // do not pin a big reply's buffer
	}
	c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	return c.wr.Flush()
}

// exec executes one batch in request order. Consecutive writes are submitted
// without waiting; a read first waits for the connection's earlier writes (so a
// client reads its own writes) and shares one read barrier with the reads right
// after it; every other reply is queued behind pending writes.
func (c *conn) exec(batch [][][]byte) {
	c.barrierDone = false
	// Requests of a batch arrived together: one clock reading serves them all.
	start := time.Now()
	for _, args := range batch {
		if c.sess.quit {
			break // QUIT: later requests are not served
		}
		o, err := c.s.parse(&c.sess, args)
		switch {
		case err != nil:
			c.immediate(o.name, start, func(w *reply) { w.fail(err) })
		case o.kind == opWrite:
			c.pending = append(c.pending, pending{fut: c.s.be.Submit(o.cmd), render: o.render,
				proto: c.sess.proto, name: o.name, start: start})
			c.barrierDone = false
		case o.kind == opRead:
			c.drain()
			c.read(o, start)
		default:
			c.immediate(o.name, start, func(w *reply) { o.local(&c.sess, w) })
		}
	}
	c.drain()
}

// immediate renders a reply that needs no waiting, in place or queued behind
// pending writes.
func (c *conn) immediate(name string, start time.Time, render func(w *reply)) {
	if len(c.pending) == 0 {
		w := reply{b: c.out, proto: c.sess.proto}
		render(&w)
		c.s.m.observe(name, replyOutcome(w.b, len(c.out)), start)
		c.out = w.b
		return
	}
	w := reply{proto: c.sess.proto}
	render(&w)
	c.pending = append(c.pending, pending{pre: w.b, name: name, start: start})
}

// drain waits for every pending write in order and renders the replies.
func (c *conn) drain() {
	if len(c.pending) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(c.s.ctx, c.s.cfg.RequestTimeout)
	defer cancel()
	for i := range c.pending {
		p := &c.pending[i]
		if p.fut == nil {
			c.s.m.observe(p.name, replyOutcome(p.pre, 0), p.start)
			c.out = append(c.out, p.pre...)
			continue
		}
		res, err := p.fut.Wait(ctx)
		w := reply{b: c.out, proto: p.proto}
		switch {
		case err != nil:
			w.fail(err)
		case res == nil:
			err = errors.New("no result")
			w.fail(err) // rendered as indeterminate
		default:
			p.render(&w, res)
		}
		oc := outcome(err)
		if err == nil && res.Err != nil {
			oc = "error"
		}
		c.s.m.observe(p.name, oc, p.start)
		c.out = w.b
		*p = pending{}
	}
	c.pending = c.pending[:0]
}

// read serves a read after the run's read barrier.
func (c *conn) read(o op, start time.Time) {
	if !c.barrierDone || c.barrierLevel != c.sess.level {
		// The backend bounds the wait itself; most barriers pass at once, and a
		// context with a deadline per read would cost a timer each.
		c.barrierErr = c.s.be.ReadBarrier(c.s.ctx, c.sess.level)
		c.barrierDone, c.barrierLevel = true, c.sess.level
	}
	w := reply{b: c.out, proto: c.sess.proto}
	if c.barrierErr != nil {
		w.fail(readErr(c.barrierErr))
		c.s.m.observe(o.name, "unavailable", start)
	} else {
		o.read(c.s.be.FSM(), &w)
		c.s.m.observe(o.name, replyOutcome(w.b, len(c.out)), start)
	}
	c.out = w.b
}

// replyOutcome classifies a rendered reply starting at b[at] for metrics.
func replyOutcome(b []byte, at int) string {
	if at < len(b) && b[at] == '-' {
		return "error"
	}
	return "ok"
}
