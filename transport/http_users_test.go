package transport

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/internal/acl"
)

// mustNewUsers is a node's users with --requirepass pass and, beside the
// default user, users made with rules: name -> ACL SETUSER rules.
func mustNewUsers(t *testing.T, pass string, users map[string][]string) *acl.Store {
	t.Helper()
	reg, err := ACLRegistry()
	if err != nil {
		t.Fatal(err)
	}
	s := acl.NewStore(reg, pass)
	for name, rules := range users {
		if err := s.SetUser(name, rules); err != nil {
			t.Fatalf("ACL SETUSER %s %v: %v", name, rules, err)
		}
	}
	return s
}

// The users of TestHTTPAuthUsers.
var httpTestUsers = map[string][]string{
	"checker":  {"on", ">pw", "~names", "+bf.exists"},
	"operator": {"on", ">op", "+@admin", "+@read", "~*"},
	"almost":   {"on", ">al", "+@all", "~*", "-config|set"}, // every command but one of @admin
	"sleeper":  {"off", ">zz", "+@all", "~*"},
	"open":     {"on", "nopass", "+@admin"},
}

// errorOf is the "error" of a JSON answer.
func errorOf(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Fatalf("answer %d is not JSON: %q", rec.Code, rec.Body)
	}
	return e.Error
}

// TestHTTPAuthUsers: over HTTP a request is one of the node's users. Basic
// auth names the user; a bearer token is the default user's password. Any
// user that is on may read (status, nodes, filters, shards, raft peers,
// metrics); every other route needs a user allowed every command of
// @admin, else 403 naming the user and what it lacks. A wrong password, an
// unknown user and a user that is off are 401.
func TestHTTPAuthUsers(t *testing.T) {
	creds := []struct {
		name  string
		cred  func(*http.Request)
		user  string // "" when refused 401
		admin bool
	}{
		{"default by bearer", withBearer(testPass), "default", true},
		{"default by basic", withBasic("default", testPass), "default", true},
		{"checker", withBasic("checker", "pw"), "checker", false},
		{"operator", withBasic("operator", "op"), "operator", true},
		{"almost", withBasic("almost", "al"), "almost", false},
		{"open (nopass) with any password", withBasic("open", "whatever"), "open", true},
		{"checker wrong password", withBasic("checker", "op"), "", false},
		{"checker's password as bearer", withBearer("pw"), "", false},
		{"unknown user", withBasic("nobody", "pw"), "", false},
		{"user that is off", withBasic("sleeper", "zz"), "", false},
	}
	for _, c := range creds {
		t.Run(c.name, func(t *testing.T) {
			e := newAuthEnv(t, Config{RequirePass: testPass, Users: mustNewUsers(t, testPass, httpTestUsers)})
			for _, rt := range allRoutes {
				what := rt.method + " " + rt.path
				rec := e.do(rt.method, rt.path, stranger, c.cred)
				switch {
				case rt.open:
					if rec.Code != rt.code {
						t.Errorf("%s: %d, want %d", what, rec.Code, rt.code)
					}
				case c.user == "":
					assertRefused(t, what, rec, msgInvalid)
				case rt.admin && !c.admin:
					path, _, _ := strings.Cut(rt.path, "?")
					want := "user " + c.user + " may not " + rt.method + " " + path + ": it needs +@admin"
					if rec.Code != http.StatusForbidden || (rt.method != "HEAD" && errorOf(t, rec) != want) {
						t.Errorf("%s: %d %q, want 403 %q", what, rec.Code, rec.Body, want)
					}
				default:
					if rec.Code != rt.code {
						t.Errorf("%s: %d, want %d: %s", what, rec.Code, rt.code, rec.Body)
					}
				}
			}
			if e.left() != c.admin || (e.cuts.Load() == 1) != c.admin {
				t.Errorf("admin routes ran: left %v, cuts %d", e.left(), e.cuts.Load())
			}
		})
	}
}

// TestHTTPAuthUserChanges: the users are read at each request, so a change
// made through the log (the same store) holds at the next one: a deleted
// user, or one turned off, is 401; a grant of @admin opens the admin routes;
// a new password replaces the old.
func TestHTTPAuthUserChanges(t *testing.T) {
	users := mustNewUsers(t, testPass, httpTestUsers)
	e := newAuthEnv(t, Config{RequirePass: testPass, Users: users})
	checker := withBasic("checker", "pw")
	if rec := e.do("POST", "/v1/leave", stranger, checker); rec.Code != http.StatusForbidden {
		t.Fatalf("checker before the grant: %d %s", rec.Code, rec.Body)
	}
	if err := users.SetUser("checker", []string{"+@admin"}); err != nil {
		t.Fatal(err)
	}
	if rec := e.do("POST", "/v1/leave", stranger, checker); rec.Code != http.StatusOK {
		t.Fatalf("checker after +@admin: %d %s", rec.Code, rec.Body)
	}
	if err := users.SetUser("checker", []string{"resetpass", ">new"}); err != nil {
		t.Fatal(err)
	}
	assertRefused(t, "the old password", e.do("GET", "/v1/status", stranger, checker), msgInvalid)
	if rec := e.do("GET", "/v1/status", stranger, withBasic("checker", "new")); rec.Code != http.StatusOK {
		t.Fatalf("the new password: %d %s", rec.Code, rec.Body)
	}
	if err := users.SetUser("checker", []string{"off"}); err != nil {
		t.Fatal(err)
	}
	assertRefused(t, "checker off", e.do("GET", "/v1/status", stranger, withBasic("checker", "new")), msgInvalid)
	if _, err := users.DelUser("operator"); err != nil {
		t.Fatal(err)
	}
	assertRefused(t, "operator deleted", e.do("GET", "/v1/status", stranger, withBasic("operator", "op")), msgInvalid)
	// The default user's password is the users' too: ACL SETUSER default
	// changes what a bearer token must be.
	if err := users.SetUser("default", []string{"resetpass", ">rotated"}); err != nil {
		t.Fatal(err)
	}
	assertRefused(t, "--requirepass once the default user's password changed",
		e.do("GET", "/v1/status", stranger, withBearer(testPass)), msgInvalid)
	if rec := e.do("GET", "/v1/status", stranger, withBearer("rotated")); rec.Code != http.StatusOK {
		t.Fatalf("the default user's new password: %d %s", rec.Code, rec.Body)
	}
}

// TestHTTPAuthACLLog: a route refused for want of @admin and a wrong
// password are in ACL LOG (context http, the route as the object), shared
// with the RESP server through Config.ACLLog; the password is not.
func TestHTTPAuthACLLog(t *testing.T) {
	log := acl.NewLog(acl.DefaultLogMax)
	e := newAuthEnv(t, Config{RequirePass: testPass, Users: mustNewUsers(t, testPass, httpTestUsers), ACLLog: log})
	e.do("POST", "/v1/drain?id=n2", stranger, withBasic("checker", "pw"))
	e.do("GET", "/v1/status", stranger, withBasic("checker", wrongPass))
	got := log.Entries(10, time.Now())
	if len(got) != 2 {
		t.Fatalf("ACL LOG holds %d entries, want 2: %+v", len(got), got)
	}
	auth, cmd := got[0], got[1]
	if cmd.Reason != acl.ReasonCommand || cmd.Context != acl.ContextHTTP || cmd.Object != "POST /v1/drain" ||
		cmd.Username != "checker" || !strings.Contains(cmd.ClientInfo, "addr="+stranger) {
		t.Errorf("the refused route: %+v", cmd)
	}
	if auth.Reason != acl.ReasonAuth || auth.Context.String() != "http" || auth.Object != "GET /v1/status" || auth.Username != "checker" {
		t.Errorf("the wrong password: %+v", auth)
	}
	for _, en := range got {
		if strings.Contains(en.ClientInfo+en.Object, wrongPass) {
			t.Errorf("ACL LOG holds the password tried: %+v", en)
		}
	}
	if log.Denied(acl.ReasonAuth) != 1 || log.Denied(acl.ReasonCommand) != 1 {
		t.Errorf("denied counts: auth %d, cmd %d", log.Denied(acl.ReasonAuth), log.Denied(acl.ReasonCommand))
	}
}

// TestHTTPAuthUsersNoPassword: on a node that asks for no credentials (no
// --requirepass, no client certificates), a request without any is the
// default user, reading from anywhere and using admin routes from loopback
// only, as before users; a named user's password is checked all the same,
// and such a user may use admin routes from anywhere if it holds @admin; a
// default user stripped of @admin is refused them even from loopback.
func TestHTTPAuthUsersNoPassword(t *testing.T) {
	users := mustNewUsers(t, "", httpTestUsers)
	e := newAuthEnv(t, Config{Users: users})
	if rec := e.do("GET", "/v1/status", stranger, nil); rec.Code != http.StatusOK {
		t.Fatalf("a read from a stranger: %d", rec.Code)
	}
	assertRefused(t, "an admin route from a stranger", e.do("POST", "/debug/faults/cut", stranger, nil), msgNeedLoopback)
	assertRefused(t, "an admin route from a stranger with the default user's (any) password",
		e.do("POST", "/debug/faults/cut", stranger, withBearer("x")), msgNeedLoopback)
	assertRefused(t, "a wrong password of a named user", e.do("GET", "/v1/status", stranger, withBasic("operator", "x")), msgInvalid)
	if rec := e.do("POST", "/debug/faults/cut", stranger, withBasic("operator", "op")); rec.Code != http.StatusOK {
		t.Fatalf("operator from a stranger's address: %d %s", rec.Code, rec.Body)
	}
	if rec := e.do("POST", "/debug/faults/cut", stranger, withBasic("checker", "pw")); rec.Code != http.StatusForbidden {
		t.Fatalf("checker from a stranger's address: %d %s", rec.Code, rec.Body)
	}
	if err := users.SetUser("default", []string{"-@admin"}); err != nil {
		t.Fatal(err)
	}
	rec := e.do("POST", "/debug/faults/cut", localPeer, nil)
	if rec.Code != http.StatusForbidden || errorOf(t, rec) != "user default may not POST /debug/faults/cut: it needs +@admin" {
		t.Fatalf("the default user without @admin from loopback: %d %s", rec.Code, rec.Body)
	}
	if rec := e.do("GET", "/v1/status", localPeer, nil); rec.Code != http.StatusOK {
		t.Fatalf("a read of the default user without @admin: %d", rec.Code)
	}
	if n := e.cuts.Load(); n != 1 {
		t.Fatalf("the fault route ran %d times, want 1 (operator's)", n)
	}
}

// laggingBackend is a node whose users lag the cluster's: its users' read
// barrier applies the change the cluster made meanwhile.
type laggingBackend struct {
	*fakeBackend
	catchUp  func()
	barriers atomic.Int32
}

type laggingReplica struct {
	*fakeBackend
	b *laggingBackend
}

func (b *laggingBackend) UsersReplica() (Replica, error) {
	return laggingReplica{b.fakeBackend, b}, nil
}

func (r laggingReplica) ReadBarrier(ctx context.Context, level cluster.ReadLevel) error {
	r.b.barriers.Add(1)
	if f := r.b.catchUp; f != nil {
		f()
	}
	return r.fakeBackend.ReadBarrier(ctx, level)
}

// TestHTTPAuthCatchesUp: a user, or a grant, made on another node a moment
// ago holds on this one at once: before a refusal the node catches its users
// up with the cluster (a linearizable read of the group that holds them),
// as RESP does before WRONGPASS or NOPERM; a request that passes costs no
// such read.
func TestHTTPAuthCatchesUp(t *testing.T) {
	users := mustNewUsers(t, testPass, nil)
	be := &laggingBackend{fakeBackend: newFakeBackend(t)}
	h := NewHTTP(Config{RequirePass: testPass, Users: users}, be).Handler()
	do := func(method, path string, cred func(*http.Request)) int {
		req := httptest.NewRequest(method, path, nil)
		req.RemoteAddr = stranger
		cred(req)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	be.catchUp = func() { users.SetUser("late", []string{"on", ">pw", "+@read"}) }
	if code := do("GET", "/v1/status", withBasic("late", "pw")); code != http.StatusOK {
		t.Fatalf("a user made elsewhere: %d", code)
	}
	be.catchUp = func() { users.SetUser("late", []string{"+@admin"}) }
	if code := do("POST", "/v1/snapshot", withBasic("late", "pw")); code != http.StatusOK {
		t.Fatalf("a grant made elsewhere: %d", code)
	}
	be.catchUp = nil
	before := be.barriers.Load()
	if code := do("POST", "/v1/snapshot", withBasic("late", "pw")); code != http.StatusOK {
		t.Fatalf("again: %d", code)
	}
	if n := be.barriers.Load() - before; n != 0 {
		t.Fatalf("a request that passes made %d read barriers", n)
	}
}

// TestHTTPAuthUsersClientCert: a verified client certificate stands for the
// default user, unless basic auth names another user, who is then checked
// and holds; the default user turned off turns the certificate away.
func TestHTTPAuthUsersClientCert(t *testing.T) {
	p := mustNewPKI(t)
	users := mustNewUsers(t, testPass, httpTestUsers)
	e := newAuthEnv(t, Config{ClientCerts: true, RequirePass: testPass, Users: users})
	url := startTLS(t, e, p)
	withCert := tlsClient(t, p, p.client)
	if code, body := call(t, withCert, "POST", url+"/v1/snapshot", nil); code != 200 {
		t.Errorf("an admin route with a certificate: %d %s", code, body)
	}
	if code, body := call(t, withCert, "GET", url+"/v1/status", withBearer(wrongPass)); code != 200 {
		t.Errorf("a certificate with a wrong bearer token (not checked, as before users): %d %s", code, body)
	}
	if code, body := call(t, withCert, "POST", url+"/v1/snapshot", withBasic("checker", "pw")); code != 403 ||
		!strings.Contains(body, "user checker may not POST /v1/snapshot") {
		t.Errorf("a certificate with checker's basic auth: %d %s", code, body)
	}
	if code, body := call(t, withCert, "GET", url+"/v1/status", withBasic("checker", wrongPass)); code != 401 {
		t.Errorf("a certificate with checker's wrong password: %d %s", code, body)
	}
	if err := users.SetUser("default", []string{"off"}); err != nil {
		t.Fatal(err)
	}
	if code, body := call(t, withCert, "GET", url+"/v1/status", nil); code != 401 || !strings.Contains(body, msgCertUserOff) {
		t.Errorf("a certificate with the default user off: %d %s", code, body)
	}
	if code, body := call(t, withCert, "POST", url+"/v1/snapshot", withBasic("operator", "op")); code != 200 {
		t.Errorf("operator beside a certificate, the default user off: %d %s", code, body)
	}
}
