package certs

import (
	"crypto/x509"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Kind is what a certificate of the cluster CA lets its holder be.
type Kind int

// The kinds of certificate. A node certificate names one node and opens every
// port of the cluster to it, as that node only; a client certificate opens
// RESP and HTTP (under --tls-client-auth) and nothing else. A legacy
// certificate, made before the two kinds existed, names no kind: nodes take it
// as the node its common name names, under the rules of cluster/peerauth.go,
// until it is re-issued.
const (
	KindLegacy Kind = iota
	KindNode
	KindClient
)

// String names the kind as logs and messages do.
func (k Kind) String() string {
	switch k {
	case KindNode:
		return "node"
	case KindClient:
		return "client"
	}
	return "legacy"
}

// The marks of a certificate's kind: a URI subject alternative name that
// carries the identity (rookery://node/ID, rookery://client/NAME), and the
// same word as the subject's organizational unit, for people reading it with
// `openssl x509 -text`. Identity is read from the URI alone.
const (
	uriScheme = "rookery"
	ouNode    = "node"
	ouClient  = "client"
)

// NodeURI is the URI a node certificate for node id carries.
func NodeURI(id string) *url.URL { return &url.URL{Scheme: uriScheme, Host: ouNode, Path: "/" + id} }

// ClientURI is the URI a client certificate for name carries.
func ClientURI(name string) *url.URL {
	return &url.URL{Scheme: uriScheme, Host: ouClient, Path: "/" + name}
}

// Identify reads what c lets its holder be, and the node id or client name it
// names. A certificate marked as a client in any way is a client, whatever
// else it says; one naming more than one node, or a name that is not a valid
// certificate name, is a client too (it is refused wherever only nodes are
// let in). A certificate with no mark at all is legacy, named by its common
// name.
func Identify(c *x509.Certificate) (Kind, string) {
	var nodes, clients []string
	for _, u := range c.URIs {
		if u.Scheme != uriScheme {
			continue
		}
		name := strings.TrimPrefix(u.Path, "/")
		switch u.Host {
		case ouNode:
			nodes = append(nodes, name)
		case ouClient:
			clients = append(clients, name)
		default:
			clients = append(clients, u.String()) // a mark we do not know: never a node
		}
	}
	isClientOU := slices.Contains(c.Subject.OrganizationalUnit, ouClient)
	switch {
	case len(clients) > 0 || isClientOU:
		if len(clients) == 1 {
			return KindClient, clients[0]
		}
		return KindClient, c.Subject.CommonName
	case len(nodes) == 1 && CheckName(nodes[0]) == nil && nodeURIClean(c.URIs, nodes[0]):
		return KindNode, nodes[0]
	case len(nodes) > 0:
		return KindClient, c.Subject.CommonName
	case slices.Contains(c.Subject.OrganizationalUnit, ouNode):
		return KindClient, c.Subject.CommonName // marked as a node, naming none
	}
	return KindLegacy, c.Subject.CommonName
}

// nodeURIClean reports whether the node URI naming id is exactly NodeURI(id): no
// user, port, query or fragment that a reader might take for part of the id.
func nodeURIClean(uris []*url.URL, id string) bool {
	want := NodeURI(id).String()
	for _, u := range uris {
		if u.Scheme == uriScheme && u.Host == ouNode {
			return u.String() == want
		}
	}
	return false
}

// IssueLegacy makes a certificate as Rookery made them before node and client
// certificates: one kind for both uses, naming its holder in the common name
// only. Tests of clusters still holding such certificates use it.
func IssueLegacy(ca Pair, name string, hosts []string, validFor time.Duration) (Pair, error) {
	return issue(ca, KindLegacy, name, hosts, validFor)
}

// checkNodeCert refuses a certificate node id cannot serve with: a client
// certificate, or another node's. With id empty it checks nothing.
func checkNodeCert(c *x509.Certificate, id string) error {
	if id == "" {
		return nil
	}
	switch kind, name := Identify(c); kind {
	case KindClient:
		return fmt.Errorf("%w: --tls-cert %q is a client certificate; node %s needs a node certificate "+
			"(rookery tls cert --ca DIR --name %s --out DIR)", ErrWrongKind, name, id, id)
	case KindNode:
		if name != id {
			return fmt.Errorf("%w: --tls-cert names node %q, not %q (rookery tls cert --ca DIR --name %s --out DIR)",
				ErrWrongKind, name, id, id)
		}
	default:
		// Peers take a certificate of the old kind as the node its common name
		// names, and hear no other.
		if name != id {
			return fmt.Errorf("%w: --tls-cert is a certificate of the old kind named %q, and peers now take it as node %q only, "+
				"not %q; re-issue it as node %s's certificate: rookery tls cert --ca DIR --name %s --out DIR --force",
				ErrWrongKind, name, name, id, id, id)
		}
	}
	return nil
}
