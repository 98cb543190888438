package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/rookerydb/rookery/internal/certs"
)

// tlsOn reports whether the node has its certificates (node-to-node mutual
// TLS, and the certificate --resp-tls and --http-tls serve).
func (o *options) tlsOn() bool { return o.tlsCA != "" }

// listeners names every address the node listens on, with its flag.
func (o *options) listeners() [][2]string {
	return [][2]string{{"--resp-addr", o.respAddr}, {"--http-addr", o.httpAddr},
		{"--raft-addr", o.raftAddr}, {"--gossip-addr", o.gossipAddr}}
}

// checkSecurity refuses configurations that would expose the cluster: a node
// is secure unless told otherwise (--insecure), as CockroachDB is.
func (o *options) checkSecurity() error {
	given := 0
	for _, f := range []string{o.tlsCA, o.tlsCert, o.tlsKey} {
		if f != "" {
			given++
		}
	}
	if given != 0 && given != 3 {
		return errors.New("--tls-ca, --tls-cert and --tls-key go together: give all three (make them with `rookery tls ca` and `rookery tls cert`)")
	}
	if (o.respTLS || o.httpTLS || o.tlsClientAuth) && !o.tlsOn() {
		return errors.New("--resp-tls, --http-tls and --tls-client-auth need the node's certificate: add --tls-ca, --tls-cert and --tls-key")
	}
	if o.tlsClientAuth && !o.respTLS && !o.httpTLS {
		return errors.New("--tls-client-auth asks clients of --resp-tls or --http-tls for certificates: add one of them")
	}
	if o.tlsOn() && o.gossipKey == "" {
		return errors.New("with TLS on, --gossip-key is required too, or anyone could gossip their way into the member list: " +
			"make one with `head -c 32 /dev/urandom | base64` and give every node the same")
	}
	if o.dev {
		for _, l := range o.listeners() {
			if !isLoopback(l[1]) {
				return fmt.Errorf("--dev listens on loopback only, but %s is %s: drop --dev and run a secured node (see README, Security)", l[0], l[1])
			}
		}
		return nil
	}
	if o.insecure {
		return nil
	}
	for _, l := range o.listeners() {
		if isLoopback(l[1]) {
			continue
		}
		if !o.tlsOn() {
			return fmt.Errorf("refusing to listen on %s (%s) in plain text: anyone who reaches it could join the cluster, "+
				"take it over or read every filter. Add --tls-ca, --tls-cert, --tls-key (make them with `rookery tls ca` and "+
				"`rookery tls cert`) and --gossip-key, or add --insecure if this network is trusted", l[1], l[0])
		}
		if face := o.openClientFace(); face != "" {
			return fmt.Errorf("refusing to listen on %s (%s) without authenticating clients: anyone who reaches %s "+
				"could read, write or flush every filter. Add --requirepass (a password for RESP AUTH and HTTP), or "+
				"--tls-client-auth (client certificates, with --resp-tls and --http-tls), or add --insecure if this "+
				"network is trusted", l[1], l[0], face)
		}
	}
	return nil
}

// openClientFace names a client face (RESP, HTTP) that would serve anyone off
// loopback: no password, and no client certificate asked at its TLS
// handshake. Empty when every face off loopback authenticates its clients.
func (o *options) openClientFace() string {
	if o.requirePass != "" {
		return ""
	}
	if !o.tlsClientAuth {
		return "the node"
	}
	if !o.respTLS && !isLoopback(o.respAddr) {
		return "RESP (" + o.respAddr + ", no --resp-tls)"
	}
	if !o.httpTLS && !isLoopback(o.httpAddr) {
		return "HTTP (" + o.httpAddr + ", no --http-tls)"
	}
	return ""
}

// warnExposure logs what is allowed but open: plain-text client faces beyond
// loopback, and a RESP face anyone can use.
func (o *options) warnExposure(log *slog.Logger) {
	if o.insecure && !o.dev {
		log.Warn("--insecure: Raft, gossip and client traffic may cross the network in plain text; run it on a trusted network only")
	}
	if !isLoopback(o.respAddr) {
		if !o.respTLS {
			log.Warn("RESP is plain text beyond loopback: passwords and items cross the network in clear (add --resp-tls)", "addr", o.respAddr)
		}
		if o.requirePass == "" && !(o.respTLS && o.tlsClientAuth) {
			log.Warn("RESP needs no credentials: anyone who reaches it can read and write every filter (add --requirepass)", "addr", o.respAddr)
		}
	}
	if !isLoopback(o.httpAddr) && !o.httpTLS && o.requirePass != "" {
		log.Warn("HTTP is plain text beyond loopback: its bearer password crosses the network in clear (add --http-tls)", "addr", o.httpAddr)
	}
}

// withTLS wraps the client listeners in TLS where --resp-tls and --http-tls
// say. RESP asks for a client certificate at the handshake with
// --tls-client-auth; HTTP only verifies one if given, because health probes
// carry none, and the HTTP server then takes a verified certificate as a
// credential on every other endpoint.
func (o *options) withTLS(src *certs.Source, resp, web net.Listener) (net.Listener, net.Listener) {
	if o.respTLS {
		auth := tls.NoClientCert
		if o.tlsClientAuth {
			auth = tls.RequireAndVerifyClientCert
		}
		resp = tls.NewListener(resp, src.ServerConfig(auth))
	}
	if o.httpTLS {
		auth := tls.NoClientCert
		if o.tlsClientAuth {
			auth = tls.VerifyClientCertIfGiven
		}
		web = tls.NewListener(web, src.ServerConfig(auth))
	}
	return resp, web
}

// isLoopback reports whether a listen address is reachable from this host
// only: a loopback IP, or a name that resolves to loopback IPs alone. An empty
// host (every interface) is not.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	host = strings.Trim(host, "[]")
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	if host == "" {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false
		}
	}
	return true
}
