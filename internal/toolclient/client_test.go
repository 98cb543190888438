package toolclient

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// refusedAddr is an address where nothing listens.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func okServer(t *testing.T, tls bool) *httptest.Server {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"path":"`+r.URL.Path+`"}`)
	})
	var s *httptest.Server
	if tls {
		s = httptest.NewTLSServer(h)
	} else {
		s = httptest.NewServer(h)
	}
	t.Cleanup(s.Close)
	return s
}

// writePEM writes a certificate as PEM to a file in dir.
func writePEM(t *testing.T, der []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// otherCA is a CA that signed nothing the test servers present.
func otherCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, der)
}

func get(t *testing.T, cfg Config) (string, string, error) {
	t.Helper()
	var notes bytes.Buffer
	cfg.Notes = &notes
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(context.Background(), http.MethodGet, "/v1/nodes", nil)
	if err != nil {
		return "", notes.String(), err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), notes.String(), nil
}

// TestFallback: a refused address is passed over for the next, with a note
// saying so; when none answers the error lists each and names --addr.
func TestFallback(t *testing.T) {
	s := okServer(t, false)
	dead := refusedAddr(t)
	body, notes, err := get(t, Config{Addrs: []string{dead, s.Listener.Addr().String()}, AddrFrom: "--addr"})
	if err != nil || !strings.Contains(body, "/v1/nodes") {
		t.Fatalf("fallback: %q, %v", body, err)
	}
	if !strings.Contains(notes, dead+": connection refused; trying "+s.Listener.Addr().String()) {
		t.Errorf("notes: %q", notes)
	}

	dead2 := refusedAddr(t)
	_, _, err = get(t, Config{Addrs: []string{dead, dead2}})
	if !errors.Is(err, ErrNoNode) {
		t.Fatalf("want ErrNoNode, got %v", err)
	}
	for _, want := range []string{dead + " (connection refused)", dead2 + " (connection refused)",
		"the local defaults", "--addr", "ROOKERY_ADDR"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindRefused {
		t.Errorf("the parts: %v", e)
	}
}

// TestTLSMismatches: each way of getting TLS wrong names the flag that fixes it.
func TestTLSMismatches(t *testing.T) {
	tlsSrv := okServer(t, true)
	plain := okServer(t, false)
	trusted := writePEM(t, tlsSrv.Certificate().Raw)
	for _, tc := range []struct {
		name string
		cfg  Config
		kind Kind
		want []string
	}{
		{"http to https", Config{Addrs: []string{tlsSrv.Listener.Addr().String()}, AddrFrom: "--addr"},
			KindWantTLS, []string{"speaks https", "--cacert", "ROOKERY_CACERT"}},
		{"https to http", Config{Addrs: []string{plain.Listener.Addr().String()}, AddrFrom: "--addr", CAFile: trusted, CAFrom: "ROOKERY_CACERT"},
			KindNotTLS, []string{"plain http", "leave out ROOKERY_CACERT"}},
		{"another CA", Config{Addrs: []string{tlsSrv.Listener.Addr().String()}, AddrFrom: "--addr", CAFile: otherCA(t), CAFrom: "--cacert"},
			KindUntrusted, []string{"not signed by the CA", "--cacert", "ROOKERY_CACERT"}},
	} {
		_, _, err := get(t, tc.cfg)
		var e *Error
		if !errors.As(err, &e) || e.Kind != tc.kind || !e.Fatal() {
			t.Errorf("%s: got %v", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", tc.name, err, w)
			}
		}
	}
	if body, _, err := get(t, Config{Addrs: []string{tlsSrv.Listener.Addr().String()}, CAFile: trusted}); err != nil || body == "" {
		t.Errorf("the right CA: %q, %v", body, err)
	}
}

// TestUnauthorized: a 401 names --password and ROOKERY_PASSWORD, and says
// where a refused password came from; it is an answer, so the next address
// is not tried with the same password.
func TestUnauthorized(t *testing.T) {
	var hits int
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		if r.Header.Get("Authorization") != "Bearer right" {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"authentication required: send Authorization: Bearer <password>"}`)
			return
		}
		io.WriteString(w, "{}")
	}))
	defer s.Close()
	addr := s.Listener.Addr().String()
	_, _, err := get(t, Config{Addrs: []string{addr, addr}})
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindAuth || !strings.Contains(err.Error(), "--password (or ROOKERY_PASSWORD)") || hits != 1 {
		t.Errorf("no password: %v (%d requests)", err, hits)
	}
	_, _, err = get(t, Config{Addrs: []string{addr}, Password: "wrong", PasswordFrom: "ROOKERY_REQUIREPASS"})
	if err == nil || !strings.Contains(err.Error(), "the password from ROOKERY_REQUIREPASS is not the nodes'") {
		t.Errorf("a wrong password: %v", err)
	}
	if _, _, err := get(t, Config{Addrs: []string{addr}, Password: "right"}); err != nil {
		t.Errorf("the right password: %v", err)
	}
}

// TestRedirect: a follower's 307 is followed with the same credentials.
func TestRedirect(t *testing.T) {
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer pw" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "leader")
	}))
	defer leader.Close()
	follower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, leader.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer follower.Close()
	body, notes, err := get(t, Config{Addrs: []string{follower.Listener.Addr().String()}, Password: "pw"})
	if err != nil || body != "leader" || !strings.Contains(notes, "is not the leader; going on to") {
		t.Errorf("redirect: %q %q %v", body, notes, err)
	}
}

// TestChangeNotResent: a POST that reached a node which then gave no answer
// is not sent to the next address (it may have been applied).
func TestChangeNotResent(t *testing.T) {
	var other int
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hj, _ := w.(http.Hijacker)
		conn, _, _ := hj.Hijack()
		conn.Close()
	}))
	defer hang.Close()
	next := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { other++ }))
	defer next.Close()
	c, err := New(Config{Addrs: []string{hang.Listener.Addr().String(), next.Listener.Addr().String()}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Do(context.Background(), http.MethodPost, "/v1/raft/transfer-leader", nil)
	if err == nil || other != 0 {
		t.Errorf("a POST without an answer: %v, %d requests to the next node", err, other)
	}
	if _, err = c.Do(context.Background(), http.MethodGet, "/v1/nodes", nil); err != nil || other != 1 {
		t.Errorf("a GET without an answer goes on: %v, %d requests to the next node", err, other)
	}
}

// TestFlagsConfig: the command line wins over ROOKERY_ADDR, ROOKERY_CACERT
// and ROOKERY_PASSWORD, which win over ROOKERY_REQUIREPASS and the defaults.
func TestFlagsConfig(t *testing.T) {
	parse := func(env map[string]string, args ...string) Config {
		t.Helper()
		var f Flags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f.Register(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		c, err := f.Config()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := parse(nil)
	if strings.Join(c.Addrs, ",") != strings.Join(DefaultAddrs, ",") || c.AddrFrom != "" || c.Password != "" || c.CAFile != "" {
		t.Errorf("defaults: %+v", c)
	}
	env := map[string]string{"ROOKERY_ADDR": "a:1, b:2", "ROOKERY_CACERT": "ca.pem",
		"ROOKERY_PASSWORD": "p1", "ROOKERY_REQUIREPASS": "p2"}
	c = parse(env)
	if strings.Join(c.Addrs, ",") != "a:1,b:2" || c.AddrFrom != "ROOKERY_ADDR" || c.CAFile != "ca.pem" || c.Password != "p1" || c.PasswordFrom != "ROOKERY_PASSWORD" {
		t.Errorf("environment: %+v", c)
	}
	c = parse(map[string]string{"ROOKERY_REQUIREPASS": "p2"})
	if c.Password != "p2" || c.PasswordFrom != "ROOKERY_REQUIREPASS" {
		t.Errorf("ROOKERY_REQUIREPASS: %+v", c)
	}
	c = parse(env, "--addr", "c:3", "--password", "p3", "--cacert", "x.pem")
	if strings.Join(c.Addrs, ",") != "c:3" || c.AddrFrom != "--addr" || c.Password != "p3" || c.CAFile != "x.pem" || c.CAFrom != "--cacert" {
		t.Errorf("flags: %+v", c)
	}
}

// TestClientCertRequired: a node that wants a client certificate (with
// --tls-client-auth) refuses the handshake; the error names --cert/--key.
func TestClientCertRequired(t *testing.T) {
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	s.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	s.StartTLS()
	defer s.Close()
	_, _, err := get(t, Config{Addrs: []string{s.Listener.Addr().String()}, AddrFrom: "--addr", CAFile: writePEM(t, s.Certificate().Raw)})
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindNeedCert || !e.Fatal() || !strings.Contains(err.Error(), "--cert FILE --key FILE") {
		t.Errorf("a node that wants a client certificate: %v", err)
	}
}

// TestHTTPSchemeWithACA is issue 29's point 6: an address written http://
// to an https port, with the CA given, is told to write https:// rather than
// to give the CA it already gave.
func TestHTTPSchemeWithACA(t *testing.T) {
	s := okServer(t, true)
	trusted := writePEM(t, s.Certificate().Raw)
	host := s.Listener.Addr().String()
	_, _, err := get(t, Config{Addrs: []string{"http://" + host}, AddrFrom: "--addr", CAFile: trusted, CAFrom: "--cacert"})
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindWantTLS || !e.Fatal() {
		t.Fatalf("http:// with a CA: %v", err)
	}
	if want := "the address says http:// though --cacert is given: write https://" + host + " in --addr (or ROOKERY_ADDR)"; !strings.Contains(err.Error(), want) ||
		strings.Contains(err.Error(), "give the cluster's CA") {
		t.Errorf("http:// with a CA: %q, want %q", err, want)
	}
	if body, _, err := get(t, Config{Addrs: []string{"https://" + host}, CAFile: trusted}); err != nil || body == "" {
		t.Errorf("https:// with the CA: %q, %v", body, err)
	}
}

// TestDeadNodePassedOverOnce: a tool that makes several calls (snapshot save
// asks for the shards, then the backup) passes a dead first address over,
// and says so, once; the next calls start from the node that answered.
func TestDeadNodePassedOverOnce(t *testing.T) {
	// Its first answer is a 409, as /v1/shards of an unsharded cluster.
	calls := 0
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls++; calls == 1 {
			w.WriteHeader(http.StatusConflict)
		}
		io.WriteString(w, "{}")
	}))
	defer s.Close()
	dead := refusedAddr(t)
	var notes bytes.Buffer
	c, err := New(Config{Addrs: []string{dead, s.Listener.Addr().String()}, AddrFrom: "--addr", Notes: &notes})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		resp, err := c.Do(context.Background(), http.MethodGet, "/v1/shards", nil)
		if i == 0 {
			var e *Error
			if !errors.As(err, &e) || e.Status != http.StatusConflict {
				t.Fatalf("the 409: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if n := strings.Count(notes.String(), "trying "+s.Listener.Addr().String()); n != 1 {
		t.Errorf("the note of the dead node, %d times:\n%s", n, notes.String())
	}
}

// TestRESPPort: an HTTP request to a RESP port (a node's --resp-addr given
// as --addr) is named for what it is, with the flag that fixes it, and not
// tried again elsewhere as if the node were down.
func TestRESPPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				buf := make([]byte, 4096)
				for {
					if _, err := conn.Read(buf); err != nil {
						return
					}
					// As redcon answers a line it does not know.
					io.WriteString(conn, "-ERR unknown command 'GET'\r\n")
				}
			}()
		}
	}()
	_, _, err = get(t, Config{Addrs: []string{ln.Addr().String()}, AddrFrom: "--addr"})
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindRESP || !e.Fatal() ||
		!strings.Contains(err.Error(), "this port speaks RESP (a node's --resp-addr), not HTTP") ||
		!strings.Contains(err.Error(), "their --http-addr) with --addr (or ROOKERY_ADDR)") {
		t.Errorf("a RESP port: %v", err)
	}
}

// TestUser: with a user, the credentials go as basic auth, to the leader a
// redirect names too; a 401 names both flags, a 403 the user and --user,
// and neither is tried on the next address.
func TestUser(t *testing.T) {
	var hits int
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		user, pass, ok := r.BasicAuth()
		switch {
		case !ok || pass != "pw" || (user != "checker" && user != "operator"):
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"invalid credentials"}`)
		case user == "checker" && r.Method == http.MethodPost:
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"error":"user checker may not POST /v1/drain: it needs +@admin"}`)
		default:
			io.WriteString(w, user)
		}
	}))
	defer leader.Close()
	follower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, leader.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer follower.Close()
	addr := follower.Listener.Addr().String()
	if body, _, err := get(t, Config{Addrs: []string{addr}, User: "checker", Password: "pw"}); err != nil || body != "checker" {
		t.Fatalf("checker through a redirect: %q %v", body, err)
	}

	hits = 0
	_, _, err := get(t, Config{Addrs: []string{addr, addr}, User: "checker", UserFrom: "ROOKERY_USER", Password: "bad", PasswordFrom: "--password"})
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindAuth || hits != 1 {
		t.Fatalf("a wrong password: %v (%d requests)", err, hits)
	}
	for _, want := range []string{"checker (from ROOKERY_USER)", "from --password", "--user and --password"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}

	c, err := New(Config{Addrs: []string{leader.Listener.Addr().String(), addr}, User: "checker", UserFrom: "--user", Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	hits = 0
	_, err = c.Do(context.Background(), http.MethodPost, "/v1/drain", nil)
	if !errors.As(err, &e) || e.Kind != KindForbidden || !e.Fatal() || !e.Answered() || hits != 1 {
		t.Fatalf("a user without the right: %v (%d requests)", err, hits)
	}
	for _, want := range []string{"403 Forbidden: user checker may not POST /v1/drain: it needs +@admin",
		"grant it to user checker (from --user) with ACL SETUSER", "--user and --password (or ROOKERY_USER"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

// TestUserFlags: --user, else ROOKERY_USER (empty is unset), else none.
func TestUserFlags(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		env       map[string]string
		user, src string
	}{
		{nil, nil, "", ""},
		{nil, map[string]string{EnvUser: ""}, "", ""},
		{nil, map[string]string{EnvUser: "checker"}, "checker", EnvUser},
		{[]string{"--user", "operator"}, map[string]string{EnvUser: "checker"}, "operator", "--user"},
	} {
		var f Flags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f.Register(fs, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		c, err := f.Config()
		if err != nil || c.User != tc.user || c.UserFrom != tc.src {
			t.Errorf("%v %v: user %q from %q, %v", tc.args, tc.env, c.User, c.UserFrom, err)
		}
	}
}
