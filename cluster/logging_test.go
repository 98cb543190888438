package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// logRecord is one line a capture took: its level, message and every
// attribute (those of With included) as key=value.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (r logRecord) String() string { return fmt.Sprintf("%v %q %v", r.level, r.msg, r.attrs) }

// logCapture is a slog.Handler that keeps every record, at every level.
type logCapture struct {
	mu    *sync.Mutex
	recs  *[]logRecord
	attrs []slog.Attr
}

func newLogCapture() *logCapture { return &logCapture{mu: &sync.Mutex{}, recs: &[]logRecord{}} }

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCapture) WithGroup(string) slog.Handler            { return c }
func (c *logCapture) WithAttrs(as []slog.Attr) slog.Handler {
	return &logCapture{mu: c.mu, recs: c.recs, attrs: append(append([]slog.Attr(nil), c.attrs...), as...)}
}
func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range c.attrs {
		rec.attrs[a.Key] = a.Value.Resolve().String()
	}
	r.Attrs(func(a slog.Attr) bool { rec.attrs[a.Key] = a.Value.Resolve().String(); return true })
	c.mu.Lock()
	*c.recs = append(*c.recs, rec)
	c.mu.Unlock()
	return nil
}

// records lists what was logged at level or above.
func (c *logCapture) records(level slog.Level) []logRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []logRecord
	for _, r := range *c.recs {
		if r.level >= level {
			out = append(out, r)
		}
	}
	return out
}

// TestPeerLogFoldsRepeatedFailures: raft's failed heartbeats and appends to
// a peer it cannot reach are one ERROR, then DEBUG, with a WARN a minute
// that counts them; once the peer is reached again one INFO says how many
// failed, and the next failure is an ERROR again. Another peer has its own.
func TestPeerLogFoldsRepeatedFailures(t *testing.T) {
	capture := newLogCapture()
	now := time.Unix(1_000_000, 0)
	pl := newPeerLog(func(addr string) bool { return addr == "10.0.0.5:7481" })
	pl.now = func() time.Time { return now }
	l := slog.New(capture).With("component", "raft", "shard", 2)
	hl := newRaftLogger(l, pl)
	refused := errors.New("dial tcp 10.0.0.2:7481: connect: connection refused")
	fail := func(n int) {
		for range n {
			hl.Error("failed to heartbeat to", "peer", "10.0.0.2:7481", "backoff time", 10*time.Millisecond, "error", refused)
			hl.Error("failed to appendEntries to", "peer", "{Voter n2 10.0.0.2:7481}", "error", refused)
			now = now.Add(100 * time.Millisecond)
		}
	}
	fail(300) // 30 s
	errs := capture.records(slog.LevelError)
	if len(errs) != 1 || !strings.HasPrefix(errs[0].msg, "raft: failed to heartbeat to: peer=10.0.0.2:7481") ||
		errs[0].attrs["peer"] != "10.0.0.2:7481" || errs[0].attrs["shard"] != "2" {
		t.Fatalf("600 failures in 30 s logged %d ERROR lines, want the first alone: %v", len(errs), errs)
	}
	if n := len(capture.records(slog.LevelDebug)); n != 600 {
		t.Fatalf("%d lines in all, want every failure at DEBUG at least", n)
	}
	fail(400) // 70 s in all: one WARN at the minute
	warns := capture.records(slog.LevelWarn)
	if len(warns) != 2 || warns[1].msg != "still failing to reach a peer" || warns[1].attrs["failures"] != "1201" || warns[1].attrs["peer"] != "10.0.0.2:7481" {
		t.Fatalf("after 70 s: %v", warns)
	}
	hl.Error("failed to heartbeat to", "peer", "10.0.0.3:7481", "backoff time", 10*time.Millisecond, "error", refused)
	if errs := capture.records(slog.LevelError); len(errs) != 2 || errs[1].attrs["peer"] != "10.0.0.3:7481" {
		t.Fatalf("another peer's first failure: %v", errs)
	}
	pl.resumed(l, "10.0.0.2:7481")
	infos := capture.records(slog.LevelInfo)
	last := infos[len(infos)-1]
	if last.msg != "reached a peer again" || last.attrs["failures"] != "1400" || last.attrs["for"] != "1m10s" {
		t.Fatalf("resumed: %v", last)
	}
	fail(1)
	if errs := capture.records(slog.LevelError); len(errs) != 3 || errs[2].attrs["peer"] != "10.0.0.2:7481" {
		t.Fatalf("the first failure after the peer came back: %v", errs)
	}
	// A peer that said it is stopping: its first failure is INFO.
	hl.Error("failed to heartbeat to", "peer", "10.0.0.5:7481", "error", refused)
	hl.Error("failed to make requestVote RPC", "target", "{Voter n5 10.0.0.5:7481}", "term", 3, "error", refused)
	if errs := capture.records(slog.LevelError); len(errs) != 3 {
		t.Fatalf("a stopping peer's failure logged as an error: %v", errs[len(errs)-1])
	}
	if infos := capture.records(slog.LevelInfo); infos[len(infos)-1].attrs["peer"] != "10.0.0.5:7481" || infos[len(infos)-1].level != slog.LevelInfo {
		t.Fatalf("a stopping peer's first failure: %v", infos[len(infos)-1])
	}
	// A connection this node closed itself stays DEBUG, first time included.
	hl.Error("failed to heartbeat to", "peer", "10.0.0.4:7481", "error", "transport shutdown")
	if errs := capture.records(slog.LevelError); len(errs) != 3 {
		t.Fatalf("transport shutdown logged as an error: %v", errs[len(errs)-1])
	}
	// A leader meeting a newer term (how a handover ends) is INFO.
	hl.Error("peer has newer term, stopping replication", "peer", "{Voter n2 10.0.0.2:7481}")
	if errs := capture.records(slog.LevelError); len(errs) != 3 {
		t.Fatalf("stepping down logged as an error: %v", errs[len(errs)-1])
	}
	if infos := capture.records(slog.LevelInfo); !strings.HasPrefix(infos[len(infos)-1].msg, "raft: peer has newer term, stopping replication") {
		t.Fatalf("stepping down: %v", infos[len(infos)-1])
	}
}

// TestShardAttrNamesGroupsAsTheToolsDo: group g > 0 logs shard=g-1, group 0
// shard=map on a sharded node (or one started with --shards) and shard=0 on
// a cluster of one group, as `rookery shards` numbers them.
func TestShardAttrNamesGroupsAsTheToolsDo(t *testing.T) {
	one := &Node{}
	sharded := &Node{cfg: Config{Shards: 3}}
	for _, c := range []struct {
		n    *Node
		gid  int
		want string
	}{{one, 0, "0"}, {sharded, 0, "map"}, {sharded, 1, "0"}, {sharded, 3, "2"}} {
		a := c.n.shardAttr(c.gid)
		if a.Key != "shard" || a.Value.Resolve().String() != c.want {
			t.Errorf("group %d (shards %d): %s=%s, want shard=%s", c.gid, c.n.cfg.Shards, a.Key, a.Value.Resolve(), c.want)
		}
	}
}

// TestCleanStopLogsNoError: a sharded node that stops cleanly (it leads the
// map group and shards, and hands them over) logs no ERROR, and neither do
// its peers about it (it told them it was stopping); their raft lines name
// the shard as the tools do.
func TestCleanStopLogsNoError(t *testing.T) {
	captures := map[string]*logCapture{}
	tc := newTestCluster(t, 3, func(c *Config) {
		c.Shards, c.Replicas = 2, 3
		captures[c.ID] = newLogCapture()
		c.Logger = slog.New(captures[c.ID]).With("node", c.ID)
	})
	eventually(t, 60*time.Second, "the shards to be created and placed", func() bool { return settledShards(tc) })
	li, l := tc.leader(10 * time.Second)
	mustSubmit(t, l, bfAdd("k", "a"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	tc.nodes[li] = nil
	if errs := captures[tc.cfgs[li].ID].records(slog.LevelError); len(errs) != 0 {
		t.Errorf("a clean stop logged %d ERROR lines: %v", len(errs), errs)
	}
	// The others elect and go on; let their leaders fail to reach the
	// stopped node for a while.
	for _, n := range tc.live() {
		mustSubmit(t, n, bfAdd("after-"+n.ID(), "a"))
	}
	// It told them it was stopping: their failures to reach it are no
	// ERROR either.
	stopped := l.RaftAddr()
	for _, n := range tc.live() {
		waitRounds(t, tc.live()[0], 3)
		for _, r := range captures[n.ID()].records(slog.LevelError) {
			if strings.Contains(r.msg, stopped) || r.attrs["peer"] == stopped {
				t.Errorf("%s logged an ERROR about the node that stopped cleanly: %v", n.ID(), r)
			}
		}
	}
	names := map[string]bool{}
	for _, c := range captures {
		for _, r := range c.records(slog.LevelInfo) {
			if r.attrs["component"] == "raft" {
				names[r.attrs["shard"]] = true
			}
		}
	}
	if !names["map"] || !names["0"] || !names["1"] || len(names) != 3 {
		t.Errorf("raft's lines name the groups %v, want map, 0 and 1", names)
	}
}
