package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/acl"
)

// usersNode is a fake node whose state machine holds users (group 0), the
// same store its HTTP server authenticates against, as cmd/node wires them.
type usersNode struct {
	be    *fakeBackend
	users *acl.Store
	h     http.Handler
}

func newUsersNode(t *testing.T, pass string) *usersNode {
	t.Helper()
	users := mustNewUsers(t, pass, nil)
	be := newFakeBackendWith(t, fsm.Options{Users: users, RequirePass: pass})
	return &usersNode{be: be, users: users, h: NewHTTP(Config{RequirePass: pass, Users: users}, be).Handler()}
}

// setUser runs ACL SETUSER name rules through n's log.
func (n *usersNode) setUser(t *testing.T, name string, rules ...string) {
	t.Helper()
	items := make([][]byte, len(rules))
	for i, r := range rules {
		items[i] = []byte(acl.HashRules([]string{r})[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := n.be.SubmitUsers(&fsm.Command{Op: fsm.OpACLSetUser, Key: name, Items: items}).Wait(ctx)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("ACL SETUSER %s: %v", name, err)
	}
}

func (n *usersNode) do(method, path string, body io.Reader, auth func(*http.Request)) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, body)
	auth(req)
	rec := httptest.NewRecorder()
	n.h.ServeHTTP(rec, req)
	return rec
}

// TestHTTPUsersBackup: GET /v1/users is group 0's users section, read after
// a linearizable barrier; POST /v1/users/restore of it on another node
// replaces that cluster's users through the log. Both are admin routes;
// damaged or oversized bodies are refused before anything is proposed.
func TestHTTPUsersBackup(t *testing.T) {
	src := newUsersNode(t, "src-pw")
	admin := withBearer("src-pw")

	rec := src.do("GET", "/v1/users", nil, admin)
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 || rec.Header().Get("X-Rookery-Users") != "0" {
		t.Fatalf("GET /v1/users before any user: %d %q %q", rec.Code, rec.Header().Get("X-Rookery-Users"), rec.Body)
	}
	src.setUser(t, "checker", "on", ">secret", "~names", "+bf.exists")
	src.setUser(t, "operator", "on", ">op", "+@all", "~*")
	src.be.mu.Lock()
	src.be.events = nil
	src.be.mu.Unlock()
	rec = src.do("GET", "/v1/users", nil, withBasic("operator", "op"))
	sec := bytes.Clone(rec.Body.Bytes())
	if rec.Code != http.StatusOK || rec.Header().Get("X-Rookery-Users") != "2" || !bytes.Equal(sec, src.be.fsm.UsersSection()) {
		t.Fatalf("GET /v1/users: %d %q %q", rec.Code, rec.Header().Get("X-Rookery-Users"), sec)
	}
	if ev := src.be.events; len(ev) != 1 || ev[0] != "barrier:lin" {
		t.Fatalf("GET /v1/users read without a linearizable barrier: %v", ev)
	}
	if bytes.Contains(sec, []byte("secret")) {
		t.Fatal("the users section holds a password in clear")
	}
	if rec := src.do("GET", "/v1/users", nil, withBasic("checker", "secret")); rec.Code != http.StatusForbidden {
		t.Fatalf("GET /v1/users by a user without @admin: %d %s", rec.Code, rec.Body)
	}
	src.be.mu.Lock()
	src.be.barrierErr = cluster.ErrNotLeader
	src.be.mu.Unlock()
	if rec := src.do("GET", "/v1/users", nil, admin); rec.Code != http.StatusServiceUnavailable ||
		!strings.Contains(errorOf(t, rec), "could not catch this node's users up") {
		t.Fatalf("GET /v1/users without a barrier: %d %s", rec.Code, rec.Body)
	}

	dst := newUsersNode(t, "dst-pw")
	dst.setUser(t, "stale", "on", "nopass", "+@all")
	dadmin := withBearer("dst-pw")
	if rec := dst.do("POST", "/v1/users/restore", bytes.NewReader(sec), withBasic("stale", "")); rec.Code != http.StatusOK {
		t.Fatalf("POST /v1/users/restore: %d %s", rec.Code, rec.Body)
	} else {
		var got usersRestoredJSON
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || !got.Restored || got.Users != 2 {
			t.Fatalf("POST /v1/users/restore answered %s", rec.Body)
		}
	}
	if u := dst.users.User("checker"); u == nil || !u.CheckPassword("secret") || dst.users.User("stale") != nil {
		t.Fatalf("after the restore: %v", dst.users.Names())
	}
	if !dst.users.User(acl.DefaultUser).CheckPassword("dst-pw") {
		t.Fatal("the default user, which the backup's log never set, lost this node's --requirepass")
	}

	// Refused before the log: nothing is proposed.
	dst.be.mu.Lock()
	before := len(dst.be.commands)
	dst.be.mu.Unlock()
	for name, tc := range map[string]struct {
		body io.Reader
		code int
		msg  string
	}{
		"damaged":  {bytes.NewReader(sec[:len(sec)-1]), http.StatusBadRequest, "not the users of a backup"},
		"flags":    {bytes.NewReader(append([]byte{0x40}, sec[1:]...)), http.StatusBadRequest, "unknown flags"},
		"too long": {io.LimitReader(zeros{}, maxUsersBody+1), http.StatusRequestEntityTooLarge, "at most"},
	} {
		rec := dst.do("POST", "/v1/users/restore", tc.body, dadmin)
		if rec.Code != tc.code || !strings.Contains(errorOf(t, rec), tc.msg) {
			t.Errorf("%s: %d %s", name, rec.Code, rec.Body)
		}
	}
	if rec := dst.do("POST", "/v1/users/restore", bytes.NewReader(sec), withBasic("checker", "secret")); rec.Code != http.StatusForbidden {
		t.Errorf("POST /v1/users/restore by a user without @admin: %d", rec.Code)
	}
	dst.be.mu.Lock()
	after := len(dst.be.commands)
	dst.be.mu.Unlock()
	if after != before {
		t.Fatalf("%d refused restores reached the log", after-before)
	}

	// An empty body: the backup's cluster never set users.
	if rec := dst.do("POST", "/v1/users/restore", nil, dadmin); rec.Code != http.StatusOK {
		t.Fatalf("POST /v1/users/restore of none: %d %s", rec.Code, rec.Body)
	}
	if got := dst.users.Names(); len(got) != 1 || got[0] != acl.DefaultUser {
		t.Fatalf("after a restore of none: %v", got)
	}
	// A group that refuses: its error, worded.
	dst.be.mu.Lock()
	dst.be.submitErr = cluster.ErrNotLeader
	dst.be.mu.Unlock()
	if rec := dst.do("POST", "/v1/users/restore", bytes.NewReader(sec), dadmin); rec.Code != http.StatusServiceUnavailable ||
		!strings.Contains(errorOf(t, rec), "restoring the users") {
		t.Fatalf("a restore the log refused: %d %s", rec.Code, rec.Body)
	}
}

// zeros reads as zero bytes without end.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
