package transport

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	testPass  = "s3cret"
	wrongPass = "guess"
	stranger  = "203.0.113.5:1234"
	localPeer = "127.0.0.1:1234"
)

// authEnv is an HTTP handler with every route switched on (metrics, pprof, a
// fault-injection route as cmd/node wires it), a fake backend, and a log.
type authEnv struct {
	h    http.Handler
	be   *fakeBackend
	cuts atomic.Int32 // calls of POST /debug/faults/cut
	log  lockedBuffer
}

func newAuthEnv(t *testing.T, cfg Config) *authEnv {
	t.Helper()
	e := &authEnv{be: newFakeBackend(t)}
	cfg.Registry = prometheus.NewRegistry()
	cfg.Pprof = true
	if cfg.AuthGuard == nil {
		// These tests are about which credentials open which route, with many
		// wrong passwords from one address: a guard whose clock jumps an hour
		// at each reading holds none of them back (authguard_test.go tests
		// the waits).
		g := NewAuthGuard(nil)
		var hours atomic.Int64
		g.now = func() time.Time { return time.Now().Add(time.Duration(hours.Add(1)) * time.Hour) }
		cfg.AuthGuard = g
	}
	cfg.Logger = slog.New(slog.NewTextHandler(&e.log, nil))
	cfg.Routes = map[string]http.Handler{
		"POST /debug/faults/cut": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			e.cuts.Add(1)
		}),
	}
	e.h = NewHTTP(cfg, e.be).Handler()
	return e
}

// do sends method path from remote, with cred applied to the request.
func (e *authEnv) do(method, path, remote string, cred func(*http.Request)) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	req.RemoteAddr = remote
	if cred != nil {
		cred(req)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

func (e *authEnv) left() bool {
	e.be.mu.Lock()
	defer e.be.mu.Unlock()
	return e.be.left
}

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func withBearer(token string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
}

func withBasic(user, pass string) func(*http.Request) {
	return func(r *http.Request) { r.SetBasicAuth(user, pass) }
}

func withHeader(value string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", value) }
}

// authRoute is one request and what it answers once past authentication.
type authRoute struct {
	method, path string
	open         bool // answers without credentials
	admin        bool // needs +@admin (accessAdmin)
	code         int
}

// allRoutes covers every route NewHTTP serves, plus an unknown path and a wrong
// method, which must not tell a stranger anything either.
var allRoutes = []authRoute{
	{"GET", "/healthz", true, false, 200},
	{"HEAD", "/healthz", true, false, 200},
	{"GET", "/readyz", true, false, 200},
	{"GET", "/v1/status", false, false, 200},
	{"HEAD", "/v1/status", false, false, 200},
	{"GET", "/v1/nodes", false, false, 200},
	{"GET", "/v1/filters", false, false, 200},
	{"GET", "/v1/shards", false, false, 501}, // the fake backend has no shard or raft operations
	{"GET", "/v1/raft/peers", false, false, 501},
	{"GET", "/metrics", false, false, 200},
	{"GET", "/debug/pprof/", false, true, 200},
	{"GET", "/debug/pprof/cmdline", false, true, 200},
	{"GET", "/v1/snapshot", false, true, 200},
	{"POST", "/v1/snapshot", false, true, 200},
	{"POST", "/v1/drain?id=n9", false, true, 501},
	{"POST", "/v1/leave", false, true, 200},
	{"POST", "/debug/faults/cut", false, true, 200},
	{"GET", "/nope", false, true, 404},
	{"DELETE", "/v1/filters", false, true, 405},
}

// assertRefused checks a refusal's status, shape and message, and that it
// repeats no password.
func assertRefused(t *testing.T, what string, rec *httptest.ResponseRecorder, msg string) {
	t.Helper()
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("%s: status %d, want 401", what, rec.Code)
		return
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q", what, ct)
	}
	challenges := strings.Join(rec.Header().Values("WWW-Authenticate"), "\n")
	if !strings.Contains(challenges, `Bearer realm="rookery"`) {
		t.Errorf("%s: WWW-Authenticate %q", what, challenges)
	}
	body := rec.Body.String()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error != msg {
		t.Errorf("%s: body %q (%v), want error %q", what, body, err, msg)
	}
	if !strings.Contains(body, msg) {
		t.Errorf("%s: the message is not readable as sent: %q", what, body)
	}
	if strings.Contains(body, testPass) || strings.Contains(body, wrongPass) {
		t.Errorf("%s: body repeats a password: %q", what, body)
	}
}

// TestHTTPAuthPassword: with --requirepass, every route but the probes wants
// the default user's password, as a bearer token or basic auth for the user
// default (or no user name); another user name is another user, who does not
// exist here; a refused change reaches no handler, even from loopback.
func TestHTTPAuthPassword(t *testing.T) {
	creds := []struct {
		name string
		cred func(*http.Request)
		msg  string // "" when accepted
	}{
		{"none", nil, msgNeedPassword},
		{"wrong bearer", withBearer(wrongPass), msgInvalid},
		{"wrong basic", withBasic("default", wrongPass), msgInvalid},
		{"empty bearer", withBearer(""), msgInvalid},
		{"password as basic user name", withBasic(testPass, ""), msgInvalid},
		{"unknown scheme", withHeader("Token " + testPass), msgNeedPassword},
		{"bearer", withBearer(testPass), ""},
		{"bearer lower-case scheme", withHeader("bearer " + testPass), ""},
		{"basic default", withBasic("default", testPass), ""},
		{"basic without a user name", withBasic("", testPass), ""},
		{"basic unknown user", withBasic("ops", testPass), msgInvalid},
	}
	for _, c := range creds {
		t.Run(c.name, func(t *testing.T) {
			for _, remote := range []string{stranger, localPeer} {
				e := newAuthEnv(t, Config{RequirePass: testPass})
				for _, rt := range allRoutes {
					what := rt.method + " " + rt.path + " from " + remote
					rec := e.do(rt.method, rt.path, remote, c.cred)
					if rt.open || c.msg == "" {
						if rec.Code != rt.code {
							t.Errorf("%s: status %d, want %d: %s", what, rec.Code, rt.code, rec.Body)
						}
						continue
					}
					assertRefused(t, what, rec, c.msg)
				}
				accepted := c.msg == ""
				if e.left() != accepted {
					t.Errorf("from %s: backend left = %v", remote, e.left())
				}
				if cuts := e.cuts.Load(); (cuts == 1) != accepted {
					t.Errorf("from %s: fault route ran %d times", remote, cuts)
				}
				if strings.Contains(e.log.String(), testPass) {
					t.Errorf("the log holds the password: %s", e.log.String())
				}
			}
		})
	}
}

// TestHTTPAuthRefusalIsLogged: a refused change is logged at warn with the
// peer's address.
func TestHTTPAuthRefusalIsLogged(t *testing.T) {
	e := newAuthEnv(t, Config{RequirePass: testPass})
	e.do("POST", "/v1/leave", stranger, withBearer(wrongPass))
	log := e.log.String()
	if !strings.Contains(log, "level=WARN") || !strings.Contains(log, "remote="+stranger) ||
		!strings.Contains(log, "path=/v1/leave") {
		t.Errorf("log %q", log)
	}
	if strings.Contains(log, wrongPass) {
		t.Errorf("the log holds the password tried: %q", log)
	}
}

// TestHTTPAuthMetrics: /metrics wants credentials like any read, unless
// MetricsPublic opens it (and only it) to a scraper without a token.
func TestHTTPAuthMetrics(t *testing.T) {
	e := newAuthEnv(t, Config{RequirePass: testPass})
	assertRefused(t, "/metrics", e.do("GET", "/metrics", stranger, nil), msgNeedPassword)
	if rec := e.do("GET", "/metrics", stranger, withBearer(testPass)); rec.Code != 200 {
		t.Errorf("/metrics with the password: %d", rec.Code)
	}

	e = newAuthEnv(t, Config{RequirePass: testPass, MetricsPublic: true})
	rec := e.do("GET", "/metrics", stranger, nil)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "rookery_raft_term 3") {
		t.Errorf("public /metrics: %d %q", rec.Code, rec.Body)
	}
	assertRefused(t, "/v1/status beside public metrics", e.do("GET", "/v1/status", stranger, nil), msgNeedPassword)
	assertRefused(t, "POST /metrics", e.do("POST", "/metrics", stranger, nil), msgNeedPassword)
}

// TestHTTPAuthNoneConfigured: with neither a password nor client certificates
// (a loopback or --insecure node), reads are open to all, and changes and
// the other admin routes are accepted from loopback only.
func TestHTTPAuthNoneConfigured(t *testing.T) {
	e := newAuthEnv(t, Config{})
	for _, rt := range allRoutes {
		rec := e.do(rt.method, rt.path, stranger, nil)
		if rt.admin {
			assertRefused(t, rt.method+" "+rt.path+" from a stranger", rec, msgNeedLoopback)
			continue
		}
		if rec.Code != rt.code {
			t.Errorf("%s %s from a stranger: %d, want %d", rt.method, rt.path, rec.Code, rt.code)
		}
	}
	for _, rt := range allRoutes {
		if rec := e.do(rt.method, rt.path, localPeer, nil); rec.Code != rt.code {
			t.Errorf("%s %s from loopback: %d, want %d", rt.method, rt.path, rec.Code, rt.code)
		}
	}
	e = newAuthEnv(t, Config{})
	for _, remote := range []string{stranger, "[2001:db8::1]:1234", "192.168.1.10:80"} {
		for _, path := range []string{"/v1/leave", "/debug/faults/cut"} {
			rec := e.do("POST", path, remote, withBearer("anything"))
			assertRefused(t, "POST "+path+" from "+remote, rec, msgNeedLoopback)
			if !strings.Contains(rec.Body.String(), "--requirepass") ||
				!strings.Contains(rec.Body.String(), "--tls-client-auth") {
				t.Errorf("the refusal does not say what to do: %s", rec.Body)
			}
		}
	}
	assertRefused(t, "DELETE from a stranger", e.do("DELETE", "/v1/filters", stranger, nil), msgNeedLoopback)
	if e.left() || e.cuts.Load() != 0 {
		t.Fatalf("a stranger's change reached a handler: left %v, cuts %d", e.left(), e.cuts.Load())
	}
	if log := e.log.String(); !strings.Contains(log, "level=WARN") || !strings.Contains(log, "remote="+stranger) {
		t.Errorf("refusals not logged: %q", log)
	}

	for i, remote := range []string{localPeer, "[::1]:1234", "[::ffff:127.0.0.1]:1234"} {
		if rec := e.do("POST", "/debug/faults/cut", remote, nil); rec.Code != 200 || e.cuts.Load() != int32(i+1) {
			t.Errorf("POST /debug/faults/cut from %s: %d", remote, rec.Code)
		}
	}
	if rec := e.do("POST", "/v1/leave", localPeer, nil); rec.Code != 200 || !e.left() {
		t.Errorf("POST /v1/leave from loopback: %d %s", rec.Code, rec.Body)
	}
}

func TestIsLoopback(t *testing.T) {
	for remote, want := range map[string]bool{
		"127.0.0.1:1":            true,
		"127.0.0.2:1":            true,
		"[::1]:1":                true,
		"[::ffff:127.0.0.1]:1":   true,
		"203.0.113.5:1":          false,
		"[2001:db8::1]:1":        false,
		"0.0.0.0:1":              false,
		"localhost:1":            false, // a name, not an address: never trusted
		"127.0.0.1":              false, // no port: not a RemoteAddr
		"@":                      false, // a Unix socket
		"":                       false,
		"[fe80::1%lo]:1":         false,
		"[::ffff:203.0.113.5]:1": false,
	} {
		if got := isLoopback(remote); got != want {
			t.Errorf("isLoopback(%q) = %v", remote, got)
		}
	}
}

// TestHTTPServerRefusesHugeHeaders: the served server (not just its handler)
// refuses headers over its limit instead of buffering them.
func TestHTTPServerRefusesHugeHeaders(t *testing.T) {
	h := NewHTTP(Config{}, newFakeBackend(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Serve(ln) }()
	t.Cleanup(func() {
		h.Close(context.Background())
		if err := <-done; err != ErrServerClosed {
			t.Errorf("Serve returned %v", err)
		}
	})
	req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/healthz", nil)
	req.Header.Set("X-Filler", strings.Repeat("a", 2*httpMaxHeaderBytes))
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("huge headers: %d", resp.StatusCode)
	}
	if httpWriteTimeout <= leaveTimeout {
		t.Errorf("WriteTimeout %v cuts POST /v1/leave (%v) short", httpWriteTimeout, leaveTimeout)
	}
}

// testPKI is a cluster CA with a server certificate for 127.0.0.1 and a
// client certificate, as --tls-client-auth deployments have.
type testPKI struct {
	roots  *x509.CertPool
	server tls.Certificate
	client tls.Certificate
}

func mustNewPKI(t *testing.T) testPKI {
	t.Helper()
	caKey := mustNewKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "rookery test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p := testPKI{roots: x509.NewCertPool()}
	p.roots.AddCert(ca)
	p.server = mustIssue(t, ca, caKey, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "node"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	p.client = mustIssue(t, ca, caKey, &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "operator"},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return p
}

func mustNewKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// mustIssue signs tmpl with the CA for a fresh key.
func mustIssue(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, tmpl *x509.Certificate) tls.Certificate {
	t.Helper()
	key := mustNewKey(t)
	tmpl.NotBefore, tmpl.NotAfter = ca.NotBefore, ca.NotAfter
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// startTLS serves e's handler over TLS as cmd/node does with
// --tls-client-auth: a client certificate is verified if given, not required.
func startTLS(t *testing.T, e *authEnv, p testPKI) string {
	t.Helper()
	ts := httptest.NewUnstartedServer(e.h)
	ts.TLS = &tls.Config{
		Certificates: []tls.Certificate{p.server},
		ClientCAs:    p.roots,
		ClientAuth:   tls.VerifyClientCertIfGiven,
	}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts.URL
}

// tlsClient trusts the CA and presents certs (none: no client certificate).
func tlsClient(t *testing.T, p testPKI, certs ...tls.Certificate) *http.Client {
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: p.roots, Certificates: certs}}}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// call sends method url with cred and returns the status and body.
func call(t *testing.T, c *http.Client, method, url string, cred func(*http.Request)) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		cred(req)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestHTTPAuthClientCert: with --tls-client-auth, a certificate the TLS layer
// verified is a credential on its own, while the probes still answer a client
// without one (orchestrators' health checks carry no certificate).
func TestHTTPAuthClientCert(t *testing.T) {
	p := mustNewPKI(t)

	t.Run("certificates only", func(t *testing.T) {
		e := newAuthEnv(t, Config{ClientCerts: true})
		url := startTLS(t, e, p)
		withCert, without := tlsClient(t, p, p.client), tlsClient(t, p)
		for _, path := range []string{"/healthz", "/readyz"} {
			if code, body := call(t, without, "GET", url+path, nil); code != 200 {
				t.Errorf("%s without a certificate: %d %s", path, code, body)
			}
		}
		if code, body := call(t, without, "GET", url+"/v1/filters", nil); code != 401 || !strings.Contains(body, msgNeedCert) {
			t.Errorf("/v1/filters without a certificate: %d %s", code, body)
		}
		// No password is set, so none (not even an empty one) may pass.
		for _, cred := range []func(*http.Request){withBearer(testPass), withBearer(""), withBasic("default", "")} {
			if code, body := call(t, without, "GET", url+"/v1/filters", cred); code != 401 {
				t.Errorf("/v1/filters with a password when none is set: %d %s", code, body)
			}
		}
		if code, _ := call(t, without, "POST", url+"/v1/leave", nil); code != 401 || e.left() {
			t.Errorf("POST /v1/leave without a certificate: %d, left %v", code, e.left())
		}
		if code, body := call(t, withCert, "GET", url+"/v1/filters", nil); code != 200 || !strings.HasPrefix(body, "[") {
			t.Errorf("/v1/filters with a certificate: %d %s", code, body)
		}
		if code, _ := call(t, withCert, "POST", url+"/v1/leave", nil); code != 200 || !e.left() {
			t.Errorf("POST /v1/leave with a certificate: %d, left %v", code, e.left())
		}
	})

	t.Run("certificates or password", func(t *testing.T) {
		e := newAuthEnv(t, Config{ClientCerts: true, RequirePass: testPass})
		url := startTLS(t, e, p)
		without := tlsClient(t, p)
		if code, body := call(t, without, "GET", url+"/v1/status", nil); code != 401 || !strings.Contains(body, msgNeedEither) {
			t.Errorf("/v1/status with nothing: %d %s", code, body)
		}
		if code, body := call(t, without, "GET", url+"/v1/status", withBearer(testPass)); code != 200 {
			t.Errorf("/v1/status with the password: %d %s", code, body)
		}
		if code, body := call(t, tlsClient(t, p, p.client), "GET", url+"/v1/status", nil); code != 200 {
			t.Errorf("/v1/status with a certificate: %d %s", code, body)
		}
	})

	t.Run("password only", func(t *testing.T) {
		// Without ClientCerts a certificate proves nothing to this node.
		e := newAuthEnv(t, Config{RequirePass: testPass})
		url := startTLS(t, e, p)
		if code, body := call(t, tlsClient(t, p, p.client), "GET", url+"/v1/filters", nil); code != 401 {
			t.Errorf("/v1/filters with a certificate only: %d %s", code, body)
		}
	})
}
