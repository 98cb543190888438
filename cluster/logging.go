package cluster

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// slogWriter turns the line-oriented output of raft's hclog and memberlist's
// log.Logger into slog records, keeping the level they printed.
type slogWriter struct {
	log *slog.Logger
	// peers, when set, folds raft's repeated failures to reach a peer
	// (peerLog).
	peers *peerLog
}

func (w *slogWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		s := strings.TrimSpace(string(line))
		if s == "" {
			continue
		}
		lvl := slog.LevelInfo
		switch {
		case strings.HasPrefix(s, "[TRACE]"), strings.HasPrefix(s, "[DEBUG]"):
			lvl = slog.LevelDebug
		case strings.HasPrefix(s, "[WARN]"):
			lvl = slog.LevelWarn
		case strings.HasPrefix(s, "[ERROR]"), strings.HasPrefix(s, "[ERR]"):
			lvl = slog.LevelError
		}
		if i := strings.Index(s, "]"); i >= 0 && strings.HasPrefix(s, "[") {
			s = strings.TrimSpace(s[i+1:])
		}
		if lvl > slog.LevelDebug && ownClose(s) {
			// This node closed the connection itself (a group closing, the
			// node stopping): nothing an operator need look at.
			lvl = slog.LevelDebug
		}
		if lvl > slog.LevelInfo && steppedDown(s) {
			// A leader learning of a newer term is how every handover
			// ends (a transfer, a stop): raft then logs that it follows.
			lvl = slog.LevelInfo
		}
		if w.peers != nil {
			if peer, ok := peerFailure(s); ok {
				w.peers.failed(w.log, lvl, s, peer)
				continue
			}
		}
		w.log.Log(context.Background(), lvl, s)
	}
	return len(p), nil
}

var _ io.Writer = (*slogWriter)(nil)

// ownClose reports whether a library's log line is about a connection or
// transport this node closed itself.
func ownClose(s string) bool {
	return strings.Contains(s, "use of closed network connection") || strings.Contains(s, "transport shutdown")
}

// steppedDown reports whether a raft line says this leader met a newer
// term: raft logs it at ERROR, yet a leadership transfer (a drain, a clean
// stop) ends that way whenever the old leader's next append reaches the
// new candidate before the vote does.
func steppedDown(s string) bool {
	return strings.Contains(s, "peer has newer term, stopping replication")
}

// newHCLogger adapts hashicorp's logger onto slog with a component attribute.
func newHCLogger(component string, l *slog.Logger) hclog.Logger {
	return newHCLoggerTo(component, &slogWriter{log: l.With("component", component)}, l)
}

// newRaftLogger is a group's raft logger onto l (its lines name the group
// as the tools do: raftLog), with repeated failures to reach a peer folded
// (peers).
func newRaftLogger(l *slog.Logger, peers *peerLog) hclog.Logger {
	return newHCLoggerTo("raft", &slogWriter{log: l, peers: peers}, l)
}

func newHCLoggerTo(component string, out *slogWriter, l *slog.Logger) hclog.Logger {
	lvl := hclog.Info
	if l.Enabled(context.Background(), slog.LevelDebug) {
		lvl = hclog.Debug
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:        component,
		Level:       lvl,
		Output:      out,
		DisableTime: true,
	})
}

// A leader's raft logs each failed heartbeat to a follower it cannot reach
// at ERROR, every backoff (about 5 a second, per group): 4,753 lines in 25
// minutes of failover drills (issue 29), which buried everything else. The
// first failure to a peer stays an ERROR; the ones after it are DEBUG, with
// a WARN once a minute that counts them while it lasts, and an INFO with
// the count once raft reaches the peer again (its ResumedHeartbeat
// observation, heal.go). Failed appends to the peer are folded alike.

// peerLogEvery is how often a peer that still fails is mentioned.
const peerLogEvery = time.Minute

// peerFailPrefixes start raft's lines about a peer it could not reach.
var peerFailPrefixes = []string{"raft: failed to heartbeat to:", "raft: failed to appendEntries to:",
	"raft: failed to pipeline appendEntries:", "raft: failed to make requestVote RPC:"}

// peerLog is the node's record of the peers raft fails to reach, over all
// its groups: a peer's failures count whichever group failed, and the first
// group to reach it again ends them (when a peer comes back, every group
// reaches it within a heartbeat).
type peerLog struct {
	now func() time.Time
	// stopping reports whether the peer at a Raft address said it is
	// stopping (a clean stop, its report): its first failure is then INFO,
	// since a clean stop is no error (nil: never).
	stopping func(addr string) bool
	mu       sync.Mutex
	m        map[string]*peerFailures // by peer address
}

type peerFailures struct {
	n      int       // failures logged since the first
	since  time.Time // the first
	noted  time.Time // the last line above DEBUG
	hidden int       // failures since then
}

func newPeerLog(stopping func(addr string) bool) *peerLog {
	return &peerLog{now: time.Now, stopping: stopping, m: map[string]*peerFailures{}}
}

// peerFailure reports whether s is a line about failing to reach a peer, and
// the peer's address.
func peerFailure(s string) (addr string, ok bool) {
	for _, p := range peerFailPrefixes {
		if strings.HasPrefix(s, p) {
			return peerAddr(s[len(p):])
		}
	}
	return "", false
}

// peerAddr finds the peer's address in hclog's key=value text: peer=ADDR, or
// peer="{Voter id ADDR}" (a raft.Server), or target= the same.
func peerAddr(kv string) (string, bool) {
	key := "peer="
	i := strings.Index(kv, key)
	if i < 0 {
		key = "target="
		if i = strings.Index(kv, key); i < 0 {
			return "", false
		}
	}
	v := kv[i+len(key):]
	if strings.HasPrefix(v, `"`) {
		q, err := strconv.QuotedPrefix(v)
		if err != nil {
			return "", false
		}
		v, _ = strconv.Unquote(q)
		v = strings.TrimSuffix(strings.TrimPrefix(v, "{"), "}")
		f := strings.Fields(v)
		if len(f) == 0 {
			return "", false
		}
		return f[len(f)-1], true
	}
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v, v != ""
}

// failed logs raft's line s about failing to reach peer: as raft gave it
// the first time, then DEBUG, with a WARN a minute counting them.
func (p *peerLog) failed(l *slog.Logger, lvl slog.Level, s, peer string) {
	now := p.now()
	p.mu.Lock()
	f := p.m[peer]
	first := f == nil
	if first {
		f = &peerFailures{since: now, noted: now}
		p.m[peer] = f
	}
	f.n++
	note := !first && now.Sub(f.noted) >= peerLogEvery
	hidden := f.hidden
	if note || first {
		f.noted, f.hidden = now, 0
	} else {
		f.hidden++
	}
	n, since := f.n, f.since
	p.mu.Unlock()
	if first && lvl > slog.LevelInfo && p.stopping != nil && p.stopping(peer) {
		lvl = slog.LevelInfo // it told us it is stopping: expected, and no error
	}
	switch {
	case first:
		l.Log(context.Background(), lvl, s, "peer", peer, "repeats", "logged at DEBUG until the peer is reached again, with a WARN a minute")
	case note:
		l.Warn("still failing to reach a peer", "peer", peer, "failures", n, "since", since.UTC().Format(time.RFC3339),
			"not_logged", hidden, "last", s)
	default:
		l.Debug(s)
	}
}

// resumed is told that raft reaches peer again: the failures end, and one
// line counts them.
func (p *peerLog) resumed(l *slog.Logger, peer string) {
	p.mu.Lock()
	f := p.m[peer]
	delete(p.m, peer)
	p.mu.Unlock()
	if f != nil {
		l.Info("reached a peer again", "peer", peer, "failures", f.n, "for", p.now().Sub(f.since).Round(time.Millisecond).String())
	}
}

// shardAttr names group gid in logs as the tools name it: shard=S for the
// group of shard S (group S+1), shard=map for group 0 of a sharded cluster
// (the map group, or a node started with --shards), and shard=0 for the one
// group of a cluster without shards. It is resolved when a line is logged,
// since a node learns whether its cluster is sharded after group 0 starts.
func (n *Node) shardAttr(gid int) slog.Attr {
	return slog.Any("shard", groupName{n: n, gid: gid})
}

// groupName is a group's name in logs (shardAttr).
type groupName struct {
	n   *Node
	gid int
}

// LogValue implements slog.LogValuer.
func (g groupName) LogValue() slog.Value {
	switch {
	case g.gid > 0:
		return slog.IntValue(g.gid - 1)
	case g.n != nil && (g.n.clusterMap() != nil || g.n.cfg.Shards > 0):
		// Started with --shards: group 0 holds (or is about to hold) the
		// map alone. (A cluster of one group that holds filters is never
		// sharded; a node of it restarted with --shards says so.)
		return slog.StringValue("map")
	}
	return slog.IntValue(0)
}

// peerStopping reports whether the node at Raft address addr said in its
// last report that it is stopping or leaving (peerLog.stopping).
func (n *Node) peerStopping(addr string) bool {
	for _, m := range n.members() {
		if m.Raft != addr {
			continue
		}
		if rc, ok := n.reports.get(m.ID); ok {
			return rc.r.Stopping || rc.r.Leaving
		}
	}
	return false
}
