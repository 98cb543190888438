package transport

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"github.com/rookerydb/rookery/internal/acl"
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
	// The node's users (acl.go): every connection runs as one.
	users  *acl.Store
	aclReg *acl.Registry
	aclLog *acl.Log
	// usersChanged is told of every change to the users (closeGoneUsers).
	usersChanged chan struct{}

	cfg     Config
	be      Backend
	log     *slog.Logger
	cmds    map[string]*command
	cmdList []*command // cmds by name
	m       *metrics
	// authFails counts and logs failed AUTHs; guard makes guessing cost time
	// per source address (authguard.go).
	authFails *authFailures
	guard     *AuthGuard
	stats     serverStats // INFO stats and commandstats (stats.go)
	started   time.Time
	bloom     atomic.Pointer[bloomConfig] // CONFIG SET bf-* and cf-* (bloomconfig.go)
	bloomMu   sync.Mutex                  // serialises CONFIG SET
	configs   []configParam               // CONFIG GET's parameters
	bg        sync.WaitGroup              // the stats sampler
	runID     string                      // INFO run_id: 40 random hex digits, new each start
	port      atomic.Int64                // INFO tcp_port: the first TCP listener's
	self      self                        // this node's id, for redirects (redirect.go)

	ctx    context.Context // ends when Close gives up waiting; bounds every wait
	cancel context.CancelFunc
	// closing ends when Close begins: it bounds waits that serve nobody once
	// the server stops (an AUTH waiting for its source's turn).
	closing     context.Context
	stopWaiting context.CancelFunc

	// Request readers: their limits, and the budget of what they may hold
	// together (budget.go), of which strangers may use a quarter.
	rlim           *readLimits
	budget         *budget
	strangerBudget *budget

	stopping  atomic.Bool
	clients   atomic.Int64 // connections holding a slot
	nextID    atomic.Uint64
	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	slots     slots          // admission.go
	wg        sync.WaitGroup // connection goroutines
}

// New returns a RESP server for be.
func New(cfg Config, be Backend) *Server {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	closing, stopWaiting := context.WithCancel(ctx)
	all := newBudget(cfg.MaxRequestBuffer, nil)
	s := &Server{
		cfg: cfg, be: be, log: cfg.Logger, cmds: commandTable(),
		m: newMetrics(cfg.Registry, be), authFails: newAuthFailures(cfg.Registry, cfg.Logger), guard: cfg.authGuard(),
		started: time.Now(), ctx: ctx, cancel: cancel, closing: closing, stopWaiting: stopWaiting, runID: newRunID(),
		budget: all, strangerBudget: newBudget(cfg.MaxRequestBuffer/4, all),
		listeners: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{},
		slots: newSlots(cfg.MaxClients),
	}
	s.rlim = &readLimits{maxReq: cfg.MaxRequestBytes, maxArgs: cfg.maxArgs(),
		maxBulk: cfg.MaxItemBytes, maxChunk: max(cfg.MaxItemBytes, maxChunkArgBytes), argBytes: s.argBytes,
		chunkCheck: s.chunkCheck}
	s.initACL()
	s.cmdList = listCommands(s.cmds)
	s.configs = configParams()
	s.bloom.Store(defaultBloomConfig(s.maxCap()))
	registerBudgetGauge(cfg.Registry, all)
	s.bg.Add(2)
	go s.sampleLoop()
	go s.closeGoneUsers()
	return s
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
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		s.port.CompareAndSwap(0, int64(a.Port))
	}
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

// accept starts a connection's goroutine, making room for it if it must
// (admission.go), or refuses it when every slot is held by an authenticated
// connection.
func (s *Server) accept(nc net.Conn) {
	c := s.newConn(nc)
	s.mu.Lock()
	if s.stopping.Load() {
		s.mu.Unlock()
		nc.Close()
		return
	}
	ok, evict := s.admit(c)
	s.wg.Add(1)
	if ok {
		s.conns[c] = struct{}{}
		s.m.accepted.Inc()
		s.stats.connections.Add(1)
	} else {
		s.m.rejected.Inc()
		s.stats.rejected.Add(1)
	}
	s.mu.Unlock()
	if evict != nil {
		evict.nc.Close() // its goroutine ends on the failed read
	}
	if !ok {
		go c.refuse()
		return
	}
	go c.serve()
}

// newConn prepares a connection. Nothing sizeable is allocated before the client
// sends something: the reader's buffer comes with the first read, redcon's
// writer buffer with the first reply.
func (s *Server) newConn(nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, wr: redcon.NewWriter(nc), created: time.Now(), fd: socketFD(nc),
		raddr: nc.RemoteAddr().String(), laddr: nc.LocalAddr().String(),
		sess: session{id: s.nextID.Add(1), proto: 2, level: s.cfg.DefaultReadLevel}}
	c.sess.conn = c
	c.active.Store(c.created.UnixNano())
	c.sess.authed = !s.authRequired()
	if c.sess.authed {
		c.sess.account = s.users.Default()
	}
	c.stranger = !c.sess.authed
	bud := s.budget
	if c.stranger {
		bud = s.strangerBudget
		if s.cfg.AuthTimeout > 0 {
			c.authBy = time.Now().Add(s.cfg.AuthTimeout)
		}
	}
	c.rd = newReader(nc, s.rlim, bud)
	return c
}

// newRunID is a random identifier of this start, as Redis's run_id.
func newRunID() string {
	var b [20]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Close stops accepting, lets every connection finish the batch it is serving
// (bounded by the request timeout), then closes what remains and waits for all
// connection goroutines to end.
func (s *Server) Close() error {
	s.stopWaiting()
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
	s.bg.Wait()
	return nil
}

// conn is one client connection, served by one goroutine.
type conn struct {
	s    *Server
	nc   net.Conn
	rd   *reader
	wr   *redcon.Writer
	sess session

	// What CLIENT LIST shows (clients.go). The first four never change; the
	// atomics are written by the connection's goroutine and read by others.
	created      time.Time
	fd           int
	raddr, laddr string
	active       atomic.Int64            // Unix ns of the last request read
	lastCmd      atomic.Pointer[command] // the command served last (nil: none yet)
	rbs, rbp     atomic.Int64            // read buffer size now, and its peak
	qbuf         atomic.Int64            // bytes read and not yet parsed
	netIn        uint64                  // bytes read, as last added to the server's count
	q            *countingQueries        // the state machine, counting keyspace hits and misses

	// Slot accounting (admission.go), guarded by s.mu.
	stranger     bool  // has not authenticated and holds a stranger's slot
	slotHeld     bool  // counted in s.clients
	older, newer *conn // neighbours in the strangers' list

	authBy        time.Time // a stranger is closed at this time (zero: never)
	deadlineArmed bool      // a read deadline is set on nc

	out     []byte    // replies of the current batch, in request order
	pending []pending // replies that cannot be written yet

	// Shards (route.go): scope, when set, is the replica a connection that
	// runs commands forwarded from another node serves them on alone; rep is
	// the replica the op being served runs on here (nil: node-wide, every
	// replica the node holds).
	scope Replica
	rep   Replica
	// reqCtx, when set, bounds what the connection waits for (a command
	// forwarded here: the forwarding node's request); else the server's.
	reqCtx context.Context

	// The read barrier shared by a run of reads: valid until the connection
	// submits a write or the batch ends, for one replica (barrierRep).
	barrierDone  bool
	barrierLevel cluster.ReadLevel
	barrierRep   Replica
	barrierErr   error

	// tx is the connection's transaction (commands_tx.go).
	tx txState
}

// pending is a reply that must wait for an earlier write's outcome: a write's own
// future, or an already rendered reply queued behind one.
type pending struct {
	fut *cluster.Future
	// more are the futures of the other pieces of a write sent as several
	// (a large LOADCHUNK, splitChunk): the reply is the first failure, or the
	// last piece's result.
	more   []*cluster.Future
	render func(*reply, *fsm.Result)
	pre    []byte
	proto  int
	name   string
	def    *command
	start  time.Time
	// rejected: pre is the error of a command refused before it ran.
	rejected bool
}

// refuse tells a client over the limit so, then closes it.
func (c *conn) refuse() {
	defer c.s.wg.Done()
	c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	c.wr.WriteError(string(errMaxClients))
	c.wr.Flush()
	c.nc.Close()
}

// serve is the connection's loop: read a batch, execute it, flush once. Before
// authentication the reader hands out one request per batch, so a request after
// AUTH is read under the limits AUTH lifted.
func (c *conn) serve() {
	defer c.done()
	if !c.handshake() {
		return
	}
	for {
		c.armReadDeadline()
		if c.s.stopping.Load() {
			return
		}
		authed := c.sess.authed
		c.rd.preAuth = !authed
		batch, err := c.rd.readBatch()
		c.noteRead()
		if err != nil {
			c.readFailed(err)
			return
		}
		c.exec(batch)
		if !authed && c.sess.authed {
			c.s.promote(c)
			c.rd.authenticated()
		}
		c.rd.release() // the batch has executed: its arguments are garbage
		if c.flush() != nil || c.sess.quit {
			return
		}
	}
}

// tlsHandshakeTimeout bounds a TLS client's handshake, so a stranger that
// opens a TLS connection and stalls holds it no longer than this (nor past its
// authentication deadline).
const tlsHandshakeTimeout = 10 * time.Second

// handshake completes the TLS handshake of a connection from a TLS listener
// (--resp-tls) before the first request is read; it reports false if it failed.
// Plain connections pass at once.
func (c *conn) handshake() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	d := time.Now().Add(tlsHandshakeTimeout)
	if !c.authBy.IsZero() && c.authBy.Before(d) {
		d = c.authBy
	}
	tc.SetDeadline(d)
	if err := tc.Handshake(); err != nil {
		c.s.log.Debug("tls handshake", "remote", c.nc.RemoteAddr().String(), "err", err)
		return false
	}
	tc.SetDeadline(time.Time{})
	return true
}

// armReadDeadline bounds the next read by the idle timeout and, before
// authentication, by the authentication deadline. It makes no system call when
// neither applies.
func (c *conn) armReadDeadline() {
	var d time.Time
	if c.s.cfg.IdleTimeout > 0 {
		d = time.Now().Add(c.s.cfg.IdleTimeout)
	}
	if !c.sess.authed && !c.authBy.IsZero() && (d.IsZero() || c.authBy.Before(d)) {
		d = c.authBy
	}
	if d.IsZero() && !c.deadlineArmed {
		return
	}
	c.nc.SetReadDeadline(d)
	c.deadlineArmed = !d.IsZero()
}

// noteRead adds what the reader read since the last batch to the server's
// input bytes, and publishes the reader's buffer for CLIENT LIST.
func (c *conn) noteRead() {
	if n := c.rd.nread; n != c.netIn {
		c.s.stats.netIn.Add(n - c.netIn)
		c.netIn = n
	}
	size := int64(len(c.rd.buf))
	c.rbs.Store(size)
	if size > c.rbp.Load() {
		c.rbp.Store(size)
	}
	c.qbuf.Store(int64(c.rd.w - c.rd.r))
}

// readFailed answers a protocol error before the connection closes, and counts
// why it closes.
func (c *conn) readFailed(err error) {
	// The connection is done: its request bytes go back to the budget before
	// the client hears why, so a client that retries at once finds them.
	c.rd.close()
	var pe protocolError
	var ne net.Error
	switch {
	case errors.As(err, &pe):
		c.s.m.protoErr.Inc()
		if pe == errBudget {
			c.s.m.bufferFull.Inc()
		}
		c.s.log.Debug("protocol error", "remote", c.nc.RemoteAddr().String(), "err", err)
		c.wr.WriteError(protocolReply(pe))
		c.flush()
	case c.s.stopping.Load():
	case errors.As(err, &ne) && ne.Timeout():
		reason := "idle"
		if !c.sess.authed && !c.authBy.IsZero() && !time.Now().Before(c.authBy) {
			reason = "auth"
		}
		c.s.m.timedOut.WithLabelValues(reason).Inc()
	}
}

func (c *conn) done() {
	c.nc.Close()
	c.rd.close()
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.releaseSlot(c)
	c.s.mu.Unlock()
	c.s.wg.Done()
}

func (c *conn) flush() error {
	c.s.stats.netOut.Add(uint64(len(c.out)))
	c.wr.WriteRaw(c.out)
	c.out = c.out[:0]
	if cap(c.out) > 1<<20 {
		c.out = nil // do not pin a big reply's buffer
	}
	d := time.Now().Add(writeTimeout)
	if !c.sess.authed && !c.authBy.IsZero() && c.authBy.Before(d) {
		d = c.authBy // a stranger that does not read its replies is not waited for longer
	}
	c.nc.SetWriteDeadline(d)
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
	c.active.Store(start.UnixNano())
	for _, args := range batch {
		if c.sess.quit {
			break // QUIT: later requests are not served
		}
		if len(args) == 0 { // a request too large to take, read past (resp_reader_big.go)
			why := c.rd.takeRefusal()
			c.immediate(op{rejected: true}, start, func(w *reply) { w.fail(why) })
			continue
		}
		o, err := c.s.parse(&c.sess, args)
		c.lastCmd.Store(o.def) // nil for an unknown command: "cmd=NULL", as Redis shows it
		if c.txStep(o, err, args, start) {
			continue
		}
		if err == nil && c.route(o, args, start) {
			continue
		}
		switch {
		case err != nil:
			c.immediate(o, start, func(w *reply) { w.fail(err) })
		case o.kind == opWrite:
			pieces := splitChunk(o.cmd)
			if len(pieces) > 1 || bigChunk(o.cmd) {
				if res := c.checkChunk(o.cmd); res != nil {
					// The whole chunk would be refused: none of its pieces go.
					c.immediate(o, start, func(w *reply) { o.render(w, res) })
					continue
				}
			}
			if err := entryBound(pieces); err != nil {
				c.immediate(o, start, func(w *reply) { w.fail(err) })
				continue
			}
			p := pending{fut: c.submit(pieces[0]), render: o.render,
				proto: c.sess.proto, name: o.name, def: o.def, start: start}
			for _, pc := range pieces[1:] {
				p.more = append(p.more, c.submit(pc))
			}
			c.pending = append(c.pending, p)
			c.barrierDone = false
		case o.kind == opRead:
			c.drain()
			c.read(o, start)
		default:
			c.immediate(o, start, func(w *reply) { o.local(&c.sess, w) })
		}
	}
	c.drain()
}

// immediate renders a reply that needs no waiting, in place or queued behind
// pending writes.
func (c *conn) immediate(o op, start time.Time, render func(w *reply)) {
	if len(c.pending) == 0 {
		w := reply{b: c.out, proto: c.sess.proto}
		render(&w)
		c.s.observe(o.name, o.def, replyOutcome(w.b, len(c.out)), start, o.rejected)
		c.out = w.b
		return
	}
	w := reply{proto: c.sess.proto}
	render(&w)
	c.pending = append(c.pending, pending{pre: w.b, name: o.name, def: o.def, start: start, rejected: o.rejected})
}

// drain waits for every pending write in order and renders the replies.
func (c *conn) drain() {
	if len(c.pending) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx(), c.s.cfg.RequestTimeout)
	defer cancel()
	for i := range c.pending {
		p := &c.pending[i]
		if p.fut == nil {
			c.s.observe(p.name, p.def, replyOutcome(p.pre, 0), p.start, p.rejected)
			c.out = append(c.out, p.pre...)
			continue
		}
		res, err := p.fut.Wait(ctx)
		for _, f := range p.more {
			if err != nil || (res != nil && res.Err != nil) {
				f.Wait(ctx) // a later piece may still apply: wait it out, report the first failure
				continue
			}
			res, err = f.Wait(ctx)
		}
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
		c.s.observe(p.name, p.def, oc, p.start, false)
		c.out = w.b
		*p = pending{}
	}
	c.pending = c.pending[:0]
}

// ctx is what bounds the connection's waits: its request's context, or the
// server's.
func (c *conn) ctx() context.Context {
	if c.reqCtx != nil {
		return c.reqCtx
	}
	return c.s.ctx
}

// submit queues a write: to the replica it runs on here (route.go), else
// as the node routes it by key.
func (c *conn) submit(cmd *fsm.Command) *cluster.Future {
	if isUsersOp(cmd) {
		return c.s.be.SubmitUsers(cmd)
	}
	if c.rep != nil {
		return c.rep.Submit(cmd)
	}
	return c.s.be.Submit(cmd)
}

// checkChunk asks the state machine, at a linearizable read, whether it would
// take the whole of a LOADCHUNK that goes into the log in pieces, or that is
// larger than any chunk of our own format (bigChunk), and returns its refusal
// as a result, or nil: a chunk the filter cannot take is refused before it is
// logged, at the cost of one read. Without a read (no leader, or the shard is
// no longer here) the pieces go, each at most loadPieceBytes, and the state
// machine answers each; a chunk that could not be split is held to
// entryBound.
func (c *conn) checkChunk(cmd *fsm.Command) *fsm.Result {
	c.drain() // this connection's earlier writes first
	c.barrierDone = false
	rep := c.rep
	if rep == nil {
		r, err := c.s.be.Replica(c.s.be.ShardOf(cmd.Key))
		if err != nil {
			return nil
		}
		rep = r
	}
	if err := rep.ReadBarrier(c.ctx(), cluster.ReadLinearizable); err != nil {
		return nil
	}
	if err := rep.FSM().CheckLoadChunk(cmd); err != nil {
		return &fsm.Result{Err: err}
	}
	return nil
}

// barrier takes the read barrier of what a read runs against: its replica,
// or for a node-wide read every replica the node holds.
func (c *conn) barrier() error {
	if c.rep != nil {
		return c.rep.ReadBarrier(c.ctx(), c.sess.level)
	}
	for _, r := range c.s.be.Replicas() {
		if err := r.ReadBarrier(c.ctx(), c.sess.level); err != nil {
			return err
		}
	}
	return nil
}

// read serves a read after the run's read barrier.
func (c *conn) read(o op, start time.Time) {
	if !c.barrierDone || c.barrierLevel != c.sess.level || c.barrierRep != c.rep {
		// The backend bounds the wait itself; most barriers pass at once, and a
		// context with a deadline per read would cost a timer each.
		c.barrierErr = c.barrier()
		c.barrierDone, c.barrierLevel, c.barrierRep = true, c.sess.level, c.rep
	}
	w := reply{b: c.out, proto: c.sess.proto}
	if c.barrierErr != nil {
		w.fail(readErr(c.barrierErr))
		c.s.observe(o.name, o.def, "unavailable", start, false)
		c.out = w.b
		return
	}
	q := c.queriesFor()
	if f, one := q.(*fsm.FSM); !one || c.q == nil || c.q.queries != queries(f) {
		c.q = &countingQueries{queries: q, ss: &c.s.stats}
	}
	o.read(c.q, &w)
	c.s.observe(o.name, o.def, replyOutcome(w.b, len(c.out)), start, false)
	c.out = w.b
}

// replyOutcome classifies a rendered reply starting at b[at] for metrics.
func replyOutcome(b []byte, at int) string {
	if at < len(b) && b[at] == '-' {
		return "error"
	}
	return "ok"
}
