package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func leafOf(t *testing.T, p Pair) *x509.Certificate {
	t.Helper()
	cs, err := parseCerts(p.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	return cs[0]
}

// TestKindsOfCertificate: a node certificate names its node and serves and
// dials; a client certificate names a client and only dials; a legacy one is
// named by its common name.
func TestKindsOfCertificate(t *testing.T) {
	ca := mustCA(t)
	node := leafOf(t, mustIssue(t, ca, "n1", "db1"))
	if k, id := Identify(node); k != KindNode || id != "n1" {
		t.Fatalf("node certificate: %v %q", k, id)
	}
	if !slices.Contains(node.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || !slices.Contains(node.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		t.Fatalf("node usages %v", node.ExtKeyUsage)
	}
	if node.URIs[0].String() != "rookery://node/n1" || node.Subject.OrganizationalUnit[0] != "node" {
		t.Fatalf("node marks: %v %v", node.URIs, node.Subject.OrganizationalUnit)
	}
	cp, err := IssueClient(ca, "app", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	client := leafOf(t, cp)
	if k, name := Identify(client); k != KindClient || name != "app" {
		t.Fatalf("client certificate: %v %q", k, name)
	}
	if !slices.Equal(client.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Fatalf("client usages %v: want client auth only", client.ExtKeyUsage)
	}
	if len(client.DNSNames)+len(client.IPAddresses) != 0 {
		t.Fatalf("a client certificate names hosts: %v %v", client.DNSNames, client.IPAddresses)
	}
	lp, err := IssueLegacy(ca, "n2", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if k, id := Identify(leafOf(t, lp)); k != KindLegacy || id != "n2" {
		t.Fatalf("legacy certificate: %v %q", k, id)
	}
	// A client certificate cannot serve a peer: peers ask for server use.
	pool := x509.NewCertPool()
	pool.AddCert(leafOf(t, ca))
	if _, err := client.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Fatal("a client certificate verifies for server use")
	}
}

// TestIdentifyAmbiguousMarks: any client mark, two node names, an unknown
// mark or a node URI with extra parts make a certificate no node.
func TestIdentifyAmbiguousMarks(t *testing.T) {
	u := func(s string) *url.URL {
		v, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name string
		c    x509.Certificate
		kind Kind
	}{
		{"node and client", x509.Certificate{URIs: []*url.URL{NodeURI("n1"), ClientURI("n1")}}, KindClient},
		{"node with client OU", x509.Certificate{URIs: []*url.URL{NodeURI("n1")}, Subject: pkix.Name{OrganizationalUnit: []string{"client"}}}, KindClient},
		{"two nodes", x509.Certificate{URIs: []*url.URL{NodeURI("n1"), NodeURI("n2")}}, KindClient},
		{"unknown mark", x509.Certificate{URIs: []*url.URL{u("rookery://admin/x")}}, KindClient},
		{"node URI with a query", x509.Certificate{URIs: []*url.URL{u("rookery://node/n1?x=1")}}, KindClient},
		{"node URI with a port", x509.Certificate{URIs: []*url.URL{u("rookery://node:1/n1")}}, KindClient},
		{"bad node name", x509.Certificate{URIs: []*url.URL{NodeURI("../x")}}, KindClient},
		{"node OU naming nothing", x509.Certificate{Subject: pkix.Name{CommonName: "n1", OrganizationalUnit: []string{"node"}}}, KindClient},
		{"another scheme", x509.Certificate{URIs: []*url.URL{u("spiffe://node/n1")}, Subject: pkix.Name{CommonName: "n1"}}, KindLegacy},
	}
	for _, c := range cases {
		if k, _ := Identify(&c.c); k != c.kind {
			t.Errorf("%s: %v, want %v", c.name, k, c.kind)
		}
	}
}

// TestLoadNodeRefusesOtherCertificates: a node refuses a client certificate
// and another node's, at start and at reload, and takes a legacy one.
func TestLoadNodeRefusesOtherCertificates(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t)
	caFile, certFile, keyFile := writeFiles(t, dir, ca, mustIssue(t, ca, "n2"))
	if _, err := LoadNode(caFile, certFile, keyFile, "n1"); !errors.Is(err, ErrWrongKind) {
		t.Fatalf("another node's certificate: %v", err)
	}
	cp, err := IssueClient(ca, "n1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, ca, cp)
	if _, err := LoadNode(caFile, certFile, keyFile, "n1"); !errors.Is(err, ErrWrongKind) {
		t.Fatalf("a client certificate: %v", err)
	}
	lp, err := IssueLegacy(ca, "n1", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, ca, lp)
	s, err := LoadNode(caFile, certFile, keyFile, "n1")
	if err != nil {
		t.Fatalf("a legacy certificate: %v", err)
	}
	// Rotating to a client certificate is refused; the legacy one stays.
	writeFiles(t, dir, ca, cp)
	if _, err := s.Reload(); !errors.Is(err, ErrWrongKind) {
		t.Fatalf("reload to a client certificate: %v", err)
	}
	if k, _ := Identify(s.Leaf()); k != KindLegacy {
		t.Fatalf("in use after a refused reload: %v", k)
	}
	writeFiles(t, dir, ca, mustIssue(t, ca, "n1"))
	if _, err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if k, id := Identify(s.Leaf()); k != KindNode || id != "n1" {
		t.Fatalf("after re-issue: %v %q", k, id)
	}
}

// TestWriteClientCert writes a client certificate's files, owner-only key.
func TestWriteClientCert(t *testing.T) {
	dir := t.TempDir()
	if err := WriteCA(dir, time.Hour, false); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "clients")
	if err := WriteClientCert(dir, "app", out, time.Hour, false); err != nil {
		t.Fatal(err)
	}
	if err := WriteClientCert(dir, "app", out, time.Hour, false); !errors.Is(err, ErrExists) {
		t.Fatalf("replacing without force: %v", err)
	}
	certFile, keyFile := CertFiles(out, "app")
	p, err := ReadPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if k, name := Identify(leafOf(t, p)); k != KindClient || name != "app" {
		t.Fatalf("%v %q", k, name)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v %v", fi.Mode(), err)
	}
}

// TestIdentifyOnForeignCertificate: a certificate made by other tools with a
// URI of its own is read without panicking.
func TestIdentifyOnForeignCertificate(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "x"},
		URIs: []*url.URL{{Scheme: "rookery", Opaque: "node"}}, NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := Identify(c); k == KindNode {
		t.Fatal("an opaque URI made a node")
	}
}

// TestInitNodeDirs: each node's directory holds its own certificate and key
// and the CA's certificate, never the CA's key or another node's key; a second
// run keeps what is there.
func TestInitNodeDirs(t *testing.T) {
	dir := t.TempDir()
	made, err := InitNodeDirs(dir, []string{"r1", "r2"}, []string{"db"})
	if err != nil || len(made) != 5 { // ca.pem, and per node its certificate and the CA copy
		t.Fatalf("made %v, %v", made, err)
	}
	caPEM, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	for _, n := range []string{"r1", "r2"} {
		entries, err := os.ReadDir(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if want := []string{"ca.pem", n + "-key.pem", n + ".pem"}; !slices.Equal(names, want) {
			t.Fatalf("%s holds %v, want %v", n, names, want)
		}
		copyPEM, _ := os.ReadFile(filepath.Join(dir, n, "ca.pem"))
		if !slices.Equal(copyPEM, caPEM) {
			t.Fatalf("%s's ca.pem is not the CA's", n)
		}
		cert, key := CertFiles(filepath.Join(dir, n), n)
		s, err := LoadNode(filepath.Join(dir, n, "ca.pem"), cert, key, n)
		if err != nil {
			t.Fatal(err)
		}
		if k, id := Identify(s.Leaf()); k != KindNode || id != n {
			t.Fatalf("%s: %v %q", n, k, id)
		}
	}
	if made, err := InitNodeDirs(dir, []string{"r1", "r2", "r3"}, nil); err != nil || len(made) != 2 {
		t.Fatalf("second run made %v, %v; want only r3's", made, err)
	}
}
