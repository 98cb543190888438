package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookerydb/rookery/client"
	"github.com/rookerydb/rookery/internal/nodeproc"
)

var (
	flagCoupons     = flag.Int("coupons", 10_000, "coupons TestRedeemAcrossFailover issues and redeems (at most 2,000 with -short)")
	flagRedeemers   = flag.Int("redeemers", 20, "concurrent redeemers of TestRedeemAcrossFailover")
	flagForgedEvery = flag.Duration("forged-every", 5*time.Millisecond, "how often TestRedeemAcrossFailover tries a forged code")
)

// answer is the service's final answer to one redeem request.
type answer struct {
	code, result string
	at           time.Time
}

// TestRedeemAcrossFailover: coupons issued by the service are redeemed by
// concurrent redeemers, two racing for every code, while the cluster's leader
// is killed and restarted and a stream of forged codes goes on throughout.
// No coupon is redeemed twice, none is refused, no forged code changes
// anything, and at the end the filter agrees with the store: every code is
// redeemed and none is left in the filter, which deleted exactly one
// fingerprint per coupon.
func TestRedeemAcrossFailover(t *testing.T) {
	n, workers := *flagCoupons, *flagRedeemers
	if testing.Short() {
		n = min(n, 2000)
	}
	cl, err := nodeproc.StartCluster(rookery(t), t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	c := newClient(t, client.Options{Addrs: cl.RESPAddrs()})
	s := newService(t, c, int64(2*n)) // half full once all are issued
	h := serve(t, s)
	runOutbox(t, s, 100*time.Millisecond)

	start := time.Now()
	codes := h.issue("failover", n, s.maxIssue)
	t.Logf("issued %d coupons in %v; %d share a fingerprint and a bucket with another (CF.ADDNX would have merged them)",
		n, time.Since(start).Round(time.Millisecond), sharedFingerprints(t, c, codes))

	start = time.Now()
	var done atomic.Int64
	answers := redeemAll(t, h, codes, workers, &done, func(stop <-chan struct{}) {
		killLeader(t, cl, &done, int64(2*n), stop)
	})
	forged := answers[len(answers)-1]
	answers = answers[:len(answers)-1]
	if t.Failed() {
		return
	}
	t.Logf("%d redeems and %d forged codes in %v", 2*n, len(forged), time.Since(start).Round(time.Millisecond))
	waitOutbox(t, s, time.Minute)

	checkRedeemedOnce(t, s.st, codes, answers)
	checkForged(t, s, forged)
	checkFilter(t, c, cl, codes)
}

// redeemAll has workers redeem every code twice, each code by two different
// workers in their own random orders, while one more goroutine sends forged
// codes and chaos runs until told to stop. It returns each worker's answers,
// and the forged codes' last.
func redeemAll(t *testing.T, h *httpSvc, codes []string, workers int, done *atomic.Int64, chaos func(stop <-chan struct{})) [][]answer {
	lists := make([][]string, workers)
	issued := make(map[string]bool, len(codes))
	for _, code := range codes {
		a := rand.IntN(workers)
		b := (a + 1 + rand.IntN(workers-1)) % workers
		lists[a] = append(lists[a], code)
		lists[b] = append(lists[b], code)
		issued[code] = true
	}
	answers := make([][]answer, workers+1)
	var wg sync.WaitGroup
	for w, list := range lists {
		rand.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, code := range list {
				a, err := redeemUntilAnswered(h, code)
				if err != nil {
					t.Error(err)
					return
				}
				answers[w] = append(answers[w], a)
				done.Add(1)
			}
		}()
	}
	stop := make(chan struct{})
	var side sync.WaitGroup
	side.Add(2)
	go func() { defer side.Done(); chaos(stop) }()
	go func() {
		defer side.Done()
		tick := time.NewTicker(*flagForgedEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			code := newCodes(1)[0]
			if issued[code] {
				continue // one chance in 2^60 / n
			}
			a, err := redeemUntilAnswered(h, code)
			if err != nil {
				t.Error(err)
				return
			}
			answers[workers] = append(answers[workers], a)
		}
	}()
	wg.Wait()
	close(stop)
	side.Wait()
	return answers
}

// redeemUntilAnswered redeems code, trying again after a 503, as a user
// would, until it gets an answer.
func redeemUntilAnswered(h *httpSvc, code string) (answer, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		status, v, err := h.do("POST", "/redeem/"+code)
		switch {
		case err != nil:
			return answer{}, err
		case status == http.StatusOK || status == http.StatusNotFound || status == http.StatusConflict:
			return answer{code: code, result: result(v), at: time.Now()}, nil
		case status != http.StatusServiceUnavailable || time.Now().After(deadline):
			return answer{}, fmt.Errorf("redeem %s: %d %v", code, status, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killLeader kills the leader once a third of total redeems are done, and
// restarts it two seconds later.
func killLeader(t *testing.T, cl *nodeproc.Cluster, done *atomic.Int64, total int64, stop <-chan struct{}) {
	for done.Load() < total/3 {
		select {
		case <-stop:
			t.Error("the redeems ended before the leader was killed")
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	l, err := cl.Leader(10 * time.Second)
	if err != nil {
		t.Error(err)
		return
	}
	at := done.Load()
	l.Kill()
	time.Sleep(2 * time.Second)
	if err := l.Restart(); err != nil {
		t.Error(err)
		return
	}
	t.Logf("killed the leader %s after %d of %d redeems, restarted it after %d", l.ID, at, total, done.Load())
	if at >= total {
		t.Error("every redeem was answered before the leader was killed")
	}
}

// checkRedeemedOnce: every code was answered "redeemed" exactly once, every
// other answer for it came after the store had redeemed it, and the store
// holds every code redeemed with its delete settled.
func checkRedeemedOnce(t *testing.T, st *Store, codes []string, answers [][]answer) {
	t.Helper()
	wins := make(map[string]int, len(codes))
	var late []answer
	for _, list := range answers {
		for _, a := range list {
			switch a.result {
			case "redeemed":
				wins[a.code]++
			case "already redeemed", "unknown":
				late = append(late, a)
			default:
				t.Fatalf("redeem %s answered %q", a.code, a.result)
			}
		}
	}
	for _, code := range codes {
		if wins[code] != 1 {
			t.Fatalf("coupon %s redeemed %d times", code, wins[code])
		}
		c := mustGet(t, st, code)
		if c.State != StateRedeemed || c.RedeemedAt == nil || c.Pending != "" || c.Stale {
			t.Fatalf("coupon at the end: %+v", c)
		}
	}
	// A valid coupon is never refused: "unknown" or "already redeemed" come
	// only once the store has redeemed it for the other request.
	for _, a := range late {
		if c := mustGet(t, st, a.code); !c.RedeemedAt.Before(a.at) {
			t.Fatalf("%s answered %q at %v, before it was redeemed at %v", a.code, a.result, a.at, *c.RedeemedAt)
		}
	}
}

// checkForged: every forged code was unknown and left no trace in the store,
// and the filter let through no more of them than its false-positive rate
// allows.
func checkForged(t *testing.T, s *Service, forged []answer) {
	t.Helper()
	for _, a := range forged {
		if a.result != "unknown" {
			t.Fatalf("forged code %s answered %q", a.code, a.result)
		}
		if _, ok, err := s.st.Get(a.code); ok || err != nil {
			t.Fatalf("forged code %s is in the store (%v)", a.code, err)
		}
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	// Only forged codes can be missing from the store. With two slots per
	// bucket and 8-bit fingerprints a full filter passes 4/255 of them; this
	// one is at most half full, so that bounds it with room to spare.
	f := float64(len(forged))
	p := 4.0 / 255
	if limit := p*f + 4*math.Sqrt(p*f) + 3; float64(st.UnknownByStore) > limit {
		t.Fatalf("%d of %d forged codes passed the filter, more than %.0f", st.UnknownByStore, len(forged), limit)
	}
	t.Logf("forged codes: %d, passed the filter (a store lookup): %d; unknown answers without a store lookup: %.2f%%",
		len(forged), st.UnknownByStore, 100*st.LookupsAvoided)
}

// checkFilter: every node's filter is empty, having deleted exactly one
// fingerprint per coupon: none twice across the failover, none for a forged
// code. So it reports none of the codes, as the store (all redeemed) says.
func checkFilter(t *testing.T, c *client.Client, cl *nodeproc.Cluster, codes []string) {
	t.Helper()
	for _, m := range cl.Nodes {
		if err := m.WaitReady(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		info := cfInfo(t, m.RESP)
		if info.NumItemsInserted != 0 || info.NumItemsDeleted != int64(len(codes)) {
			t.Fatalf("%s: the filter holds %d and deleted %d; want 0 and %d",
				m.ID, info.NumItemsInserted, info.NumItemsDeleted, len(codes))
		}
	}
	for from := 0; from < len(codes); from += 1000 {
		part := codes[from:min(from+1000, len(codes))]
		seen, err := c.CFMExists(bg, testFilter, part...)
		if err != nil {
			t.Fatal(err)
		}
		for i, ok := range seen {
			if ok {
				t.Fatalf("the filter still reports redeemed %s", part[i])
			}
		}
	}
}

// sharedFingerprints counts the codes whose CF.COUNT is above one: another
// code has the same fingerprint in the same buckets.
func sharedFingerprints(t *testing.T, c *client.Client, codes []string) int {
	t.Helper()
	shared := 0
	for from := 0; from < len(codes); from += 1000 {
		p := c.Pipeline()
		var counts []*client.Result[int64]
		for _, code := range codes[from:min(from+1000, len(codes))] {
			counts = append(counts, p.CFCount(testFilter, code))
		}
		if err := p.Exec(bg); err != nil {
			t.Fatal(err)
		}
		for _, r := range counts {
			if r.Val() > 1 {
				shared++
			}
		}
	}
	return shared
}
