//go:build redisbloom

package filters

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"testing"
	"time"
)

// The cross-check against a real RedisBloom: the only test here that needs
// something outside the repository, a redis-server with the RedisBloom module,
// named by ROOKERY_REDISBLOOM_ADDR (checked with 2.6.28, 8.0.8 and 8.8.0). It builds the golden scenarios (rbGoldens)
// in RedisBloom with the same commands and holds every reply, dump byte and
// lookup to ours; then loads RedisBloom's dumps into RBChains and ours into
// RedisBloom. Keys are named rookery-rbchain-test:*, and deleted before and
// after.

// rbRedisAddrEnv names the environment variable holding host:port.
const rbRedisAddrEnv = "ROOKERY_REDISBLOOM_ADDR"

func rbRedis(t *testing.T) *respConn {
	t.Helper()
	addr := os.Getenv(rbRedisAddrEnv)
	if addr == "" {
		t.Skipf("set %s=host:port of a redis-server with RedisBloom loaded to compare RBChain with it", rbRedisAddrEnv)
	}
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &respConn{t: t, c: nc, r: bufio.NewReader(nc)}
}

// respConn is a minimal RESP2 client: commands of bulk strings, replies as
// string, []byte (bulk), int64, []any, nil or respErr.
type respConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

type respErr string

// with returns the connection reporting failures to t, a subtest.
func (rc *respConn) with(t *testing.T) *respConn { c := *rc; c.t = t; return &c }

func (e respErr) Error() string { return string(e) }

// send writes commands without reading their replies.
func (rc *respConn) send(cmds ...[]any) {
	var b bytes.Buffer
	for _, cmd := range cmds {
		fmt.Fprintf(&b, "*%d\r\n", len(cmd))
		for _, a := range cmd {
			var s []byte
			switch v := a.(type) {
			case string:
				s = []byte(v)
			case []byte:
				s = v
			default:
				s = fmt.Append(nil, v)
			}
			fmt.Fprintf(&b, "$%d\r\n", len(s))
			b.Write(s)
			b.WriteString("\r\n")
		}
	}
	rc.c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := rc.c.Write(b.Bytes()); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// do sends one command and returns its reply.
func (rc *respConn) do(args ...any) any {
	rc.send(args)
	v, err := rc.read()
	if err != nil {
		rc.t.Fatalf("%v: %v", args[0], err)
	}
	return v
}

// ok runs a command that must not fail.
func (rc *respConn) ok(args ...any) any {
	v := rc.do(args...)
	if e, isErr := v.(respErr); isErr {
		rc.t.Fatalf("%v %v: %v", args[0], args[1], e)
	}
	return v
}

func (rc *respConn) read() (any, error) {
	line, err := rc.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 {
		return nil, fmt.Errorf("short reply line %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return respErr(body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(rc.r, b); err != nil {
			return nil, err
		}
		return b[:n], nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = rc.read(); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown reply %q", line)
}

const rbRedisPrefix = "rookery-rbchain-test:"

// rbRedisDel deletes the keys, now and when the test ends.
func rbRedisDel(t *testing.T, rc *respConn, keys ...string) {
	del := func() {
		for _, k := range keys {
			rc.do("DEL", k)
		}
	}
	del()
	t.Cleanup(del)
}

// redisDump reads a filter's whole dump from RedisBloom, cursor by cursor.
func redisDump(t *testing.T, rc *respConn, key string) []rbChunk {
	t.Helper()
	var out []rbChunk
	for iter := int64(0); ; {
		r := rc.ok("BF.SCANDUMP", key, iter).([]any)
		next := r[0].(int64)
		data := r[1].([]byte)
		if next == 0 {
			if len(data) != 0 {
				t.Fatalf("SCANDUMP %s %d: next 0 with %d bytes", key, iter, len(data))
			}
			return out
		}
		out = append(out, rbChunk{next, data})
		iter = next
	}
}

// redisLoad loads a dump into RedisBloom under key.
func redisLoad(t *testing.T, rc *respConn, key string, dump []rbChunk) {
	t.Helper()
	for _, ch := range dump {
		rc.ok("BF.LOADCHUNK", key, ch.iter, ch.data)
	}
}

// redisExists asks BF.MEXISTS for items, in batches.
func redisExists(t *testing.T, rc *respConn, key string, items [][]byte) []bool {
	t.Helper()
	out := make([]bool, 0, len(items))
	for lo := 0; lo < len(items); lo += 1000 {
		args := []any{"BF.MEXISTS", key}
		for _, it := range items[lo:min(lo+1000, len(items))] {
			args = append(args, it)
		}
		for _, v := range rc.ok(args...).([]any) {
			out = append(out, v.(int64) == 1)
		}
	}
	return out
}

// redisAdd adds items with BF.MADD, in batches, and returns each reply as 1, 0
// or the error text.
func redisAdd(t *testing.T, rc *respConn, key string, items [][]byte) []string {
	t.Helper()
	out := make([]string, 0, len(items))
	for lo := 0; lo < len(items); lo += 1000 {
		args := []any{"BF.MADD", key}
		for _, it := range items[lo:min(lo+1000, len(items))] {
			args = append(args, it)
		}
		rep := rc.ok(args...).([]any)
		for _, v := range rep {
			out = append(out, rbReply(v))
		}
		if len(rep) < len(args)-2 {
			// MADD stops at the first "full"; the rest were not tried.
			for range len(args) - 2 - len(rep) {
				out = append(out, "not tried")
			}
		}
	}
	return out
}

func rbReply(v any) string {
	switch v := v.(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case respErr:
		return string(v)
	}
	return fmt.Sprint(v)
}

// redisInfo returns BF.INFO's numbers: capacity, size, filters, items.
func redisInfo(t *testing.T, rc *respConn, key string) [4]int64 {
	r := rc.ok("BF.INFO", key).([]any)
	return [4]int64{r[1].(int64), r[3].(int64), r[5].(int64), r[7].(int64)}
}

func ourInfo(c *RBChain) [4]int64 {
	return [4]int64{int64(c.Capacity()), int64(c.RedisBloomSize()), int64(c.Filters()), int64(c.Count())}
}

func redisDebug(rc *respConn, key string) []string {
	var out []string
	for _, v := range rc.ok("BF.DEBUG", key).([]any) {
		out = append(out, string(v.([]byte)))
	}
	return out
}

// TestRBChainAgainstRedisBloom is the one test that needs a RedisBloom: it runs
// each comparison below against the server ROOKERY_REDISBLOOM_ADDR names, and
// reports what it needs when that is not set.
func TestRBChainAgainstRedisBloom(t *testing.T) {
	rc := rbRedis(t)
	t.Run("scenarios", func(t *testing.T) { rbRedisScenarios(t, rc.with(t)) })
	t.Run("cursors", func(t *testing.T) { rbRedisCursors(t, rc.with(t)) })
	t.Run("headers", func(t *testing.T) { rbRedisHeaders(t, rc.with(t)) })
	t.Run("large", func(t *testing.T) { rbRedisLarge(t, rc.with(t)) })
}

// rbRedisScenarios builds every golden scenario in RedisBloom and in an RBChain,
// and holds them to each other: every add reply, BF.INFO, BF.DEBUG, the dump
// byte for byte, and the lookups of the golden probes; then RedisBloom's dump
// loaded here, and ours loaded there, must answer the same.
func rbRedisScenarios(t *testing.T, parent *respConn) {
	ver := redisBloomVersion(parent)
	t.Logf("RedisBloom version %d", ver)
	for _, g := range rbGoldens() {
		t.Run(g.name, func(t *testing.T) {
			rc := parent.with(t)
			key, back := rbRedisPrefix+g.name, rbRedisPrefix+g.name+":back"
			rbRedisDel(t, rc, key, back)
			ours := g.build(t)
			reserved := false
			if g.reserve != nil {
				// RedisBloom from 8.1 on takes a rate above 0.25 as 0.25, as
				// NewRBChain does; for older versions the cap is applied here.
				cmd := g.reserve(key)
				if ver < 80100 {
					cmd[2] = strconv.FormatFloat(min(g.rate, RBMaxErrorRate), 'g', -1, 64)
				}
				switch r := rc.do(cmd...).(type) {
				case respErr:
					// RedisBloom 2.6 refuses EXPANSION 0, which later versions
					// take as NONSCALING: the chain is loaded instead.
					t.Logf("%v: %v; loading the chain instead", cmd, r)
				default:
					reserved = true
				}
			}
			if !reserved {
				// Chains RedisBloom's commands do not make are created from
				// our header; both then take the same adds.
				redisLoad(t, rc, key, ourDump(g.base(t)))
			}
			if theirs := redisAdd(t, rc, key, g.items()); !equalStrings(theirs, g.replies) {
				t.Fatalf("add replies differ at %d", firstDiffStrings(theirs, g.replies))
			}
			rbCompareRedis(t, rc, key, ours, g)

			// RedisBloom's dump into a fresh chain; ours back into RedisBloom.
			loaded := rbLoadDump(t, redisDump(t, rc, key))
			if err := sameDump(ourDump(loaded), ourDump(ours)); err != nil {
				t.Fatalf("RedisBloom's dump loaded here dumps differently: %v", err)
			}
			redisLoad(t, rc, back, ourDump(ours))
			rbCompareRedis(t, rc, back, loaded, g)
		})
	}
}

// redisBloomVersion returns the bf module's version from MODULE LIST (20628 for
// 2.6.28).
func redisBloomVersion(rc *respConn) int64 {
	for _, m := range rc.ok("MODULE", "LIST").([]any) {
		fields := m.([]any)
		if len(fields) >= 4 && string(fields[1].([]byte)) == "bf" {
			return fields[3].(int64)
		}
	}
	rc.t.Fatal("no bf module in MODULE LIST")
	return 0
}

// rbCompareRedis holds the filter at key to ours: dump, info, debug, lookups.
func rbCompareRedis(t *testing.T, rc *respConn, key string, ours *RBChain, g *rbGolden) {
	t.Helper()
	if err := sameDump(redisDump(t, rc, key), ourDump(ours)); err != nil {
		t.Fatalf("dumps differ: %v", err)
	}
	if theirs, mine := redisInfo(t, rc, key), ourInfo(ours); theirs != mine {
		t.Fatalf("BF.INFO capacity, size, filters, items: RedisBloom %v, ours %v", theirs, mine)
	}
	if theirs, mine := redisDebug(rc, key), ours.Debug(); !equalStrings(theirs, mine) {
		t.Fatalf("BF.DEBUG: RedisBloom %q, ours %q", theirs, mine)
	}
	probes := g.probes()
	theirs := redisExists(t, rc, key, probes)
	fp, present := 0, g.n
	for i, it := range probes {
		if ours.Test(it) != theirs[i] {
			t.Fatalf("EXISTS %q: RedisBloom %v, ours %v", it, theirs[i], !theirs[i])
		}
		if theirs[i] && i >= present {
			fp++
		}
	}
	t.Logf("%d probes agree (%d false positives of %d absent)", len(probes), fp, len(probes)-present)
}

// rbRedisCursors holds SCANDUMP at cursors SCANDUMP never hands out, and
// LOADCHUNK's refusals, to RedisBloom's.
func rbRedisCursors(t *testing.T, rc *respConn) {
	key := rbRedisPrefix + "cursors"
	rbRedisDel(t, rc, key)
	rc.ok("BF.RESERVE", key, "0.01", 100)
	ours := mustNewRBChain(t, 100, 0.01, 2, false)
	items := rbItems("item:", 0, 300)
	redisAdd(t, rc, key, items)
	ourAdd(ours, items)
	total := int64(ours.payloadBytes())
	for _, iter := range []int64{-5, -1, 1, 2, 7, 8, 9, 100, 144, 145, 146, 400, total, total + 1, total + 2, 1 << 40} {
		r := rc.ok("BF.SCANDUMP", key, iter).([]any)
		next, data := ours.DumpChunk(iter)
		if r[0].(int64) != next || !bytes.Equal(r[1].([]byte), data) {
			t.Errorf("SCANDUMP %d: RedisBloom (%d, %d bytes), ours (%d, %d bytes)", iter, r[0], len(r[1].([]byte)), next, len(data))
		}
	}
	for _, c := range []struct {
		iter int64
		data []byte
	}{
		{0, []byte{1}}, {-3, []byte{1}}, {3, []byte{1, 2, 3, 4}}, {4, []byte{1, 2, 3, 4}}, {5, []byte{1, 2, 3, 4}},
		{145, make([]byte, 144)}, {146, make([]byte, 144)}, {150, make([]byte, 10)}, {total + 1, []byte{}},
		{total + 2, []byte{}}, {total + 2, []byte{9}}, {1 << 40, []byte{1}}, {1, []byte{}},
	} {
		theirs := rbReply(rc.do("BF.LOADCHUNK", key, c.iter, c.data))
		mine := "OK"
		if err := ours.LoadChunk(c.iter, c.data); err != nil {
			mine = "ERR " + rbBaseErr(err).Error()
		}
		if theirs != mine {
			t.Errorf("LOADCHUNK %d (%d bytes): RedisBloom %q, ours %q", c.iter, len(c.data), theirs, mine)
		}
	}
	if err := sameDump(redisDump(t, rc, key), ourDump(ours)); err != nil {
		t.Errorf("dumps differ after the chunks: %v", err)
	}
}

// rbRedisHeaders sends every header of rbHeaderCases that RedisBloom can take
// without allocating absurd memory to BF.LOADCHUNK, and checks RedisBloom's
// verdict. Where both accept, the same random bytes are loaded into every link
// of both chains, and lookups, adds and the dumps after them must agree.
func rbRedisHeaders(t *testing.T, parent *respConn) {
	for i, hc := range rbHeaderCases(t) {
		if hc.unsafe {
			continue
		}
		t.Run(hc.name, func(t *testing.T) {
			rc := parent.with(t)
			key := fmt.Sprintf("%sheader:%d", rbRedisPrefix, i)
			rbRedisDel(t, rc, key)
			rep := rbReply(rc.do("BF.LOADCHUNK", key, 1, hc.header))
			if (rep == "OK") != hc.theirs && !hc.varies || rep != "OK" && rep != "ERR received bad data" {
				t.Fatalf("RedisBloom answers %q; expected it to accept: %v", rep, hc.theirs)
			}
			if !hc.ours || !hc.theirs {
				return
			}
			ours, err := NewRBChainFromHeader(hc.header)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(uint64(i), 9))
			start := int64(1)
			for _, l := range ours.Links() {
				data := make([]byte, l.Bytes)
				for j := range data {
					data[j] = byte(r.Uint32() | r.Uint32()) // three bits in four set
				}
				iter := start + int64(len(data))
				rc.ok("BF.LOADCHUNK", key, iter, data)
				if err := ours.LoadChunk(iter, data); err != nil {
					t.Fatal(err)
				}
				start = iter
			}
			probes := rbItems("probe:", 0, 2000)
			theirs := redisExists(t, rc, key, probes)
			for j, it := range probes {
				if ours.Test(it) != theirs[j] {
					t.Fatalf("EXISTS %q: RedisBloom %v", it, theirs[j])
				}
			}
			if !hc.noAdds {
				items := rbItems("add:", 0, 300)
				if theirs, mine := redisAdd(t, rc, key, items), ourMAdd(ours, items); !equalStrings(theirs, mine) {
					i := firstDiffStrings(theirs, mine)
					t.Fatalf("add %d: RedisBloom %q, ours %q", i, theirs[i], mine[i])
				}
			}
			if err := sameDump(redisDump(t, rc, key), ourDump(ours)); err != nil {
				t.Fatalf("dumps differ: %v", err)
			}
			if theirs, mine := redisInfo(t, rc, key), ourInfo(ours); theirs != mine {
				t.Fatalf("BF.INFO: RedisBloom %v, ours %v", theirs, mine)
			}
		})
	}
}

// rbRedisLarge: a link of more than RBMaxChunkBytes dumps in the same chunks as
// RedisBloom's, and each side loads the other's.
func rbRedisLarge(t *testing.T, rc *respConn) {
	key, back := rbRedisPrefix+"large", rbRedisPrefix+"large:back"
	rbRedisDel(t, rc, key, back)
	rc.ok("BF.RESERVE", key, "0.01", 15_000_000)
	ours := mustNewRBChain(t, 15_000_000, 0.01, 2, false)
	items := rbItems("big:", 0, 20000)
	if theirs, mine := redisAdd(t, rc, key, items), ourMAdd(ours, items); !equalStrings(theirs, mine) {
		t.Fatalf("add replies differ at %d", firstDiffStrings(theirs, mine))
	}
	theirs := redisDump(t, rc, key)
	if len(theirs) != 3 {
		t.Fatalf("RedisBloom dumps in %d chunks", len(theirs))
	}
	if err := sameDump(theirs, ourDump(ours)); err != nil {
		t.Fatalf("dumps differ: %v", err)
	}
	loaded := rbLoadDump(t, theirs)
	redisLoad(t, rc, back, ourDump(ours))
	probes := append(items, rbItems("absent:", 0, 5000)...)
	want := redisExists(t, rc, back, probes)
	for i, it := range probes {
		if loaded.Test(it) != want[i] {
			t.Fatalf("EXISTS %q: RedisBloom %v", it, want[i])
		}
	}
}

// probes are the items, then g.absent items never added.
func (g *rbGolden) probes() [][]byte { return append(g.items(), rbItems("absent:", 0, g.absent)...) }
