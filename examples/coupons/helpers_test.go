package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/rookerydb/rookery/client"
	"github.com/rookerydb/rookery/internal/nodeproc"
)

// The tests run the service in-process (httptest) against real rookery
// processes, and talk to it over HTTP as its users would.

var rookeryBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // no binary: the tests that need one skip
	}
	os.Exit(nodeproc.RunTests(m, false, &rookeryBin))
}

// rookery is the binary for a test that drives real nodes; with -short such a
// test is skipped.
func rookery(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test drives the rookery binary as real processes")
	}
	return rookeryBin
}

var bg = context.Background()

const testFilter = "coupons"

func newClient(t *testing.T, o client.Options) *client.Client {
	t.Helper()
	if o.RetryBackoff == 0 {
		o.RetryBackoff = 10 * time.Millisecond
	}
	c, err := client.New(bg, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// newService opens a store in a temporary directory and creates the filter
// with capacity slots, as main does.
func newService(t *testing.T, c *client.Client, capacity int64) *Service {
	t.Helper()
	if err := ensureFilter(bg, c, testFilter, capacity); err != nil {
		t.Fatal(err)
	}
	st, err := OpenStore(filepath.Join(t.TempDir(), "coupons.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tl := &testLog{t: t}
	t.Cleanup(tl.stop) // after the outbox loop and the server, which start later, have stopped
	return NewService(c, st, testFilter, slog.New(slog.NewTextHandler(tl, &slog.HandlerOptions{Level: slog.LevelError})))
}

// testLog writes the service's log lines to the test's log while the test
// runs.
type testLog struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

func (l *testLog) stop() {
	l.mu.Lock()
	l.done = true
	l.mu.Unlock()
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// runOutbox runs the service's outbox loop until the test ends.
func runOutbox(t *testing.T, s *Service, every time.Duration) {
	ctx, cancel := context.WithCancel(bg)
	done := make(chan struct{})
	go func() { defer close(done); s.RunOutbox(ctx, every) }()
	t.Cleanup(func() { cancel(); <-done })
}

// httpSvc is the service as its users see it.
type httpSvc struct {
	t   *testing.T
	url string
	hc  *http.Client
}

func serve(t *testing.T, s *Service) *httpSvc {
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &httpSvc{t: t, url: srv.URL,
		hc: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

// do sends a request and decodes the JSON answer; errors are returned, not
// fatal, so that goroutines can call it.
func (h *httpSvc) do(method, path string) (int, map[string]any, error) {
	req, err := http.NewRequest(method, h.url+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: %d %q: %w", method, path, resp.StatusCode, body, err)
	}
	return resp.StatusCode, v, nil
}

func (h *httpSvc) must(method, path string, want int) map[string]any {
	h.t.Helper()
	status, v, err := h.do(method, path)
	if err != nil {
		h.t.Fatal(err)
	}
	if status != want {
		h.t.Fatalf("%s %s: %d %v, want %d", method, path, status, v, want)
	}
	return v
}

// issue issues n codes of campaign, in requests of at most per codes.
func (h *httpSvc) issue(campaign string, n, per int) []string {
	h.t.Helper()
	var codes []string
	for len(codes) < n {
		k := min(per, n-len(codes))
		v := h.must("POST", fmt.Sprintf("/campaigns/%s/issue?n=%d", campaign, k), http.StatusOK)
		list, _ := v["codes"].([]any)
		if len(list) != k {
			h.t.Fatalf("issue %d: got %d codes", k, len(list))
		}
		for _, c := range list {
			codes = append(codes, c.(string))
		}
	}
	return codes
}

// result is a redeem's answer: "redeemed", "unknown", "already redeemed".
func result(v map[string]any) string {
	s, _ := v["result"].(string)
	return s
}

func mustGet(t *testing.T, st *Store, code string) Coupon {
	t.Helper()
	c, ok, err := st.Get(code)
	if err != nil || !ok {
		t.Fatalf("store: %s: %v %v", code, ok, err)
	}
	return c
}

// couponCount counts the store's coupons.
func couponCount(t *testing.T, st *Store) int {
	t.Helper()
	n := 0
	err := st.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketCoupons).Stats().KeyN
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitOutbox waits until the outbox is empty.
func waitOutbox(t *testing.T, s *Service, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, err := s.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.OutboxPending == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("outbox still holds %d operations after %v", st.OutboxPending, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
