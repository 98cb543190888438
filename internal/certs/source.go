package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Source is a node's TLS material: the CA pool and the node's key pair. The
// tls.Configs it hands out read the current material on every handshake, so a
// Reload takes effect for every new connection (established ones keep theirs).
type Source struct {
	caFile, certFile, keyFile string // empty for material given in memory
	node                      string // LoadNode's id: the certificate must be no other node's

	cur atomic.Pointer[material]

	mu    sync.Mutex // serialises reloads
	stamp string     // the files' sizes and times at the last load attempt
}

type material struct {
	cert tls.Certificate
	leaf *x509.Certificate
	pool *x509.CertPool
}

// New returns a Source of fixed material: the CA certificate(s) caPEM and the
// node's pair.
func New(caPEM []byte, node Pair) (*Source, error) {
	m, err := build(caPEM, node)
	if err != nil {
		return nil, err
	}
	s := &Source{}
	s.cur.Store(m)
	return s, nil
}

// Load reads the CA and the node's pair from files; Reload reads them again.
func Load(caFile, certFile, keyFile string) (*Source, error) {
	s := &Source{caFile: caFile, certFile: certFile, keyFile: keyFile}
	if _, err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// LoadNode is Load for node id: the certificate must not be a client
// certificate, nor name another node, now or at any reload. A legacy
// certificate (Identify) naming id in its common name is taken.
func LoadNode(caFile, certFile, keyFile, id string) (*Source, error) {
	s := &Source{caFile: caFile, certFile: certFile, keyFile: keyFile, node: id}
	if _, err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload reads the files again and, if they hold valid material, uses it from
// the next handshake on. changed reports whether the files differed from the
// last load attempt. On error the material in use stays.
func (s *Source) Reload() (changed bool, err error) {
	if s.caFile == "" {
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stamp := s.fileStamp()
	changed = stamp != s.stamp
	s.stamp = stamp
	ca, err := os.ReadFile(s.caFile)
	if err != nil {
		return changed, fmt.Errorf("read --tls-ca: %w", err)
	}
	node, err := ReadPair(s.certFile, s.keyFile)
	if err != nil {
		return changed, fmt.Errorf("read --tls-cert/--tls-key: %w", err)
	}
	m, err := build(ca, node)
	if err != nil {
		return changed, err
	}
	if err := checkNodeCert(m.leaf, s.node); err != nil {
		return changed, err
	}
	s.cur.Store(m)
	return changed, nil
}

// Watch reloads the files whenever their size or modification time changes,
// checking every interval until ctx ends, and tells report the outcome of
// each reload.
func (s *Source) Watch(ctx context.Context, interval time.Duration, report func(error)) {
	if s.caFile == "" {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		same := s.fileStamp() == s.stamp
		s.mu.Unlock()
		if same {
			continue
		}
		_, err := s.Reload()
		report(err)
	}
}

// fileStamp summarises the three files' sizes and modification times.
func (s *Source) fileStamp() string {
	var b []byte
	for _, f := range []string{s.caFile, s.certFile, s.keyFile} {
		if fi, err := os.Stat(f); err == nil {
			b = fmt.Appendf(b, "%d/%d;", fi.Size(), fi.ModTime().UnixNano())
		} else {
			b = append(b, "-;"...)
		}
	}
	return string(b)
}

// Leaf is the node's certificate now in use.
func (s *Source) Leaf() *x509.Certificate { return s.cur.Load().leaf }

// build checks the material: the CA file holds CA certificates, the key
// belongs to the certificate, and the CA signed the certificate, which is
// valid now.
func build(caPEM []byte, node Pair) (*material, error) {
	cas, err := parseCerts(caPEM)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	for _, c := range cas {
		if !c.IsCA {
			return nil, fmt.Errorf("--tls-ca: %q is not a CA certificate", c.Subject.CommonName)
		}
		pool.AddCert(c)
	}
	kp, err := tls.X509KeyPair(node.CertPEM, node.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	leaf, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("--tls-cert: %w", err)
	}
	kp.Leaf = leaf
	if err := verifyChain(pool, kp.Certificate, x509.ExtKeyUsageAny); err != nil {
		return nil, fmt.Errorf("--tls-cert %q: %w", leaf.Subject.CommonName, err)
	}
	return &material{cert: kp, leaf: leaf, pool: pool}, nil
}

// verifyChain checks a peer's chain (leaf first) against pool, without a host
// name.
func verifyChain(pool *x509.CertPool, raw [][]byte, usage x509.ExtKeyUsage) error {
	if len(raw) == 0 {
		return errors.New("no certificate presented")
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, r := range raw {
		c, err := x509.ParseCertificate(r)
		if err != nil {
			return err
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

// PeerServerConfig is the Raft port's side of mutual TLS: it presents the
// node's certificate and accepts only clients with a certificate the CA signed.
func (s *Source) PeerServerConfig() *tls.Config {
	return s.serverConfig(tls.VersionTLS13, tls.RequireAndVerifyClientCert)
}

// PeerClientConfig is the dialling side of mutual TLS between nodes: it
// presents the node's certificate and accepts a server whose certificate the CA
// signed, whatever host name it names (see the package comment).
func (s *Source) PeerClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// The chain is verified in VerifyConnection, against the CA only.
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			m := s.cur.Load()
			return &m.cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			raw := make([][]byte, len(cs.PeerCertificates))
			for i, c := range cs.PeerCertificates {
				raw[i] = c.Raw
			}
			return verifyChain(s.cur.Load().pool, raw, x509.ExtKeyUsageServerAuth)
		},
	}
}

// ServerConfig serves clients (RESP, HTTP) with the node's certificate. auth
// says whether they must present a certificate the CA signed
// (tls.RequireAndVerifyClientCert), may (tls.VerifyClientCertIfGiven), or need
// not (tls.NoClientCert).
func (s *Source) ServerConfig(auth tls.ClientAuthType) *tls.Config {
	return s.serverConfig(tls.VersionTLS12, auth)
}

// serverConfig reads the material in use at every handshake, so that a reload
// reaches every new connection.
func (s *Source) serverConfig(minVersion uint16, auth tls.ClientAuthType) *tls.Config {
	return &tls.Config{
		MinVersion: minVersion,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := s.cur.Load()
			return &tls.Config{
				MinVersion:   minVersion,
				Certificates: []tls.Certificate{m.cert},
				ClientAuth:   auth,
				ClientCAs:    m.pool,
			}, nil
		},
	}
}

// ClientConfig is a client's configuration for reaching nodes served with
// certificates of the CA in caFile (the system's roots when caFile is "");
// certFile and keyFile, when given, are the client's own certificate (for
// --tls-client-auth). Every tool that dials a node over TLS takes its
// configuration from here, so that they all refuse what it refuses (TLS
// before 1.2).
func ClientConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		ca, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("%s: no PEM certificate found", caFile)
		}
		cfg.RootCAs = pool
	}
	if certFile != "" {
		kp, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{kp}
	}
	return cfg, nil
}
