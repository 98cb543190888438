package nodeproc

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/rookerydb/rookery/internal/certs"
)

// Security is how the nodes of a cluster are secured; the zero value is plain
// text on loopback, with no credentials.
type Security struct {
	// CertDir holds ca.pem and NAME.pem / NAME-key.pem for every node id (see
	// MakeCerts). Empty: no TLS.
	CertDir string
	// GossipKey is --gossip-key (base64).
	GossipKey string
	// Password is --requirepass; HTTP calls send it as a bearer token.
	Password string
	// RESPTLS and HTTPTLS serve those faces over TLS with the node certificate.
	RESPTLS, HTTPTLS bool
}

// MakeCerts makes a CA and a certificate for each name in dir with the
// binary's own `rookery tls` commands.
func MakeCerts(bin, dir string, names ...string) error {
	if out, err := exec.Command(bin, "tls", "ca", "--out", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("rookery tls ca: %v\n%s", err, out)
	}
	for _, n := range names {
		if out, err := exec.Command(bin, "tls", "cert", "--ca", dir, "--name", n, "--out", dir).CombinedOutput(); err != nil {
			return fmt.Errorf("rookery tls cert %s: %v\n%s", n, err, out)
		}
	}
	return nil
}

// MakeClientCert makes a client certificate for name in dir (which holds the
// CA) with `rookery tls cert --client`.
func MakeClientCert(bin, dir, name string) error {
	if out, err := exec.Command(bin, "tls", "cert", "--ca", dir, "--client", "--name", name, "--out", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("rookery tls cert --client %s: %v\n%s", name, err, out)
	}
	return nil
}

// Flags are the flags that secure node id.
func (s Security) Flags(id string) []string {
	var f []string
	if s.CertDir != "" {
		cert, key := certs.CertFiles(s.CertDir, id)
		f = append(f, "--tls-ca", filepath.Join(s.CertDir, "ca.pem"), "--tls-cert", cert, "--tls-key", key)
	}
	if s.GossipKey != "" {
		f = append(f, "--gossip-key", s.GossipKey)
	}
	if s.Password != "" {
		f = append(f, "--requirepass", s.Password)
	}
	if s.RESPTLS {
		f = append(f, "--resp-tls")
	}
	if s.HTTPTLS {
		f = append(f, "--http-tls")
	}
	return f
}

// ClientTLS is the TLS configuration of a client of the nodes' RESP or HTTP
// faces (trusting the cluster CA), or nil without TLS.
func (s Security) ClientTLS() *tls.Config {
	if s.CertDir == "" {
		return nil
	}
	cfg, err := certs.ClientConfig(filepath.Join(s.CertDir, "ca.pem"), "", "")
	if err != nil {
		panic(fmt.Sprintf("nodeproc: cluster CA: %v", err)) // MakeCerts made it
	}
	return cfg
}

// RESPTLSConfig is ClientTLS when RESP is served over TLS, else nil.
func (s Security) RESPTLSConfig() *tls.Config {
	if !s.RESPTLS {
		return nil
	}
	return s.ClientTLS()
}

// Request builds a request to a node's HTTP face at addr, with the password as a
// bearer token, and returns the client to send it with.
func (s Security) Request(method, addr, path string) (*http.Client, *http.Request, error) {
	c, scheme := s.httpClient()
	req, err := http.NewRequest(method, scheme+addr+path, nil)
	if err != nil {
		return nil, nil, err
	}
	if s.Password != "" {
		req.Header.Set("Authorization", "Bearer "+s.Password)
	}
	return c, req, nil
}

// httpClient is how a Proc reaches its node's HTTP face.
func (s Security) httpClient() (*http.Client, string) {
	c := &http.Client{Timeout: 5 * time.Second}
	if s.HTTPTLS {
		c.Transport = &http.Transport{TLSClientConfig: s.ClientTLS()}
		return c, "https://"
	}
	return c, "http://"
}
