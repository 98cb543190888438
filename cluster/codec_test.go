package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/fsm"
)

// confFuture is a raft.ConfigurationFuture that holds a configuration.
type confFuture struct{ c raft.Configuration }

func (f confFuture) Error() error                      { return nil }
func (f confFuture) Index() uint64                     { return 1 }
func (f confFuture) Configuration() raft.Configuration { return f.c }

// TestCodecForEveryServer: the leader writes the lowest log format any server
// of the configuration reads, non-voters (which apply every entry and may be
// promoted) included, and never raises the format for a server it has not
// heard from.
func TestCodecForEveryServer(t *testing.T) {
	server := func(id string, s raft.ServerSuffrage) raft.Server {
		return raft.Server{ID: raft.ServerID(id), Suffrage: s}
	}
	conf := func(ss ...raft.Server) confFuture {
		return confFuture{raft.Configuration{Servers: append([]raft.Server{server("n1", raft.Voter)}, ss...)}}
	}
	heard := func(codecs map[string]int) map[string]member {
		t := make(map[string]member)
		for id, c := range codecs {
			t[id] = member{meta: meta{ID: id, Codec: c}}
		}
		return t
	}
	for _, tc := range []struct {
		name    string
		held    byte // this node's MaxLogFormat
		used    byte // the format it last wrote as leader
		members map[string]int
		conf    confFuture
		want    byte
	}{
		{"every voter current", 0, 0, map[string]int{"n2": 3, "n3": 3},
			conf(server("n2", raft.Voter), server("n3", raft.Voter)), fsm.CodecV3},
		{"a voter held at 2", 0, 3, map[string]int{"n2": 3, "n3": 2},
			conf(server("n2", raft.Voter), server("n3", raft.Voter)), fsm.CodecV2},
		{"a non-voter held at 2", 0, 3, map[string]int{"n2": 3, "n3": 3, "n4": 2},
			conf(server("n2", raft.Voter), server("n3", raft.Voter), server("n4", raft.Nonvoter)), fsm.CodecV2},
		{"that non-voter promoted", 0, 2, map[string]int{"n2": 3, "n3": 3, "n4": 2},
			conf(server("n2", raft.Voter), server("n3", raft.Voter), server("n4", raft.Voter)), fsm.CodecV2},
		{"a gossiping member not yet in the configuration", 0, 3, map[string]int{"n2": 3, "n5": 1},
			conf(server("n2", raft.Voter)), fsm.CodecV3},
		{"a voter not heard from, nothing written yet", 0, 0, map[string]int{"n2": 3},
			conf(server("n2", raft.Voter), server("n3", raft.Voter)), fsm.CodecV2},
		{"a voter not heard from while format 2 is in use", 0, 2, map[string]int{"n2": 3},
			conf(server("n2", raft.Voter), server("n3", raft.Voter)), fsm.CodecV2},
		{"a voter not heard from once format 3 is in use", 0, 3, map[string]int{"n2": 3},
			conf(server("n2", raft.Voter), server("n3", raft.Voter)), fsm.CodecV3},
		{"a build before formats were gossiped", 0, 3, map[string]int{"n2": 0},
			conf(server("n2", raft.Voter)), fsm.CodecV1},
		{"a newer build", 0, 3, map[string]int{"n2": int(fsm.CodecVersion) + 1},
			conf(server("n2", raft.Voter)), fsm.CodecVersion},
		{"this node held at 2", fsm.CodecV2, 0, map[string]int{"n2": 3, "n3": 3},
			conf(server("n2", raft.Voter), server("n3", raft.Voter)), fsm.CodecV2},
	} {
		n := &Node{cfg: Config{ID: "n1", MaxLogFormat: tc.held}, memTable: heard(tc.members)}
		n.meta = &group{n: n}
		n.meta.codecUsed.Store(uint32(tc.used))
		if got := n.meta.codecFor(tc.conf); got != tc.want {
			t.Errorf("%s: format %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestHeldNodeKeepsTheClusterAtItsFormat: with one voter held at format 2 the
// leader writes format 2 entries, which it applies like the others; once that
// node restarts without the hold the leader moves to format 3, and the node
// applies those too.
func TestHeldNodeKeepsTheClusterAtItsFormat(t *testing.T) {
	tc := newTestCluster(t, 3, func(c *Config) {
		if c.ID == "n3" {
			c.MaxLogFormat = fsm.CodecV2
		}
	})
	held := 2
	formats := func(n *Node) map[byte]int {
		out := map[byte]int{}
		first, _ := n.meta.logs.FirstIndex()
		for i := max(first, 1); i <= n.meta.raft.LastIndex(); i++ {
			var lg raft.Log
			if n.meta.logs.GetLog(i, &lg) == nil && lg.Type == raft.LogCommand {
				out[lg.Data[1]]++
			}
		}
		return out
	}
	for i := range 20 {
		tc.mustWrite(bfAdd("k", string(rune('a'+i))))
	}
	_, l := tc.leader(10 * time.Second)
	f := formats(l)
	if f[fsm.CodecV2] == 0 {
		t.Fatalf("entries by format with n3 held at 2: %v", f)
	}
	for v := byte(fsm.CodecV3); v <= fsm.CodecVersion; v++ {
		if f[v] != 0 {
			t.Fatalf("entries by format with n3 held at 2: %v", f)
		}
	}
	if st := tc.nodes[held].Status(); st.LogFormat != 2 || !st.Ready {
		t.Fatalf("held node: %+v", st)
	}
	if st := l.Status(); st.LogFormatUse != 2 {
		t.Fatalf("leader writes format %d with n3 held at 2", st.LogFormatUse)
	}
	for _, n := range tc.live() {
		if h := n.meta.fsm.Halted(); h != nil {
			t.Fatalf("%s halted: %v", n.ID(), h)
		}
	}
	// A command of a later format is refused, not applied, while a member
	// cannot read it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err := submit(ctx, l, &fsm.Command{Op: fsm.OpRename, Key: "k", Keys: []string{"k2"}})
	cancel()
	if !errors.Is(err, ErrNeedsUpgrade) {
		t.Fatalf("RENAME with n3 held at format 2: %v, want ErrNeedsUpgrade", err)
	}

	tc.crash(held)
	tc.cfgs[held].MaxLogFormat = 0
	tc.start(held)
	eventually(t, 20*time.Second, "current-format entries once n3 is upgraded", func() bool {
		tc.mustWrite(bfAdd("k", "after"))
		_, l := tc.leader(10 * time.Second)
		return formats(l)[fsm.CodecVersion] > 0 && l.Status().LogFormatUse == int(fsm.CodecVersion)
	})
	tc.mustWrite(&fsm.Command{Op: fsm.OpRename, Key: "k", Keys: []string{"k2"}})
	tc.mustWrite(&fsm.Command{Op: fsm.OpRename, Key: "k2", Keys: []string{"k"}})
	tc.mustWrite(bfAdd("k", "last"))
	eventually(t, 10*time.Second, "every write on the upgraded node", func() bool {
		return exists(t, tc.nodes[held], "k", "last") && exists(t, tc.nodes[held], "k", "a")
	})
	for _, n := range tc.live() {
		if h := n.meta.fsm.Halted(); h != nil {
			t.Fatalf("%s halted: %v", n.ID(), h)
		}
	}
}
