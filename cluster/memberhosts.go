package cluster

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// The Raft port keeps pending slots for the addresses of known members
// (connlimit.go). Which addresses those are is worked out here, off the accept
// path: the accept loop only looks a connection's source up in a set, and
// never waits for a name to resolve (a stranger could make it wait).
//
// A known member is a server of the latest configuration of any group this
// node holds, a peer of its members file (what it knew when it last ran: so a
// node that restarts knows its peers before its Raft or gossip is up), or a
// member gossip knows and that has not left for good. Its Raft and gossip
// hosts count; a host name counts as the addresses it resolves to.

// Timing of the set of members' addresses: it is worked out again every
// memberHostsEvery; a host name is looked up again after resolveEvery, each
// lookup bounded by resolveTimeout. A name that fails to resolve keeps the
// addresses it last had: a member's old address is likelier to be it than a
// stranger's.
const (
	memberHostsEvery = time.Second
	resolveEvery     = 30 * time.Second
	resolveTimeout   = time.Second
)

// hostSet is a set of canonical host addresses (hostOf).
type hostSet map[string]struct{}

// resolvedName is a host name's last answer.
type resolvedName struct {
	hosts []string
	at    time.Time
}

// memberHosts turns members' addresses into the set the mux reads.
type memberHosts struct {
	mu    sync.Mutex
	names map[string]resolvedName
	// lookup resolves a host name (net.DefaultResolver's; tests replace it).
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

func newMemberHosts() *memberHosts {
	return &memberHosts{names: map[string]resolvedName{}, lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}}
}

// hosts is the set of the hosts of addrs (host:port, or a bare host). With
// resolve, a host name not looked up within resolveEvery of now is looked up
// (the caller may wait up to resolveTimeout a name); without, names count
// with what they last resolved to, or not at all.
func (h *memberHosts) hosts(addrs []string, resolve bool, now time.Time) hostSet {
	set := hostSet{}
	for _, a := range addrs {
		host := a
		if x, _, err := net.SplitHostPort(a); err == nil {
			host = x
		}
		if host == "" {
			continue
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			set[canonicalIP(ip)] = struct{}{}
			continue
		}
		for _, ip := range h.resolved(host, resolve, now) {
			set[ip] = struct{}{}
		}
	}
	return set
}

// resolved is what name resolves to, looked up again if it is due and
// resolve is set.
func (h *memberHosts) resolved(name string, resolve bool, now time.Time) []string {
	h.mu.Lock()
	last, ok := h.names[name]
	h.mu.Unlock()
	if !resolve || ok && now.Sub(last.at) < resolveEvery {
		return last.hosts
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	ips, err := h.lookup(ctx, name)
	cancel()
	next := resolvedName{hosts: last.hosts, at: now}
	if err == nil && len(ips) > 0 {
		next.hosts = make([]string, 0, len(ips))
		for _, ip := range ips {
			next.hosts = append(next.hosts, canonicalIP(ip))
		}
	}
	h.mu.Lock()
	h.names[name] = next
	h.mu.Unlock()
	return next.hosts
}

// memberAddrs lists the Raft and gossip addresses of every known member (see
// above), this node's own among them.
func (n *Node) memberAddrs() []string {
	var out []string
	for _, g := range n.openGroups() {
		if g.raft == nil {
			continue
		}
		servers, err := latestServers(g.raft)
		if err != nil {
			continue
		}
		for _, s := range servers {
			out = append(out, string(s.Address))
		}
	}
	for _, p := range n.heal.book.get().Peers {
		out = append(out, p.Raft, p.Gossip)
	}
	for _, m := range n.members() {
		if m.state == memberlist.StateLeft {
			continue
		}
		out = append(out, m.Raft, m.gossip)
	}
	return out
}

// refreshMemberHosts gives the mux the members' addresses as they are now
// (resolve: as memberHosts.hosts).
func (n *Node) refreshMemberHosts(resolve bool) {
	n.mux.setMembers(n.memberHostSet.hosts(n.memberAddrs(), resolve, time.Now()))
}

// memberHostsLoop keeps the mux's set of members' addresses current.
func (n *Node) memberHostsLoop() {
	defer n.wg.Done()
	t := time.NewTicker(memberHostsEvery)
	defer t.Stop()
	for {
		n.refreshMemberHosts(true)
		select {
		case <-t.C:
		case <-n.stop:
			return
		}
	}
}
