package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/internal/certs"
	"github.com/rookerydb/rookery/internal/nodeproc"
)

// runFails runs the binary with args and returns what it printed; the test
// fails unless it exits 1 within ten seconds.
func runFails(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin(t), args...)
	done := make(chan struct{})
	time.AfterFunc(10*time.Second, func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
		}
	})
	out, err := cmd.CombinedOutput()
	close(done)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("%v: %v, want exit status 1\n%s", args, err, out)
	}
	return string(out)
}

// TestSecureByDefault: a node refuses to listen beyond loopback in plain text
// unless told --insecure, and says what to add.
func TestSecureByDefault(t *testing.T) {
	dir := t.TempDir()
	certDir := filepath.Join(dir, "certs")
	if err := nodeproc.MakeCerts(bin(t), certDir, "n1"); err != nil {
		t.Fatal(err)
	}
	tlsFlags := []string{"--tls-ca", filepath.Join(certDir, "ca.pem"), "--tls-cert", filepath.Join(certDir, "n1.pem"),
		"--tls-key", filepath.Join(certDir, "n1-key.pem")}
	base := append([]string{"--id", "n1", "--data-dir", filepath.Join(dir, "data"), "--bootstrap-expect", "1"}, nodeproc.EphemeralAddrs()...)
	with := func(extra ...string) []string { return append(slices.Clone(base), extra...) }
	secured := append(slices.Clone(tlsFlags), "--gossip-key", base64.StdEncoding.EncodeToString(make([]byte, 32)),
		"--resp-tls", "--http-tls")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{with("--resp-addr", "0.0.0.0:0"), []string{"0.0.0.0:0 (--resp-addr) in plain text", "--tls-ca", "--gossip-key", "--insecure"}},
		{with("--raft-addr", "0.0.0.0:0"), []string{"(--raft-addr) in plain text"}},
		{with("--gossip-addr", ":0"), []string{"(--gossip-addr) in plain text"}},
		{with("--http-addr", "[::]:0"), []string{"(--http-addr) in plain text"}},
		{[]string{"--dev", "--resp-addr", "0.0.0.0:0"}, []string{"--dev listens on loopback only"}},
		{with(tlsFlags...), []string{"--gossip-key is required"}},
		{with(tlsFlags[:2]...), []string{"--tls-ca, --tls-cert and --tls-key go together"}},
		{with("--resp-tls"), []string{"need the node's certificate"}},
		// TLS everywhere and a gossip key, but no way to authenticate a client:
		// an open database on the network.
		{with(append(slices.Clone(secured), "--resp-addr", "0.0.0.0:0")...),
			[]string{"without authenticating clients", "--requirepass", "--tls-client-auth", "--insecure"}},
		{with(append(slices.Clone(secured), "--raft-addr", "0.0.0.0:0")...),
			[]string{"(--raft-addr) without authenticating clients", "--requirepass", "--tls-client-auth", "--insecure"}},
		// Client certificates asked on RESP only leave plain HTTP beyond loopback open.
		{with(append(slices.Clone(secured), "--tls-client-auth", "--http-tls=false", "--http-addr", "0.0.0.0:0")...),
			[]string{"HTTP (0.0.0.0:0, no --http-tls)", "--requirepass", "--insecure"}},
	} {
		out := runFails(t, c.args...)
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output %q lacks %q", c.args, out, w)
			}
		}
	}
	// Told --insecure, it starts on every interface (and says it is open).
	p := startProc(t, nil, with("--insecure", "--resp-addr", "0.0.0.0:0", "--http-addr", "0.0.0.0:0")...)
	p.waitReady(10 * time.Second)
	if !strings.Contains(p.Logs(), "--insecure") {
		t.Errorf("no warning about --insecure in the log:\n%s", p.Logs())
	}
	p.Kill()
	// With TLS and a way to authenticate clients (either), it starts beyond loopback.
	for i, auth := range [][]string{{"--requirepass", "pw"}, {"--tls-client-auth"}} {
		args := append(slices.Clone(secured), auth...)
		args = append(args, "--id", "n1", "--data-dir", filepath.Join(dir, fmt.Sprint("auth", i)), "--bootstrap-expect", "1")
		args = append(args, nodeproc.EphemeralAddrs()...)
		q := startProc(t, nil, append(args, "--resp-addr", "0.0.0.0:0")...)
		q.Sec = nodeproc.Security{CertDir: certDir, RESPTLS: true, HTTPTLS: true}
		q.waitReady(10 * time.Second)
		q.Kill()
	}
}

// TestTLSCommands: `rookery tls ca` and `rookery tls cert` make a CA and a
// certificate good for serving and dialling, and never replace a CA unasked.
func TestTLSCommands(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) error {
		out, err := exec.Command(bin(t), append([]string{"tls"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := run("ca", "--out", dir); err != nil {
		t.Fatal(err)
	}
	if err := run("ca", "--out", dir); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("a second CA into the same directory: %v", err)
	}
	out := filepath.Join(dir, "nodes")
	if err := run("cert", "--ca", dir, "--name", "db1", "--host", "db1.example.com,10.1.2.3", "--out", out); err != nil {
		t.Fatal(err)
	}
	if err := run("cert", "--ca", dir, "--name", "../evil", "--out", out); err == nil {
		t.Fatal("a name with a path was accepted")
	}
	if err := run("cert", "--ca", dir, "--name", "x"); err == nil {
		t.Fatal("cert without --out was accepted")
	}
	for f, mode := range map[string]os.FileMode{"ca-key.pem": 0o600, "ca.pem": 0o644, "nodes/db1-key.pem": 0o600, "nodes/db1.pem": 0o644} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v %v, want mode %v", f, fi.Mode(), err, mode)
		}
	}
	b, _ := os.ReadFile(filepath.Join(out, "db1.pem"))
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatal("db1.pem holds no PEM block")
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	for _, host := range []string{"127.0.0.1", "localhost", "db1.example.com", "10.1.2.3", "db1"} {
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Errorf("host %s usage %v: %v", host, usage, err)
			}
		}
	}
	if len(cert.URIs) != 1 || cert.URIs[0].String() != "rookery://node/db1" {
		t.Errorf("a node certificate names %v, want rookery://node/db1", cert.URIs)
	}

	// --client: a client certificate, for dialling only, naming a client.
	if err := run("cert", "--ca", dir, "--client", "--name", "app", "--host", "x", "--out", out); err == nil {
		t.Fatal("a client certificate with --host was made")
	}
	if err := run("cert", "--ca", dir, "--client", "--name", "app", "--out", out); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(filepath.Join(out, "app.pem"))
	blk, _ = pem.Decode(b)
	client, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(client.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("client certificate usages %v, want client auth only", client.ExtKeyUsage)
	}
	if len(client.URIs) != 1 || client.URIs[0].String() != "rookery://client/app" {
		t.Errorf("a client certificate names %v", client.URIs)
	}
	if fi, err := os.Stat(filepath.Join(out, "app-key.pem")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("client key: %v %v", fi.Mode(), err)
	}
}

// TestNodeRefusesOthersCertificates: a node does not start with a client
// certificate or another node's, and says how to make its own; with a
// certificate of the old kind it starts and warns how to re-issue it.
func TestNodeRefusesOthersCertificates(t *testing.T) {
	dir := t.TempDir()
	if err := nodeproc.MakeCerts(bin(t), dir, "n2"); err != nil {
		t.Fatal(err)
	}
	if err := nodeproc.MakeClientCert(bin(t), dir, "n1"); err != nil {
		t.Fatal(err)
	}
	key := base64.StdEncoding.EncodeToString(make([]byte, 32))
	args := func(certName string) []string {
		return append([]string{"--id", "n1", "--data-dir", filepath.Join(dir, "data"), "--bootstrap-expect", "1", "--gossip-key", key,
			"--tls-ca", filepath.Join(dir, "ca.pem"), "--tls-cert", filepath.Join(dir, certName+".pem"),
			"--tls-key", filepath.Join(dir, certName+"-key.pem")}, nodeproc.EphemeralAddrs()...)
	}
	if out := runFails(t, args("n1")...); !strings.Contains(out, "is a client certificate") || !strings.Contains(out, "rookery tls cert --ca DIR --name n1") {
		t.Errorf("with a client certificate: %s", out)
	}
	if out := runFails(t, args("n2")...); !strings.Contains(out, `names node "n2", not "n1"`) {
		t.Errorf("with another node's certificate: %s", out)
	}
	// A certificate of the old kind, as Rookery made them before: it serves, with a warning.
	caPair, err := certs.ReadPair(certs.CAFiles(dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"n1", "n3"} {
		old, err := certs.IssueLegacy(caPair, name, nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "legacy-"+name+".pem"), old.CertPEM, 0o600)
		os.WriteFile(filepath.Join(dir, "legacy-"+name+"-key.pem"), old.KeyPEM, 0o600)
	}
	if out := runFails(t, args("legacy-n3")...); !strings.Contains(out, `certificate of the old kind named "n3"`) ||
		!strings.Contains(out, "--name n1 --out DIR --force") {
		t.Errorf("with an old certificate naming another node: %s", out)
	}
	p := startProc(t, nil, args("legacy-n1")...)
	p.Sec = nodeproc.Security{CertDir: dir}
	p.waitReady(15 * time.Second)
	if !strings.Contains(p.Logs(), "certificate of the old kind") || !strings.Contains(p.Logs(), "--name n1 --out DIR --force") {
		t.Errorf("no warning about the old kind of certificate:\n%s", p.Logs())
	}
}

// secureCluster starts three nodes with mutual TLS, a gossip key, a password,
// and RESP and HTTP over TLS.
func secureCluster(t *testing.T) (*localCluster, nodeproc.Security) {
	t.Helper()
	dir := t.TempDir()
	certDir := filepath.Join(dir, "certs")
	if err := nodeproc.MakeCerts(bin(t), certDir, "n1", "n2", "n3"); err != nil {
		t.Fatal(err)
	}
	sec := nodeproc.Security{CertDir: certDir, GossipKey: base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef")),
		Password: "s3cret", RESPTLS: true, HTTPTLS: true}
	c, err := nodeproc.StartSecureCluster(bin(t), filepath.Join(dir, "data"), 3, sec, "--log-level", "debug")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &localCluster{Cluster: c, t: t}, sec
}

func tlsClient(t *testing.T, addr string, sec nodeproc.Security) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, Password: sec.Password, TLSConfig: sec.RESPTLSConfig(),
		MaxRetries: -1, DialTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSecureCluster is the README's secure three-process cluster: go-redis and
// redis-cli over TLS with the password; strangers on every port get nothing.
func TestSecureCluster(t *testing.T) {
	lc, sec := secureCluster(t)
	leader := lc.leader(15 * time.Second)
	f := lc.followers()
	if err := tlsClient(t, f[0].RESP, sec).BFAdd(bg(), "users", "alice").Err(); err != nil {
		t.Fatalf("BF.ADD over TLS on a follower: %v", err)
	}
	if !tlsClient(t, f[1].RESP, sec).BFExists(bg(), "users", "alice").Val() {
		t.Fatal("a write through one follower is not visible on the other")
	}
	host, port, _ := strings.Cut(leader.RESP, ":")
	cacert := filepath.Join(sec.CertDir, "ca.pem")
	out, err := exec.Command("redis-cli", "--tls", "--cacert", cacert, "-h", host, "-p", port, "-a", "s3cret",
		"--no-auth-warning", "BF.EXISTS", "users", "alice").CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || got != "1" {
		t.Fatalf("redis-cli --tls: %q %v", got, err)
	}
	// Plain text on the TLS port, and TLS without the password, get nowhere.
	if err := client(t, leader.RESP, 2).Ping(bg()).Err(); err == nil {
		t.Fatal("plain-text PING on the TLS port answered")
	}
	noPass := tlsClient(t, leader.RESP, nodeproc.Security{CertDir: sec.CertDir, RESPTLS: true})
	if err := noPass.BFExists(bg(), "users", "alice").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Fatalf("BF.EXISTS without the password: %v", err)
	}

	// HTTP: probes open, the rest behind the password; no stranger leaves a voter.
	strangerHTTP := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: sec.ClientTLS()}}
	for _, c := range []struct {
		method, path string
		want         int
	}{{"GET", "/healthz", 200}, {"GET", "/readyz", 200}, {"GET", "/v1/filters", 401}, {"GET", "/v1/status", 401},
		{"GET", "/metrics", 401}, {"POST", "/v1/leave", 401}} {
		req, _ := http.NewRequest(c.method, "https://"+f[1].HTTP+c.path, nil)
		resp, err := strangerHTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s without credentials: %d %s, want %d", c.method, c.path, resp.StatusCode, body, c.want)
		}
		if c.want == 401 && !strings.Contains(string(body), `"error"`) {
			t.Errorf("%s %s: 401 without a JSON error: %s", c.method, c.path, body)
		}
	}
	if resp, err := f[1].HTTPDo("GET", "/v1/filters"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/v1/filters with the password: %v %v", resp, err)
	}

	// A stranger speaking Raft to the leader, and gossiping without the key.
	st, err := leader.Status()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var vresp raft.RequestVoteResponse
	if err := tr.RequestVote(raft.ServerID(leader.ID), raft.ServerAddress(leader.Raft), &raft.RequestVoteRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("evil"), Addr: []byte(tr.LocalAddr())},
		Term:      st.Term + 100, LastLogIndex: st.Commit + 100, LastLogTerm: st.Term + 99,
	}, &vresp); err == nil {
		t.Fatal("the leader answered a stranger's vote request")
	}
	joinWithoutKey(t, leader.Gossip)
	time.Sleep(3 * time.Second)
	after, err := leader.Status()
	if err != nil || after.Role != "leader" || after.Term != st.Term {
		t.Fatalf("leadership disturbed: %+v -> %+v %v", st, after, err)
	}
	for _, m := range lc.Nodes {
		voters, err := m.Voters()
		if err != nil || len(voters) != 3 {
			t.Fatalf("%s sees voters %v %v", m.ID, voters, err)
		}
		resp, err := m.HTTPDo("GET", "/v1/nodes")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), `"evil"`) {
			t.Fatalf("%s lists the stranger: %s", m.ID, body)
		}
	}
	if err := tlsClient(t, leader.RESP, sec).BFAdd(bg(), "users", "bob").Err(); err != nil {
		t.Fatalf("write after the attacks: %v", err)
	}
}

// joinWithoutKey gossips to addr as "evil", without the cluster's key.
func joinWithoutKey(t *testing.T, addr string) {
	t.Helper()
	mc := memberlist.DefaultLANConfig()
	mc.Name = "evil"
	mc.BindAddr, mc.BindPort = "127.0.0.1", 0
	mc.Logger = log.New(io.Discard, "", 0)
	ml, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ml.Shutdown() })
	if n, err := ml.Join([]string{addr}); err == nil && n > 0 && ml.NumMembers() > 1 {
		t.Logf("gossip without the key reached %d members", ml.NumMembers())
	}
}

// TestCertificateRotation: a new certificate written over the old one is
// served after SIGHUP, without a restart, and the cluster keeps working.
func TestCertificateRotation(t *testing.T) {
	lc, sec := secureCluster(t)
	m := lc.Nodes[0]
	serial := func() string {
		c, err := tls.Dial("tcp", m.RESP, sec.ClientTLS())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	if out, err := exec.Command(bin(t), "tls", "cert", "--ca", sec.CertDir, "--name", "n1", "--out", sec.CertDir, "--force").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if err := m.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for serial() == before {
		if time.Now().After(deadline) {
			t.Fatalf("the new certificate is not served\n%s", m.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !m.Alive() {
		t.Fatal("the node exited")
	}
	if !strings.Contains(m.Logs(), "certificate reloaded") {
		t.Errorf("no reload in the log")
	}
	// Raft connections made after the rotation work too.
	leader := lc.leader(15 * time.Second)
	if err := tlsClient(t, leader.RESP, sec).BFAdd(bg(), "k", strconv.Itoa(1)).Err(); err != nil {
		t.Fatal(err)
	}
	for _, n := range lc.Nodes {
		if !tlsClient(t, n.RESP, sec).BFExists(bg(), "k", "1").Val() {
			t.Fatalf("%s: write not visible", n.ID)
		}
	}
}

// TestClientCertificates: with --tls-client-auth, RESP wants a client
// certificate of the cluster CA at the handshake, and over HTTP such a
// certificate is a credential, while the probes stay open to anyone.
func TestClientCertificates(t *testing.T) {
	dir := t.TempDir()
	if err := nodeproc.MakeCerts(bin(t), dir, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := nodeproc.MakeClientCert(bin(t), dir, "app"); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other")
	if err := nodeproc.MakeCerts(bin(t), other); err != nil {
		t.Fatal(err)
	}
	if err := nodeproc.MakeClientCert(bin(t), other, "app"); err != nil {
		t.Fatal(err)
	}
	sec := nodeproc.Security{CertDir: dir, GossipKey: base64.StdEncoding.EncodeToString(make([]byte, 16)), RESPTLS: true, HTTPTLS: true}
	args := append([]string{"--id", "n1", "--data-dir", filepath.Join(dir, "data"), "--bootstrap-expect", "1", "--tls-client-auth"},
		nodeproc.EphemeralAddrs()...)
	p := startProc(t, nil, append(args, sec.Flags("n1")...)...)
	p.Sec = sec
	p.waitReady(10 * time.Second)

	withCert := func(certDir string) *tls.Config {
		cfg := sec.ClientTLS()
		kp, err := tls.LoadX509KeyPair(filepath.Join(certDir, "app.pem"), filepath.Join(certDir, "app-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{kp}
		return cfg
	}
	rc := func(cfg *tls.Config) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: p.RESP, TLSConfig: cfg, MaxRetries: -1, DialTimeout: 5 * time.Second})
		t.Cleanup(func() { c.Close() })
		return c
	}
	if err := rc(withCert(dir)).BFAdd(bg(), "users", "alice").Err(); err != nil {
		t.Fatalf("RESP with a client certificate: %v", err)
	}
	if err := rc(sec.ClientTLS()).Ping(bg()).Err(); err == nil {
		t.Fatal("RESP without a client certificate answered")
	}
	if err := rc(withCert(other)).Ping(bg()).Err(); err == nil {
		t.Fatal("RESP with another CA's certificate answered")
	}
	host, port, _ := strings.Cut(p.RESP, ":")
	out, err := exec.Command("redis-cli", "--tls", "--cacert", filepath.Join(dir, "ca.pem"), "--cert", filepath.Join(dir, "app.pem"),
		"--key", filepath.Join(dir, "app-key.pem"), "-h", host, "-p", port, "BF.EXISTS", "users", "alice").CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || got != "1" {
		t.Fatalf("redis-cli with a client certificate: %q %v", got, err)
	}

	get := func(cfg *tls.Config, path string) int {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := c.Get("https://" + p.HTTP + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		cfg  *tls.Config
		path string
		want int
	}{
		{sec.ClientTLS(), "/readyz", 200}, {sec.ClientTLS(), "/v1/filters", 401}, {withCert(dir), "/v1/filters", 200},
		{sec.ClientTLS(), "/metrics", 401}, {withCert(dir), "/metrics", 200},
	} {
		if got := get(c.cfg, c.path); got != c.want {
			t.Errorf("GET %s (certificate %v): %d, want %d", c.path, len(c.cfg.Certificates) > 0, got, c.want)
		}
	}

	// The client certificate opens no node-to-node port: a status request on
	// the Raft port gets nothing back, while n1's own certificate is answered.
	nodeCert := sec.ClientTLS()
	kp, err := tls.LoadX509KeyPair(filepath.Join(dir, "n1.pem"), filepath.Join(dir, "n1-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	nodeCert.Certificates = []tls.Certificate{kp}
	if got := peerStatusFrame(t, p.Raft, withCert(dir)); len(got) > 0 {
		t.Fatalf("the raft port answered a client certificate: %q", got)
	}
	if got := peerStatusFrame(t, p.Raft, nodeCert); len(got) == 0 {
		t.Fatal("the raft port did not answer the node's own certificate (the refusal above proves nothing)")
	}
}

// peerStatusFrame sends a node-to-node status request to a Raft port over TLS
// with cfg and returns whatever comes back.
func peerStatusFrame(t *testing.T, addr string, cfg *tls.Config) []byte {
	t.Helper()
	cfg = cfg.Clone()
	cfg.InsecureSkipVerify = true // peers' certificates name node ids, not hosts
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil // refused at the handshake
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	// stream 'P', then a frame: u32 length 9, u64 request id 1, u8 op 3 (status)
	c.Write([]byte{'P', 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 1, 3})
	b, _ := io.ReadAll(c)
	return b
}
