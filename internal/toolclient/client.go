// Package toolclient is how rookery's tools (members, status, wait, raft,
// snapshot) reach the nodes' HTTP API: a list of addresses tried in turn
// until one answers, the cluster CA, a client certificate and the password,
// a follower's redirect to the leader followed with the same credentials, and
// every failure turned into a message that names the flag that fixes it
// (--addr, --cacert, --cert/--key, --user, --password, or their ROOKERY_
// variables).
package toolclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rookerydb/rookery/internal/certs"
)

// Config is a resolved set of connection settings (Flags.Config).
type Config struct {
	// Addrs are the nodes' HTTP addresses (HOST:PORT or URLs), tried in turn.
	Addrs []string
	// AddrFrom names where Addrs came from ("--addr", "ROOKERY_ADDR"); ""
	// means the local defaults.
	AddrFrom string
	// AddrFlag says how to give other addresses, for the hints (default
	// "--addr (or ROOKERY_ADDR)").
	AddrFlag string
	// CAFile, when set, makes the tool speak https and trust this CA; CAFrom
	// names where it came from.
	CAFile, CAFrom string
	// CertFile and KeyFile are a client certificate (--tls-client-auth).
	CertFile, KeyFile string
	// User, when set, is the node's user to act as: User and Password go as
	// basic auth. Without it Password is the default user's, sent as a
	// bearer token. UserFrom and PasswordFrom name where they came from (""
	// when not given).
	User, UserFrom         string
	Password, PasswordFrom string
	// HeaderTimeout bounds the wait for a node's answer once the request is
	// sent (default 30s).
	HeaderTimeout time.Duration
	// Notes receives a line for each address passed over and each redirect
	// followed (nil: io.Discard).
	Notes io.Writer
}

// maxRedirects bounds how often a follower may send a request on.
const maxRedirects = 5

// Client sends requests to the first node of a Config that answers.
type Client struct {
	cfg   Config
	hc    *http.Client
	bases []*url.URL
	notes io.Writer
	// first is the address Do starts from: the last one that answered, so
	// that a tool making several calls (snapshot save asks for the shards,
	// then the backup) passes a dead node over, and says so, once.
	first atomic.Int32
}

// New checks cfg and loads its certificates.
func New(cfg Config) (*Client, error) {
	if len(cfg.Addrs) == 0 {
		cfg.Addrs = DefaultAddrs
	}
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = 30 * time.Second
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = cfg.HeaderTimeout
	// An upload waits for the node's word first, so that a refusal or a
	// redirect costs nothing of the body.
	tr.ExpectContinueTimeout = 10 * time.Second
	tr.TLSHandshakeTimeout = 5 * time.Second
	scheme := "http"
	if cfg.CAFile != "" || cfg.CertFile != "" {
		tc, err := certs.ClientConfig(cfg.CAFile, cfg.CertFile, cfg.KeyFile)
		switch {
		case err != nil && cfg.CAFile != "":
			return nil, fmt.Errorf("%s %s: %w", cfg.CAFrom, cfg.CAFile, err)
		case err != nil:
			return nil, fmt.Errorf("--cert/--key: %w", err)
		}
		tr.TLSClientConfig, scheme = tc, "https"
	}
	c := &Client{cfg: cfg, notes: cfg.Notes}
	if c.notes == nil {
		c.notes = io.Discard
	}
	for _, a := range cfg.Addrs {
		raw := a
		if !strings.Contains(raw, "://") {
			raw = scheme + "://" + raw
		}
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("%s: %q is not HOST:PORT", c.addrFlag(), a)
		}
		c.bases = append(c.bases, u)
	}
	c.hc = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // send follows them itself
	}}
	return c, nil
}

// Hosts are the addresses the client tries, in order.
func (c *Client) Hosts() []string {
	out := make([]string, len(c.bases))
	for i, b := range c.bases {
		out[i] = b.Host
	}
	return out
}

// Defaults reports whether the client tries the local defaults (no --addr,
// no ROOKERY_ADDR).
func (c *Client) Defaults() bool { return c.cfg.AddrFrom == "" }

// Do sends method path (with its query) to the nodes in turn, following a
// follower's redirect to the leader, and returns the first 200 answer. A node
// that does not answer is passed over for the next, unless the request may
// have reached it and is not a GET; an answer other than 200 ends the call
// with that node's error. body, if set, gives the request body afresh for
// each attempt. Every error is an *Error, or ErrNoNode joining them.
func (c *Client) Do(ctx context.Context, method, path string, body func() (io.Reader, int64)) (*http.Response, error) {
	var errs []*Error
	first := int(c.first.Load())
	for k := range c.bases {
		i := (first + k) % len(c.bases)
		resp, err := c.DoAt(ctx, i, method, path, body)
		if err == nil {
			c.first.Store(int32(i))
			return resp, nil
		}
		var e *Error
		if errors.As(err, &e) && e.Answered() {
			c.first.Store(int32(i)) // an answer, if not a 200: the node is up
		}
		if !errors.As(err, &e) || e.Answered() || (e.Sent && method != http.MethodGet) || ctx.Err() != nil {
			return nil, err
		}
		errs = append(errs, e)
		if k+1 < len(c.bases) {
			fmt.Fprintf(c.notes, "%s: %s; trying %s\n", e.Addr, e.short(), c.bases[(i+1)%len(c.bases)].Host)
		}
	}
	return nil, c.noNode(errs)
}

// DoAt is Do against the i-th address only.
func (c *Client) DoAt(ctx context.Context, i int, method, path string, body func() (io.Reader, int64)) (*http.Response, error) {
	target := c.bases[i].ResolveReference(&url.URL{Path: path})
	if p, q, ok := strings.Cut(path, "?"); ok {
		target = c.bases[i].ResolveReference(&url.URL{Path: p, RawQuery: q})
	}
	for hop := 0; ; hop++ {
		resp, err := c.send(ctx, method, target, body)
		if err != nil {
			if e := (*Error)(nil); hop > 0 && errors.As(err, &e) && !e.Answered() {
				e.Hint = "the leader's address came in a redirect; if the nodes advertise addresses this host cannot use, give the leader's address with " + c.addrFlag()
			}
			return nil, err
		}
		if resp.StatusCode != http.StatusTemporaryRedirect {
			return resp, nil
		}
		resp.Body.Close()
		next, err := target.Parse(resp.Header.Get("Location"))
		switch {
		case err != nil || next.Host == "":
			return nil, &Error{Addr: target.Host, Kind: KindAnswer, Status: resp.StatusCode,
				Msg: fmt.Sprintf("a redirect without a usable address: %q", resp.Header.Get("Location"))}
		case hop == maxRedirects:
			return nil, &Error{Addr: next.Host, Kind: KindAnswer, Status: resp.StatusCode,
				Msg: fmt.Sprintf("still not the leader after %d redirects; is the cluster electing one?", hop)}
		case target.Scheme == "https" && next.Scheme != "https":
			return nil, &Error{Addr: target.Host, Kind: KindAnswer, Status: resp.StatusCode,
				Msg: fmt.Sprintf("redirected to %s, which is not https; refusing to send credentials in plain text", next)}
		}
		fmt.Fprintf(c.notes, "%s is not the leader; going on to %s\n", target.Host, next.Host)
		target = next
	}
}

// send makes one request and classifies what went wrong; a 200 or 307 comes
// back as a response.
func (c *Client) send(ctx context.Context, method string, target *url.URL, body func() (io.Reader, int64)) (*http.Response, error) {
	var rd io.Reader
	var size int64
	if body != nil {
		rd, size = body()
	}
	sent := false
	trace := &httptrace.ClientTrace{WroteHeaders: func() { sent = true }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), method, target.String(), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.ContentLength = size
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set("Expect", "100-continue")
	}
	switch {
	case c.cfg.User != "":
		req.SetBasicAuth(c.cfg.User, c.cfg.Password)
	case c.cfg.Password != "":
		req.Header.Set("Authorization", "Bearer "+c.cfg.Password)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		e := c.classify(target.Host, err)
		e.Sent = sent
		if e.Kind == KindUnreachable && target.Scheme == "http" && speaksRESP(ctx, target.Host) {
			// A RESP port answers a request line with an error of its own,
			// which the HTTP client reads as a broken response.
			e.Kind, e.Msg, e.Sent = KindRESP, "this port speaks RESP (a node's --resp-addr), not HTTP", false
			e.Hint = "give the nodes' HTTP addresses (their --http-addr) with " + c.addrFlag()
		}
		return nil, e
	}
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusTemporaryRedirect {
		return resp, nil
	}
	return nil, c.answerError(ctx, target, resp)
}

// answerError turns an answer other than 200 into an Error: a 400 from a
// port that speaks TLS is an https port spoken to in plain HTTP, a 401 asks
// for credentials.
func (c *Client) answerError(ctx context.Context, target *url.URL, resp *http.Response) *Error {
	msg := errorMessage(resp)
	e := &Error{Addr: target.Host, Kind: KindAnswer, Status: resp.StatusCode, Msg: msg, Sent: true}
	switch {
	case resp.StatusCode == http.StatusBadRequest && target.Scheme == "http" && speaksTLS(ctx, target.Host):
		e.Kind, e.Msg, e.Sent = KindWantTLS, "", false // the TLS layer refused it, the node saw nothing
		e.Hint = c.caHint(target.Host)
	case resp.StatusCode == http.StatusUnauthorized:
		e.Kind = KindAuth
		e.Hint = c.authHint()
	case resp.StatusCode == http.StatusForbidden:
		e.Kind = KindForbidden
		e.Hint = c.forbiddenHint()
	}
	return e
}

// errorMessage is the "error" of a node's JSON answer, or its start.
func errorMessage(resp *http.Response) string {
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error != "" {
		return e.Error
	}
	return strings.TrimSpace(string(raw))
}

// addrFlag names the way to give addresses.
func (c *Client) addrFlag() string {
	if c.cfg.AddrFlag != "" {
		return c.cfg.AddrFlag
	}
	return "--addr (or " + EnvAddr + ")"
}
