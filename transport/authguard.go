package transport

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Guessing a password costs a guesser time and leaves a trace (DESIGN.md,
// "Guessing costs time"): every password check, over RESP (AUTH, HELLO ...
// AUTH) or HTTP (Bearer, Basic), goes through one AuthGuard, which makes an
// address that keeps failing take turns and wait, however many connections it
// uses; every failure is counted (rookery_auth_failures_total) and logged with
// its source, at most a line a second; and a RESP connection is closed at its
// maxAuthFailures-th failure (Redis has no limit), so a guesser reconnects.
const (
	// maxAuthFailures is how many failed AUTH (or HELLO AUTH) a RESP
	// connection may make: the last one is answered and the connection closed.
	maxAuthFailures = 3
	// authLogEvery spaces the log lines about failed authentications.
	authLogEvery = time.Second
)

// The guard's numbers. A source's first authFreeFailures failures cost
// nothing; from then on its attempts take turns, one checked at a time, and
// each failure makes the next attempt wait authPenaltyBase, doubled per
// failure up to authPenaltyMax. A source is forgotten authForget after its
// last failure; at most authMaxSources are tracked.
const (
	authFreeFailures  = 3
	authPenaltyBase   = 100 * time.Millisecond
	authPenaltyMax    = 5 * time.Second
	authPenaltyMaxExp = 16 // authPenaltyBase << 16 is far past authPenaltyMax
	authForget        = 15 * time.Minute
	authMaxSources    = 8192
	// authMaxWaiters bounds the attempts of one source waiting for their turn;
	// one more is refused at once.
	authMaxWaiters = 8
	// authMaxWait bounds one attempt's wait for its turn; it is then refused.
	authMaxWait = 10 * time.Second
	// authIPv6Prefix groups IPv6 sources: one end site usually holds a whole
	// /64 and can pick any address in it, so counting per address would give
	// it 2^64 allowances.
	authIPv6Prefix = 64
)

// Faces of the counters.
const (
	faceRESP = "resp"
	faceHTTP = "http"
)

// errAuthBusy refuses an attempt unchecked: too many attempts from its source
// wait already, or its turn did not come within authMaxWait.
var errAuthBusy = errors.New("too many authentication attempts from this address")

// authFailures counts and logs failed authentications.
type authFailures struct {
	counter *prometheus.CounterVec
	log     *slog.Logger

	lastLog    atomic.Int64 // unix nanoseconds
	suppressed atomic.Int64 // failures not logged since
}

func newAuthFailures(reg *prometheus.Registry, log *slog.Logger) *authFailures {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rookery_auth_failures_total",
		Help: "Failed authentications (a wrong password, or a user other than default), by face (resp, http).",
	}, []string{"face"})
	if reg != nil {
		c = register(reg, c)
	}
	return &authFailures{counter: c, log: log}
}

// note counts one failure from remote and logs it, with its source's failures
// and what the source's next attempt waits, unless a line was logged less than
// authLogEvery ago; the next line says how many it left out.
func (a *authFailures) note(face, remote string, failures int, penalty time.Duration) {
	a.counter.WithLabelValues(face).Inc()
	now := time.Now().UnixNano()
	last := a.lastLog.Load()
	if now-last < int64(authLogEvery) || !a.lastLog.CompareAndSwap(last, now) {
		a.suppressed.Add(1)
		return
	}
	a.log.Warn("authentication failed", "face", face, "remote", remote, "source", sourceOf(remote),
		"source_failures", failures, "next_attempt_waits", penalty,
		"failures_not_logged_since_last_line", a.suppressed.Swap(0))
}

// AuthGuard makes guessing the password cost time per source address (an
// IPv4 address, or an IPv6 /64), on every face at once: the RESP and HTTP
// servers of a node share one (Config.AuthGuard). A source's first few
// failures are free; after them its attempts take turns, one checked at a
// time whatever the number of connections they come on, and each waits out
// the penalty its source's last failure earned. A right password from such a
// source waits its turn too (answering it at once would tell a guesser which
// guess was right by the time it took); a source with no failures never
// waits. A success does not forget the failures: behind one address (a NAT)
// the guesser's neighbours logging in would hand it a fresh allowance.
type AuthGuard struct {
	mu      sync.Mutex
	sources map[string]*source
	now     func() time.Time // tests replace it

	delayed *prometheus.CounterVec
	refused *prometheus.CounterVec
}

// source is what the guard knows of one source.
type source struct {
	failures int       // since the source was last quiet for authForget
	last     time.Time // the last failure
	next     time.Time // no attempt after a penalty is checked before this
	inflight int       // attempts being checked
	queue    []*waiter // attempts waiting for their turn, oldest first
}

// waiter is an attempt waiting for its turn; turn is closed when it is first
// in the queue and nothing of its source is in flight.
type waiter struct {
	turn      chan struct{}
	signalled bool
}

// NewAuthGuard returns a guard whose counters and gauge are registered on reg
// (nil: none). A second guard on the same registry shares the counters; the
// gauge stays the first one's.
func NewAuthGuard(reg *prometheus.Registry) *AuthGuard {
	g := &AuthGuard{
		sources: map[string]*source{},
		now:     time.Now,
		delayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rookery_auth_delayed_total",
			Help: "Authentications that waited for their turn because their source address had failed before, by face (resp, http).",
		}, []string{"face"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rookery_auth_refused_total",
			Help: "Authentications refused unchecked because too many from the same source address were waiting, by face (resp, http).",
		}, []string{"face"}),
	}
	if reg != nil {
		g.delayed = register(reg, g.delayed)
		g.refused = register(reg, g.refused)
		_ = reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rookery_auth_penalised_sources",
			Help: "Source addresses (IPv6: /64 prefixes) whose authentications take turns after repeated failures.",
		}, func() float64 { return float64(g.penalised()) }))
	}
	return g
}

// authGuard is cfg's guard, or a new one of the server's own.
func (c Config) authGuard() *AuthGuard {
	if c.AuthGuard != nil {
		return c.AuthGuard
	}
	return NewAuthGuard(c.Registry)
}

// hostOf is the address part of a RemoteAddr; the port changes per connection.
func hostOf(remote string) string {
	if h, _, err := net.SplitHostPort(remote); err == nil {
		return h
	}
	return remote
}

// sourceOf is the source a RemoteAddr counts against: the IPv4 address (an
// IPv4-mapped IPv6 address too), or the IPv6 address's /64. Anything that
// does not parse (a Unix socket) is its own source.
func sourceOf(remote string) string {
	host := hostOf(remote)
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.WithZone("").Unmap()
	if ip.Is4() {
		return ip.String()
	}
	p, _ := ip.Prefix(authIPv6Prefix)
	return p.String()
}

// penalty is what the failures-th failure makes the next attempt wait.
func penalty(failures int) time.Duration {
	if failures <= authFreeFailures {
		return 0
	}
	return min(authPenaltyBase<<min(failures-authFreeFailures-1, authPenaltyMaxExp), authPenaltyMax)
}

// attempt is one password check admitted by the guard; done ends it.
type attempt struct {
	g   *AuthGuard
	key string
	s   *source
}

// enter admits one password check from remote when its source's turn comes.
// A source under its free failures is admitted at once; otherwise the attempt
// queues, and is admitted when every earlier attempt of the source has ended
// and the source's penalty has passed. It fails with errAuthBusy at once when
// authMaxWaiters attempts of the source wait already, or after authMaxWait;
// with ctx's error if ctx ends first.
func (g *AuthGuard) enter(ctx context.Context, face, remote string) (*attempt, error) {
	key := sourceOf(remote)
	g.mu.Lock()
	s := g.source(key)
	if len(s.queue) == 0 && s.failures+s.inflight < authFreeFailures {
		s.inflight++
		g.mu.Unlock()
		return &attempt{g: g, key: key, s: s}, nil
	}
	if len(s.queue) >= authMaxWaiters {
		g.mu.Unlock()
		g.refused.WithLabelValues(face).Inc()
		return nil, errAuthBusy
	}
	w := &waiter{turn: make(chan struct{})}
	s.queue = append(s.queue, w)
	handOn(s)
	delayed := !w.signalled
	g.mu.Unlock()

	wctx, cancel := context.WithTimeout(ctx, authMaxWait)
	defer cancel()
	select {
	case <-w.turn:
	case <-wctx.Done():
		return nil, g.giveUp(ctx, face, key, s, w)
	}
	// First in line with nothing in flight: s.next changes only when an
	// attempt of the source ends, so it holds still while this one waits.
	g.mu.Lock()
	d := s.next.Sub(g.now())
	g.mu.Unlock()
	if d > 0 {
		delayed = true
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-wctx.Done():
			t.Stop()
			return nil, g.giveUp(ctx, face, key, s, w)
		}
	}
	g.mu.Lock()
	s.queue[0] = nil
	s.queue = s.queue[1:]
	s.inflight++
	g.mu.Unlock()
	if delayed {
		g.delayed.WithLabelValues(face).Inc()
	}
	return &attempt{g: g, key: key, s: s}, nil
}

// giveUp takes w out of s's queue, handing the turn on if it had it, and says
// why: ctx's error, or errAuthBusy when the attempt waited authMaxWait.
func (g *AuthGuard) giveUp(ctx context.Context, face, key string, s *source, w *waiter) error {
	g.mu.Lock()
	for i, q := range s.queue {
		if q == w {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			break
		}
	}
	handOn(s)
	g.tidy(key, s)
	g.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	g.refused.WithLabelValues(face).Inc()
	return errAuthBusy
}

// done ends the attempt with its outcome. A failure counts against the source
// and sets the wait of its next attempt, which done returns with the source's
// failures. Called with g.mu not held, exactly once.
func (a *attempt) done(ok bool) (failures int, wait time.Duration) {
	g, s := a.g, a.s
	g.mu.Lock()
	defer g.mu.Unlock()
	s.inflight--
	if !ok {
		now := g.now()
		s.failures++
		s.last = now
		wait = penalty(s.failures)
		if next := now.Add(wait); next.After(s.next) {
			s.next = next
		}
	}
	failures = s.failures
	handOn(s)
	g.tidy(a.key, s)
	return failures, wait
}

// handOn gives the turn to the first waiter of s once nothing of s is in
// flight. Called with g.mu held.
func handOn(s *source) {
	if s.inflight == 0 && len(s.queue) > 0 && !s.queue[0].signalled {
		s.queue[0].signalled = true
		close(s.queue[0].turn)
	}
}

// source returns key's entry, making one if there is none, and forgets the
// failures of an idle source quiet for authForget. Called with g.mu held.
func (g *AuthGuard) source(key string) *source {
	now := g.now()
	s := g.sources[key]
	if s == nil {
		if len(g.sources) >= authMaxSources {
			g.prune(now)
		}
		s = &source{}
		g.sources[key] = s
	}
	if s.failures > 0 && s.idle() && now.Sub(s.last) > authForget {
		*s = source{}
	}
	return s
}

// idle reports whether nothing of s is in flight or waiting.
func (s *source) idle() bool { return s.inflight == 0 && len(s.queue) == 0 }

// tidy drops key's entry once it holds nothing worth keeping. Called with
// g.mu held.
func (g *AuthGuard) tidy(key string, s *source) {
	if s.failures == 0 && s.idle() && g.sources[key] == s {
		delete(g.sources, key)
	}
}

// prune drops idle sources whose failures are forgotten; if that is not
// enough, it drops the idle half with the oldest failures, so the table stays
// bounded under a flood of sources. Sources with attempts in flight or
// waiting stay (the connections and requests they hold bound them). Called
// with g.mu held.
func (g *AuthGuard) prune(now time.Time) {
	for k, s := range g.sources {
		if s.idle() && now.Sub(s.last) > authForget {
			delete(g.sources, k)
		}
	}
	if len(g.sources) < authMaxSources {
		return
	}
	// The mean age of the idle sources' last failures: every one is at
	// most authForget old now, so the sum cannot overflow. A source with
	// attempts in flight may never have failed (its last is zero): it is
	// neither counted nor dropped.
	var sum time.Duration
	idle := 0
	for _, s := range g.sources {
		if s.idle() {
			sum += now.Sub(s.last)
			idle++
		}
	}
	if idle == 0 {
		return
	}
	mean := sum / time.Duration(idle)
	for k, s := range g.sources {
		if s.idle() && now.Sub(s.last) >= mean {
			delete(g.sources, k)
		}
	}
}

// delay is how long an attempt from remote's source would wait now for the
// source's penalty, not counting attempts ahead of it.
func (g *AuthGuard) delay(remote string) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.sources[sourceOf(remote)]
	if s == nil {
		return 0
	}
	return max(0, s.next.Sub(g.now()))
}

// penalised counts the sources whose attempts take turns: past their free
// failures, and not yet forgotten.
func (g *AuthGuard) penalised() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	n := 0
	for _, s := range g.sources {
		if s.failures >= authFreeFailures && (!s.idle() || now.Sub(s.last) <= authForget) {
			n++
		}
	}
	return n
}
