package client_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/client"
	"github.com/rookerydb/rookery/internal/nodeproc"
)

// These tests run the real rookery binary and talk to it only through the
// client, as an application would.

var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// No binary and no nodes: the tests that need them skip, and the
		// examples, which print what real nodes answer, are left out.
		_ = flag.Set("test.skip", "^Example")
		os.Exit(m.Run())
	}
	os.Exit(nodeproc.RunTests(withExampleNodes{m}, false, &binary))
}

// rookery is the binary for a test that drives real nodes; with -short such a
// test is skipped.
func rookery(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test drives the rookery binary as real processes")
	}
	return binary
}

var bg = context.Background()

func singleNode(t *testing.T, extra ...string) *nodeproc.Proc {
	t.Helper()
	args := append([]string{"--id", "n1", "--data-dir", t.TempDir(), "--bootstrap-expect", "1"}, nodeproc.EphemeralAddrs()...)
	p, err := nodeproc.Start(rookery(t), nil, append(args, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	if err := p.WaitReady(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	return p
}

func newClient(t *testing.T, addrs ...string) *client.Client {
	t.Helper()
	c, err := client.New(bg, client.Options{Addrs: addrs, RetryBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// result holds a call's two results, so that got(c.X(...)).must(t) reads well.
type result[V any] struct {
	v   V
	err error
}

func got[V any](v V, err error) result[V] { return result[V]{v, err} }

func (r result[V]) must(t *testing.T) V {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

// TestCommands: every method against one node, with RedisBloom's semantics and
// the package's errors.
func TestCommands(t *testing.T) {
	p := singleNode(t)
	c := newClient(t, p.RESP)

	if err := c.BFReserve(bg, "users", 0.001, 1000, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.BFReserve(bg, "users", 0.001, 1000, nil); !errors.Is(err, client.ErrExists) {
		t.Fatalf("second BF.RESERVE: %v", err)
	}
	if !got(c.BFAdd(bg, "users", "alice")).must(t) || got(c.BFAdd(bg, "users", "alice")).must(t) {
		t.Fatal("BF.ADD new then old")
	}
	if res := got(c.BFMAdd(bg, "users", "bob", "alice")).must(t); len(res) != 2 || !res[0] || res[1] {
		t.Fatalf("BF.MADD %v", res)
	}
	if !got(c.BFExists(bg, "users", "bob")).must(t) || got(c.BFExists(bg, "nobody", "bob")).must(t) {
		t.Fatal("BF.EXISTS")
	}
	if res := got(c.BFMExists(bg, "users", "alice", "zed")).must(t); len(res) != 2 || !res[0] {
		t.Fatalf("BF.MEXISTS %v", res)
	}
	if n := got(c.BFCard(bg, "users")).must(t); n != 2 {
		t.Fatalf("BF.CARD %d", n)
	}
	// A full non-scaling filter stops BF.MADD part way.
	if err := c.BFReserve(bg, "tiny", 0.0001, 2, &client.BFReserveOptions{NonScaling: true}); err != nil {
		t.Fatal(err)
	}
	added, err := c.BFMAdd(bg, "tiny", "a", "b", "c", "d")
	if !errors.Is(err, client.ErrFull) || len(added) != 2 {
		t.Fatalf("BF.MADD on a full non-scaling filter: %v %v", added, err)
	}

	if err := c.CFReserve(bg, "coupons", 1000, &client.CFReserveOptions{BucketSize: 4, Expansion: 2}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := c.CFAdd(bg, "coupons", "C1"); err != nil {
			t.Fatal(err)
		}
	}
	if n := got(c.CFCount(bg, "coupons", "C1")).must(t); n != 2 {
		t.Fatalf("CF.COUNT after two adds: %d", n)
	}
	if got(c.CFAddNX(bg, "coupons", "C1")).must(t) || !got(c.CFAddNX(bg, "coupons", "C2")).must(t) {
		t.Fatal("CF.ADDNX")
	}
	if res := got(c.CFInsert(bg, "coupons", "C3", "C4")).must(t); len(res) != 2 || !res[0] || !res[1] {
		t.Fatalf("CF.INSERT %v", res)
	}
	if !got(c.CFDel(bg, "coupons", "C2")).must(t) || got(c.CFDel(bg, "coupons", "C2")).must(t) {
		t.Fatal("CF.DEL found then not")
	}
	if _, err := c.CFDel(bg, "nothing", "C2"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("CF.DEL on a missing filter: %v", err)
	}
	if res := got(c.CFMExists(bg, "coupons", "C1", "C2", "C3")).must(t); !res[0] || res[1] || !res[2] {
		t.Fatalf("CF.MEXISTS %v", res)
	}
	if _, err := c.BFAdd(bg, "coupons", "x"); !errors.Is(err, client.ErrWrongType) {
		t.Fatalf("BF.ADD on a cuckoo filter: %v", err)
	}

	if err := c.CBFReserve(bg, "counts", 0.01, 1000, &client.CBFReserveOptions{CounterBits: 8, Layout: "dleft"}); err != nil {
		t.Fatal(err)
	}
	got(c.CBFAdd(bg, "counts", "x")).must(t)
	got(c.CBFAdd(bg, "counts", "x")).must(t)
	if n := got(c.CBFCount(bg, "counts", "x")).must(t); n != 2 {
		t.Fatalf("CBF.COUNT %d", n)
	}
	if !got(c.CBFDel(bg, "counts", "x")).must(t) || !got(c.CBFExists(bg, "counts", "x")).must(t) {
		t.Fatal("CBF.DEL of one of two occurrences")
	}

	for key, want := range map[string]string{"users": "MBbloom--", "coupons": "MBbloomCF", "counts": "MBbloomCBF", "nothing": "none"} {
		if typ := got(c.Type(bg, key)).must(t); typ != want {
			t.Errorf("TYPE %s = %q, want %q", key, typ, want)
		}
	}
	if in := got(c.Info(bg, "CBF", "counts")).must(t); in["Capacity"] != "1000" || in["Counter bits"] != "8" ||
		in["Layout"] != "dleft" || in["Number of items inserted"] != "1" {
		t.Errorf("CBF.INFO %v", in)
	}
	if in := got(c.Info(bg, "BF", "tiny")).must(t); in["Capacity"] != "2" || in["Expansion rate"] != "" {
		t.Errorf("BF.INFO of a non-scaling filter %v", in)
	}
	if in := got(c.Info(bg, "CF", "coupons")).must(t); in["Bucket size"] != "4" || in["Number of items inserted"] != "4" {
		t.Errorf("CF.INFO %v", in)
	}
	if _, err := c.Info(bg, "BF", "nothing"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("BF.INFO of a missing key: %v", err)
	}
	if !got(c.Exists(bg, "counts")).must(t) {
		t.Fatal("EXISTS")
	}
	if n := got(c.Del(bg, "counts", "users", "nothing")).must(t); n != 2 {
		t.Fatalf("DEL counted %d", n)
	}
	// Stale reads serve from the node's own state.
	if !got(c.CFExists(client.WithReadLevel(bg, client.ReadStale), "coupons", "C1")).must(t) {
		t.Fatal("stale CF.EXISTS")
	}
}

// dropProxy forwards TCP to a node; when armed, it swallows the next reply it
// sees and closes that connection, as a network failure after the request was
// sent would: the client cannot know whether the write happened.
type dropProxy struct {
	ln       net.Listener
	upstream string
	armed    atomic.Bool
	dropped  atomic.Int32
	// blackhole, while set, swallows every reply and keeps the connections
	// open, as a network that stopped delivering would.
	blackhole atomic.Bool
	wg        sync.WaitGroup
}

func startProxy(t *testing.T, upstream string, ln net.Listener) *dropProxy {
	p := &dropProxy{ln: ln, upstream: upstream}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *dropProxy) serve(c net.Conn) {
	defer c.Close()
	u, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	defer u.Close()
	go func() { io.Copy(u, c); u.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := u.Read(buf)
		if n > 0 {
			if p.armed.CompareAndSwap(true, false) {
				p.dropped.Add(1)
				return // the reply is lost with the connection
			}
			if p.blackhole.Load() {
				continue
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestExactlyOnceAcrossLostReplies: a write whose reply is lost is retried and
// applied once: a retried CF.ADD stores one copy, a retried CF.DEL deletes one.
func TestExactlyOnceAcrossLostReplies(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The node advertises the proxy, so the client sends everything through it.
	p := singleNode(t, "--resp-advertise", ln.Addr().String())
	proxy := startProxy(t, p.RESP, ln)
	c := newClient(t, ln.Addr().String())

	proxy.armed.Store(true)
	if err := c.CFAdd(bg, "coupons", "C-1234"); err != nil {
		t.Fatalf("CF.ADD across a lost reply: %v", err)
	}
	proxy.armed.Store(true)
	if err := c.CFAdd(bg, "coupons", "C-1234"); err != nil {
		t.Fatalf("second CF.ADD across a lost reply: %v", err)
	}
	if n := got(c.CFCount(bg, "coupons", "C-1234")).must(t); n != 2 {
		t.Fatalf("two adds, each retried once, stored %d copies", n)
	}
	proxy.armed.Store(true)
	if ok, err := c.CFDel(bg, "coupons", "C-1234"); err != nil || !ok {
		t.Fatalf("CF.DEL across a lost reply: %v %v", ok, err)
	}
	if n := got(c.CFCount(bg, "coupons", "C-1234")).must(t); n != 1 {
		t.Fatalf("one delete, retried, left %d copies, want 1", n)
	}
	if d := proxy.dropped.Load(); d != 3 {
		t.Fatalf("the proxy lost %d replies, want 3", d)
	}
}

// TestFailover: writes through the client keep succeeding while the leader is
// killed, each lands exactly once, and every acknowledged one is readable on
// every node.
func TestFailover(t *testing.T) {
	cl, err := nodeproc.StartCluster(rookery(t), t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	c := newClient(t, cl.RESPAddrs()...)
	if err := c.CFReserve(bg, "coupons", 100000, &client.CFReserveOptions{BucketSize: 4}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var acked []string
	var failed atomic.Int32
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				item := fmt.Sprintf("w%d-%d", w, i)
				if err := c.CFAdd(bg, "coupons", item); err != nil {
					t.Errorf("CF.ADD %s during failover: %v", item, err)
					failed.Add(1)
					return
				}
				mu.Lock()
				acked = append(acked, item)
				mu.Unlock()
			}
		}(w)
	}
	time.Sleep(500 * time.Millisecond)
	l, err := cl.Leader(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l.Kill()
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	if failed.Load() > 0 {
		t.FailNow()
	}
	// Reads through the client skip the dead node and keep answering.
	for _, item := range acked[:min(len(acked), 300)] {
		if ok, err := c.CFExists(bg, "coupons", item); err != nil || !ok {
			t.Fatalf("CF.EXISTS %s with a node down: %v %v", item, ok, err)
		}
	}
	checkStored(t, cl, "coupons", acked, 0)
	t.Logf("%d writes acknowledged across the failover, each stored once", len(acked))
}

// cfInfo asks one node for CF.INFO linearizably, waiting out elections (on a
// loaded machine the two survivors of a three-node cluster may take a while to
// settle on a leader).
func cfInfo(t *testing.T, r *redis.Client, key string) redis.CFInfo {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := r.CFInfo(bg, key).Result()
		if err == nil {
			return info
		}
		if time.Now().After(deadline) || !(strings.HasPrefix(err.Error(), "CLUSTERDOWN") || strings.HasPrefix(err.Error(), "TRYAGAIN")) {
			t.Fatalf("CF.INFO %s on %s: %v", key, r.Options().Addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkStored asks every running node directly, not through the client, for
// the cuckoo filter key: it must hold every acknowledged item, and as many
// items as were acknowledged, plus at most the writes whose outcome was
// unknown: none twice, none lost.
func checkStored(t *testing.T, cl *nodeproc.Cluster, key string, acked []string, unknown int64) {
	t.Helper()
	for _, m := range cl.Nodes {
		if !m.Alive() {
			continue
		}
		r := redis.NewClient(&redis.Options{Addr: m.RESP, MaxRetries: -1})
		defer r.Close()
		info := cfInfo(t, r, key)
		if n := info.NumItemsInserted; n < int64(len(acked)) || n > int64(len(acked))+unknown {
			t.Fatalf("%s holds %d items; %d were acknowledged and %d unknown: a write landed twice or was lost",
				m.ID, n, len(acked), unknown)
		}
		for from := 0; from < len(acked); from += 50000 {
			part := acked[from:min(from+50000, len(acked))]
			args := make([]any, len(part))
			for i, v := range part {
				args[i] = v
			}
			ok, err := r.CFMExists(bg, key, args...).Result()
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range ok {
				if !v {
					t.Fatalf("acknowledged %s missing on %s", part[i], m.ID)
				}
			}
		}
	}
}

// TestWindowedFilters: BF.RESERVE and CF.RESERVE with a window, through the
// client's options: items answer within the window, a coupon is redeemed once,
// and once the window and its slack have passed the node forgets them with no
// other write.
func TestWindowedFilters(t *testing.T) {
	p := singleNode(t)
	c := newClient(t, p.RESP)
	const window = 700 * time.Millisecond // generations of 100 ms
	if err := c.BFReserve(bg, "seen", 0.001, 1000, &client.BFReserveOptions{Window: window}); err != nil {
		t.Fatal(err)
	}
	if err := c.BFReserve(bg, "last", 0.001, 100, &client.BFReserveOptions{Last: 100}); err != nil {
		t.Fatal(err)
	}
	if err := c.CFReserve(bg, "coupons", 1000, &client.CFReserveOptions{Window: window, MaxIterations: 100}); err != nil {
		t.Fatal(err)
	}
	if !got(c.BFAdd(bg, "seen", "url")).must(t) || !got(c.BFAdd(bg, "last", "url")).must(t) {
		t.Fatal("BF.ADD to a windowed filter")
	}
	if err := c.CFAdd(bg, "coupons", "C-1"); err != nil {
		t.Fatal(err)
	}
	if err := c.CFAdd(bg, "coupons", "C-2"); err != nil {
		t.Fatal(err)
	}
	if !got(c.CFDel(bg, "coupons", "C-1")).must(t) || got(c.CFDel(bg, "coupons", "C-1")).must(t) {
		t.Fatal("a coupon redeemed other than once")
	}
	info := got(c.Info(bg, "BF", "seen")).must(t)
	if info["Capacity"] != "1000" || info["Number of items inserted"] != "1" {
		t.Fatalf("BF.INFO %v", info)
	}
	deadline := time.Now().Add(10 * time.Second)
	for got(c.BFExists(bg, "seen", "url")).must(t) || got(c.CFCount(bg, "coupons", "C-2")).must(t) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a windowed filter still answers 10 s after its window and slack")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !got(c.BFExists(bg, "last", "url")).must(t) {
		t.Fatal("a count window forgot with no insertion")
	}
}
