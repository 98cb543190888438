package transport

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// syncBuffer is a log destination safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestRESPAuthFailuresClose: the third failed AUTH on a connection is answered
// and the connection closed, pipelined requests behind it unserved; the
// failures are counted and logged with the client's address.
func TestRESPAuthFailuresClose(t *testing.T) {
	var logs syncBuffer
	ts := mustStartServer(t, Config{RequirePass: "s3cret", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	wrong := "-WRONGPASS invalid username-password pair or user is disabled.\r\n"

	c := dialRaw(t, ts.addr)
	for i, args := range [][]string{{"AUTH", "nope"}, {"AUTH", "bob", "s3cret"}} {
		if got := c.do(args...); got != wrong {
			t.Fatalf("failure %d: %q", i+1, got)
		}
	}
	// The third, pipelined with a correct AUTH and a write: only it is answered.
	c.send(encode("HELLO", "3", "AUTH", "default", "nope") + encode("AUTH", "s3cret") + encode("BF.ADD", "k", "a"))
	if got := c.reply(); got != wrong {
		t.Fatalf("third failure: %q", got)
	}
	c.expectClosed()
	if n := len(ts.be.submitted()); n != 0 {
		t.Fatalf("%d writes after the connection's last allowed failure", n)
	}
	if n := testutil.ToFloat64(ts.s.authFails.counter.WithLabelValues(faceRESP)); n != 3 {
		t.Fatalf("rookery_auth_failures_total{face=resp} = %v, want 3", n)
	}
	local := c.nc.LocalAddr().String()
	if out := logs.String(); !strings.Contains(out, "authentication failed") || !strings.Contains(out, local) {
		t.Fatalf("no log line naming %s:\n%s", local, out)
	}

	// Two failures, then the password: the connection stays and serves.
	d := dialRaw(t, ts.addr)
	d.do("AUTH", "x")
	d.do("AUTH", "y")
	if got := d.do("AUTH", "s3cret"); got != "+OK\r\n" {
		t.Fatalf("AUTH after two failures: %q", got)
	}
	if got := d.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING: %q", got)
	}
}

// TestAuthFailureLogIsRateLimited: a burst of failures logs one line, and the
// next line says how many it left out; every failure is counted.
func TestAuthFailureLogIsRateLimited(t *testing.T) {
	var logs syncBuffer
	reg := prometheus.NewRegistry()
	a := newAuthFailures(reg, slog.New(slog.NewTextHandler(&logs, nil)))
	for range 1000 {
		a.note(faceHTTP, "192.0.2.1:5555", 7, time.Second)
	}
	if n := strings.Count(logs.String(), "authentication failed"); n != 1 {
		t.Fatalf("%d log lines for a burst, want 1", n)
	}
	if !strings.Contains(logs.String(), "source=192.0.2.1 source_failures=7 next_attempt_waits=1s") {
		t.Fatalf("the line does not say the source's state:\n%s", logs.String())
	}
	a.lastLog.Store(0) // a second has passed
	a.note(faceHTTP, "192.0.2.1:5556", 8, 2*time.Second)
	if !strings.Contains(logs.String(), "failures_not_logged_since_last_line=999") {
		t.Fatalf("the second line does not count what was left out:\n%s", logs.String())
	}
	if n := testutil.ToFloat64(a.counter.WithLabelValues(faceHTTP)); n != 1001 {
		t.Fatalf("counted %v, want 1001", n)
	}
	// A second server on the registry shares the counter.
	if b := newAuthFailures(reg, slog.Default()); b.counter != a.counter {
		t.Fatal("a second registration made a second counter")
	}
}

// TestAuthSourceOf: IPv4 addresses count alone (mapped into IPv6 too), IPv6
// addresses by their /64, and what does not parse as itself.
func TestAuthSourceOf(t *testing.T) {
	for remote, want := range map[string]string{
		"192.0.2.1:5555":                  "192.0.2.1",
		"[::ffff:192.0.2.1]:5555":         "192.0.2.1",
		"[2001:db8:1:2:aaaa::1]:6379":     "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff:1:2:3]:1":     "2001:db8:1:2::/64",
		"[2001:db8:1:3::1]:1":             "2001:db8:1:3::/64",
		"[fe80::1%eth0]:80":               "fe80::/64",
		"pipe":                            "pipe",
		"":                                "",
		"[::1]:1":                         "::/64",
		"127.0.0.2:40000":                 "127.0.0.2",
		"[2001:db8::1]:1":                 "2001:db8::/64",
		"[2001:db8:0:0:ffff:ffff:0:1]:22": "2001:db8::/64",
	} {
		if got := sourceOf(remote); got != want {
			t.Errorf("sourceOf(%q) = %q, want %q", remote, got, want)
		}
	}
}

// guardAt returns a guard whose clock stands at *now.
func guardAt(now *time.Time) *AuthGuard {
	g := NewAuthGuard(nil)
	g.now = func() time.Time { return *now }
	return g
}

// failOnce makes one failed attempt from remote, its wait already passed.
func failOnce(t *testing.T, g *AuthGuard, remote string, now *time.Time) time.Duration {
	t.Helper()
	at, err := g.enter(context.Background(), faceHTTP, remote)
	if err != nil {
		t.Fatal(err)
	}
	_, d := at.done(false)
	*now = now.Add(d)
	return d
}

// TestAuthThrottleGrows: after the free failures each one costs the source
// more, up to the bound; another source is not held back; a success does not
// forget, a quiet spell does; a flood of sources keeps the table bounded.
func TestAuthThrottleGrows(t *testing.T) {
	now := time.Unix(1000, 0)
	g := guardAt(&now)
	var got []time.Duration
	for range 12 {
		got = append(got, failOnce(t, g, "192.0.2.1:1", &now))
	}
	want := []time.Duration{0, 0, 0, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
		800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, authPenaltyMax, authPenaltyMax, authPenaltyMax}
	if !slices.Equal(got, want) {
		t.Fatalf("penalties %v, want %v", got, want)
	}
	now = now.Add(-time.Second) // a second before the next attempt may be checked
	if d := g.delay("192.0.2.1:2"); d != time.Second {
		t.Fatalf("delay %v", d)
	}
	if d := g.delay("192.0.2.2:1"); d != 0 {
		t.Fatalf("another address waits %v", d)
	}
	if n := g.penalised(); n != 1 {
		t.Fatalf("%d penalised sources, want 1", n)
	}
	now = now.Add(authForget + time.Second)
	if n := g.penalised(); n != 0 {
		t.Fatalf("%d penalised sources after a quiet spell, want 0", n)
	}
	if d := failOnce(t, g, "192.0.2.1:3", &now); d != 0 {
		t.Fatalf("a failure after a quiet spell cost %v", d)
	}

	for range 5 {
		failOnce(t, g, "192.0.2.3:1", &now)
	}
	at, err := g.enter(context.Background(), faceHTTP, "192.0.2.3:1")
	if err != nil {
		t.Fatal(err)
	}
	at.done(true)
	if d := failOnce(t, g, "192.0.2.3:1", &now); d != 400*time.Millisecond {
		t.Fatalf("the failure after a success cost %v, want 400ms: the success forgot the failures", d)
	}
	// A source that only ever succeeds leaves nothing behind.
	for range 3 {
		at, _ := g.enter(context.Background(), faceHTTP, "192.0.2.4:1")
		at.done(true)
	}
	if _, ok := g.sources["192.0.2.4"]; ok {
		t.Fatal("a source without failures is tracked")
	}

	// The table stays bounded under a flood of failing sources, also while
	// an attempt of a source that never failed is in flight.
	inflight, err := g.enter(context.Background(), faceHTTP, "192.0.2.6:1")
	if err != nil {
		t.Fatal(err)
	}
	defer inflight.done(true)
	for i := range 3 * authMaxSources {
		now = now.Add(time.Millisecond)
		failOnce(t, g, fmt.Sprintf("10.%d.%d.%d:1", i>>16, (i>>8)&255, i&255), &now)
	}
	if n := len(g.sources); n > authMaxSources {
		t.Fatalf("%d sources tracked", n)
	}
}

// TestAuthThrottleQueueBounded: at most authMaxWaiters attempts of a source
// wait for their turn; one more is refused at once, and counted; waiters that
// give up leave the queue.
func TestAuthThrottleQueueBounded(t *testing.T) {
	now := time.Now()
	g := guardAt(&now)
	for range authFreeFailures + 1 {
		failOnce(t, g, "192.0.2.5:1", &now)
	}
	g.mu.Lock()
	g.sources["192.0.2.5"].next = now.Add(time.Hour) // nobody's turn comes
	g.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, authMaxWaiters)
	for range authMaxWaiters {
		go func() {
			_, err := g.enter(ctx, faceRESP, "192.0.2.5:2")
			errs <- err
		}()
	}
	waitFor(t, "the queue to fill", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.sources["192.0.2.5"].queue) == authMaxWaiters
	})
	start := time.Now()
	if _, err := g.enter(context.Background(), faceRESP, "192.0.2.5:3"); err != errAuthBusy {
		t.Fatalf("one more attempt: %v, want errAuthBusy", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("the refusal took %v", d)
	}
	if n := testutil.ToFloat64(g.refused.WithLabelValues(faceRESP)); n != 1 {
		t.Fatalf("refused counted %v", n)
	}
	// Another source is admitted at once meanwhile.
	at, err := g.enter(context.Background(), faceRESP, "192.0.2.6:1")
	if err != nil {
		t.Fatal(err)
	}
	at.done(true)
	cancel()
	for range authMaxWaiters {
		if err := <-errs; err != context.Canceled {
			t.Fatalf("a waiter whose client went away: %v", err)
		}
	}
	if q := len(g.sources["192.0.2.5"].queue); q != 0 {
		t.Fatalf("%d waiters left in the queue", q)
	}
}

// TestHTTPRepeatedFailuresAreSlowed: over HTTP, wrong passwords from one
// address are answered more and more slowly, counted and logged; the right
// password still gets in, after waiting its turn.
func TestHTTPRepeatedFailuresAreSlowed(t *testing.T) {
	var logs syncBuffer
	reg := prometheus.NewRegistry()
	cfg := Config{RequirePass: "s3cret", Registry: reg, Logger: slog.New(slog.NewTextHandler(&logs, nil))}.withDefaults()
	a := newHTTPAuth(cfg, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	try := func(pass string) (int, time.Duration) {
		r := httptest.NewRequest("GET", "/v1/status", nil)
		r.RemoteAddr = "192.0.2.9:4000"
		r.Header.Set("Authorization", "Bearer "+pass)
		w := httptest.NewRecorder()
		start := time.Now()
		a.ServeHTTP(w, r)
		return w.Code, time.Since(start)
	}
	var took []time.Duration
	for range 6 {
		code, d := try("guess")
		if code != http.StatusUnauthorized {
			t.Fatalf("wrong password: %d", code)
		}
		took = append(took, d)
	}
	// Failures 1-4 are answered at once (the 4th earns the first penalty); the
	// 5th waits that 100 ms, the 6th 200 ms.
	if took[4] < 90*time.Millisecond || took[5] < 190*time.Millisecond {
		t.Fatalf("answer times %v: repeated failures not slowed", took)
	}
	code, d := try("s3cret")
	if code != http.StatusOK || d < 390*time.Millisecond {
		t.Fatalf("right password after failures: %d after %v (want 200 after the 400 ms penalty)", code, d)
	}
	if d := a.guard.delay("192.0.2.9:4000"); d != 0 {
		t.Fatalf("after success the address still waits %v", d)
	}
	if n := testutil.ToFloat64(a.failures.counter.WithLabelValues(faceHTTP)); n != 6 {
		t.Fatalf("rookery_auth_failures_total{face=http} = %v, want 6", n)
	}
	if !strings.Contains(logs.String(), "192.0.2.9:4000") {
		t.Fatalf("the log does not name the address:\n%s", logs.String())
	}
	// A client that gives up while held back is not answered. The success
	// did not forget the failures: the next one earns 800 ms.
	try("guess")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	r := httptest.NewRequest("GET", "/v1/status", nil).WithContext(ctx)
	r.RemoteAddr = "192.0.2.9:4001"
	r.Header.Set("Authorization", "Bearer s3cret")
	w := httptest.NewRecorder()
	start := time.Now()
	a.ServeHTTP(w, r)
	if time.Since(start) > time.Second || w.Body.Len() != 0 {
		t.Fatalf("a cancelled request: %d %q after %v", w.Code, w.Body.String(), time.Since(start))
	}
}

// httpTry sends one request with a bearer password from remote through a and
// reports the status and how long the answer took.
func httpTry(a http.Handler, remote, pass string) (int, time.Duration) {
	r := httptest.NewRequest("GET", "/v1/status", nil)
	r.RemoteAddr = remote
	r.Header.Set("Authorization", "Bearer "+pass)
	w := httptest.NewRecorder()
	start := time.Now()
	a.ServeHTTP(w, r)
	return w.Code, time.Since(start)
}

// TestHTTPGuessesTakeTurns: parallel wrong passwords from one penalised address
// are checked one at a time, each after the penalty the previous one earned,
// while the right password from another address is answered at once; past
// authMaxWaiters waiting, a guess is refused with 429 unchecked.
func TestHTTPGuessesTakeTurns(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := Config{RequirePass: "s3cret", Registry: reg}.withDefaults()
	a := newHTTPAuth(cfg, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	const guesser = "192.0.2.20:4000"
	for range authFreeFailures + 1 {
		if code, d := httpTry(a, guesser, "guess"); code != http.StatusUnauthorized || d > 50*time.Millisecond {
			t.Fatalf("a free failure: %d after %v", code, d)
		}
	}
	// Failures 4 on: the next waits 100 ms, then 200, 400, 800.
	const parallel = 4
	start := time.Now()
	var mu sync.Mutex
	var ends []time.Duration
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			code, _ := httpTry(a, guesser, "guess")
			if code != http.StatusUnauthorized {
				t.Errorf("a parallel guess: %d", code)
			}
			mu.Lock()
			ends = append(ends, time.Since(start))
			mu.Unlock()
		})
	}
	waitFor(t, "the guesses to queue", func() bool {
		a.guard.mu.Lock()
		defer a.guard.mu.Unlock()
		return len(a.guard.sources["192.0.2.20"].queue) == parallel
	})
	for range 3 {
		if code, d := httpTry(a, "192.0.2.21:4000", "s3cret"); code != http.StatusOK || d > 50*time.Millisecond {
			t.Fatalf("the right password from another address: %d after %v", code, d)
		}
	}
	wg.Wait()
	slices.Sort(ends)
	t.Logf("parallel guesses answered after %v", ends)
	// 100, 300, 700, 1500 ms after the start, less timer slack.
	for i, want := range []time.Duration{100, 300, 700, 1500} {
		if ends[i] < want*time.Millisecond-20*time.Millisecond {
			t.Fatalf("guess %d answered after %v, want %v ms: %v", i+1, ends[i], want, ends)
		}
	}
	if n := testutil.ToFloat64(a.guard.delayed.WithLabelValues(faceHTTP)); n != parallel {
		t.Fatalf("rookery_auth_delayed_total{face=http} = %v, want %d", n, parallel)
	}

	// A full queue: one more guess is refused at once with 429.
	a.guard.mu.Lock()
	a.guard.sources["192.0.2.20"].next = time.Now().Add(time.Hour)
	a.guard.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	for range authMaxWaiters {
		wg.Go(func() {
			r := httptest.NewRequest("GET", "/v1/status", nil).WithContext(ctx)
			r.RemoteAddr = guesser
			r.Header.Set("Authorization", "Bearer guess")
			a.ServeHTTP(httptest.NewRecorder(), r)
		})
	}
	waitFor(t, "the queue to fill", func() bool {
		a.guard.mu.Lock()
		defer a.guard.mu.Unlock()
		return len(a.guard.sources["192.0.2.20"].queue) == authMaxWaiters
	})
	r := httptest.NewRequest("GET", "/v1/status", nil)
	r.RemoteAddr = guesser
	r.Header.Set("Authorization", "Bearer s3cret")
	w := httptest.NewRecorder()
	a.ServeHTTP(w, r)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), msgTooMany) {
		t.Fatalf("past the waiters' bound: %d %q %v", w.Code, w.Body.String(), w.Header())
	}
	cancel()
	wg.Wait()
	if n := testutil.ToFloat64(a.guard.refused.WithLabelValues(faceHTTP)); n != 1 {
		t.Fatalf("rookery_auth_refused_total{face=http} = %v, want 1", n)
	}
}

// TestAuthGuardSharedByFaces: failures over RESP hold back HTTP attempts from
// the same address when both servers share a guard, as a node's do.
func TestAuthGuardSharedByFaces(t *testing.T) {
	cfg := Config{RequirePass: "s3cret", AuthGuard: NewAuthGuard(nil)}
	ts := mustStartServer(t, cfg)
	a := newHTTPAuth(cfg.withDefaults(), nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	c := dialRaw(t, ts.addr)
	c.do("AUTH", "a")
	c.do("AUTH", "b")
	c.do("AUTH", "c") // closes c
	c = dialRaw(t, ts.addr)
	c.do("AUTH", "d") // the 4th: the next attempt waits 100 ms
	remote := c.nc.LocalAddr().String()
	if code, d := httpTry(a, remote, "s3cret"); code != http.StatusOK || d < 90*time.Millisecond {
		t.Fatalf("HTTP from the address that failed over RESP: %d after %v, want 200 after 100 ms", code, d)
	}
	if n := testutil.ToFloat64(ts.s.authFails.counter.WithLabelValues(faceRESP)); n != 4 {
		t.Fatalf("rookery_auth_failures_total{face=resp} = %v, want 4", n)
	}
}
