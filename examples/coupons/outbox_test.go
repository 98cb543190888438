package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/client"
	"github.com/rookerydb/rookery/internal/nodeproc"
)

// oneNode starts a one-node cluster on ports it keeps across a restart.
func oneNode(t *testing.T) *nodeproc.Member {
	t.Helper()
	cl, err := nodeproc.StartCluster(rookery(t), t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	if _, err := cl.Leader(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	return cl.Nodes[0]
}

// cfInfo asks a node directly, not through the client.
func cfInfo(t *testing.T, addr string) redis.CFInfo {
	t.Helper()
	r := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer r.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := r.CFInfo(bg, testFilter).Result()
		if err == nil {
			return info
		}
		if time.Now().After(deadline) || !(strings.HasPrefix(err.Error(), "CLUSTERDOWN") || strings.HasPrefix(err.Error(), "TRYAGAIN")) {
			t.Fatalf("CF.INFO on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lossyDialer opens the service's connections to the nodes. While armed, it
// lets every command named cmd reach the node and loses its reply, as a
// network failure or a leader dying after the write would: the client cannot
// know whether the write happened, and after its retries reports
// ErrIndeterminate.
type lossyDialer struct {
	cmd     []byte
	armed   atomic.Bool
	sent    atomic.Int32 // commands named cmd sent
	dropped atomic.Int32 // replies lost
}

func (d *lossyDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &lossyConn{Conn: c, d: d}, nil
}

type lossyConn struct {
	net.Conn
	d    *lossyDialer
	lose atomic.Bool
}

func (c *lossyConn) Write(b []byte) (int, error) {
	if bytes.Contains(b, c.d.cmd) {
		c.d.sent.Add(1)
		if c.d.armed.Load() {
			c.lose.Store(true)
		}
	}
	return c.Conn.Write(b)
}

func (c *lossyConn) Read(b []byte) (int, error) {
	if !c.lose.Load() {
		return c.Conn.Read(b)
	}
	// Wait for the node's answer, so the delete has surely been applied,
	// then lose it with the connection.
	_, _ = c.Conn.Read(b)
	c.Conn.Close()
	c.d.dropped.Add(1)
	return 0, errors.New("connection reset (reply lost by the test)")
}

// TestLostDeleteReplyFinishedOnce: a redeem whose CF.DEL reply is lost, on
// every retry, gets ErrIndeterminate from the client. The store has decided:
// the answer is "redeemed", and the delete stays in the outbox. Once the
// network heals, the outbox loop sends it again under the same key, and the
// cluster answers it without applying it a second time.
func TestLostDeleteReplyFinishedOnce(t *testing.T) {
	node := oneNode(t)
	d := &lossyDialer{cmd: []byte("CF.DEL")}
	c := newClient(t, client.Options{Addrs: []string{node.RESP}, Dialer: d.dial, Retries: 2})
	s := newService(t, c, 1000)
	h := serve(t, s)
	runOutbox(t, s, 50*time.Millisecond)
	code := h.issue("lossy", 1, 10)[0]

	// A second copy of the code's fingerprint, as another coupon sharing it
	// would hold: a delete applied twice would take it.
	raw := newClient(t, client.Options{Addrs: []string{node.RESP}})
	if err := raw.CFAdd(bg, testFilter, code); err != nil {
		t.Fatal(err)
	}
	d.armed.Store(true)
	if v := h.must("POST", "/redeem/"+code, http.StatusOK); result(v) != "redeemed" {
		t.Fatalf("redeem with the delete's replies lost: %v", v)
	}
	if n := d.dropped.Load(); n < 3 {
		t.Fatalf("%d replies lost; the client sends a write 1+Retries times", n)
	}
	if cp := mustGet(t, s.st, code); cp.State != StateRedeemed {
		t.Fatalf("coupon after the redeem: %+v", cp)
	}
	if n, err := raw.CFCount(bg, testFilter, code); err != nil || n != 1 {
		t.Fatalf("copies after a delete sent %d times: %d %v, want 1", d.sent.Load(), n, err)
	}
	// A second redeem is refused by the store while the delete is pending.
	if v := h.must("POST", "/redeem/"+code, http.StatusConflict); result(v) != "already redeemed" {
		t.Fatalf("second redeem: %v", v)
	}

	sent := d.sent.Load()
	d.armed.Store(false)
	waitOutbox(t, s, 30*time.Second)
	if d.sent.Load() <= sent {
		t.Fatal("the outbox settled the delete without sending it")
	}
	if cp := mustGet(t, s.st, code); cp.Pending != "" || cp.Stale {
		t.Fatalf("coupon after the outbox: %+v", cp)
	}
	if n, err := raw.CFCount(bg, testFilter, code); err != nil || n != 1 {
		t.Fatalf("copies after the outbox re-sent the delete: %d %v, want 1", n, err)
	}
	if info := cfInfo(t, node.RESP); info.NumItemsDeleted != 1 || info.NumItemsInserted != 1 {
		t.Fatalf("CF.INFO: %d deleted, %d held; want 1 and 1", info.NumItemsDeleted, info.NumItemsInserted)
	}
}

// TestLostInsertReplyFinishedOnce: an issue whose CF.INSERT reply is lost
// answers 202 with the codes: they are issued, and redeem once the filter has
// confirmed them. Until then a redeem answers 503 and changes nothing. Another
// process of the service (a restart) finishes the insert from the store, under
// the same key, and the codes are in the filter once.
func TestLostInsertReplyFinishedOnce(t *testing.T) {
	node := oneNode(t)
	d := &lossyDialer{cmd: []byte("CF.INSERT")}
	c := newClient(t, client.Options{Addrs: []string{node.RESP}, Dialer: d.dial, Retries: 2})
	s := newService(t, c, 1000)
	h := serve(t, s)
	d.armed.Store(true)
	v := h.must("POST", "/campaigns/lossy/issue?n=3", http.StatusAccepted)
	list, _ := v["codes"].([]any)
	if len(list) != 3 || d.dropped.Load() < 3 {
		t.Fatalf("issue with its replies lost (%d): %v", d.dropped.Load(), v)
	}
	code := list[0].(string)
	v = h.must("POST", "/redeem/"+code, http.StatusServiceUnavailable)
	if cp := mustGet(t, s.st, code); cp.State != StateIssued || cp.Pending != opAdd {
		t.Fatalf("coupon after a 503: %+v (%v)", cp, v)
	}

	// The service restarts: a new client, the same store.
	c2 := newClient(t, client.Options{Addrs: []string{node.RESP}})
	s2 := NewService(c2, s.st, testFilter, s.log)
	if left := s2.DrainOutbox(bg); left != 0 {
		t.Fatalf("%d operations left", left)
	}
	for _, x := range list {
		if n, err := c2.CFCount(bg, testFilter, x.(string)); err != nil || n != 1 {
			t.Fatalf("%s: %d copies after an insert sent %d times (%v), want 1", x, n, d.sent.Load()+1, err)
		}
	}
	h2 := serve(t, s2)
	if v := h2.must("POST", "/redeem/"+code, http.StatusOK); result(v) != "redeemed" {
		t.Fatalf("redeem once the insert settled: %v", v)
	}
}

// TestExpiredKeys: what the outbox does with operations whose keys outlived
// client.KeyLifetime (the cluster was unreachable that long): a delete that
// did apply is settled, one that did not is left in the filter and counted
// stale, and an add is sent again under a new key.
func TestExpiredKeys(t *testing.T) {
	node := oneNode(t)
	c := newClient(t, client.Options{Addrs: []string{node.RESP}})
	s := newService(t, c, 1000)
	h := serve(t, s)
	old := func() client.Key {
		k := c.NewKey()
		k.Made = time.Now().Add(-client.KeyLifetime - time.Minute)
		return k
	}
	codes := h.issue("expiry", 2, 10)
	applied, unapplied := codes[0], codes[1]
	// Redeems decided by the store whose deletes were sent (applied) or not
	// (unapplied) before their keys expired.
	for _, code := range codes {
		if out, _, err := s.st.Redeem(code, old(), time.Now()); err != nil || out != Redeemed {
			t.Fatalf("redeem %s: %v %v", code, out, err)
		}
	}
	if ok, err := c.CFDel(bg, testFilter, applied); err != nil || !ok {
		t.Fatalf("CF.DEL %s: %v %v", applied, ok, err)
	}
	// An issue whose CF.INSERT never reached the cluster.
	added := newCodes(1)[0]
	if _, err := s.st.Issue("expiry", []string{added}, []client.Key{old()}, 10, time.Now()); err != nil {
		t.Fatal(err)
	}

	if left := s.DrainOutbox(bg); left != 0 {
		t.Fatalf("%d operations left", left)
	}
	if cp := mustGet(t, s.st, applied); cp.Pending != "" || cp.Stale {
		t.Fatalf("applied delete: %+v", cp)
	}
	if cp := mustGet(t, s.st, unapplied); cp.Pending != "" || !cp.Stale || cp.State != StateRedeemed {
		t.Fatalf("unapplied delete: %+v", cp)
	}
	if n, _ := c.CFCount(bg, testFilter, unapplied); n != 1 {
		t.Fatalf("the stale code has %d copies; it must be left alone", n)
	}
	if st, _ := s.Stats(); st.FilterStale != 1 {
		t.Fatalf("stats: %+v", st)
	}
	// The stale copy costs a store lookup, and the store refuses it.
	if v := h.must("POST", "/redeem/"+unapplied, http.StatusConflict); result(v) != "already redeemed" {
		t.Fatalf("redeem of the stale code: %v", v)
	}
	// The add was sent under a new key, and its coupon redeems.
	if n, _ := c.CFCount(bg, testFilter, added); n != 1 {
		t.Fatalf("the re-keyed add stored %d copies", n)
	}
	if v := h.must("POST", "/redeem/"+added, http.StatusOK); result(v) != "redeemed" {
		t.Fatalf("redeem of the re-added code: %v", v)
	}
}

// TestUnavailable: with the cluster down, a redeem answers 503 and changes
// nothing, an issue answers 503 and stores nothing; back up, both work.
func TestUnavailable(t *testing.T) {
	node := oneNode(t)
	c := newClient(t, client.Options{Addrs: []string{node.RESP}, DialTimeout: time.Second})
	s := newService(t, c, 1000)
	h := serve(t, s)
	code := h.issue("down", 1, 10)[0]

	node.Kill()
	start := time.Now()
	v := h.must("POST", "/redeem/"+code, http.StatusServiceUnavailable)
	if msg, _ := v["error"].(string); !strings.Contains(msg, "nothing changed") {
		t.Fatalf("503 body: %v", v)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("redeem against a dead cluster took %v", d)
	}
	if cp := mustGet(t, s.st, code); cp.State != StateIssued || cp.Pending != "" {
		t.Fatalf("coupon after a 503: %+v", cp)
	}
	v = h.must("POST", "/campaigns/down/issue?n=5", http.StatusServiceUnavailable)
	if msg, _ := v["error"].(string); !strings.Contains(msg, "nothing was issued") {
		t.Fatalf("503 body: %v", v)
	}
	if n := couponCount(t, s.st); n != 1 {
		t.Fatalf("the store holds %d coupons after a failed issue, want 1", n)
	}
	if st, _ := s.Stats(); st.OutboxPending != 0 {
		t.Fatalf("a failed issue left %d operations", st.OutboxPending)
	}

	if err := node.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := node.WaitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if v := h.must("POST", "/redeem/"+code, http.StatusOK); result(v) != "redeemed" {
		t.Fatalf("redeem after the restart: %v", v)
	}
}
