//go:build redisbloom

package filters

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The test here runs the same CF commands against a real Redis with
// RedisBloom and against RBCuckoo, and compares every reply and every dump
// byte for byte. It needs a server to talk to:
//
//	ROOKERY_REDISBLOOM_ADDR=127.0.0.1:PORT go test -run TestRBCuckooRedisBloom ./filters/
//
// Its keys are named rookery-rbc-test-*; it deletes them first and last.

// rbcConn is a minimal RESP2 client: enough for the commands the test sends.
type rbcConn struct {
	c net.Conn
	r *bufio.Reader
}

func rbcDial(t *testing.T, addr string) *rbcConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rbcConn{c: c, r: bufio.NewReaderSize(c, 1<<20)}
}

// do sends one command and returns its reply rendered as rbcExec renders.
func (rc *rbcConn) do(t *testing.T, args ...string) string {
	t.Helper()
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	rc.c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := rc.c.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	s, err := rc.reply()
	if err != nil {
		t.Fatalf("%s: %v", args[0], err)
	}
	return s
}

func (rc *rbcConn) reply() (string, error) {
	line, err := rc.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("empty reply line")
	}
	switch body := line[1:]; line[0] {
	case '+':
		return body, nil
	case '-':
		return "ERR:" + body, nil
	case ':':
		return body, nil
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return "nil", err
		}
		buf := make([]byte, n+2)
		if _, err := ioReadFull(rc.r, buf); err != nil {
			return "", err
		}
		return fmt.Sprintf("x%x", buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return "nil", err
		}
		parts := make([]string, n)
		for i := range parts {
			if parts[i], err = rc.reply(); err != nil {
				return "", err
			}
		}
		return "[" + strings.Join(parts, " ") + "]", nil
	}
	return "", fmt.Errorf("unknown reply %q", line)
}

func ioReadFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// rbcHexChunk decodes a rendered bulk string.
func rbcHexChunk(t *testing.T, s string) []byte {
	t.Helper()
	var b []byte
	if _, err := fmt.Sscanf(s, "x%x", &b); err != nil && s != "x" {
		t.Fatalf("not a bulk string: %.40q", s)
	}
	return b
}

// redisDump returns the key's whole dump from the server.
func (rc *rbcConn) dump(t *testing.T, key string) []rbcChunk {
	t.Helper()
	var out []rbcChunk
	for pos := int64(0); ; {
		r := rc.do(t, "CF.SCANDUMP", key, strconv.FormatInt(pos, 10))
		var next int64
		var data string
		if _, err := fmt.Sscanf(r, "[%d %s", &next, &data); err != nil {
			t.Fatalf("SCANDUMP reply %.60q", r)
		}
		data = strings.TrimSuffix(data, "]")
		if data == "nil" {
			return out
		}
		out = append(out, rbcChunk{next, rbcHexChunk(t, data)})
		pos = next
	}
}

func rbcRedis(t *testing.T) *rbcConn {
	addr := os.Getenv("ROOKERY_REDISBLOOM_ADDR")
	if addr == "" {
		t.Skip("set ROOKERY_REDISBLOOM_ADDR=127.0.0.1:PORT to a Redis with RedisBloom loaded " +
			"(for example one started by /tmp/rbref/start8.sh PORT) to compare RBCuckoo with it")
	}
	rc := rbcDial(t, addr)
	var keys []string
	for _, k := range []string{"a", "b", "c", "d", "big", "hdr"} {
		keys = append(keys, "rookery-rbc-test-"+k)
	}
	rc.do(t, append([]string{"DEL"}, keys...)...)
	t.Cleanup(func() { rc.do(t, append([]string{"DEL"}, keys...)...) })
	return rc
}

// TestRBCuckooRedisBloom compares RBCuckoo with a real RedisBloom: random
// commands, dump cursors, chunk loads, headers, and a filter larger than one
// chunk.
func TestRBCuckooRedisBloom(t *testing.T) {
	rc := rbcRedis(t)
	t.Run("commands", func(t *testing.T) { rbcCompareCommands(t, rc) })
	t.Run("cursors", func(t *testing.T) { rbcCompareCursors(t, rc) })
	t.Run("headers", func(t *testing.T) { rbcCompareHeaders(t, rc) })
	t.Run("large", func(t *testing.T) { rbcCompareLarge(t, rc) })
	t.Run("golden", func(t *testing.T) { rbcCompareGolden(t, rc) })
}

// rbcCompareGolden replays every golden transcript on RedisBloom: the files
// hold what RedisBloom itself answers.
func rbcCompareGolden(t *testing.T, rc *rbcConn) {
	files, _ := filepath.Glob(filepath.Join("testdata", "redisbloom", "cuckoo-*.txt"))
	if len(files) == 0 {
		t.Fatal("no transcripts")
	}
	key := "rookery-rbc-test-d"
	s := &rbcSession{
		exec: func(args []string) string { return rc.do(t, append([]string{args[0], key}, args[2:]...)...) },
		reserve: func(args []string) error {
			rc.do(t, "DEL", key)
			if r := rc.do(t, append([]string{args[0], key}, args[2:]...)...); r != "OK" {
				return fmt.Errorf("%s", r)
			}
			return nil
		},
		load: func(chunks []rbcChunk) error {
			rc.do(t, "DEL", key)
			for i, ch := range chunks {
				pos := ch.next
				if i == 0 {
					pos = 1
				}
				if r := rc.do(t, "CF.LOADCHUNK", key, strconv.FormatInt(pos, 10), string(ch.data)); r != "OK" {
					return fmt.Errorf("CF.LOADCHUNK %d: %s", pos, r)
				}
			}
			return nil
		},
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			rbcReplay(t, s, rbcParseTranscript(data))
		})
	}
}

// rbcCompareCommands runs random CF.ADD/ADDNX/INSERT/INSERTNX/DEL/COMPACT and
// lookups on RedisBloom and RBCuckoo for several shapes, compares every reply,
// CF.INFO, CF.DEBUG and the SCANDUMP bytes, then loads RedisBloom's dump into
// an RBCuckoo and RBCuckoo's into RedisBloom and goes on with both.
func rbcCompareCommands(t *testing.T, rc *rbcConn) {
	shapes := []struct {
		capacity              uint64
		bs, maxIter, exp, ops int
	}{
		{1000, 2, 20, 1, 6000}, {64, 1, 5, 2, 2000}, {200, 4, 50, 4, 5000}, {48, 3, 7, 1, 4000},
		{300, 8, 20, 2, 4000}, {40, 5, 3, 0, 1000}, {510, 255, 10, 1, 3000}, {96, 6, 1, 2, 3000},
		{4, 2, 2, 1, 3000}, {1024, 2, 500, 0, 3000},
	}
	for si, sh := range shapes {
		name := fmt.Sprintf("c%d-b%d-i%d-x%d", sh.capacity, sh.bs, sh.maxIter, sh.exp)
		t.Run(name, func(t *testing.T) {
			key := "rookery-rbc-test-a"
			rc.do(t, "DEL", key, "rookery-rbc-test-b")
			if r := rc.do(t, "CF.RESERVE", key, fmt.Sprint(sh.capacity), "BUCKETSIZE", fmt.Sprint(sh.bs),
				"MAXITERATIONS", fmt.Sprint(sh.maxIter), "EXPANSION", fmt.Sprint(sh.exp)); r != "OK" {
				t.Fatalf("CF.RESERVE: %s", r)
			}
			c := mustNewRBCuckoo(t, sh.capacity, uint16(sh.bs), uint16(sh.maxIter), uint16(sh.exp))
			r := rand.New(rand.NewPCG(uint64(si), 2026))
			rbcCompareRun(t, rc, key, c, r, sh.ops, int(sh.capacity)*3)
			// RedisBloom's dump into ours, ours into RedisBloom, and on.
			theirs := rc.dump(t, key)
			if !rbcSameDump(theirs, rbcDump(c)) {
				t.Fatal("dumps differ")
			}
			if len(theirs) == 0 {
				return // no items: nothing to load
			}
			loaded, err := rbcLoad(theirs)
			if err != nil {
				t.Fatalf("loading RedisBloom's dump: %v", err)
			}
			back := "rookery-rbc-test-b"
			for _, ch := range append([]rbcChunk{{1, c.DumpHeader()}}, rbcDump(c)[1:]...) {
				if r := rc.do(t, "CF.LOADCHUNK", back, strconv.FormatInt(ch.next, 10), string(ch.data)); r != "OK" {
					t.Fatalf("RedisBloom refused our chunk at %d: %s", ch.next, r)
				}
			}
			rbcCompareRun(t, rc, back, loaded, r, sh.ops/3, int(sh.capacity)*3)
		})
	}
}

// rbcCompareRun sends ops random commands to key on the server and to c, and
// compares the replies, and every so often CF.INFO, CF.DEBUG and the dump.
func rbcCompareRun(t *testing.T, rc *rbcConn, key string, c *RBCuckoo, r *rand.Rand, ops, universe int) {
	t.Helper()
	item := func() string { return fmt.Sprintf("it-%d", r.IntN(universe)) }
	for op := range ops {
		var args []string
		switch k := r.IntN(40); {
		case k < 14:
			args = []string{"CF.ADD", key, item()}
		case k < 17:
			args = []string{"CF.ADDNX", key, item()}
		case k < 19:
			args = []string{"CF.INSERT", key, "ITEMS"}
			for range 1 + r.IntN(40) {
				args = append(args, item())
			}
		case k < 20:
			args = []string{"CF.INSERTNX", key, "ITEMS"}
			for range 1 + r.IntN(10) {
				args = append(args, item())
			}
		case k < 31:
			args = []string{"CF.DEL", key, item()}
		case k < 32:
			args = []string{"CF.COMPACT", key}
		case k < 35:
			args = []string{"CF.EXISTS", key, item()}
		case k < 37:
			args = []string{"CF.COUNT", key, item()}
		default:
			args = []string{"CF.MEXISTS", key, item(), item(), item()}
		}
		want := rc.do(t, args...)
		if got := rbcExec(c, args); got != want {
			t.Fatalf("op %d %v: RBCuckoo %.200s, RedisBloom %.200s", op, args, got, want)
		}
		if op%500 == 0 || op == ops-1 {
			for _, cmd := range []string{"CF.INFO", "CF.DEBUG"} {
				if got, want := rbcExec(c, []string{cmd, key}), rc.do(t, cmd, key); got != want {
					t.Fatalf("op %d %s: RBCuckoo %s, RedisBloom %s", op, cmd, got, want)
				}
			}
			if !rbcSameDump(rc.dump(t, key), rbcDump(c)) {
				t.Fatalf("op %d: dumps differ", op)
			}
		}
	}
	t.Logf("%s: %s", key, c.Debug())
}

// rbcCompareCursors compares SCANDUMP at every kind of cursor and LOADCHUNK of
// chunks at every kind of position, with its refusals.
func rbcCompareCursors(t *testing.T, rc *rbcConn) {
	key := "rookery-rbc-test-c"
	rc.do(t, "CF.RESERVE", key, "64", "BUCKETSIZE", "2", "EXPANSION", "2")
	c := mustNewRBCuckoo(t, 64, 2, 20, 2)
	for _, cmd := range [][]string{{"CF.SCANDUMP", key, "0"}, {"CF.SCANDUMP", key, "5"}, {"CF.SCANDUMP", key, "-1"}} {
		if got, want := rbcExec(c, cmd), rc.do(t, cmd...); got != want {
			t.Errorf("empty filter %v: RBCuckoo %s, RedisBloom %s", cmd, got, want)
		}
	}
	for i := range 300 {
		args := []string{"CF.ADD", key, fmt.Sprintf("cur-%d", i)}
		if got, want := rbcExec(c, args), rc.do(t, args...); got != want {
			t.Fatalf("%v: %s, RedisBloom %s", args, got, want)
		}
	}
	total := int64(0)
	for i := range c.subs {
		total += int64(c.subs[i].size)
	}
	t.Logf("%s, %d bytes", c.Debug(), total)
	for pos := int64(-2); pos <= total+3; pos++ {
		cmd := []string{"CF.SCANDUMP", key, strconv.FormatInt(pos, 10)}
		if got, want := rbcExec(c, cmd), rc.do(t, cmd...); got != want {
			t.Fatalf("%v: RBCuckoo %.80s, RedisBloom %.80s", cmd, got, want)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 3000 {
		pos := r.Int64N(total+40) - 3
		n := r.IntN(40)
		if i%10 == 0 {
			n = r.IntN(int(total) + 10)
		}
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(r.UintN(256))
		}
		cmd := []string{"CF.LOADCHUNK", key, strconv.FormatInt(pos, 10), string(data)}
		if got, want := rbcExec(c, cmd), rc.do(t, cmd...); got != want {
			t.Fatalf("LOADCHUNK at %d of %d bytes: RBCuckoo %s, RedisBloom %s", pos, n, got, want)
		}
	}
	if !rbcSameDump(rc.dump(t, key), rbcDump(c)) {
		t.Fatal("dumps differ after the chunks")
	}
	// Lookups, deletes and compaction over the bytes the chunks scrambled.
	rbcCompareRun(t, rc, key, c, r, 2000, 1000)
}

// rbcCompareHeaders offers RedisBloom and NewRBCuckooFromHeader the same
// headers: both accept or both refuse, but where this package's bounds are
// deliberately tighter.
func rbcCompareHeaders(t *testing.T, rc *rbcConn) {
	key := "rookery-rbc-test-hdr"
	header := func(items, nb, deletes, filters uint64, bs, iter, exp uint16) []byte {
		h := binary.LittleEndian.AppendUint64(nil, items)
		h = binary.LittleEndian.AppendUint64(h, nb)
		h = binary.LittleEndian.AppendUint64(h, deletes)
		h = binary.LittleEndian.AppendUint64(h, filters)
		h = binary.LittleEndian.AppendUint16(h, bs)
		h = binary.LittleEndian.AppendUint16(h, iter)
		return binary.LittleEndian.AppendUint16(h, exp)
	}
	for _, v := range []struct {
		h       []byte
		tighter bool // RedisBloom accepts it, we refuse
		// refused by RedisBloom 8 and by us, accepted by RedisBloom 2.6,
		// which does not check the expansion
		newer bool
	}{
		{h: header(0, 64, 0, 1, 2, 20, 1)},
		{h: header(5, 1, 99, 3, 255, 65535, 2)},
		{h: header(0, 1<<10, 0, 2, 4, 1, 32768)},
		{h: header(0, 64, 0, 1, 0, 20, 1)},
		{h: header(0, 64, 0, 1, 256, 20, 1)},
		{h: header(0, 64, 0, 1, 2, 0, 1)},
		{h: header(0, 64, 0, 0, 2, 20, 1)},
		{h: header(0, 64, 0, 2, 2, 20, 0)},
		{h: header(0, 0, 0, 1, 2, 20, 1)},
		{h: header(0, 48, 0, 1, 2, 20, 1)},
		{h: header(0, 64, 0, 1, 2, 20, 32769), newer: true},
		{h: header(0, 4, 0, 65, 2, 20, 1), tighter: true},
		{h: header(0, 4, 0, 3, 2, 20, 3), tighter: true},
		{h: header(129, 64, 0, 1, 2, 20, 1), tighter: true},
		{h: header(0, 64, 0, 1, 2, 20, 1)[:37]},
		{h: append(header(0, 64, 0, 1, 2, 20, 1), 0)},
	} {
		rc.do(t, "DEL", key)
		want := rc.do(t, "CF.LOADCHUNK", key, "1", string(v.h))
		_, err := NewRBCuckooFromHeader(v.h)
		got := "OK"
		switch {
		case errors.Is(err, ErrRBCuckooHeader):
			got = "ERR:Invalid header"
		case err != nil:
			got = "ERR:Couldn't create filter!"
		}
		if v.tighter && (want != "OK" || got == "OK") {
			t.Errorf("header %x: RedisBloom %s, RBCuckoo %s; want RedisBloom to accept, us to refuse", v.h, want, got)
		}
		if v.newer && (got == "OK" || want != "OK" && want != got) {
			t.Errorf("header %x: RBCuckoo %s, RedisBloom %s; want both to refuse, or 2.6 to accept", v.h, got, want)
		}
		if !v.tighter && !v.newer && got != want {
			t.Errorf("header %x: RBCuckoo %s, RedisBloom %s", v.h, got, want)
		}
	}
}

// rbcCompareLarge compares a filter whose sub-filter exceeds one 16 MiB
// SCANDUMP chunk: cursors, chunk sizes and bytes.
func rbcCompareLarge(t *testing.T, rc *rbcConn) {
	key := "rookery-rbc-test-big"
	if r := rc.do(t, "CF.RESERVE", key, "40000000", "BUCKETSIZE", "1", "EXPANSION", "2"); r != "OK" {
		t.Fatal(r)
	}
	c := mustNewRBCuckoo(t, 40000000, 1, 20, 2)
	args := []string{"CF.INSERT", key, "ITEMS"}
	for i := range 20000 {
		args = append(args, fmt.Sprintf("big-%d", i))
	}
	if got, want := rbcExec(c, args), rc.do(t, args...); got != want {
		t.Fatal("CF.INSERT replies differ")
	}
	theirs, ours := rc.dump(t, key), rbcDump(c)
	if !rbcSameDump(theirs, ours) {
		t.Fatalf("dumps differ: %d and %d chunks", len(theirs), len(ours))
	}
	if len(ours) != 5 || len(ours[1].data) != 16<<20 || ours[4].next != 1+64<<20 {
		t.Errorf("%d chunks, the first of %d bytes", len(ours), len(ours[1].data))
	}
	for _, pos := range []int64{2, 16<<20 + 1, 16<<20 + 77, 64 << 20, 64<<20 + 1, 64<<20 + 5} {
		cmd := []string{"CF.SCANDUMP", key, strconv.FormatInt(pos, 10)}
		if got, want := rbcExec(c, cmd), rc.do(t, cmd...); got != want {
			t.Errorf("%v: replies differ (%d and %d bytes)", cmd, len(got), len(want))
		}
	}
}
