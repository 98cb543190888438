package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/internal/certs"
)

// Who a peer on the Raft port may be (with peer TLS). The handshake proves a
// certificate of the cluster CA; the certificate then says who its holder is
// (certs.Identify):
//
//   - a node certificate: the node it names, and no other. Raft requests
//     (raftguard.go) and node-to-node requests that carry a sender id are
//     refused when the id is another node's;
//   - a client certificate: nobody. It opens RESP and HTTP, never this port;
//   - a legacy certificate (made before the two kinds): the node its common
//     name names, while the cluster moves to node certificates. A node whose
//     own certificate is legacy takes any legacy peer, as before; a node that
//     already holds a node certificate takes a legacy peer only as a server of
//     its latest Raft configuration (or, before Raft has started, of its
//     members file). Every legacy peer taken is logged, once a minute per
//     name, with the way out.
//
// The same rules apply to the node a connection is dialled to, and it must
// be the node the dialler meant (dialled): every dial names the id it is for
// (Raft streams of every group through dialname.go, node-to-node requests
// through Node.peer), and a node that answers with the certificate of another
// is refused before a byte of the stream is written.

// Errors of peer authentication.
var (
	errClientCert = errors.New("a client certificate: it opens RESP and HTTP, not the raft port")
	errNoCert     = errors.New("no certificate")
	// errWrongPeer: a node this node dialled answered with the certificate
	// of another node.
	errWrongPeer = errors.New("the certificate names another node than the one dialled")
)

// peerAuth applies the rules above.
type peerAuth struct {
	// local is the node's own certificate now (it changes at a reload); nil
	// counts as a node certificate.
	local func() *x509.Certificate
	// isServer reports whether id is a server of the latest configuration.
	isServer func(id string) bool
	// warnLegacy is told of each legacy peer taken.
	warnLegacy func(name string)
}

// identify returns the node id a peer with this TLS state may speak as.
func (a *peerAuth) identify(cs tls.ConnectionState) (string, error) {
	if len(cs.PeerCertificates) == 0 {
		return "", errNoCert
	}
	kind, name := certs.Identify(cs.PeerCertificates[0])
	switch kind {
	case certs.KindNode:
		return name, nil
	case certs.KindClient:
		return "", fmt.Errorf("%w (%q)", errClientCert, name)
	}
	if certs.CheckName(name) != nil {
		return "", fmt.Errorf("a certificate of the old kind naming %q, which cannot be a node id", name)
	}
	if !a.localLegacy() && (a.isServer == nil || !a.isServer(name)) {
		return "", fmt.Errorf("a certificate of the old kind naming %q, which is no server of the cluster "+
			"(a new member needs a node certificate: rookery tls cert --ca DIR --name %s --out DIR)", name, name)
	}
	if a.warnLegacy != nil {
		a.warnLegacy(name)
	}
	return name, nil
}

// dialled checks the TLS state of a connection this node dialled to node
// want: the peer must be want by identify's rules. It returns the node the
// peer is ("" if none).
func (a *peerAuth) dialled(cs tls.ConnectionState, want string) (string, error) {
	got, err := a.identify(cs)
	if err != nil {
		return "", err
	}
	if want == "" || got != want {
		return got, fmt.Errorf("%w: dialled %q, it names %q", errWrongPeer, want, got)
	}
	return got, nil
}

// localLegacy reports whether the node's own certificate is legacy.
func (a *peerAuth) localLegacy() bool {
	if a.local == nil {
		return false
	}
	c := a.local()
	if c == nil {
		return false
	}
	kind, _ := certs.Identify(c)
	return kind == certs.KindLegacy
}

// newPeerAuth is the node's peerAuth.
func (n *Node) newPeerAuth() *peerAuth {
	a := &peerAuth{isServer: n.isConfigServer, warnLegacy: func(name string) {
		n.warnEvery("legacy-peer:"+name, "took a peer's certificate of the old kind as node "+name+
			"; re-issue it as a node certificate: rookery tls cert --ca DIR --name "+name+" --out DIR --force "+
			"(see README, Security)", "peer", name)
	}}
	if n.cfg.PeerTLS != nil {
		a.local = n.cfg.PeerTLS.Local
	}
	return a
}

// isConfigServer reports whether id is a server (voter or not) of the latest
// Raft configuration; before Raft has started, of the members file.
func (n *Node) isConfigServer(id string) bool {
	select {
	case <-n.meta.raftUp:
	default:
		return n.heal.book.knows(id)
	}
	f := n.meta.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == raft.ServerID(id) {
			return true
		}
	}
	return false
}

// knows reports whether the members file lists id.
func (b *peerBook) knows(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.cur.Peers {
		if p.ID == id {
			return true
		}
	}
	return false
}

// refuseRPC closes a node-to-node connection whose peer spoke as another node.
func (n *Node) refuseRPC(c net.Conn, peer, what string) {
	c.Close()
	if n.metrics.peerRefused != nil {
		n.metrics.peerRefused.Inc()
	}
	n.warnEvery("rpc-refused:"+peer, "refused a node-to-node request: the peer's certificate names another node",
		"peer", peer, "request", what)
}

// misdialed counts and logs (once a minute per address and pair of names) a
// connection this node dialled and closed after the handshake: the node at
// addr holds the certificate of got, or of no node, not of want. A stale
// address (a member moved, another took its old port) looks the same as a
// node answering in another's place; either way nothing is sent to it.
func (n *Node) misdialed(stream, addr, want, got string, err error) {
	if n.metrics.dialRefused != nil {
		n.metrics.dialRefused.WithLabelValues(stream).Inc()
	}
	n.warnEvery("misdial:"+addr+":"+want+":"+got, "refused a peer this node dialled: its certificate is not the node's it meant to reach",
		"addr", addr, "expected", want, "presented", got, "stream", stream, "err", err)
}
