package transport

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Guessing a password costs a guesser time and leaves a trace: every failed
// authentication is counted (rookery_auth_failures_total) and logged with its
// source, at most a line a second per face; a RESP connection is closed at its
// maxAuthFailures-th failure (Redis has no limit); HTTP answers an address
// that keeps failing more and more slowly (httpThrottle).
const (
	// maxAuthFailures is how many failed AUTH (or HELLO AUTH) a RESP
	// connection may make: the last one is answered and the connection closed.
	maxAuthFailures = 3
	// authLogEvery spaces the log lines about failed authentications.
	authLogEvery = time.Second
)

// Faces of authFailures' counter.
const (
	faceRESP = "resp"
	faceHTTP = "http"
)

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

// note counts one failure from remote and logs it unless a line was logged
// less than authLogEvery ago; the next line says how many it left out.
func (a *authFailures) note(face, remote string) {
	a.counter.WithLabelValues(face).Inc()
	now := time.Now().UnixNano()
	last := a.lastLog.Load()
	if now-last < int64(authLogEvery) || !a.lastLog.CompareAndSwap(last, now) {
		a.suppressed.Add(1)
		return
	}
	a.log.Warn("authentication failed", "face", face, "remote", remote,
		"failures_not_logged_since_last_line", a.suppressed.Swap(0))
}

// HTTP throttling: after httpFreeFailures failures an address waits before
// each further attempt, httpPenaltyBase doubled per failure up to
// httpPenaltyMax; an address forgotten after httpPenaltyForget without a
// failure starts afresh, and at most httpThrottleAddrs addresses are tracked.
const (
	httpFreeFailures   = 3
	httpPenaltyBase    = 100 * time.Millisecond
	httpPenaltyMax     = 5 * time.Second
	httpPenaltyForget  = 15 * time.Minute
	httpThrottleAddrs  = 8192
	httpThrottleMaxExp = 16
)

// httpThrottle slows down an address that keeps failing to authenticate. A
// request with credentials from an address under penalty waits until the
// penalty ends (or the request is cancelled) before its credentials are
// checked, so parallel guesses from one address wait too.
type httpThrottle struct {
	mu    sync.Mutex
	addrs map[string]*penalty
	now   func() time.Time // tests replace it
}

type penalty struct {
	failures int
	until    time.Time // no attempt is checked before this
	last     time.Time // the last failure
}

func newHTTPThrottle() *httpThrottle {
	return &httpThrottle{addrs: map[string]*penalty{}, now: time.Now}
}

// hostOf is the address part of a RemoteAddr; the port changes per connection.
func hostOf(remote string) string {
	if h, _, err := net.SplitHostPort(remote); err == nil {
		return h
	}
	return remote
}

// delay is how long an attempt from host must wait now.
func (t *httpThrottle) delay(host string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.addrs[host]
	if p == nil {
		return 0
	}
	return max(0, p.until.Sub(t.now()))
}

// wait holds an attempt from host until its penalty ends; false if ctx ended
// first.
func (t *httpThrottle) wait(ctx context.Context, host string) bool {
	d := t.delay(host)
	if d <= 0 {
		return true
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// fail records a failure from host and returns the penalty it earned.
func (t *httpThrottle) fail(host string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	p := t.addrs[host]
	if p != nil && now.Sub(p.last) > httpPenaltyForget {
		p = nil
	}
	if p == nil {
		if len(t.addrs) >= httpThrottleAddrs {
			t.prune(now)
		}
		p = &penalty{}
		t.addrs[host] = p
	}
	p.failures++
	p.last = now
	if p.failures <= httpFreeFailures {
		return 0
	}
	exp := min(p.failures-httpFreeFailures-1, httpThrottleMaxExp)
	d := min(httpPenaltyBase<<exp, httpPenaltyMax)
	p.until = now.Add(d)
	return d
}

// succeed forgets host's failures: whoever mistyped has now got it right.
func (t *httpThrottle) succeed(host string) {
	t.mu.Lock()
	delete(t.addrs, host)
	t.mu.Unlock()
}

// prune drops addresses whose failures are forgotten; if none are, it drops
// the half with the oldest failures, so the table stays bounded under a flood
// of addresses. Called with t.mu held.
func (t *httpThrottle) prune(now time.Time) {
	for h, p := range t.addrs {
		if now.Sub(p.last) > httpPenaltyForget {
			delete(t.addrs, h)
		}
	}
	if len(t.addrs) < httpThrottleAddrs {
		return
	}
	var total time.Duration
	for _, p := range t.addrs {
		total += now.Sub(p.last) / httpThrottleAddrs
	}
	for h, p := range t.addrs {
		if now.Sub(p.last) >= total {
			delete(t.addrs, h)
		}
	}
}
