package client

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ReadLevel is the consistency of a read.
type ReadLevel int

// Read levels.
const (
	// ReadLinearizable reads reflect every write acknowledged before they began,
	// on whichever node serves them.
	ReadLinearizable ReadLevel = iota
	// ReadStale reads the serving node's local state: fastest, and may miss the
	// most recent writes.
	ReadStale
)

type levelKey struct{}

// WithReadLevel returns a context whose reads use level.
func WithReadLevel(ctx context.Context, level ReadLevel) context.Context {
	return context.WithValue(ctx, levelKey{}, level)
}

// Options configure a Client. Zero fields take the defaults in brackets.
type Options struct {
	// Addrs are RESP addresses of some of the cluster's nodes; the client learns
	// the others from them.
	Addrs []string
	// Password for AUTH, if the nodes require one (--requirepass).
	Password string
	// TLS, when set, reaches every node over TLS (nodes started with
	// --resp-tls). RootCAs should hold the cluster CA (ca.pem); with
	// --tls-client-auth, Certificates holds the client's. An empty ServerName
	// is each node's host, as advertised.
	TLS *tls.Config
	// ReadLevel is the level of reads whose context names none [linearizable].
	ReadLevel ReadLevel
	// DialTimeout [5s], ReadTimeout [15s, longer than a node's apply timeout] and
	// WriteTimeout [5s] bound each network step.
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	// Retries is how many times a request is retried after an error that allows
	// it: no leader, a leader change, a lost connection, an unknown outcome [20].
	Retries int
	// RetryBackoff is the first pause between retries; it doubles up to a second
	// [25ms].
	RetryBackoff time.Duration
	// PoolSize is the connections kept per node and level [go-redis's default].
	PoolSize int
	// RefreshInterval is how often the client re-reads the cluster's members [5s].
	RefreshInterval time.Duration
	// Dialer, when set, opens every connection to a node instead of a plain
	// TCP (or TLS) dial: a tunnel, a proxy, or a test that breaks connections.
	// With TLS set, the handshake runs over the connection it returns.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Client is safe for concurrent use.
type Client struct {
	opts     Options
	sessions sessionPool

	mu     sync.Mutex
	nodes  map[string]*node // by RESP address
	order  []string         // read rotation
	leader string           // RESP address, "" when unknown

	rr     atomic.Uint64
	stop   chan struct{}
	wg     sync.WaitGroup
	closed atomic.Bool
}

// node holds the connection pools of one server: one reading linearizably, one
// whose connections said READONLY.
type node struct {
	lin, stale *redis.Client
	// downUntil (Unix ns) keeps a node that just failed a request out of the
	// read rotation for a moment.
	downUntil atomic.Int64
}

// downFor is how long a node that failed a read is left out of the rotation.
const downFor = time.Second

// New returns a client of the cluster that opts.Addrs reach. It asks them for
// the cluster's members and leader; it fails only if none answers.
func New(ctx context.Context, opts Options) (*Client, error) {
	if len(opts.Addrs) == 0 {
		return nil, errors.New("client: no addresses")
	}
	setDefault(&opts.DialTimeout, 5*time.Second)
	setDefault(&opts.ReadTimeout, 15*time.Second)
	setDefault(&opts.WriteTimeout, 5*time.Second)
	setDefault(&opts.RetryBackoff, 25*time.Millisecond)
	setDefault(&opts.RefreshInterval, 5*time.Second)
	if opts.Retries == 0 {
		opts.Retries = 20
	}
	c := &Client{opts: opts, nodes: make(map[string]*node), stop: make(chan struct{})}
	for _, a := range opts.Addrs {
		c.node(a)
	}
	if err := c.refresh(ctx); err != nil {
		c.Close()
		return nil, err
	}
	c.wg.Add(1)
	go c.refreshLoop()
	return c, nil
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

// Close releases every connection.
func (c *Client) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(c.stop)
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, n := range c.nodes {
		errs = append(errs, n.lin.Close(), n.stale.Close())
	}
	return errors.Join(errs...)
}

// node returns the pools of addr, creating them on first use.
func (c *Client) node(addr string) *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.nodes[addr]; n != nil {
		return n
	}
	base := redis.Options{Addr: addr, Password: c.opts.Password, Protocol: 2, MaxRetries: -1,
		DialTimeout: c.opts.DialTimeout, ReadTimeout: c.opts.ReadTimeout, WriteTimeout: c.opts.WriteTimeout,
		PoolSize: c.opts.PoolSize, DisableIdentity: true, TLSConfig: c.opts.TLS}
	if d := c.opts.Dialer; d != nil {
		base.Dialer = c.dialThrough(d)
	}
	stale := base
	stale.OnConnect = func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }
	n := &node{lin: redis.NewClient(&base), stale: redis.NewClient(&stale)}
	c.nodes[addr] = n
	c.order = append(c.order, addr)
	return n
}

// dialThrough is a go-redis dialer that opens connections with d and, when the
// client uses TLS, runs the handshake over them (go-redis only wraps its own
// dials in TLS).
func (c *Client) dialThrough(d func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d(ctx, network, addr)
		if err != nil || c.opts.TLS == nil {
			return conn, err
		}
		cfg := c.opts.TLS.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		return tc, nil
	}
}

// refresh asks the known nodes, in turn, for the cluster's members and leader.
func (c *Client) refresh(ctx context.Context) error {
	c.mu.Lock()
	addrs := append([]string(nil), c.order...)
	c.mu.Unlock()
	var errs []error
	for _, a := range addrs {
		lines, err := c.node(a).lin.Do(ctx, "CLUSTER", "NODES").Text()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a, err))
			continue
		}
		leader := ""
		for _, line := range strings.Split(strings.TrimSpace(lines), "\n") {
			// id resp http raft role voter|nonvoter health
			f := strings.Fields(line)
			if len(f) < 7 || f[1] == "-" || f[6] == "dead" || f[6] == "left" {
				continue
			}
			c.node(f[1])
			if f[4] == "leader" {
				leader = f[1]
			}
		}
		c.mu.Lock()
		c.leader = leader
		c.mu.Unlock()
		return nil
	}
	return fmt.Errorf("client: no node answered: %w", errors.Join(errs...))
}

func (c *Client) refreshLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.opts.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), c.opts.DialTimeout)
			_ = c.refresh(ctx)
			cancel()
		}
	}
}

// leaderNode returns the leader's pools, asking the cluster if it is unknown.
func (c *Client) leaderNode(ctx context.Context) (*node, error) {
	c.mu.Lock()
	l := c.leader
	c.mu.Unlock()
	if l == "" {
		if err := c.refresh(ctx); err != nil {
			return nil, err
		}
		c.mu.Lock()
		l = c.leader
		c.mu.Unlock()
		if l == "" {
			return nil, fmt.Errorf("%w: no leader known", ErrUnavailable)
		}
	}
	return c.node(l), nil
}

func (c *Client) nodeCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.order)
}

func (c *Client) forgetLeader() {
	c.mu.Lock()
	c.leader = ""
	c.mu.Unlock()
}

// readNode returns the next node of the read rotation that has not failed
// lately, or the next one at all if every node has.
func (c *Client) readNode() *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now().UnixNano()
	var first *node
	for range c.order {
		n := c.nodes[c.order[int(c.rr.Add(1)%uint64(len(c.order)))]]
		if first == nil {
			first = n
		}
		if n.downUntil.Load() <= now {
			return n
		}
	}
	return first
}

// backoff sleeps before retry attempt (1, 2, ...), or returns ctx's error.
func (c *Client) backoff(ctx context.Context, attempt int) error {
	d := c.opts.RetryBackoff << min(attempt-1, 6)
	d = min(d, time.Second)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.stop:
		return ErrClosed
	}
}

// write sends a mutation to the leader as IDEM session seq args..., retrying
// with the same session and sequence number until it has an answer.
func (c *Client) write(ctx context.Context, args ...any) (any, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	s := c.sessions.get()
	defer c.sessions.put(s)
	cmd := append([]any{"IDEM", s.id, s.next()}, args...)
	var last error
	unknown := false
	for attempt := 0; attempt <= c.opts.Retries; attempt++ {
		if attempt > 0 {
			if err := c.backoff(ctx, attempt); err != nil {
				last = err
				break
			}
		}
		n, err := c.leaderNode(ctx)
		if err != nil {
			last = err
			continue
		}
		v, err := n.lin.Do(ctx, cmd...).Result()
		switch classify(err) {
		case final:
			return v, serverErr(err)
		case notApplied:
			last = err
			c.forgetLeader()
		case outcomeUnknown:
			last, unknown = err, true
			c.forgetLeader()
		}
		if ctx.Err() != nil {
			break
		}
	}
	if unknown {
		return nil, fmt.Errorf("%w: %v", ErrIndeterminate, last)
	}
	return nil, fmt.Errorf("%w: %v", ErrUnavailable, last)
}

// read sends a query to the next node of the rotation at the context's level,
// trying the next node on an error that allows it.
func (c *Client) read(ctx context.Context, args ...any) (any, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	level := c.opts.ReadLevel
	if l, ok := ctx.Value(levelKey{}).(ReadLevel); ok {
		level = l
	}
	var last error
	failed := 0 // failures in a row since the last pause
	for attempt := 0; attempt <= c.opts.Retries; attempt++ {
		// Another node is tried at once; only when each has failed in turn is
		// there a pause.
		if failed > 0 && failed%c.nodeCount() == 0 {
			if err := c.backoff(ctx, failed/c.nodeCount()); err != nil {
				last = err
				break
			}
		}
		n := c.readNode()
		cl := n.lin
		if level == ReadStale {
			cl = n.stale
		}
		v, err := cl.Do(ctx, args...).Result()
		if classify(err) == final {
			return v, serverErr(err)
		}
		last = err
		failed++
		n.downUntil.Store(time.Now().Add(downFor).UnixNano())
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("%w: %v", ErrUnavailable, last)
}

// sessionPool hands out sessions for exactly-once writes, one write at a time
// per session, so a retry always finds its answer in the server's window.
type sessionPool struct {
	mu   sync.Mutex
	free []*session
}

type session struct {
	id  uint64
	seq uint64
}

func (s *session) next() uint64 {
	s.seq++
	return s.seq
}

func (p *sessionPool) get() *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		s := p.free[n-1]
		p.free = p.free[:n-1]
		return s
	}
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if id := binary.LittleEndian.Uint64(b[:]) >> 1; id != 0 {
			return &session{id: id}
		}
	}
}

func (p *sessionPool) put(s *session) {
	p.mu.Lock()
	p.free = append(p.free, s)
	p.mu.Unlock()
}
