package client_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rookerydb/rookery/client"
	"github.com/rookerydb/rookery/internal/nodeproc"
)

// wantUnavailable checks that err says "not applied" and names addr.
func wantUnavailable(t *testing.T, what string, err error, addr string) {
	t.Helper()
	if !errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrIndeterminate) {
		t.Fatalf("%s: %v, want ErrUnavailable and not ErrIndeterminate", what, err)
	}
	var ne *client.NodeError
	if !errors.As(err, &ne) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("%s: %v does not name node %s", what, err, addr)
	}
}

// TestDeadNodeUnavailable: when every node is dead before the call, writes and
// reads fail at once with ErrUnavailable, naming the node and why: nothing was
// sent, so nothing can have been applied. (Issue 13: CF.DEL used to answer
// ErrIndeterminate after 15.6 s.)
func TestDeadNodeUnavailable(t *testing.T) {
	p := singleNode(t)
	const dial = time.Second
	c, err := client.New(bg, client.Options{Addrs: []string{p.RESP}, DialTimeout: dial})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Connections to the node sit in the pool when it dies.
	if err := c.CFAdd(bg, "coupons", "C-1"); err != nil {
		t.Fatal(err)
	}
	got(c.CFExists(bg, "coupons", "C-1")).must(t)
	p.Kill()

	// Generous bounds: a refused dial takes microseconds, but the machine is
	// loaded.
	bound := 2*dial + time.Second
	for _, call := range []struct {
		name string
		f    func() error
	}{
		{"CF.DEL", func() error { _, err := c.CFDel(bg, "coupons", "C-1"); return err }},
		{"CF.ADD", func() error { return c.CFAdd(bg, "coupons", "C-2") }},
		{"CF.EXISTS", func() error { _, err := c.CFExists(bg, "coupons", "C-1"); return err }},
		{"pipeline", func() error {
			pl := c.Pipeline()
			pl.CFDel("coupons", "C-1")
			pl.CFExists("coupons", "C-1")
			return pl.Exec(bg)
		}},
		{"AddAll", func() error {
			_, err := c.AddAll(bg, client.KindBloom, "b", []string{"x", "y"}, nil)
			return err
		}},
	} {
		start := time.Now()
		err := call.f()
		took := time.Since(start)
		wantUnavailable(t, call.name, err, p.RESP)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s: %v does not say the connection was refused", call.name, err)
		}
		if took > bound {
			t.Errorf("%s took %v to fail against a dead node (bound %v)", call.name, took, bound)
		}
		t.Logf("%s against a dead node: %v after %v", call.name, err, took)
	}

	start := time.Now()
	_, err = client.New(bg, client.Options{Addrs: []string{p.RESP}, DialTimeout: dial})
	wantUnavailable(t, "New", err, p.RESP)
	if took := time.Since(start); took > bound {
		t.Errorf("New took %v to fail against a dead node", took)
	}
}

// TestDeadClusterUnavailable: with all three nodes of a cluster dead, a write
// tries each once and fails with ErrUnavailable naming all three.
func TestDeadClusterUnavailable(t *testing.T) {
	cl, err := nodeproc.StartCluster(rookery(t), t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	c := newClient(t, cl.RESPAddrs()[0])
	if err := c.CFAdd(bg, "coupons", "C-1"); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	start := time.Now()
	_, err = c.CFDel(bg, "coupons", "C-1")
	took := time.Since(start)
	for _, a := range cl.RESPAddrs() {
		wantUnavailable(t, "CF.DEL", err, a)
	}
	if took > 5*time.Second {
		t.Errorf("CF.DEL took %v to fail against three dead nodes", took)
	}
}

// TestDialTimeoutUnavailable: a node that never answers the dial (a dropped
// SYN, here a dialer that hangs) costs one dial timeout, and the call says
// ErrUnavailable with the deadline.
func TestDialTimeoutUnavailable(t *testing.T) {
	p := singleNode(t)
	var hang atomic.Bool
	c, err := client.New(bg, client.Options{Addrs: []string{p.RESP}, DialTimeout: 500 * time.Millisecond,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if hang.Load() {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The connection New pooled fails its liveness check once the node is
	// gone; the dial that replaces it hangs.
	hang.Store(true)
	p.Kill()
	start := time.Now()
	err = c.CFAdd(bg, "coupons", "C-1")
	took := time.Since(start)
	wantUnavailable(t, "CF.ADD", err, p.RESP)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%v does not name the dial deadline", err)
	}
	if took < 400*time.Millisecond || took > 3*time.Second {
		t.Errorf("CF.ADD failed after %v; the dial timeout is 500ms", took)
	}
}

// TestLostReplyIndeterminate: a write whose reply never comes is
// ErrIndeterminate when the context ends, within its deadline; sent again under
// the same Key once the network is back, it is applied once and answered with
// the first answer.
func TestLostReplyIndeterminate(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := singleNode(t, "--resp-advertise", ln.Addr().String())
	proxy := startProxy(t, p.RESP, ln)
	c := newClient(t, ln.Addr().String())
	for i := 0; i < 2; i++ {
		if err := c.CFAdd(bg, "coupons", "C-7"); err != nil {
			t.Fatal(err)
		}
	}

	key := c.NewKey()
	proxy.blackhole.Store(true)
	ctx, cancel := context.WithTimeout(client.WithKey(bg, key), time.Second)
	start := time.Now()
	_, err = c.CFDel(ctx, "coupons", "C-7")
	took := time.Since(start)
	cancel()
	if !errors.Is(err, client.ErrIndeterminate) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CF.DEL whose replies are swallowed: %v, want ErrIndeterminate and the deadline", err)
	}
	if took > 3*time.Second {
		t.Errorf("CF.DEL returned %v after a 1 s deadline", took)
	}
	proxy.blackhole.Store(false)

	// The swallowed attempts reached the node: one copy is gone.
	if n := got(c.CFCount(bg, "coupons", "C-7")).must(t); n != 1 {
		t.Fatalf("after the lost CF.DEL the node holds %d copies, want 1", n)
	}
	// The same delete again, under the same key, in a later call: the first
	// answer, and no second deletion.
	for i := 0; i < 2; i++ {
		if ok := got(c.CFDel(client.WithKey(bg, key), "coupons", "C-7")).must(t); !ok {
			t.Fatal("the retried CF.DEL did not return the first answer (true)")
		}
	}
	if n := got(c.CFCount(bg, "coupons", "C-7")).must(t); n != 1 {
		t.Fatalf("a retried CF.DEL deleted again: %d copies left, want 1", n)
	}
	// Stored as text and read back, the key is the same write.
	k2, err := client.ParseKey(key.String())
	if err != nil || k2.Session != key.Session || k2.Seq != key.Seq {
		t.Fatalf("ParseKey(%s) = %v, %v", key, k2, err)
	}
	if ok := got(c.CFDel(client.WithKey(bg, k2), "coupons", "C-7")).must(t); !ok {
		t.Fatal("the key read back did not return the first answer")
	}
	if n := got(c.CFCount(bg, "coupons", "C-7")).must(t); n != 1 {
		t.Fatalf("%d copies left, want 1", n)
	}
}

// TestPausedNodeIndeterminate: a leader frozen (SIGSTOP) takes the connection
// and the request and does not answer: ErrIndeterminate at the deadline. Once
// it runs again, it applies the request it had read, and the retry under the
// same key finds that answer.
func TestPausedNodeIndeterminate(t *testing.T) {
	p := singleNode(t)
	c := newClient(t, p.RESP)
	if err := c.CFAdd(bg, "coupons", "C-9"); err != nil {
		t.Fatal(err)
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	key := c.NewKey()
	ctx, cancel := context.WithTimeout(client.WithKey(bg, key), 700*time.Millisecond)
	_, err := c.CFDel(ctx, "coupons", "C-9")
	cancel()
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(err, client.ErrIndeterminate) {
		t.Fatalf("CF.DEL to a frozen node: %v, want ErrIndeterminate", err)
	}
	if ok := got(c.CFDel(client.WithKey(bg, key), "coupons", "C-9")).must(t); !ok {
		t.Fatal("retry under the same key: want the first answer, true")
	}
	if ok := got(c.CFExists(bg, "coupons", "C-9")).must(t); ok {
		t.Fatal("C-9 still there after the delete")
	}
	if ok := got(c.CFDel(bg, "coupons", "C-9")).must(t); ok {
		t.Fatal("a new CF.DEL found a copy: the keyed delete was applied twice or not at all")
	}
}

// TestKeyExpired: a key older than KeyLifetime is not sent: the cluster may have
// forgotten its first answer and would apply it again.
func TestKeyExpired(t *testing.T) {
	p := singleNode(t)
	c := newClient(t, p.RESP)
	if err := c.CFAdd(bg, "coupons", "C-1"); err != nil {
		t.Fatal(err)
	}
	k := c.NewKey()
	old := client.Key{Session: k.Session, Seq: k.Seq, Made: time.Now().Add(-client.KeyLifetime - time.Second)}
	if _, err := c.CFDel(client.WithKey(bg, old), "coupons", "C-1"); !errors.Is(err, client.ErrKeyExpired) ||
		errors.Is(err, client.ErrIndeterminate) {
		t.Fatalf("CF.DEL under an expired key: %v, want ErrKeyExpired", err)
	}
	if !got(c.CFExists(bg, "coupons", "C-1")).must(t) {
		t.Fatal("an expired key's delete was sent")
	}
	if _, err := c.CFDel(client.WithKey(bg, client.Key{}), "coupons", "C-1"); err == nil {
		t.Fatal("the zero key was accepted")
	}
}
