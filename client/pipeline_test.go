package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/client"
	"github.com/rookerydb/rookery/internal/nodeproc"
)

// TestPipeline: queued commands come back with their own answers and errors,
// reads see the pipeline's earlier writes, and Exec returns the first error.
func TestPipeline(t *testing.T) {
	p := singleNode(t)
	c := newClient(t, p.RESP)
	pl := c.Pipeline()
	reserve := pl.CFReserve("coupons", 1000, &client.CFReserveOptions{BucketSize: 4})
	add := pl.CFAdd("coupons", "C-1")
	nx := pl.CFAddNX("coupons", "C-1")
	exists := pl.CFExists("coupons", "C-1")
	wrong := pl.BFAdd("coupons", "x") // a cuckoo filter: WRONGTYPE
	madd := pl.BFMAdd("users", "alice", "bob", "alice")
	count := pl.CFCount("coupons", "C-1")
	del := pl.CFDel("coupons", "C-1")
	if pl.Len() != 8 {
		t.Fatalf("Len %d, want 8", pl.Len())
	}
	err := pl.Exec(bg)
	if !errors.Is(err, client.ErrWrongType) {
		t.Fatalf("Exec: %v, want the first error, ErrWrongType", err)
	}
	for name, e := range map[string]error{"reserve": reserve.Err(), "add": add.Err(), "nx": nx.Err(),
		"exists": exists.Err(), "madd": madd.Err(), "count": count.Err(), "del": del.Err()} {
		if e != nil {
			t.Fatalf("%s: %v", name, e)
		}
	}
	if nx.Val() || !exists.Val() || count.Val() != 1 || !del.Val() || !errors.Is(wrong.Err(), client.ErrWrongType) {
		t.Fatalf("nx %v exists %v count %d del %v wrong %v", nx.Val(), exists.Val(), count.Val(), del.Val(), wrong.Err())
	}
	if v := madd.Val(); len(v) != 3 || !v[0] || !v[1] || v[2] {
		t.Fatalf("BF.MADD %v", v)
	}
	if pl.Len() != 0 || pl.Exec(bg) != nil {
		t.Fatal("an executed pipeline is not empty")
	}
	// Reads alone go to the read rotation, at the context's level.
	r := pl.BFMExists("users", "alice", "carol")
	if err := pl.Exec(client.WithReadLevel(bg, client.ReadStale)); err != nil {
		t.Fatal(err)
	}
	if v := r.Val(); !v[0] || v[1] {
		t.Fatalf("BF.MEXISTS %v", v)
	}
	pl.CFAdd("coupons", "x")
	if err := pl.Exec(client.WithKey(bg, c.NewKey())); err == nil {
		t.Fatal("a pipeline took a key")
	}
}

// TestPipelineAcrossLostReply: a pipeline of 300 writes (five sessions) whose
// replies are lost part way is sent again whole, and each write lands once.
func TestPipelineAcrossLostReply(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := singleNode(t, "--resp-advertise", ln.Addr().String())
	proxy := startProxy(t, p.RESP, ln)
	c := newClient(t, ln.Addr().String())
	if err := c.CFReserve(bg, "coupons", 10000, nil); err != nil {
		t.Fatal(err)
	}
	pl := c.Pipeline()
	for i := range 300 {
		pl.CFAdd("coupons", fmt.Sprint("C-", i))
	}
	proxy.armed.Store(true)
	if err := pl.Exec(bg); err != nil {
		t.Fatal(err)
	}
	if proxy.dropped.Load() != 1 {
		t.Fatal("the proxy lost no reply")
	}
	for i := range 300 {
		if n := got(c.CFCount(bg, "coupons", fmt.Sprint("C-", i))).must(t); n != 1 {
			t.Fatalf("C-%d stored %d times", i, n)
		}
	}
}

// TestPipelineFailover: pipelines of CF.ADD keep going while the leader is
// killed; afterwards every surviving node holds each acknowledged item once,
// and nothing else but the writes whose outcome was reported unknown.
func TestPipelineFailover(t *testing.T) {
	cl, err := nodeproc.StartCluster(rookery(t), t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	c := newClient(t, cl.RESPAddrs()...)
	if err := c.CFReserve(bg, "coupons", 200000, &client.CFReserveOptions{BucketSize: 4}); err != nil {
		t.Fatal(err)
	}
	var h pipelineHistory
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				h.run(t, c, fmt.Sprintf("w%d-%d", w, i))
			}
		}()
	}
	time.Sleep(time.Second)
	l, err := cl.Leader(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l.Kill()
	h.mu.Lock()
	atKill := len(h.acked)
	h.mu.Unlock()
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	acked, unknown := h.acked, h.unknown
	if len(acked) <= atKill {
		t.Fatal("no pipeline succeeded after the leader was killed")
	}
	t.Logf("%d writes acknowledged in pipelines across the failover, %d unknown", len(acked), unknown)
	checkStored(t, cl, "coupons", acked, unknown)
}

// pipelineHistory records what pipelines of CF.ADD were told.
type pipelineHistory struct {
	mu      sync.Mutex
	acked   []string
	unknown int64
}

// run sends one pipeline of 100 CF.ADDs of new items and records each answer.
func (h *pipelineHistory) run(t *testing.T, c *client.Client, prefix string) {
	pl := c.Pipeline()
	items := make([]string, 100)
	res := make([]*client.Result[struct{}], 100)
	for j := range items {
		items[j] = fmt.Sprint(prefix, "-", j)
		res[j] = pl.CFAdd("coupons", items[j])
	}
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	_ = pl.Exec(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	for j, r := range res {
		switch err := r.Err(); {
		case err == nil:
			h.acked = append(h.acked, items[j])
		case errors.Is(err, client.ErrIndeterminate):
			h.unknown++
		default:
			t.Errorf("CF.ADD %s: %v", items[j], err)
		}
	}
}

// TestAddAll: a load in chunks reports per item whether it was new, in the
// order of the items, whatever order the chunks' answers arrive in.
func TestAddAll(t *testing.T) {
	p := singleNode(t)
	c := newClient(t, p.RESP)
	if err := c.BFReserve(bg, "urls", 0.0001, 100000, nil); err != nil {
		t.Fatal(err)
	}
	items := make([]string, 25000)
	for i := range items {
		items[i] = fmt.Sprintf("u%d", i%20000) // the last 5000 repeat the first
	}
	var chunks []int64
	added, err := c.AddAll(bg, client.KindBloom, "urls", items, &client.BulkOptions{Chunk: 777, InFlight: 6,
		OnChunk: func(r client.ChunkResult) { chunks = append(chunks, r.Offset) }})
	if err != nil {
		t.Fatal(err)
	}
	newCount := 0
	for i, a := range added {
		if a {
			newCount++
		}
		if i >= 20000 && a {
			t.Fatalf("item %d (a repeat) reported new", i)
		}
	}
	// The filter's 0.01% error rate may take a few new items for old ones.
	if newCount < 19990 || newCount > 20000 {
		t.Fatalf("%d items reported new, want about 20000", newCount)
	}
	for i, off := range chunks {
		if off != int64(i*777) {
			t.Fatalf("chunk %d delivered at offset %d, want %d: out of order", i, off, i*777)
		}
	}
	if n := got(c.BFCard(bg, "urls")).must(t); n != int64(newCount) {
		t.Fatalf("BF.CARD %d, %d reported new", n, newCount)
	}

}

// TestBulkCuckoo: with NX, loading the same items twice adds them once; a
// NoCreate load into a missing filter is ErrNotFound and creates nothing; a
// load past a full filter says so.
func TestBulkCuckoo(t *testing.T) {
	p := singleNode(t)
	c := newClient(t, p.RESP)
	items := make([]string, 5000)
	for i := range items {
		items[i] = fmt.Sprint("u", i)
	}
	// Cuckoo with NX: loading the same items twice adds them once.
	if err := c.CFReserve(bg, "codes", 100000, &client.CFReserveOptions{BucketSize: 4}); err != nil {
		t.Fatal(err)
	}
	var added []bool
	for round := range 2 {
		res, err := c.AddAll(bg, client.KindCuckoo, "codes", items[:3000], &client.BulkOptions{Chunk: 500, NX: true})
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			added = res
			continue
		}
		for i, a := range res {
			if a {
				t.Fatalf("item %d added again by the second NX load", i)
			}
		}
	}
	n := 0
	for _, a := range added {
		if a {
			n++
		}
	}
	// 8-bit fingerprints in buckets of 4: a few percent of new items look
	// present already.
	if n < 2800 {
		t.Fatalf("the first NX load added %d of 3000 new items", n)
	}
	r := redis.NewClient(&redis.Options{Addr: p.RESP, MaxRetries: -1})
	defer r.Close()
	if info := r.CFInfo(bg, "codes").Val(); info.NumItemsInserted != int64(n) {
		t.Fatalf("the filter holds %d items, the loads reported %d added", info.NumItemsInserted, n)
	}

	// NoCreate names the missing filter instead of making a tiny one.
	b := c.NewBulk(bg, client.KindBloom, "absent", client.BulkOptions{NoCreate: true, Chunk: 10})
	_ = b.Add(items[:25]...)
	if err := b.Close(); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("NoCreate into a missing filter: %v", err)
	}
	if b.Acked() != 0 || got(c.Exists(bg, "absent")).must(t) {
		t.Fatal("NoCreate created the filter or acknowledged items")
	}
	// A full cuckoo filter (32 sub-filters of 64 slots) says which items
	// found no room.
	if err := c.CFReserve(bg, "small", 64, &client.CFReserveOptions{BucketSize: 1}); err != nil {
		t.Fatal(err)
	}
	res, err := c.AddAll(bg, client.KindCuckoo, "small", items[:5000], nil)
	if !errors.Is(err, client.ErrFull) || len(res) != 5000 {
		t.Fatalf("a load past a full cuckoo filter: %v", err)
	}
	t.Log(err)
}
