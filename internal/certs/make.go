package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Validity defaults: a CA outlives many node certificates, which are rotated.
const (
	DefaultCAValidity   = 10 * 365 * 24 * time.Hour
	DefaultCertValidity = 2 * 365 * 24 * time.Hour
	// clockSkew back-dates NotBefore so that a certificate made on one host is
	// already valid on a peer whose clock is a little behind.
	clockSkew = 5 * time.Minute
)

// Errors of this package.
var (
	// ErrBadName reports a certificate name that cannot be a file name and a host
	// name label.
	ErrBadName = errors.New("certs: a name is 1-64 letters, digits, '.', '-' or '_', starting with a letter or digit")
	// ErrNotCA reports a CA file whose certificate cannot sign others.
	ErrNotCA = errors.New("certs: not a CA certificate")
	// ErrWrongKind reports a node given a client certificate, or another
	// node's certificate.
	ErrWrongKind = errors.New("certs: not this node's certificate")
)

// Pair is a certificate and its private key, PEM encoded.
type Pair struct {
	CertPEM, KeyPEM []byte
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// CheckName reports whether name can name a certificate: it becomes a file name
// (NAME.pem) and the certificate's common name.
func CheckName(name string) error {
	if !nameRE.MatchString(name) || strings.Contains(name, "..") {
		return fmt.Errorf("%w: %q", ErrBadName, name)
	}
	return nil
}

// NewCA makes a self-signed certificate authority valid for validFor.
func NewCA(validFor time.Duration) (Pair, error) {
	key, serial, err := newKey()
	if err != nil {
		return Pair{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "Rookery CA " + serial.Text(16)[:8], Organization: []string{"Rookery"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validFor),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		SubjectKeyId:          keyID(&key.PublicKey),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Pair{}, fmt.Errorf("certs: create CA: %w", err)
	}
	return encodePair(der, key)
}

// Issue makes a node certificate for node id name signed by ca, valid for
// validFor, usable both to serve (TLS server) and to dial (TLS client). It
// names the node (NodeURI), which is what lets it speak Raft. It is valid for
// the host names and IP addresses in hosts, for 127.0.0.1, ::1 and localhost,
// and for name itself when name is a host name.
func Issue(ca Pair, name string, hosts []string, validFor time.Duration) (Pair, error) {
	return issue(ca, KindNode, name, hosts, validFor)
}

// IssueClient makes a client certificate for name signed by ca: usable only
// to dial (TLS client), marked as a client (ClientURI), so that it opens RESP
// and HTTP under --tls-client-auth and never the Raft port.
func IssueClient(ca Pair, name string, validFor time.Duration) (Pair, error) {
	return issue(ca, KindClient, name, nil, validFor)
}

// issue makes a certificate of kind for name.
func issue(ca Pair, kind Kind, name string, hosts []string, validFor time.Duration) (Pair, error) {
	if err := CheckName(name); err != nil {
		return Pair{}, err
	}
	caCert, caKey, err := parseCA(ca)
	if err != nil {
		return Pair{}, err
	}
	key, serial, err := newKey()
	if err != nil {
		return Pair{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"Rookery"}},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     now.Add(validFor),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		SubjectKeyId: keyID(&key.PublicKey),
	}
	switch kind {
	case KindNode:
		tmpl.Subject.OrganizationalUnit = []string{ouNode}
		tmpl.URIs = []*url.URL{NodeURI(name)}
		addHosts(tmpl, name, hosts)
	case KindClient:
		tmpl.Subject.OrganizationalUnit = []string{ouClient}
		tmpl.URIs = []*url.URL{ClientURI(name)}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	default: // KindLegacy: the one kind there was, for both uses
		addHosts(tmpl, name, hosts)
	}
	if tmpl.NotAfter.After(caCert.NotAfter) {
		tmpl.NotAfter = caCert.NotAfter // a chain is only as valid as its CA
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return Pair{}, fmt.Errorf("certs: issue %s: %w", name, err)
	}
	return encodePair(der, key)
}

// addHosts makes a server certificate valid for 127.0.0.1, ::1, localhost, the
// hosts given and name itself when it can be a host name.
func addHosts(tmpl *x509.Certificate, name string, hosts []string) {
	addHost := func(h string) {
		h = strings.TrimSpace(h)
		if h == "" {
			return
		}
		if ip := net.ParseIP(h); ip != nil {
			for _, have := range tmpl.IPAddresses {
				if have.Equal(ip) {
					return
				}
			}
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			return
		}
		h = strings.ToLower(h)
		for _, have := range tmpl.DNSNames {
			if have == h {
				return
			}
		}
		tmpl.DNSNames = append(tmpl.DNSNames, h)
	}
	for _, h := range append([]string{"127.0.0.1", "::1", "localhost"}, hosts...) {
		addHost(h)
	}
	if !strings.Contains(name, "_") {
		addHost(name) // a node named after its host (rookery1) is reached by it
	}
}

// parseCA decodes a CA pair and checks it can sign.
func parseCA(ca Pair) (*x509.Certificate, crypto.Signer, error) {
	certs, err := parseCerts(ca.CertPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("CA certificate: %w", err)
	}
	cert := certs[0]
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, nil, ErrNotCA
	}
	key, err := parseKey(ca.KeyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("CA key: %w", err)
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, nil, errors.New("certs: the CA key does not belong to the CA certificate")
	}
	return cert, key, nil
}

// newKey makes a P-256 key and a random 127-bit serial number for its
// certificate.
func newKey() (*ecdsa.PrivateKey, *big.Int, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return key, serial, err
}

func keyID(pub *ecdsa.PublicKey) []byte {
	b, _ := x509.MarshalPKIXPublicKey(pub)
	sum := sha256.Sum256(b)
	return sum[:20]
}

func encodePair(der []byte, key *ecdsa.PrivateKey) (Pair, error) {
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}),
	}, nil
}

// parseCerts decodes every CERTIFICATE block of a PEM file; there must be one.
func parseCerts(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return out, nil
}

// parseKey decodes a PKCS#8, EC or RSA private key.
func parseKey(b []byte) (crypto.Signer, error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, errors.New("no PEM private key found")
		}
		var k any
		var err error
		switch blk.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(blk.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, errors.New("unsupported private key type")
		}
		return s, nil
	}
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ae, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ae.Equal(b)
}
