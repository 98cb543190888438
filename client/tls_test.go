package client_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/rookerydb/rookery/client"
	"github.com/rookerydb/rookery/internal/nodeproc"
)

// secureCluster starts n nodes with TLS on RESP and HTTP and a password.
func secureCluster(t *testing.T, n int) (*nodeproc.Cluster, nodeproc.Security) {
	t.Helper()
	dir := t.TempDir()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprint("n", i+1)
	}
	if err := nodeproc.MakeCerts(rookery(t), filepath.Join(dir, "certs"), names...); err != nil {
		t.Fatal(err)
	}
	sec := nodeproc.Security{CertDir: filepath.Join(dir, "certs"), GossipKey: "MDEyMzQ1Njc4OWFiY2RlZg==",
		Password: "pw", RESPTLS: true, HTTPTLS: true}
	cl, err := nodeproc.StartSecureCluster(rookery(t), filepath.Join(dir, "data"), n, sec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, sec
}

// TestClientTLS: against a cluster with TLS everywhere and a password, the
// client given the CA file and the password writes, pipelines, loads and reads
// on every node at both levels; a wrong or missing password is ErrAuth, and a
// plain-text client reaches nothing.
func TestClientTLS(t *testing.T) {
	cl, sec := secureCluster(t, 3)
	ca := filepath.Join(sec.CertDir, "ca.pem")
	c, err := client.New(bg, client.Options{Addrs: cl.RESPAddrs()[:1], Password: "pw", CAFile: ca})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CFAdd(bg, "coupons", "C-1"); err != nil {
		t.Fatalf("CF.ADD over TLS: %v", err)
	}
	for i := 0; i < 6; i++ { // reads rotate over every node it learned of
		if !got(c.CFExists(bg, "coupons", "C-1")).must(t) {
			t.Fatal("CF.EXISTS over TLS")
		}
		// A follower's local state may lag a moment behind.
		for deadline := time.Now().Add(5 * time.Second); ; {
			if got(c.CFExists(client.WithReadLevel(bg, client.ReadStale), "coupons", "C-1")).must(t) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("stale CF.EXISTS over TLS never saw C-1")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	pl := c.Pipeline()
	del := pl.CFDel("coupons", "C-1")
	madd := pl.BFMAdd("users", "alice", "bob")
	if err := pl.Exec(bg); err != nil || !del.Val() || len(madd.Val()) != 2 {
		t.Fatalf("pipeline over TLS: %v %v %v", err, del.Val(), madd.Val())
	}
	if _, err := c.AddAll(bg, client.KindBloom, "users", []string{"carol", "dave"}, nil); err != nil {
		t.Fatalf("AddAll over TLS: %v", err)
	}
	if n := got(c.BFCard(bg, "users")).must(t); n != 4 {
		t.Fatalf("BF.CARD %d, want 4", n)
	}

	// The same with a *tls.Config.
	c2, err := client.New(bg, client.Options{Addrs: cl.RESPAddrs(), Password: "pw", TLS: sec.ClientTLS()})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if !got(c2.BFExists(bg, "users", "carol")).must(t) {
		t.Fatal("BF.EXISTS with a tls.Config")
	}

	for _, pw := range []string{"wrong", ""} {
		start := time.Now()
		_, err := client.New(bg, client.Options{Addrs: cl.RESPAddrs(), Password: pw, CAFile: ca})
		if !errors.Is(err, client.ErrAuth) || time.Since(start) > 5*time.Second {
			t.Fatalf("password %q: %v after %v, want ErrAuth at once", pw, err, time.Since(start))
		}
	}
	if _, err := client.New(bg, client.Options{Addrs: cl.RESPAddrs(), Password: "pw", TLS: sec.ClientTLS(), CAFile: ca}); err == nil {
		t.Fatal("both TLS and CAFile were accepted")
	}
	if _, err := client.New(bg, client.Options{Addrs: cl.RESPAddrs(), Password: "pw", DialTimeout: time.Second, Retries: 1}); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("a plain-text client of TLS nodes: %v", err)
	}
}

// TestTLSDeadNode: TLS connections pooled when the node dies are found closed
// before use too: ErrUnavailable at once, never ErrIndeterminate.
func TestTLSDeadNode(t *testing.T) {
	cl, sec := secureCluster(t, 1)
	c, err := client.New(bg, client.Options{Addrs: cl.RESPAddrs(), Password: "pw", TLS: sec.ClientTLS(), DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CFAdd(bg, "coupons", "C-1"); err != nil {
		t.Fatal(err)
	}
	cl.Nodes[0].Kill()
	start := time.Now()
	_, err = c.CFDel(bg, "coupons", "C-1")
	wantUnavailable(t, "CF.DEL over TLS", err, cl.Nodes[0].RESP)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("CF.DEL over TLS took %v to fail against a dead node", took)
	}
}
