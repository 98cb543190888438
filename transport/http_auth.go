package transport

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// access is what a request needs before it reaches a handler.
type access int

const (
	// accessOpen: nothing (the orchestrator's probes, public metrics).
	accessOpen access = iota
	// accessRead: credentials when any are configured.
	accessRead
	// accessWrite: credentials when any are configured, else a loopback peer.
	accessWrite
)

// credential is what a request presented.
type credential int

const (
	credMissing credential = iota // nothing we recognise
	credInvalid                   // a password, and not the node's
	credValid                     // the node's password or a verified client certificate
)

// Messages of refusals. None of them repeats what the client sent.
const (
	msgInvalid      = "invalid credentials"
	msgNeedPassword = "authentication required: send Authorization: Bearer <password>"
	msgNeedCert     = "authentication required: present a client certificate signed by the cluster CA"
	msgNeedEither   = "authentication required: send Authorization: Bearer <password> " +
		"or present a client certificate signed by the cluster CA"
	msgNeedLoopback = "authentication required: with no credentials configured, changes are " +
		"accepted only from loopback; start the node with --requirepass or --tls-client-auth"
)

// The challenges of a 401 (RFC 9110, section 11.6.1): both schemes we accept.
const (
	challengeBearer = `Bearer realm="rookery"`
	challengeBasic  = `Basic realm="rookery", charset="UTF-8"`
)

// httpAuth guards every HTTP route. It wraps the whole mux rather than single
// handlers so that a route added later (a Config.Routes entry, a new endpoint)
// is protected by default: only the probes, and /metrics under its own rule,
// are allow-listed.
type httpAuth struct {
	next          http.Handler
	hasPass       bool
	passSum       [sha256.Size]byte
	certs         bool
	metricsPublic bool
	log           *slog.Logger
	failures      *authFailures
	throttle      *httpThrottle
}

// newHTTPAuth wraps next with the credential rules of cfg.
func newHTTPAuth(cfg Config, next http.Handler) *httpAuth {
	return &httpAuth{
		next:          next,
		hasPass:       cfg.RequirePass != "",
		passSum:       sha256.Sum256([]byte(cfg.RequirePass)),
		certs:         cfg.ClientCerts,
		metricsPublic: cfg.MetricsPublic,
		log:           cfg.Logger,
		failures:      newAuthFailures(cfg.Registry, cfg.Logger),
		throttle:      newHTTPThrottle(),
	}
}

// configured reports whether the node has any credential a client could present.
func (a *httpAuth) configured() bool { return a.hasPass || a.certs }

// ServeHTTP passes r on to the mux if it may, and refuses it with 401 if not.
func (a *httpAuth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	need := a.classify(r)
	if need == accessOpen {
		a.next.ServeHTTP(w, r)
		return
	}
	if !a.configured() {
		// Nobody can authenticate, so reads stay open (such a node is meant to be
		// on loopback or --insecure), but a change must come from this host.
		if need == accessRead || isLoopback(r.RemoteAddr) {
			a.next.ServeHTTP(w, r)
			return
		}
		a.refuse(w, r, need, msgNeedLoopback)
		return
	}
	cred, byPassword := a.check(r)
	host := hostOf(r.RemoteAddr)
	if byPassword && !a.throttle.wait(r.Context(), host) {
		return // the client went away while its address was held back
	}
	switch cred {
	case credValid:
		if byPassword {
			a.throttle.succeed(host)
		}
		a.next.ServeHTTP(w, r)
	case credInvalid:
		a.throttle.fail(host)
		a.failures.note(faceHTTP, r.RemoteAddr)
		a.refuse(w, r, need, msgInvalid)
	default:
		a.refuse(w, r, need, a.needMessage())
	}
}

// classify says what r needs. Paths are compared exactly, so an unclean path
// (which the mux would only redirect) is never taken for a probe.
func (a *httpAuth) classify(r *http.Request) access {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return accessWrite
	}
	switch r.URL.Path {
	case "/healthz", "/readyz":
		return accessOpen
	case "/metrics":
		if a.metricsPublic {
			return accessOpen
		}
	}
	return accessRead
}

// check looks at what r presents, and whether it was a password (an attempt
// that may be a guess). A verified client certificate is enough on its own
// when ClientCerts is set; otherwise the password is taken from a bearer token
// or from basic auth (any user name: redis's is "default").
func (a *httpAuth) check(r *http.Request) (credential, bool) {
	if a.certs && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		return credValid, false
	}
	pass, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		_, pass, ok = r.BasicAuth()
	}
	if !ok {
		return credMissing, false
	}
	// Comparing digests keeps the time independent of the password's length as
	// well as its content.
	sum := sha256.Sum256([]byte(pass))
	if a.hasPass && subtle.ConstantTimeCompare(sum[:], a.passSum[:]) == 1 {
		return credValid, true
	}
	return credInvalid, true
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
	case a.hasPass && a.certs:
		return msgNeedEither
	case a.certs:
		return msgNeedCert
	default:
		return msgNeedPassword
	}
}

// refuse answers 401 with a JSON error and the challenges. Refused changes are
// logged at warn, as someone tried to alter the cluster; refused reads only at
// debug, as a scraper without a token would otherwise flood the log.
func (a *httpAuth) refuse(w http.ResponseWriter, r *http.Request, need access, msg string) {
	level := slog.LevelDebug
	if need == accessWrite {
		level = slog.LevelWarn
	}
	a.log.Log(r.Context(), level, "http request refused", "method", r.Method,
		"path", r.URL.Path, "remote", r.RemoteAddr, "reason", msg)
	w.Header().Add("WWW-Authenticate", challengeBearer)
	w.Header().Add("WWW-Authenticate", challengeBasic)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	// Not writeJSON: the message is one of our constants, and its "<password>"
	// should reach a curl user as written, not HTML-escaped.
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
