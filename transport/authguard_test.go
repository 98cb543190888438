package transport

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
		a.note(faceHTTP, "192.0.2.1:5555")
	}
	if n := strings.Count(logs.String(), "authentication failed"); n != 1 {
		t.Fatalf("%d log lines for a burst, want 1", n)
	}
	a.lastLog.Store(0) // a second has passed
	a.note(faceHTTP, "192.0.2.1:5556")
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

// TestHTTPThrottleGrows: after the free failures each one costs the address
// more, up to the bound; another address is not held back; success forgets.
func TestHTTPThrottleGrows(t *testing.T) {
	th := newHTTPThrottle()
	now := time.Unix(1000, 0)
	th.now = func() time.Time { return now }
	var got []time.Duration
	for range 12 {
		got = append(got, th.fail("192.0.2.1"))
	}
	want := []time.Duration{0, 0, 0, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
		800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, httpPenaltyMax, httpPenaltyMax, httpPenaltyMax}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("penalties %v, want %v", got, want)
		}
	}
	if d := th.delay("192.0.2.1"); d != httpPenaltyMax {
		t.Fatalf("delay %v", d)
	}
	if d := th.delay("192.0.2.2"); d != 0 {
		t.Fatalf("another address waits %v", d)
	}
	now = now.Add(httpPenaltyForget + time.Second)
	if d := th.fail("192.0.2.1"); d != 0 {
		t.Fatalf("a failure after a quiet spell cost %v", d)
	}
	for range 5 {
		th.fail("192.0.2.3")
	}
	th.succeed("192.0.2.3")
	if d := th.delay("192.0.2.3"); d != 0 {
		t.Fatalf("after success: %v", d)
	}
	// A flood of addresses keeps the table bounded.
	for i := range 3 * httpThrottleAddrs {
		now = now.Add(time.Millisecond)
		th.fail(strings.Repeat("x", i%7) + string(rune('a'+i%26)) + time.Duration(i).String())
	}
	if n := len(th.addrs); n > httpThrottleAddrs {
		t.Fatalf("%d addresses tracked", n)
	}
}

// TestHTTPRepeatedFailuresAreSlowed: over HTTP, wrong passwords from one
// address are answered more and more slowly, counted and logged; the right
// password still gets in.
func TestHTTPRepeatedFailuresAreSlowed(t *testing.T) {
	var logs syncBuffer
	reg := prometheus.NewRegistry()
	cfg := Config{RequirePass: "s3cret", Registry: reg, Logger: slog.New(slog.NewTextHandler(&logs, nil))}.withDefaults()
	a := newHTTPAuth(cfg, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
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
	if d := a.throttle.delay("192.0.2.9"); d != 0 {
		t.Fatalf("after success the address still waits %v", d)
	}
	if n := testutil.ToFloat64(a.failures.counter.WithLabelValues(faceHTTP)); n != 6 {
		t.Fatalf("rookery_auth_failures_total{face=http} = %v, want 6", n)
	}
	if !strings.Contains(logs.String(), "192.0.2.9:4000") {
		t.Fatalf("the log does not name the address:\n%s", logs.String())
	}
	// A client that gives up while held back is not answered.
	for range 6 {
		try("guess")
	}
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
