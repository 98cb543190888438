package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/nodeproc"
)

// formatStatus is the part of /v1/status about log formats.
type formatStatus struct {
	Role      string `json:"role"`
	Ready     bool   `json:"ready"`
	Problem   string `json:"problem"`
	LogFormat int    `json:"log_format"`
	InUse     int    `json:"log_format_in_use"`
}

func readFormatStatus(p *proc) (formatStatus, error) {
	var st formatStatus
	resp, err := p.HTTPDo("GET", "/v1/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// everyWrite sends one write of every kind (each log op, each family) through
// c, keys suffixed with s, and checks the replies.
func everyWrite(t *testing.T, c *redis.Client, s string) {
	t.Helper()
	for _, w := range []struct {
		args []any
		want string
	}{
		{[]any{"BF.RESERVE", "bf" + s, "0.01", "1000"}, "OK"},
		{[]any{"BF.ADD", "bf" + s, "a"}, "1"},
		{[]any{"BF.MADD", "bf" + s, "b", "c"}, "[1 1]"},
		{[]any{"BF.INSERT", "bfi" + s, "CAPACITY", "100", "ERROR", "0.01", "ITEMS", "x", "y"}, "[1 1]"},
		{[]any{"BF.ADD", "gone" + s, "z"}, "1"},
		{[]any{"DEL", "gone" + s}, "1"},
		{[]any{"CF.RESERVE", "cf" + s, "1000"}, "OK"},
		{[]any{"CF.ADD", "cf" + s, "a"}, "1"},
		{[]any{"CF.ADDNX", "cf" + s, "b"}, "1"},
		{[]any{"CF.INSERT", "cf" + s, "ITEMS", "c", "d"}, "[1 1]"},
		{[]any{"CF.INSERTNX", "cfi" + s, "ITEMS", "e"}, "[1]"},
		{[]any{"CF.DEL", "cf" + s, "a"}, "1"},
		{[]any{"CBF.RESERVE", "cbf" + s, "0.01", "1000"}, "OK"},
		{[]any{"CBF.ADD", "cbf" + s, "a"}, "1"},
		{[]any{"CBF.MADD", "cbf" + s, "b", "c"}, "[1 1]"},
		{[]any{"CBF.DEL", "cbf" + s, "a"}, "1"},
	} {
		got, err := c.Do(bg(), w.args...).Result()
		if err != nil || fmt.Sprint(got) != w.want {
			t.Fatalf("%v: %v %v, want %s", w.args, got, err, w.want)
		}
	}
	// BF.SCANDUMP into BF.LOADCHUNK: the load op.
	for iter := int64(0); ; {
		r, err := c.Do(bg(), "BF.SCANDUMP", "bf"+s, iter).Slice()
		if err != nil || len(r) != 2 {
			t.Fatalf("BF.SCANDUMP: %v %v", r, err)
		}
		iter = r[0].(int64)
		if iter == 0 {
			break
		}
		if err := c.Do(bg(), "BF.LOADCHUNK", "copy"+s, iter, r[1]).Err(); err != nil {
			t.Fatalf("BF.LOADCHUNK: %v", err)
		}
	}
}

// seesEveryWrite checks through c that everything everyWrite(s) did is there.
func seesEveryWrite(t *testing.T, c *redis.Client, s string) {
	t.Helper()
	for _, r := range []struct {
		args []any
		want string
	}{
		{[]any{"BF.MEXISTS", "bf" + s, "a", "b", "c"}, "[1 1 1]"},
		{[]any{"BF.MEXISTS", "bfi" + s, "x", "y"}, "[1 1]"},
		{[]any{"BF.MEXISTS", "copy" + s, "a", "b", "c"}, "[1 1 1]"},
		{[]any{"EXISTS", "gone" + s}, "0"},
		{[]any{"CF.MEXISTS", "cf" + s, "a", "b", "c", "d"}, "[0 1 1 1]"},
		{[]any{"CF.EXISTS", "cfi" + s, "e"}, "1"},
		{[]any{"CBF.MEXISTS", "cbf" + s, "a", "b", "c"}, "[0 1 1]"},
	} {
		got, err := c.Do(bg(), r.args...).Result()
		if err != nil || fmt.Sprint(got) != r.want {
			t.Fatalf("%v: %v %v, want %s", r.args, got, err, r.want)
		}
	}
}

// TestRollingUpgrade: a three-node cluster with n3 held at the older log
// format serves writes of every kind, through the held node and the others,
// with every write visible on the held node, which never halts; the leader
// writes the older format meanwhile. Restarted without the hold (upgraded in
// place), n3 advertises the new format, the leader switches to it, and writes
// go on.
func TestRollingUpgrade(t *testing.T) {
	old := fsm.CodecVersion - 1
	dir := t.TempDir()
	nodes := make([]*proc, 3)
	var args3 []string
	for i := range nodes {
		var join []string
		if i > 0 {
			join = []string{nodes[0].Gossip}
		}
		id := fmt.Sprintf("n%d", i+1)
		args, err := nodeproc.NodeArgs(id, filepath.Join(dir, id), 3, join)
		if err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			args3 = args
			args = append(append([]string{}, args...), "--max-log-format", fmt.Sprint(old))
		}
		nodes[i] = startProc(t, nil, args...)
	}
	for _, p := range nodes {
		p.waitReady(30 * time.Second)
	}
	held := nodes[2]
	leader := func(within time.Duration) (*proc, formatStatus) {
		t.Helper()
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			for _, p := range nodes {
				if st, err := readFormatStatus(p); err == nil && st.Role == "leader" {
					return p, st
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("no leader within %v", within)
		return nil, formatStatus{}
	}

	if st, err := readFormatStatus(held); err != nil || st.LogFormat != old {
		t.Fatalf("held node advertises %+v %v, want log format %d", st, err, old)
	}
	if _, st := leader(10 * time.Second); st.InUse != old {
		t.Fatalf("leader writes log format %d with n3 held at %d", st.InUse, old)
	}
	everyWrite(t, held.client(2), "{held}")
	l, _ := leader(10 * time.Second)
	everyWrite(t, l.client(2), "{leader}")
	for _, s := range []string{"{held}", "{leader}"} {
		seesEveryWrite(t, held.client(2), s)
	}
	// A command of a newer format (EXPIRE, format 5; a windowed filter,
	// format 6) is refused, not applied, through the held node and the
	// leader alike.
	for _, c := range []struct {
		need  *fsm.Command
		args  []any
		check []any // a read that shows the command was not applied, and its answer
		want  any
	}{
		{&fsm.Command{Op: fsm.OpExpire}, []any{"EXPIRE", "bf{held}", "100"}, []any{"TTL", "bf{held}"}, int64(-1)},
		{&fsm.Command{Op: fsm.OpReserve, Spec: fsm.Spec{Window: 1}}, []any{"BF.RESERVE", "w{held}", "0.01", "100", "WINDOW", "7d"},
			[]any{"EXISTS", "w{held}"}, int64(0)},
	} {
		need := int(fsm.MinCodec(c.need))
		if need <= old {
			continue
		}
		want := fmt.Sprintf("ERR not every node of the cluster can apply this command: "+
			"it needs log format %d and a member reads only up to %d; upgrade every node", need, old)
		for _, p := range []*proc{held, l} {
			if err := p.client(2).Do(bg(), c.args...).Err(); err == nil || err.Error() != want {
				t.Fatalf("%v with n3 held at %d: %v, want %q", c.args, old, err, want)
			}
		}
		if got, err := held.client(2).Do(bg(), c.check...).Result(); err != nil || got != c.want {
			t.Fatalf("%v after a refused %v: %v %v", c.check, c.args, got, err)
		}
	}
	// A transaction (MULTI/EXEC, format 10) likewise: EXEC is refused and
	// nothing of it applies.
	if need := int(fsm.MinCodec(&fsm.Command{Op: fsm.OpExec})); need > old {
		want := fmt.Sprintf("ERR not every node of the cluster can apply this command: "+
			"it needs log format %d and a member reads only up to %d; upgrade every node", need, old)
		for _, p := range []*proc{held, l} {
			_, err := p.client(2).TxPipelined(bg(), func(pp redis.Pipeliner) error {
				pp.BFAdd(bg(), "tx{held}", "x")
				return nil
			})
			if err == nil || err.Error() != want {
				t.Fatalf("EXEC with n3 held at %d: %v, want %q", old, err, want)
			}
		}
		if n, err := held.client(2).Exists(bg(), "tx{held}").Result(); err != nil || n != 0 {
			t.Fatalf("a refused EXEC applied: %d %v", n, err)
		}
	}
	st, err := readFormatStatus(held)
	if err != nil || !st.Ready || st.Problem != "" || strings.Contains(held.Logs(), "needs a newer rookery") {
		t.Fatalf("held node after the writes: %+v %v\n%s", st, err, held.Logs())
	}
	if _, st := leader(10 * time.Second); st.InUse != old {
		t.Fatalf("leader wrote log format %d with n3 held at %d", st.InUse, old)
	}

	// Upgrade n3 in place: same data directory and addresses, no hold.
	if err := held.stop(syscall.SIGTERM, 15*time.Second); err != nil {
		t.Fatalf("stop n3: %v", err)
	}
	nodes[2] = startProc(t, nil, args3...)
	held = nodes[2]
	if err := held.WaitReady(30 * time.Second); err != nil {
		resp, _ := held.HTTPDo("GET", "/readyz")
		var body []byte
		if resp != nil {
			body, _ = io.ReadAll(resp.Body)
		}
		resp2, _ := held.HTTPDo("GET", "/v1/status")
		var body2 []byte
		if resp2 != nil {
			body2, _ = io.ReadAll(resp2.Body)
		}
		t.Fatalf("upgraded n3: %v: %s\n%s", err, body, body2)
	}
	if st, err := readFormatStatus(held); err != nil || st.LogFormat != fsm.CodecVersion {
		t.Fatalf("upgraded node advertises %+v %v, want %d", st, err, fsm.CodecVersion)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, st := leader(10 * time.Second)
		if st.InUse == fsm.CodecVersion {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leader still writes log format %d after n3 was upgraded", st.InUse)
		}
		time.Sleep(100 * time.Millisecond)
	}
	everyWrite(t, held.client(2), "{after}")

	for _, s := range []string{"{held}", "{leader}", "{after}"} {
		seesEveryWrite(t, held.client(2), s)
		seesEveryWrite(t, nodes[0].client(2), s)
	}
	for _, p := range nodes {
		if st, err := readFormatStatus(p); err != nil || !st.Ready {
			t.Fatalf("%+v %v\n%s", st, err, p.Logs())
		}
	}
	// Now EXPIRE is taken, and the key goes on every node with no other write.
	c := held.client(2)
	if err := c.Do(bg(), "BF.ADD", "window", "x").Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Do(bg(), "PEXPIRE", "window", "1000").Int64(); err != nil || n != 1 {
		t.Fatalf("PEXPIRE after the upgrade: %d %v", n, err)
	}
	for i, p := range nodes {
		deadline := time.Now().Add(15 * time.Second)
		for {
			n, err := p.client(2).Do(bg(), "EXISTS", "window").Int64()
			if err == nil && n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("window still on n%d after its deadline: %d %v", i+1, n, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// And a windowed filter is taken, and answers on every node.
	if err := c.Do(bg(), "BF.RESERVE", "seen", "0.01", "100", "WINDOW", "7d").Err(); err != nil {
		t.Fatalf("windowed BF.RESERVE after the upgrade: %v", err)
	}
	if err := c.Do(bg(), "BF.ADD", "seen", "x").Err(); err != nil {
		t.Fatal(err)
	}
	for i, p := range nodes {
		if ok, err := p.client(2).Do(bg(), "BF.EXISTS", "seen", "x").Bool(); err != nil || !ok {
			t.Fatalf("n%d: BF.EXISTS of a windowed filter after the upgrade: %v %v", i+1, ok, err)
		}
	}
}
