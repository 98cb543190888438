package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"sort"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// meta is what each member gossips about itself.
type meta struct {
	ID   string `json:"id"`
	Raft string `json:"raft"`
	RESP string `json:"resp"`
	HTTP string `json:"http"`
}

type delegate struct{ meta []byte }

func (d delegate) NodeMeta(limit int) []byte {
	if len(d.meta) > limit {
		return nil
	}
	return d.meta
}
func (delegate) NotifyMsg([]byte)                           {}
func (delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (delegate) LocalState(join bool) []byte                { return nil }
func (delegate) MergeRemoteState(buf []byte, join bool)     {}

type events struct{ n *Node }

func (e events) NotifyJoin(*memberlist.Node)   { e.n.membershipChanged() }
func (e events) NotifyLeave(*memberlist.Node)  { e.n.membershipChanged() }
func (e events) NotifyUpdate(*memberlist.Node) { e.n.membershipChanged() }

func (n *Node) membershipChanged() {
	select {
	case n.events <- struct{}{}:
	default:
	}
}

func (n *Node) startGossip() error {
	host, portStr, err := net.SplitHostPort(n.cfg.GossipAddr)
	if err != nil {
		return fmt.Errorf("gossip address %s: %w", n.cfg.GossipAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("gossip address %s: %w", n.cfg.GossipAddr, err)
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = n.cfg.ID
	mc.BindAddr = resolveHost(host)
	mc.BindPort = port
	if n.cfg.GossipAdvertise != "" {
		ah, ap, err := net.SplitHostPort(n.cfg.GossipAdvertise)
		if err != nil {
			return fmt.Errorf("gossip advertise address %s: %w", n.cfg.GossipAdvertise, err)
		}
		mc.AdvertiseAddr = resolveHost(ah)
		mc.AdvertisePort, _ = strconv.Atoi(ap)
	}
	// A LAN of a few nodes: detect failures in about a second.
	mc.ProbeInterval = 500 * time.Millisecond
	mc.ProbeTimeout = 250 * time.Millisecond
	mc.GossipInterval = 100 * time.Millisecond
	mc.SuspicionMult = 2
	mc.SecretKey = n.cfg.GossipKey
	mc.Logger = log.New(&slogWriter{log: n.cfg.Logger.With("component", "gossip")}, "", 0)
	b, _ := json.Marshal(meta{ID: n.cfg.ID, Raft: n.raftAdvertise, RESP: n.cfg.RESPAddr, HTTP: n.cfg.HTTPAddr})
	mc.Delegate = delegate{meta: b}
	mc.Events = events{n}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("start gossip on %s: %w", n.cfg.GossipAddr, err)
	}
	n.ml = ml
	return nil
}

// resolveHost turns a host name into an IP address for memberlist, which binds
// and advertises IPs only.
func resolveHost(h string) string {
	if h == "" {
		return "0.0.0.0"
	}
	if net.ParseIP(h) != nil {
		return h
	}
	if addrs, err := net.LookupHost(h); err == nil && len(addrs) > 0 {
		return addrs[0]
	}
	return h
}

// joinLoop retries --join until some address answers.
func (n *Node) joinLoop() {
	defer n.wg.Done()
	for {
		k, err := n.ml.Join(n.cfg.Join)
		if k > 0 {
			n.log.Info("joined gossip", "contacted", k)
			return
		}
		n.log.Warn("join failed, retrying", "addrs", n.cfg.Join, "err", err)
		select {
		case <-time.After(time.Second):
		case <-n.stop:
			return
		}
	}
}

// member is a gossip member with its metadata parsed.
type member struct {
	meta
	state memberlist.NodeStateType
}

func (n *Node) members() []member {
	var out []member
	for _, m := range n.ml.Members() {
		var md meta
		if json.Unmarshal(m.Meta, &md) != nil || md.ID == "" {
			continue
		}
		out = append(out, member{meta: md, state: m.State})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// allMembers also lists members memberlist has declared dead or left.
func (n *Node) memberMeta(id string) (meta, bool) {
	for _, m := range n.ml.Members() {
		var md meta
		if json.Unmarshal(m.Meta, &md) == nil && md.ID == id {
			return md, true
		}
	}
	if id == n.cfg.ID {
		return meta{ID: id, Raft: n.raftAdvertise, RESP: n.cfg.RESPAddr, HTTP: n.cfg.HTTPAddr}, true
	}
	return meta{}, false
}

// membershipLoop bootstraps when the expected members are known, and on the
// leader reconciles the Raft configuration with gossip, on every event and once a
// second.
func (n *Node) membershipLoop() {
	defer n.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		n.maybeBootstrap()
		if n.IsLeader() {
			n.reconcile()
		}
		select {
		case <-n.events:
		case <-tick.C:
		case <-n.stop:
			return
		}
	}
}

// peerStatusOf asks a member about its Raft state.
func (n *Node) peerStatusOf(ctx context.Context, raftAddr string) (peerStatus, error) {
	var ps peerStatus
	body, err := n.peer(raftAddr).call(ctx, opStatus, nil)
	if err != nil {
		return ps, err
	}
	err = json.Unmarshal(body, &ps)
	return ps, err
}
