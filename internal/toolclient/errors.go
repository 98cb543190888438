package toolclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// Errors of the package.
var (
	// ErrNoNode: none of the addresses answered; it joins each one's *Error.
	ErrNoNode = errors.New("no node answered")
)

// Kind says what went wrong with one node, and so which flag fixes it.
type Kind int

// The kinds of failure.
const (
	KindUnreachable Kind = iota // no answer: timeout, no route, connection reset
	KindRefused                 // connection refused: nothing listens there (--addr)
	KindWantTLS                 // an https port spoken to in plain HTTP (--cacert)
	KindNotTLS                  // a plain HTTP port spoken to in https (no --cacert)
	KindUntrusted               // a certificate the CA given does not vouch for (--cacert)
	KindNeedCert                // the node wants a client certificate (--cert, --key)
	KindAuth                    // 401: no password, or the wrong one (--user, --password)
	KindAnswer                  // any other answer but 200: the node's own message
	KindRESP                    // a RESP port spoken to in HTTP (--addr names the HTTP port)
	KindForbidden               // 403: the user may not do this (--user)
)

// Error is a failed exchange with one node.
type Error struct {
	Addr   string
	Kind   Kind
	Status int    // the HTTP status, for answers
	Msg    string // the node's message, or what went wrong
	Hint   string // what to do, naming the flag
	// Sent: the request may have reached the node (so a change must not be
	// sent to another one blindly).
	Sent bool
	Err  error
}

func (e *Error) Error() string {
	s := e.Addr + ": " + e.short()
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// short is the failure without the hint.
func (e *Error) short() string {
	switch e.Kind {
	case KindWantTLS:
		return "this port speaks https (the node runs with --http-tls) and the request was plain http"
	case KindAnswer, KindAuth, KindForbidden:
		if e.Msg == "" {
			return fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status))
		}
		return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), e.Msg)
	}
	return e.Msg
}

// Answered reports whether the node answered over HTTP (a status of its own).
func (e *Error) Answered() bool {
	return e.Kind == KindAnswer || e.Kind == KindAuth || e.Kind == KindForbidden
}

// Fatal reports whether the failure is one of the tool's settings, which
// waiting does not cure: TLS spoken to a plain port or the reverse, a
// certificate not trusted, a client certificate missing, a password refused,
// a user without the right.
func (e *Error) Fatal() bool {
	switch e.Kind {
	case KindWantTLS, KindNotTLS, KindUntrusted, KindNeedCert, KindAuth, KindRESP, KindForbidden:
		return true
	}
	return false
}

// classify reads a transport failure (no HTTP answer).
func (c *Client) classify(addr string, err error) *Error {
	e := &Error{Addr: addr, Kind: KindUnreachable, Msg: err.Error(), Err: err}
	var rec tls.RecordHeaderError
	var unknownCA x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var host x509.HostnameError
	var ne net.Error
	switch {
	case errors.As(err, &rec), errors.Is(err, http.ErrSchemeMismatch):
		e.Kind, e.Msg = KindNotTLS, "this port speaks plain http and the request was https"
		e.Hint = "it runs without --http-tls: leave out " + c.caFlagGiven()
	case errors.As(err, &unknownCA):
		e.Kind, e.Msg = KindUntrusted, "its certificate is not signed by the CA in "+c.cfg.CAFile
		e.Hint = "give the cluster's CA (the tls-ca of the nodes, e.g. certs/ca.pem) with --cacert (or " + EnvCACert + ")"
	case errors.As(err, &host):
		e.Kind, e.Msg = KindUntrusted, "its certificate does not name "+hostOnly(addr)+": "+host.Error()
		e.Hint = "use an address the certificate names in " + c.addrFlag() + ", or make the node's certificate with --host " + hostOnly(addr)
	case errors.As(err, &invalid):
		e.Kind, e.Msg = KindUntrusted, "its certificate is not valid: "+invalid.Error()
		e.Hint = "renew the node's certificate (rookery tls cert ... --force), or check this host's clock"
	case remoteAlert(err) && c.cfg.CertFile == "":
		// certificate_required (TLS 1.3) or bad_certificate (TLS 1.2), as
		// a node with --tls-client-auth answers a client without one.
		e.Kind, e.Msg = KindNeedCert, "the node refused the TLS connection ("+err.Error()+")"
		e.Hint = "it runs with --tls-client-auth: give a client certificate the cluster CA signed with --cert FILE --key FILE"
	case remoteAlert(err):
		e.Kind, e.Msg = KindNeedCert, "the node refused the TLS connection ("+err.Error()+")"
		e.Hint = "give a client certificate the cluster CA signed with --cert FILE --key FILE"
	case errors.Is(err, syscall.ECONNREFUSED):
		e.Kind, e.Msg = KindRefused, "connection refused"
		e.Hint = "no node listens there: give the nodes' HTTP addresses (their --http-addr) with " + c.addrFlag()
	case errors.As(err, &ne) && ne.Timeout():
		e.Msg = "no answer (" + err.Error() + ")"
		e.Hint = "is the node running and reachable, and is this its --http-addr? " + c.addrFlag() + " names others"
	}
	return e
}

// caHint is what to do about an https port spoken to in plain HTTP at
// host: give the CA, or, when one is given, the address said http:// in so
// many words.
func (c *Client) caHint(host string) string {
	if c.cfg.CAFile != "" || c.cfg.CertFile != "" {
		return "the address says http:// though " + c.caFlagGiven() + " is given: write https://" + host + " in " + c.addrFlag()
	}
	return "give the cluster's CA with --cacert FILE (or " + EnvCACert + "), e.g. --cacert certs/ca.pem"
}

// caFlagGiven names where the CA came from, for "leave it out".
func (c *Client) caFlagGiven() string {
	if c.cfg.CAFrom == "" {
		return "--cacert and --cert"
	}
	return c.cfg.CAFrom
}

// authHint is what to do about a 401.
func (c *Client) authHint() string {
	switch {
	case c.cfg.User != "":
		// Redis's answer, which tells nothing of which part was wrong.
		return "the node has no user " + c.cfg.User + " (" + c.userFrom() + ") that is on with the password " +
			c.passwordFrom() + ": check both, --user and --password (or " + EnvUser + " and " + EnvPassword + ")"
	case c.cfg.PasswordFrom == "":
		return "give the nodes' password (their --requirepass) with --password (or " + EnvPassword +
			"), or a user's name and password with --user and --password (or " + EnvUser + ")"
	}
	return "the password from " + c.cfg.PasswordFrom + " is not the nodes' --requirepass (the default user's): give theirs with --password (or " +
		EnvPassword + "), or name another user with --user (or " + EnvUser + ")"
}

// forbiddenHint is what to do about a 403: the node knows the user, who may
// not do what was asked (the node's message says what it lacks).
func (c *Client) forbiddenHint() string {
	who := "the default user (no --user given)"
	if c.cfg.User != "" {
		who = "user " + c.cfg.User + " (" + c.userFrom() + ")"
	}
	return "act as a user allowed it with --user and --password (or " + EnvUser + " and " + EnvPassword +
		"), or grant it to " + who + " with ACL SETUSER"
}

// userFrom names where the user came from.
func (c *Client) userFrom() string {
	if c.cfg.UserFrom == "" {
		return "the configuration"
	}
	return "from " + c.cfg.UserFrom
}

// passwordFrom names where the password came from, or says there is none.
func (c *Client) passwordFrom() string {
	if c.cfg.PasswordFrom == "" {
		return "none given"
	}
	return "from " + c.cfg.PasswordFrom
}

// noNode is the error when no address answered: what each said, and what to do.
func (c *Client) noNode(errs []*Error) error {
	if len(errs) == 1 && !c.Defaults() {
		return errs[0] // the one address given: its own error says it all
	}
	var fatal *Error
	parts := make([]string, 0, len(errs))
	all := make([]error, 0, len(errs)+1)
	all = append(all, ErrNoNode)
	refused := 0
	for _, e := range errs {
		parts = append(parts, e.Addr+" ("+e.short()+")")
		all = append(all, e)
		if e.Fatal() && fatal == nil {
			fatal = e
		}
		if e.Kind == KindRefused {
			refused++
		}
	}
	where := "tried " + strings.Join(parts, ", ")
	if c.Defaults() {
		where += ", the local defaults as neither --addr nor " + EnvAddr + " is set"
	}
	var hint string
	switch {
	case fatal != nil:
		hint = fatal.Hint
	case refused == len(errs):
		hint = "no node listens there: give the nodes' HTTP addresses (their --http-addr) with " + c.addrFlag()
	case len(errs) > 0:
		hint = errs[0].Hint
	}
	msg := ErrNoNode.Error() + ": " + where
	if hint != "" {
		msg += "; " + hint
	}
	return &joined{msg: msg, errs: all}
}

// joined is an error with its own text that still unwraps to its parts.
type joined struct {
	msg  string
	errs []error
}

func (j *joined) Error() string   { return j.msg }
func (j *joined) Unwrap() []error { return j.errs }

// speaksTLS reports whether a TLS server answers at addr: a handshake that
// completes, or a TLS alert. It only looks: nothing is sent over it.
func speaksTLS(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	// Only to see whether the peer speaks TLS at all; no request goes over it.
	tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec
	err = tc.HandshakeContext(ctx)
	return err == nil || remoteAlert(err)
}

// speaksRESP reports whether a RESP server answers at addr: a PING there
// gets a simple string or an error (+PONG, -NOAUTH ...), where an HTTP
// server answers "HTTP/1.1 400".
func speaksRESP(ctx context.Context, addr string) bool {
	b := probe(ctx, addr, "PING\r\n", 1)
	return len(b) == 1 && (b[0] == '+' || b[0] == '-')
}

// SpeaksHTTP reports whether an HTTP server answers at addr (HOST:PORT, or
// a URL): a line it cannot read draws "HTTP/1.1 400", where a RESP server
// answers PING. It ignores ctx's cancellation, not its values.
func SpeaksHTTP(ctx context.Context, addr string) bool {
	if _, rest, ok := strings.Cut(addr, "://"); ok {
		addr, _, _ = strings.Cut(rest, "/")
		if i := strings.LastIndexByte(addr, '@'); i >= 0 {
			addr = addr[i+1:]
		}
	}
	return string(probe(context.WithoutCancel(ctx), addr, "PING\r\n\r\n", 5)) == "HTTP/"
}

// probe sends what to addr and returns the first n bytes of the answer, or
// nil, within 2 s.
func probe(ctx context.Context, addr, what string, n int) []byte {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte(what)); err != nil {
		return nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(conn, b); err != nil {
		return nil
	}
	return b
}

// remoteAlert reports whether err is a TLS alert the peer sent: crypto/tls
// returns those as a *net.OpError of Op "remote error".
func remoteAlert(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "remote error"
}

func hostOnly(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
