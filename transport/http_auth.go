package transport

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/rookerydb/rookery/internal/acl"
)

// access is what a request needs before it reaches a handler.
type access int

const (
	// accessOpen: nothing (the orchestrator's probes, public metrics).
	accessOpen access = iota
	// accessRead: an authenticated user that is on.
	accessRead
	// accessAdmin: a user allowed every command of @admin (HasCategory);
	// without credentials, on a node that asks for none, a loopback peer.
	accessAdmin
)

// Messages of refusals. None of them repeats what the client sent.
const (
	msgInvalid      = "invalid credentials: invalid username-password pair or user is disabled"
	msgNeedPassword = "authentication required: send basic auth <user>:<password>, " +
		"or Authorization: Bearer <password> for the default user"
	msgNeedCert   = "authentication required: present a client certificate signed by the cluster CA"
	msgNeedEither = "authentication required: send basic auth <user>:<password>, " +
		"or Authorization: Bearer <password> for the default user, " +
		"or present a client certificate signed by the cluster CA"
	msgTooMany      = "too many authentication attempts from this address: try again later"
	msgNeedLoopback = "authentication required: with no credentials configured, changes and admin " +
		"routes are accepted only from loopback; start the node with --requirepass or --tls-client-auth"
	msgCertUserOff = "invalid credentials: a client certificate stands for the default user, which is disabled"
)

// The challenges of a 401 (RFC 9110, section 11.6.1): both schemes we accept.
const (
	challengeBearer = `Bearer realm="rookery"`
	challengeBasic  = `Basic realm="rookery", charset="UTF-8"`
)

// readRoutes are the GET and HEAD routes any authenticated user may use: they
// show the node's and the cluster's state and change nothing. Every other
// request, whatever its method, is an admin route (accessAdmin): a backup
// (GET /v1/snapshot), pprof, a Config.Routes entry, a route added later, an
// unknown path.
var readRoutes = map[string]bool{
	"/v1/status":     true,
	"/v1/nodes":      true,
	"/v1/filters":    true,
	"/v1/shards":     true,
	"/v1/raft/peers": true,
	"/metrics":       true,
}

// httpAuth guards every HTTP route. It wraps the whole mux rather than single
// handlers so that a route added later (a Config.Routes entry, a new endpoint)
// is protected by default: only the probes, and /metrics under its own rule,
// are allow-listed, and only readRoutes are open to a user without @admin.
//
// Who a request is comes from the node's users (Config.Users, the store the
// RESP server checks AUTH against): basic auth names a user and its password,
// a bearer token is the default user's password, a verified client
// certificate stands for the default user.
type httpAuth struct {
	next          http.Handler
	users         *acl.Store
	be            Backend // catches the users up with the cluster; nil: never
	aclLog        *acl.Log
	certs         bool
	metricsPublic bool
	log           *slog.Logger
	failures      *authFailures
	guard         *AuthGuard
}

// newHTTPAuth wraps next with the credential rules of cfg; be (nil in tests of
// the middleware alone) catches the node's users up before a refusal.
func newHTTPAuth(cfg Config, be Backend, next http.Handler) *httpAuth {
	return &httpAuth{
		next:          next,
		users:         cfg.users(),
		be:            be,
		aclLog:        cfg.aclLog(),
		certs:         cfg.ClientCerts,
		metricsPublic: cfg.MetricsPublic,
		log:           cfg.Logger,
		failures:      newAuthFailures(cfg.Registry, cfg.Logger),
		guard:         cfg.authGuard(),
	}
}

// configured reports whether the node asks clients for credentials: the
// default user has a password (or is off), or client certificates are
// required. It is read per request, as ACL SETUSER default changes it.
func (a *httpAuth) configured() bool { return a.certs || a.users.AuthRequired() }

// identity is who a request is.
type identity struct {
	acct *acl.Account
	// anonymous: no credential, on a node that asks for none; the request
	// runs as the default user, and changes only from loopback.
	anonymous bool
	// cert: a verified client certificate, standing for the default user.
	cert bool
}

// ServeHTTP passes r on to the mux if its user may use the route, and refuses
// it with 401 (who are you?), 403 (not you) or 429 (too many guesses) if not.
func (a *httpAuth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	need := a.classify(r)
	if need == accessOpen {
		a.next.ServeHTTP(w, r)
		return
	}
	id, ok := a.identify(w, r, need)
	if ok && a.authorize(w, r, need, id) {
		a.next.ServeHTTP(w, r)
	}
}

// classify says what r needs. Paths are compared exactly, so an unclean path
// (which the mux would only redirect) is never taken for a probe or a read.
func (a *httpAuth) classify(r *http.Request) access {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return accessAdmin
	}
	switch p := r.URL.Path; {
	case p == "/healthz", p == "/readyz", p == "/metrics" && a.metricsPublic:
		return accessOpen
	case readRoutes[p]:
		return accessRead
	}
	return accessAdmin
}

// identify finds who r is, or answers it (401, 429) and reports false:
//
//   - a verified client certificate (with ClientCerts) is the default user,
//     unless basic auth names another user, who is then checked instead;
//   - basic auth user:password is that user (an empty name is the default
//     user), a bearer token the default user's password; either is checked
//     against the users when it could authenticate anyone: it names a user
//     other than default, or the node asks for credentials. A password for
//     a default user who takes any (nopass) proves nothing, and is refused
//     on a node that asks for a certificate;
//   - with nothing, on a node that asks for no credentials, the request is
//     the default user, anonymous.
func (a *httpAuth) identify(w http.ResponseWriter, r *http.Request, need access) (identity, bool) {
	name, pass, hasPass := credentials(r)
	cert := a.certs && r.TLS != nil && len(r.TLS.VerifiedChains) > 0
	switch {
	case cert && (!hasPass || name == acl.DefaultUser):
		return identity{acct: a.users.Default(), cert: true}, true
	case hasPass && (name != acl.DefaultUser || a.configured()):
		return a.checkPassword(w, r, need, name, pass)
	case !a.configured():
		return identity{acct: a.users.Default(), anonymous: true}, true
	}
	a.refuse(w, r, need, a.needMessage())
	return identity{}, false
}

// checkPassword checks a user's password once its source's turn comes.
func (a *httpAuth) checkPassword(w http.ResponseWriter, r *http.Request, need access, name, pass string) (identity, bool) {
	// A password is a guess until checked: it waits for its source's turn
	// (AuthGuard), whichever way it turns out, and only then is answered.
	at, err := a.guard.enter(r.Context(), faceHTTP, r.RemoteAddr)
	if err != nil {
		if r.Context().Err() == nil {
			a.tooMany(w, r)
		}
		return identity{}, false // else the client went away while its source was held back
	}
	acct, ok := authenticate(a.users, name, pass, func() bool { return usersCaughtUp(r.Context(), a.be) })
	if ok && name == acl.DefaultUser {
		if u := acct.User(); u == nil || u.NoPass() {
			ok = false // the default user takes any password: this one proves nothing
		}
	}
	failures, wait := at.done(ok)
	if !ok {
		a.failures.note(faceHTTP, r.RemoteAddr, failures, wait)
		a.logACL(r, acl.ReasonAuth, name)
		a.refuse(w, r, need, msgInvalid)
		return identity{}, false
	}
	return identity{acct: acct}, true
}

// authorize decides whether id may use the route r asks for, or answers r
// (401, 403) and reports false. A user deleted or turned off since it was
// identified is refused 401, as RESP closes a deleted user's connections. An
// admin route refused is refused only after this node's users have caught up
// with the cluster, so that a grant made on another node a moment ago holds.
func (a *httpAuth) authorize(w http.ResponseWriter, r *http.Request, need access, id identity) bool {
	u := id.acct.User()
	if u == nil || !u.Enabled() {
		msg := msgInvalid
		if id.cert {
			msg = msgCertUserOff
		}
		a.refuse(w, r, need, msg)
		return false
	}
	if need == accessRead {
		return true
	}
	if id.anonymous && !isLoopback(r.RemoteAddr) {
		a.refuse(w, r, need, msgNeedLoopback)
		return false
	}
	reg := a.users.Registry()
	if u.HasCategory(reg, acl.CatAdmin) {
		return true
	}
	if usersCaughtUp(r.Context(), a.be) {
		if u = id.acct.User(); u == nil || !u.Enabled() {
			a.refuse(w, r, need, msgInvalid)
			return false
		}
		if u.HasCategory(reg, acl.CatAdmin) {
			return true
		}
	}
	a.forbid(w, r, id.acct.Name())
	return false
}

// credentials are the user name and password r presents: basic auth's (an
// empty user name is the default user, as curl -u :password sends), else a
// bearer token as the default user's password.
func credentials(r *http.Request) (name, pass string, ok bool) {
	if pass, ok = bearer(r.Header.Get("Authorization")); ok {
		return acl.DefaultUser, pass, true
	}
	if name, pass, ok = r.BasicAuth(); !ok {
		return "", "", false
	}
	if name == "" {
		name = acl.DefaultUser
	}
	return name, pass, true
}

// bearer returns the token of an "Authorization: Bearer <token>" header. The
// scheme is case-insensitive (RFC 9110, section 11.1); the token is taken as
// is, since a password may hold any byte.
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return token, true
}

// needMessage tells a client without credentials which ones would do.
func (a *httpAuth) needMessage() string {
	switch {
	case a.certs && a.users.AuthRequired():
		return msgNeedEither
	case a.certs:
		return msgNeedCert
	default:
		return msgNeedPassword
	}
}

// tooMany answers 429 to a password refused unchecked: too many attempts from
// its source wait their turn already.
func (a *httpAuth) tooMany(w http.ResponseWriter, r *http.Request) {
	a.log.Debug("http authentication refused unchecked", "remote", r.RemoteAddr, "source", sourceOf(r.RemoteAddr))
	w.Header().Set("Retry-After", strconv.Itoa(int(authPenaltyMax/time.Second)))
	writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": msgTooMany})
}

// refuse answers 401 with a JSON error and the challenges. Refused admin
// requests are logged at warn, as someone tried to alter the cluster or read
// all of it; refused reads only at debug, as a scraper without a token would
// otherwise flood the log.
func (a *httpAuth) refuse(w http.ResponseWriter, r *http.Request, need access, msg string) {
	level := slog.LevelDebug
	if need == accessAdmin {
		level = slog.LevelWarn
	}
	a.log.Log(r.Context(), level, "http request refused", "method", r.Method,
		"path", r.URL.Path, "remote", r.RemoteAddr, "reason", msg)
	w.Header().Add("WWW-Authenticate", challengeBearer)
	w.Header().Add("WWW-Authenticate", challengeBasic)
	writeError(w, http.StatusUnauthorized, msg)
}

// forbid answers 403 to user, who may not use the admin route r asks for, and
// records the refusal in ACL LOG (reason "command", context "http", the
// route as the object).
func (a *httpAuth) forbid(w http.ResponseWriter, r *http.Request, user string) {
	msg := fmt.Sprintf("user %s may not %s %s: it needs +@%s", user, r.Method, r.URL.Path, acl.CatAdmin)
	a.log.Warn("http request forbidden", "method", r.Method, "path", r.URL.Path,
		"remote", r.RemoteAddr, "user", user)
	a.logACL(r, acl.ReasonCommand, user)
	writeError(w, http.StatusForbidden, msg)
}

// logACL records a refusal of r in ACL LOG, as RESP records a failed AUTH or
// a NOPERM: the route is the object, the user the one named (or tried).
func (a *httpAuth) logACL(r *http.Request, reason acl.Reason, user string) {
	info := "addr=" + r.RemoteAddr
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		info += " laddr=" + la.String()
	}
	info += " user=" + user + " proto=http"
	a.aclLog.Add(acl.Event{Reason: reason, Context: acl.ContextHTTP, Object: r.Method + " " + r.URL.Path,
		Username: user, ClientInfo: info}, time.Now())
}

// writeError answers code with {"error": msg}. Not writeJSON: the message
// holds our constants or a user's name, and its "<password>" should reach a
// curl user as written, not HTML-escaped.
func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(map[string]string{"error": msg})
}

// isLoopback reports whether a RemoteAddr ("host:port") is a loopback address.
// Anything unparsable (a Unix socket, an empty address) is not.
func isLoopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
