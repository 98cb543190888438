package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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
	// Username is the nodes' user to act as (ACL SETUSER): every connection
	// the client opens, to any node, sends AUTH Username Password first.
	// Empty: the default user, AUTH Password alone when Password is set.
	Username string
	// Password for AUTH: Username's, or the default user's (the nodes'
	// --requirepass) without a Username.
	Password string
	// TLS, when set, reaches every node over TLS (nodes started with
	// --resp-tls). RootCAs should hold the cluster CA (ca.pem); with
	// --tls-client-auth, Certificates holds the client's. An empty ServerName
	// is each node's host, as advertised.
	TLS *tls.Config
	// CAFile, CertFile and KeyFile are the TLS configuration as PEM files, for
	// when TLS is nil: CAFile (the cluster's ca.pem) turns TLS on; CertFile and
	// KeyFile are the client's certificate, for --tls-client-auth.
	CAFile, CertFile, KeyFile string
	// ReadLevel is the level of reads whose context names none [linearizable].
	ReadLevel ReadLevel
	// DialTimeout bounds opening a connection: TCP, TLS and AUTH [5s].
	// ReadTimeout bounds waiting for a reply [15s, longer than a node's 10 s
	// request timeout]; WriteTimeout bounds sending a request [5s]. The
	// context's deadline bounds all three.
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	// Retries is how many times a request is sent again after an answer that
	// allows it: no leader, an election, a lost reply, an unknown outcome [20].
	// Nodes that cannot be reached are not retried within one call.
	Retries int
	// RetryBackoff is the first pause between retries; it doubles up to a second
	// [25ms].
	RetryBackoff time.Duration
	// PoolSize is the most connections open per node and read level [10 per CPU].
	PoolSize int
	// RefreshInterval is how often the client re-reads the cluster's members
	// and slot map [5s].
	RefreshInterval time.Duration
	// Dialer, when set, opens every connection to a node instead of a plain
	// TCP dial: a tunnel, a proxy, or a test that breaks connections. With TLS
	// set, the handshake runs over the connection it returns.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Client is a connection to a cluster; safe for concurrent use.
type Client struct {
	opts     Options
	tls      *tls.Config
	sessions sessionPool

	keyMu      sync.Mutex
	keySession *session

	mu     sync.Mutex
	nodes  map[string]*node // by RESP address
	order  []string         // read rotation
	leader string           // RESP address, "" when unknown
	slots  *slotMap         // nil when unknown (a build before shards)

	rr      atomic.Uint64
	kick    chan struct{} // asks the refresh loop to run now
	stop    chan struct{}
	wg      sync.WaitGroup
	closing sync.Once
	closed  atomic.Bool
}

// node holds the connections to one server: one pool reading linearizably,
// one whose connections said READONLY.
type node struct {
	addr       string
	lin, stale *pool
	// downUntil (Unix ns) keeps a node that just failed out of the way of
	// later calls for a moment.
	downUntil atomic.Int64
}

// downFor is how long a node that failed is passed over.
const downFor = time.Second

func (n *node) down(now int64) bool { return n.downUntil.Load() > now }
func (n *node) markDown()           { n.downUntil.Store(time.Now().Add(downFor).UnixNano()) }

// New returns a client of the cluster that opts.Addrs reach. It asks them for
// the cluster's members and leader, and fails, wrapping ErrUnavailable, only if
// none answers.
func New(ctx context.Context, opts Options) (*Client, error) {
	if len(opts.Addrs) == 0 {
		return nil, errors.New("rookery: no addresses")
	}
	setDefault(&opts.DialTimeout, 5*time.Second)
	setDefault(&opts.ReadTimeout, 15*time.Second)
	setDefault(&opts.WriteTimeout, 5*time.Second)
	setDefault(&opts.RetryBackoff, 25*time.Millisecond)
	setDefault(&opts.RefreshInterval, 5*time.Second)
	if opts.Retries == 0 {
		opts.Retries = 20
	}
	if opts.PoolSize <= 0 {
		opts.PoolSize = 10 * runtime.GOMAXPROCS(0)
	}
	cfg, err := tlsConfig(opts)
	if err != nil {
		return nil, err
	}
	c := &Client{opts: opts, tls: cfg, nodes: make(map[string]*node),
		kick: make(chan struct{}, 1), stop: make(chan struct{})}
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

// tlsConfig is opts.TLS, or one made from the PEM files, or nil.
func tlsConfig(opts Options) (*tls.Config, error) {
	files := opts.CAFile != "" || opts.CertFile != "" || opts.KeyFile != ""
	switch {
	case opts.TLS != nil && files:
		return nil, errors.New("rookery: set Options.TLS or the certificate files, not both")
	case opts.TLS != nil:
		return opts.TLS, nil
	case !files:
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("rookery: CA file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("rookery: CA file %s: no PEM certificate found", opts.CAFile)
		}
	}
	if opts.CertFile != "" || opts.KeyFile != "" {
		kp, err := tls.LoadX509KeyPair(opts.CertFile, opts.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("rookery: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{kp}
	}
	return cfg, nil
}

// Close releases every connection. Calls in progress fail with ErrClosed or
// their own errors.
func (c *Client) Close() error {
	c.closing.Do(func() {
		c.closed.Store(true)
		close(c.stop)
		c.wg.Wait()
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, n := range c.nodes {
			n.lin.close()
			n.stale.close()
		}
	})
	return nil
}

// node returns the node at addr, adding it on first sight.
func (c *Client) node(addr string) *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.nodes[addr]; n != nil {
		return n
	}
	n := &node{addr: addr, lin: newPool(c, addr, false), stale: newPool(c, addr, true)}
	c.nodes[addr] = n
	c.order = append(c.order, addr)
	return n
}

// refresh asks the known nodes, in turn, for the cluster's members and leader
// (CLUSTER MEMBERS; CLUSTER NODES of a node of a build before it, which
// answered there in the same form). It fails, wrapping ErrUnavailable, if none
// answers.
func (c *Client) refresh(ctx context.Context) error {
	c.mu.Lock()
	addrs := append([]string(nil), c.order...)
	c.mu.Unlock()
	var errs nodeErrors
	for _, a := range addrs {
		n := c.node(a)
		o := c.members(ctx, n)
		auth := false
		switch {
		case o.err != nil:
			var de *dialError
			auth = errors.As(o.err, &de) && de.auth
		case o.rep.isError():
			o.err = serverErr(o.rep.str)
			auth = errors.Is(o.err, ErrAuth)
		case o.rep.kind != '$':
			o.err = fmt.Errorf("CLUSTER MEMBERS answered %s", unexpected(o.rep))
		}
		if o.err != nil {
			ne := &NodeError{Addr: a, Err: o.err}
			if auth {
				return ne // the other nodes have the same password
			}
			errs = append(errs, ne)
			continue
		}
		c.learn(o.rep.str)
		c.learnSlots(ctx, n)
		return nil
	}
	return &callError{class: ErrUnavailable, cmd: "CLUSTER MEMBERS", cause: errs}
}

// learnSlots asks n for the slot map: CLUSTER SHARDS, or CLUSTER SLOTS if n
// does not know it. A node that knows neither (a build before shards) leaves
// the client without a map; one that fails to answer leaves the map as it was,
// for the next refresh to settle.
func (c *Client) learnSlots(ctx context.Context, n *node) {
	outs := make([]outcome, 1)
	var m *slotMap
	for _, sub := range []string{"SHARDS", "SLOTS"} {
		n.lin.exchange(ctx, []*request{{args: []string{"CLUSTER", sub}}}, outs)
		o := outs[0]
		if o.err != nil {
			return
		}
		if o.rep.isError() {
			if strings.Contains(strings.ToLower(o.rep.str), "unknown subcommand") {
				continue
			}
			return
		}
		var err error
		if sub == "SHARDS" {
			m, err = parseShards(o.rep)
		} else {
			m, err = parseSlots(o.rep)
		}
		if err != nil {
			return
		}
		break
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m != nil {
		for _, sh := range m.shards {
			live := sh.replicas[:0]
			for _, a := range sh.replicas {
				if c.nodes[a] != nil {
					live = append(live, a)
				}
			}
			sh.replicas = live
			if c.nodes[sh.leader] == nil {
				sh.leader = ""
			}
		}
	}
	c.slots = m
}

// members asks n for CLUSTER MEMBERS, or CLUSTER NODES if n is of a build
// that does not know it.
func (c *Client) members(ctx context.Context, n *node) outcome {
	outs := make([]outcome, 1)
	n.lin.exchange(ctx, []*request{{args: []string{"CLUSTER", "MEMBERS"}}}, outs)
	if o := outs[0]; o.err == nil && o.rep.isError() && strings.Contains(strings.ToLower(o.rep.str), "unknown subcommand") {
		n.lin.exchange(ctx, []*request{{args: []string{"CLUSTER", "NODES"}}}, outs)
	}
	return outs[0]
}

// learn takes in CLUSTER MEMBERS: one line per node, "id resp http raft role
// voter|nonvoter health".
func (c *Client) learn(lines string) {
	leader := ""
	for _, line := range strings.Split(strings.TrimSpace(lines), "\n") {
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
		case <-c.kick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.DialTimeout)
		_ = c.refresh(ctx)
		cancel()
	}
}

// forgetLeader drops addr as the leader of sh (of the cluster, for nil) and
// has the refresh loop look for the new one.
func (c *Client) forgetLeader(addr string, sh *shard) {
	c.mu.Lock()
	switch {
	case sh != nil && sh.leader == addr:
		sh.leader = ""
	case sh == nil && c.leader == addr:
		c.leader = ""
	}
	c.mu.Unlock()
	c.kickRefresh()
}

// forgetNode drops addr as the leader of the cluster and of every shard (it
// could not be reached) and has the refresh loop look for new ones.
func (c *Client) forgetNode(addr string) {
	c.mu.Lock()
	if c.leader == addr {
		c.leader = ""
	}
	if c.slots != nil {
		for _, sh := range c.slots.shards {
			if sh.leader == addr {
				sh.leader = ""
			}
		}
	}
	c.mu.Unlock()
	c.kickRefresh()
}

// kickRefresh has the refresh loop run now.
func (c *Client) kickRefresh() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// shardFor returns the shard that holds every slot of slots, or nil when
// there are none, the map is unknown or they are spread over several shards.
// Called with mu held.
func (c *Client) shardFor(slots []int) *shard {
	if len(slots) == 0 || c.slots == nil {
		return nil
	}
	sh := c.slots.shardOf(slots[0])
	for _, s := range slots[1:] {
		if c.slots.shardOf(s) != sh {
			return nil
		}
	}
	return sh
}

// pickWrite chooses where a write goes: the leader of its shard (of the
// cluster, for a write of no one shard, or when the shard's leader is
// unknown) if it is known and was not found unreachable in this call, else
// any other node (which forwards writes to the leader), those that have not
// failed lately first. Nil when every node was unreachable in this call. It
// also returns the shard it routed by, nil if none.
func (c *Client) pickWrite(slots []int, skip map[*node]bool) (*node, *shard) {
	c.mu.Lock()
	sh := c.shardFor(slots)
	var l *node
	if sh != nil && sh.leader != "" {
		l = c.nodes[sh.leader]
	} else {
		l, sh = c.nodes[c.leader], nil
	}
	c.mu.Unlock()
	if l != nil && !skip[l] && !l.down(time.Now().UnixNano()) {
		return l, sh
	}
	return c.pickRead(nil, skip), nil
}

// pickRead chooses the next node of the read rotation that was not found
// unreachable in this call, preferring those that have not failed lately:
// the rotation of the replicas of the shard that holds slots, or of every
// node when there is no such shard or none of its replicas is left.
func (c *Client) pickRead(slots []int, skip map[*node]bool) *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now().UnixNano()
	if sh := c.shardFor(slots); sh != nil {
		if n := c.pickFrom(sh.replicas, skip, now); n != nil {
			return n
		}
	}
	return c.pickFrom(c.order, skip, now)
}

// pickFrom is the next node of addrs in the rotation, as pickRead chooses.
// Called with mu held.
func (c *Client) pickFrom(addrs []string, skip map[*node]bool, now int64) *node {
	var fallback *node
	for range addrs {
		n := c.nodes[addrs[int(c.rr.Add(1)%uint64(len(addrs)))]]
		if n == nil || skip[n] {
			continue
		}
		if !n.down(now) {
			return n
		}
		if fallback == nil {
			fallback = n
		}
	}
	return fallback
}

// readRound is how many nodes a read of slots goes round before it pauses:
// the replicas of its shard, or every node.
func (c *Client) readRound(slots []int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sh := c.shardFor(slots); sh != nil && len(sh.replicas) > 0 {
		return len(sh.replicas)
	}
	return len(c.order)
}

// backoff sleeps before retry attempt (1, 2, ...), or returns why it cannot.
func (c *Client) backoff(ctx context.Context, attempt int) error {
	d := min(c.opts.RetryBackoff<<min(attempt-1, 6), time.Second)
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
