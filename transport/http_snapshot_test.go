package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/fsm"
)

// snapReq sends method path with body to h from peer 192.0.2.1, with the
// password as a bearer token if pass is set.
func snapReq(t *testing.T, h http.Handler, method, path, pass string, body io.Reader) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, body)
	if pass != "" {
		req.Header.Set("Authorization", "Bearer "+pass)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestHTTPBackupRoundTrip: GET /v1/snapshot serves a backup file whose every
// checksum holds and whose length was announced; POST /v1/snapshot/restore of
// that file on another node gives it the same filters. Both want the password.
func TestHTTPBackupRoundTrip(t *testing.T) {
	const pass = "pw"
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	c.do("BF.ADD", "users", "alice")
	c.do("CF.ADD", "coupons", "C1")
	h := NewHTTP(Config{RequirePass: pass}, ts.be).Handler()

	if rec := snapReq(t, h, "GET", "/v1/snapshot", "", nil); rec.Code != http.StatusUnauthorized {
		t.Fatalf("GET /v1/snapshot without the password: %d", rec.Code)
	}
	rec := snapReq(t, h, "GET", "/v1/snapshot", pass, nil)
	file := rec.Body.Bytes()
	if rec.Code != 200 || rec.Header().Get("Content-Length") != fmt.Sprint(len(file)) {
		t.Fatalf("GET /v1/snapshot: %d, Content-Length %q for %d bytes: %s",
			rec.Code, rec.Header().Get("Content-Length"), len(file), file)
	}
	info, err := cluster.VerifyBackup(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.State.Filters) != 2 || info.State.Filters[0].Key != "coupons" || info.State.Filters[1].Key != "users" {
		t.Fatalf("backup holds %+v", info.State.Filters)
	}

	other := newFakeBackend(t)
	h2 := NewHTTP(Config{RequirePass: pass}, other).Handler()
	if rec := snapReq(t, h2, "POST", "/v1/snapshot/restore", "", bytes.NewReader(file)); rec.Code != http.StatusUnauthorized {
		t.Fatalf("restore without the password: %d", rec.Code)
	}
	rec = snapReq(t, h2, "POST", "/v1/snapshot/restore", pass, bytes.NewReader(file))
	var res restoredJSON
	if err := json.Unmarshal(rec.Body.Bytes(), &res); rec.Code != 200 || err != nil || !res.Restored || res.Filters != 2 {
		t.Fatalf("restore: %d %s %v", rec.Code, rec.Body, err)
	}
	if !other.fsm.Exists(fsm.FamilyBF, "users", [][]byte{[]byte("alice")})[0] ||
		!other.fsm.Exists(fsm.FamilyCF, "coupons", [][]byte{[]byte("C1")})[0] {
		t.Fatal("restored node lacks the backup's items")
	}

	if rec := snapReq(t, h2, "POST", "/v1/snapshot", "", nil); rec.Code != http.StatusUnauthorized {
		t.Fatalf("POST /v1/snapshot without the password: %d", rec.Code)
	}
	rec = snapReq(t, h2, "POST", "/v1/snapshot", pass, nil)
	var snap snapshotJSON
	if err := json.Unmarshal(rec.Body.Bytes(), &snap); rec.Code != 200 || err != nil || snap.ID == "" || snap.Term != 3 {
		t.Fatalf("POST /v1/snapshot: %d %s %v", rec.Code, rec.Body, err)
	}
}

// TestHTTPRestoreRefusesDamage: a damaged file is refused with 400 and a
// message naming the damage, and nothing is restored.
func TestHTTPRestoreRefusesDamage(t *testing.T) {
	be := newFakeBackend(t)
	h := NewHTTP(Config{RequirePass: "pw"}, be).Handler()
	file := snapReq(t, h, "GET", "/v1/snapshot", "pw", nil).Body.Bytes()
	file[len(file)/2] ^= 1
	rec := snapReq(t, h, "POST", "/v1/snapshot/restore", "pw", bytes.NewReader(file))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "damaged") {
		t.Fatalf("damaged restore: %d %s", rec.Code, rec.Body)
	}
	if be.restores != 0 {
		t.Fatal("a damaged backup was restored")
	}
}

// TestHTTPBackupOnFollower: a follower sends GET /v1/snapshot and restores to
// the leader's HTTP address with 307 (method and body kept), serves its own
// state when asked for ?stale, and never reads an upload it will not restore.
func TestHTTPBackupOnFollower(t *testing.T) {
	be := newFakeBackend(t)
	be.set(func(b *fakeBackend) { b.follower = true })
	h := NewHTTP(Config{RequirePass: "pw"}, be).Handler()
	rec := snapReq(t, h, "GET", "/v1/snapshot", "pw", nil)
	if rec.Code != http.StatusTemporaryRedirect || rec.Header().Get("Location") != "http://127.0.0.1:8080/v1/snapshot" {
		t.Fatalf("GET on a follower: %d %q %s", rec.Code, rec.Header().Get("Location"), rec.Body)
	}
	if rec := snapReq(t, h, "GET", "/v1/snapshot?stale", "pw", nil); rec.Code != 200 {
		t.Fatalf("GET ?stale on a follower: %d %s", rec.Code, rec.Body)
	}
	body := &countingBody{r: strings.NewReader("a backup")}
	rec = snapReq(t, h, "POST", "/v1/snapshot/restore", "pw", body)
	if rec.Code != http.StatusTemporaryRedirect || rec.Header().Get("Location") != "http://127.0.0.1:8080/v1/snapshot/restore" {
		t.Fatalf("restore on a follower: %d %q %s", rec.Code, rec.Header().Get("Location"), rec.Body)
	}
	if body.n != 0 {
		t.Fatalf("a follower read %d bytes of an upload it redirects", body.n)
	}
}

type countingBody struct {
	r io.Reader
	n int
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestHTTPBackupErrors: each failure has the status a client can act on.
func TestHTTPBackupErrors(t *testing.T) {
	be := newFakeBackend(t)
	h := NewHTTP(Config{RequirePass: "pw"}, be).Handler()
	for _, c := range []struct {
		err  error
		code int
	}{
		{fmt.Errorf("%w: too big", cluster.ErrBackupTooLarge), http.StatusRequestEntityTooLarge},
		{fmt.Errorf("%w: over --max-memory", cluster.ErrTooLarge), http.StatusRequestEntityTooLarge},
		{cluster.ErrRestoreInProgress, http.StatusConflict},
		{cluster.ErrNoLeader, http.StatusServiceUnavailable},
		{fmt.Errorf("%w: leadership lost", cluster.ErrIndeterminate), http.StatusServiceUnavailable},
		{errors.New("disk on fire"), http.StatusInternalServerError},
	} {
		be.set(func(b *fakeBackend) { b.backupErr = c.err })
		rec := snapReq(t, h, "POST", "/v1/snapshot/restore", "pw", strings.NewReader("x"))
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.err.Error()) {
			t.Errorf("restore failing with %v: %d %s, want %d", c.err, rec.Code, rec.Body, c.code)
		}
	}
	be.set(func(b *fakeBackend) { b.backupErr = cluster.ErrNothingToSnapshot })
	if rec := snapReq(t, h, "POST", "/v1/snapshot", "pw", nil); rec.Code != http.StatusConflict {
		t.Errorf("snapshot with nothing applied: %d %s", rec.Code, rec.Body)
	}
	be.set(func(b *fakeBackend) { b.backupErr = nil })
	rec := snapReq(t, h, "POST", "/v1/snapshot/restore", "pw", io.MultiReader(strings.NewReader("RKY"), errReader{}))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "upload interrupted after 3 bytes") {
		t.Errorf("interrupted upload: %d %s", rec.Code, rec.Body)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// TestHTTPRestoreExpectContinue: over a real connection, a client that sends
// "Expect: 100-continue" (as rookery snapshot restore does) learns that a node
// redirects, or refuses it, before it has sent any of the file.
func TestHTTPRestoreExpectContinue(t *testing.T) {
	be := newFakeBackend(t)
	be.set(func(b *fakeBackend) { b.follower = true })
	srv := NewHTTP(Config{RequirePass: "pw"}, be)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(t.Context()) })
	client := &http.Client{
		Transport: &http.Transport{ExpectContinueTimeout: 5 * time.Second},
		// The test looks at the redirect itself.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	for _, c := range []struct {
		pass string
		code int
	}{{"", http.StatusUnauthorized}, {"pw", http.StatusTemporaryRedirect}} {
		body := &countingBody{r: bytes.NewReader(make([]byte, 8<<20))}
		req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/v1/snapshot/restore", body)
		req.ContentLength = 8 << 20
		req.Header.Set("Expect", "100-continue")
		if c.pass != "" {
			req.Header.Set("Authorization", "Bearer "+c.pass)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.code || body.n != 0 {
			t.Errorf("password %q: %s after sending %d bytes, want %d before any", c.pass, resp.Status, body.n, c.code)
		}
	}
}
