package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/atomicfile"
)

func mustCA(t *testing.T) Pair {
	t.Helper()
	ca, err := NewCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func mustIssue(t *testing.T, ca Pair, name string, hosts ...string) Pair {
	t.Helper()
	p, err := Issue(ca, name, hosts, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustSource(t *testing.T, ca, node Pair) *Source {
	t.Helper()
	s, err := New(ca.CertPEM, node)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// handshake runs one TLS handshake over a pipe and returns each side's error and
// the certificate the client saw.
func handshake(t *testing.T, server, client *tls.Config) (seen *x509.Certificate, serverErr, clientErr error) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	deadline := time.Now().Add(5 * time.Second)
	a.SetDeadline(deadline)
	b.SetDeadline(deadline)
	done := make(chan error, 1)
	go func() {
		sc := tls.Server(a, server)
		err := sc.Handshake()
		if err == nil {
			// TLS 1.3 clients learn of a refused certificate only when they read.
			_, err = sc.Write([]byte{1})
		}
		if err != nil {
			a.Close()
		}
		done <- err
	}()
	cc := tls.Client(b, client)
	clientErr = cc.Handshake()
	if clientErr == nil {
		var one [1]byte
		_, clientErr = cc.Read(one[:])
		seen = cc.ConnectionState().PeerCertificates[0]
	}
	b.Close()
	return seen, <-done, clientErr
}

func TestIssueNamesAndUsages(t *testing.T) {
	ca := mustCA(t)
	p := mustIssue(t, ca, "rookery1", "10.0.0.7", "node.example.com", "localhost")
	certs, err := parseCerts(p.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	c := certs[0]
	if c.Subject.CommonName != "rookery1" {
		t.Fatalf("common name %q", c.Subject.CommonName)
	}
	wantDNS := []string{"localhost", "node.example.com", "rookery1"}
	got := slices.Clone(c.DNSNames)
	slices.Sort(got)
	if !slices.Equal(got, wantDNS) {
		t.Fatalf("DNS names %v, want %v", got, wantDNS)
	}
	for _, ip := range []string{"127.0.0.1", "::1", "10.0.0.7"} {
		if c.VerifyHostname(ip) != nil {
			t.Errorf("not valid for %s", ip)
		}
	}
	if !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		t.Fatalf("usages %v: want server and client", c.ExtKeyUsage)
	}
	if c.IsCA {
		t.Fatal("a node certificate must not be a CA")
	}
	if _, err := Issue(p, "x", nil, time.Hour); !errors.Is(err, ErrNotCA) {
		t.Fatalf("issuing with a node certificate as CA: %v", err)
	}
	for _, bad := range []string{"", "../etc", "a/b", "-x", "a b"} {
		if _, err := Issue(ca, bad, nil, time.Hour); !errors.Is(err, ErrBadName) {
			t.Errorf("name %q: %v", bad, err)
		}
	}
}

func TestMutualTLS(t *testing.T) {
	ca := mustCA(t)
	n1 := mustSource(t, ca, mustIssue(t, ca, "n1"))
	n2 := mustSource(t, ca, mustIssue(t, ca, "n2"))
	other := mustCA(t)
	stranger := mustSource(t, other, mustIssue(t, other, "n1"))

	if seen, se, ce := handshake(t, n1.PeerServerConfig(), n2.PeerClientConfig()); se != nil || ce != nil {
		t.Fatalf("members: server %v, client %v", se, ce)
	} else if seen.Subject.CommonName != "n1" {
		t.Fatalf("client saw %q", seen.Subject.CommonName)
	}
	// A client without a certificate, and one from another CA, are refused.
	noCert := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}
	if _, se, _ := handshake(t, n1.PeerServerConfig(), noCert); se == nil {
		t.Fatal("a client without a certificate was accepted")
	}
	if _, se, _ := handshake(t, n1.PeerServerConfig(), stranger.PeerClientConfig()); se == nil {
		t.Fatal("a client with another CA's certificate was accepted")
	}
	// A member does not talk to a server of another CA either.
	if _, _, ce := handshake(t, stranger.PeerServerConfig(), n2.PeerClientConfig()); ce == nil {
		t.Fatal("a member accepted a server of another CA")
	}
}

func TestSourceRefusesBadMaterial(t *testing.T) {
	ca, other := mustCA(t), mustCA(t)
	good := mustIssue(t, ca, "n1")
	foreign := mustIssue(t, other, "n1")
	expired, err := Issue(ca, "old", nil, time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond)
	cases := []struct {
		name string
		ca   []byte
		node Pair
	}{
		{"not signed by the CA", ca.CertPEM, foreign},
		{"key of another certificate", ca.CertPEM, Pair{CertPEM: good.CertPEM, KeyPEM: foreign.KeyPEM}},
		{"expired", ca.CertPEM, expired},
		{"CA file holds a node certificate", good.CertPEM, good},
		{"garbage CA", []byte("not pem"), good},
	}
	for _, c := range cases {
		if _, err := New(c.ca, c.node); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
}

func writeFiles(t *testing.T, dir string, ca, node Pair) (string, string, string) {
	t.Helper()
	caFile := filepath.Join(dir, "ca.pem")
	certFile, keyFile := CertFiles(dir, "node")
	for f, b := range map[string][]byte{caFile: ca.CertPEM, certFile: node.CertPEM, keyFile: node.KeyPEM} {
		if err := atomicfile.Write(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return caFile, certFile, keyFile
}

func TestReloadRotatesAndKeepsGoodMaterial(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t)
	caFile, certFile, keyFile := writeFiles(t, dir, ca, mustIssue(t, ca, "first"))
	s, err := Load(caFile, certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	client := mustSource(t, ca, mustIssue(t, ca, "client")).PeerClientConfig()
	server := s.PeerServerConfig() // made once: reloads reach it
	if seen, _, _ := handshake(t, server, client); seen == nil || seen.Subject.CommonName != "first" {
		t.Fatalf("before rotation: %v", seen)
	}

	// A half-rotated state (new certificate, old key) is refused; the old pair stays.
	second := mustIssue(t, ca, "second")
	if err := atomicfile.Write(certFile, second.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reload(); err == nil {
		t.Fatal("a certificate with another's key was loaded")
	}
	if seen, _, _ := handshake(t, server, client); seen == nil || seen.Subject.CommonName != "first" {
		t.Fatalf("after a failed reload: %v", seen)
	}

	// The key arrives: Watch notices the change and loads the new pair.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reports := make(chan error, 10)
	go s.Watch(ctx, 10*time.Millisecond, func(err error) { reports <- err })
	time.Sleep(20 * time.Millisecond) // distinct modification time
	if err := atomicfile.Write(keyFile, second.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-reports:
		if err != nil {
			t.Fatalf("watch reload: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the change was not noticed")
	}
	if seen, _, _ := handshake(t, server, client); seen == nil || seen.Subject.CommonName != "second" {
		t.Fatalf("after rotation: %v", seen)
	}
	if s.Leaf().Subject.CommonName != "second" {
		t.Fatalf("Leaf: %q", s.Leaf().Subject.CommonName)
	}
}

func TestWriteAndInit(t *testing.T) {
	dir := t.TempDir()
	if err := WriteCA(dir, time.Hour, false); err != nil {
		t.Fatal(err)
	}
	if err := WriteCA(dir, time.Hour, false); !errors.Is(err, ErrExists) {
		t.Fatalf("replacing a CA without force: %v", err)
	}
	_, caKey := CAFiles(dir)
	if fi, err := os.Stat(caKey); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("CA key mode: %v %v", fi.Mode(), err)
	}
	out := filepath.Join(dir, "nodes")
	if err := WriteCert(dir, "n1", []string{"db1"}, out, time.Hour, false); err != nil {
		t.Fatal(err)
	}
	if err := WriteCert(dir, "n1", nil, out, time.Hour, false); !errors.Is(err, ErrExists) {
		t.Fatalf("replacing a certificate without force: %v", err)
	}
	caFile, _ := CAFiles(dir)
	certFile, keyFile := CertFiles(out, "n1")
	if _, err := Load(caFile, certFile, keyFile); err != nil {
		t.Fatalf("written files do not load: %v", err)
	}

	idir := t.TempDir()
	made, err := Init(idir, []string{"a", "b"}, nil)
	if err != nil || len(made) != 3 {
		t.Fatalf("init: %v %v", made, err)
	}
	before, _ := os.ReadFile(filepath.Join(idir, "ca.pem"))
	made, err = Init(idir, []string{"a", "b", "c"}, nil)
	if err != nil || len(made) != 1 {
		t.Fatalf("second init made %v, %v; want only c", made, err)
	}
	after, _ := os.ReadFile(filepath.Join(idir, "ca.pem"))
	if string(before) != string(after) {
		t.Fatal("init replaced the CA")
	}
}

// TestClientConfig: the tools' one client configuration trusts the CA given
// (the system's roots without one), presents the client certificate given,
// and never speaks TLS before 1.2.
func TestClientConfig(t *testing.T) {
	dir := t.TempDir()
	if err := WriteCA(dir, time.Hour, false); err != nil {
		t.Fatal(err)
	}
	if err := WriteClientCert(dir, "app", dir, time.Hour, false); err != nil {
		t.Fatal(err)
	}
	ca, _ := CAFiles(dir)
	cert, key := CertFiles(dir, "app")
	for _, c := range []struct {
		ca, cert, key string
		roots, certs  bool
	}{{ca, "", "", true, false}, {ca, cert, key, true, true}, {"", cert, key, false, true}} {
		cfg, err := ClientConfig(c.ca, c.cert, c.key)
		if err != nil || cfg.MinVersion != tls.VersionTLS12 || (cfg.RootCAs != nil) != c.roots || (len(cfg.Certificates) == 1) != c.certs {
			t.Errorf("ClientConfig(%q, %q, %q): %+v %v", c.ca, c.cert, c.key, cfg, err)
		}
	}
	if _, err := ClientConfig(key, "", ""); err == nil {
		t.Error("a key file taken as a CA")
	}
	if _, err := ClientConfig("", cert, ca); err == nil {
		t.Error("a key that does not match its certificate taken")
	}
}
