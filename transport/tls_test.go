package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/internal/certs"
)

// TestServerTLS: over a TLS listener (--resp-tls) a client with the CA and the
// password is served; a stranger who opens a connection and never completes
// the handshake is closed by its authentication deadline.
func TestServerTLS(t *testing.T) {
	ca, err := certs.NewCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	node, err := certs.Issue(ca, "n1", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	src, err := certs.New(ca.CertPEM, node)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{RequirePass: "pw", AuthTimeout: 300 * time.Millisecond, Registry: prometheus.NewRegistry()}, newFakeBackend(t))
	go s.Serve(tls.NewListener(ln, src.ServerConfig(tls.NoClientCert)))
	t.Cleanup(func() { s.Close() })
	addr := ln.Addr().String()

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	c := redis.NewClient(&redis.Options{Addr: addr, Password: "pw", TLSConfig: &tls.Config{RootCAs: pool}, MaxRetries: -1})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING over TLS: %v", err)
	}

	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	start := time.Now()
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(raw); err != nil && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("a stalled handshake was not closed: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("a stalled handshake held its connection %v", d)
	}
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING after the stranger: %v", err)
	}
}
