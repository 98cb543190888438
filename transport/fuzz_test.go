package transport

import (
	"bufio"
	"bytes"
	"io"
	"math/bits"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
)

// fuzzConfig keeps filters small so executing fuzzed commands stays cheap.
var fuzzConfig = Config{MaxCapacity: 4096, MaxItemsPerCommand: 32, MaxItemBytes: 128}

// fuzzSeeds are valid and nearly valid requests, one per line, arguments
// separated by spaces (the corpus encodes them NUL-separated).
var fuzzSeeds = []string{
	"BF.RESERVE k 0.01 1000 EXPANSION 4", "BF.RESERVE k 0.01 100 NONSCALING", "BF.ADD bf a",
	"BF.MADD bf a b c", "BF.INSERT k CAPACITY 10 ERROR 0.1 EXPANSION 2 NOCREATE NONSCALING ITEMS a",
	"BF.EXISTS bf a", "BF.MEXISTS bf a b", "BF.CARD bf", "BF.INFO bf", "BF.INFO bf EXPANSION",
	"BF.SCANDUMP bf 0", "BF.SCANDUMP bf 1", "BF.LOADCHUNK n 1 x", "CF.RESERVE k 1000 BUCKETSIZE 4 MAXITERATIONS 5 EXPANSION 2",
	"CF.ADD cf a", "CF.ADDNX cf a", "CF.INSERT cf CAPACITY 100 NOCREATE ITEMS a b", "CF.INSERTNX cf ITEMS a",
	"CF.EXISTS cf a", "CF.MEXISTS cf a b", "CF.COUNT cf a", "CF.DEL cf a", "CF.INFO cf", "CF.SCANDUMP cf 0",
	"CF.LOADCHUNK n 1 x", "CBF.RESERVE k 0.01 100 COUNTERBITS 8 LAYOUT dleft", "CBF.ADD cbf a",
	"CBF.MADD cbf a b", "CBF.DEL cbf a", "CBF.EXISTS cbf a", "CBF.MEXISTS cbf a", "CBF.COUNT cbf a",
	"CBF.INFO cbf", "DEL bf cf", "EXISTS bf x", "TYPE cf", "SCAN 0 MATCH *f COUNT 3 TYPE MBbloomCF",
	"KEYS [bc]*", "DBSIZE", "PING", "ECHO x", "HELLO 3 AUTH default x SETNAME n", "AUTH x",
	"SELECT 0", "CLIENT SETINFO LIB-NAME x", "CLIENT GETNAME", "CLIENT ID", "INFO keyspace", "COMMAND",
	"COMMAND INFO bf.add", "COMMAND COUNT", "COMMAND DOCS", "READONLY", "READWRITE", "ROLE",
	"CLUSTER NODES", "IDEM 1 2 CF.DEL cf a", "IDEM 1 1 BF.EXISTS bf a", "QUIT",
	"INFO", "INFO all", "INFO default commandstats", "INFO replication", "CLIENT LIST", "CLIENT LIST TYPE normal",
	"CLIENT LIST ID 1 2", "CLIENT INFO", "CLIENT KILL 1.2.3.4:5", "CLIENT KILL ID 1 SKIPME no USER default",
	"CLIENT HELP", "MODULE LIST", "MODULE HELP", "MODULE LOAD x", "MEMORY USAGE bf SAMPLES 5", "MEMORY HELP",
	"UNLINK bf x", "TIME", "CONFIG GET bf-* maxmemory", "CONFIG SET cf-bucket-size 3 cf-initial-size 64",
	"CONFIG SET bf-error-rate 0.5", "CONFIG SET cf-max-expansions 2", "CONFIG RESETSTAT", "CONFIG HELP",
	"COMMAND DOCS bf.insert client|kill", "COMMAND LIST FILTERBY MODULE bf", "COMMAND GETKEYS DEL a b",
	"COMMAND HELP", "CLUSTER HELP",
	"BF.RESERVE w 0.01 100 WINDOW 7d", "BF.RESERVE w 0.01 100 LAST 50 NONSCALING", "BF.INFO w WINDOW",
	"CF.RESERVE c 100 WINDOW 500ms MAXITERATIONS 50", "CF.INFO c WINDOW", "BF.RESERVE w 0.01 100 WINDOW 1.5h",
}

// FuzzCommand sends arbitrary argument vectors through parsing and validation,
// executes what parses against a real state machine, and renders everything in
// both protocols. Nothing may panic, every reply must be one well-formed RESP
// value, and every accepted write must be within the limits.
func FuzzCommand(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(strings.ReplaceAll(s, " ", "\x00")))
	}
	be := newFakeBackend(f)
	s := New(fuzzConfig, be)
	f.Cleanup(func() { s.Close() })
	f.Fuzz(func(t *testing.T, data []byte) {
		args := bytes.Split(data, []byte{0})
		if len(args) > 64 {
			return
		}
		q := fuzzState(t)
		for _, proto := range []int{2, 3} {
			c := &session{proto: proto, authed: true}
			o, err := s.parse(c, args)
			w := reply{proto: proto}
			switch {
			case err != nil:
				w.fail(err)
			case o.kind == opWrite:
				checkWrite(t, o.cmd)
				o.render(&w, q.ApplyCommand(100, o.cmd))
			case o.kind == opRead:
				o.read(q, &w)
			default:
				o.local(c, &w)
			}
			checkOneReply(t, w.b)
		}
	})
}

// fuzzState is a small state machine holding one filter of each family.
func fuzzState(t *testing.T) *fsm.FSM {
	q := fsm.New(fsm.Options{})
	specs := map[string]fsm.Command{
		"bf":  {Op: fsm.OpReserve, Family: fsm.FamilyBF, Spec: bfSpec(0.01, 50, 2, false)},
		"cf":  {Op: fsm.OpReserve, Family: fsm.FamilyCF, Spec: defaultBloomConfig(1 << 30).cfDefaultSpec(64)},
		"cbf": {Op: fsm.OpReserve, Family: fsm.FamilyCBF, Spec: cbfSpec(filters.KindCounting, 0.01, 50, 4)},
	}
	i := uint64(0)
	for key, cmd := range specs {
		i++
		cmd.Key = key
		if r := q.ApplyCommand(i, &cmd); r.Err != nil {
			t.Fatalf("create %s: %v", key, r.Err)
		}
	}
	return q
}

// checkWrite asserts an accepted write stays within the limits and ranges.
func checkWrite(t *testing.T, c *fsm.Command) {
	lim := fuzzConfig.withDefaults()
	if len(c.Key) > lim.MaxItemBytes || len(c.Items) > lim.MaxItemsPerCommand || len(c.Keys) > lim.MaxItemsPerCommand {
		t.Fatalf("limits passed: %+v", c)
	}
	for _, it := range c.Items {
		if len(it) > lim.MaxItemBytes {
			t.Fatalf("item of %d bytes passed", len(it))
		}
	}
	if c.Op != fsm.OpReserve && c.Op != fsm.OpAdd {
		return
	}
	sp := c.Spec
	if sp.Capacity < 1 || sp.Capacity > lim.MaxCapacity {
		t.Fatalf("capacity %d passed", sp.Capacity)
	}
	if fsm.IsWindowed(sp.Kind) || sp.Window != 0 || sp.Last != 0 {
		checkWindowSpec(t, c)
		return
	}
	switch c.Family {
	case fsm.FamilyBF:
		if !(sp.ErrorRate > 0 && sp.ErrorRate <= bfErrorRateCap) || sp.Expansion > maxExpansion ||
			sp.NonScaling != (sp.Expansion == 0) || sp.Kind != filters.KindScalable {
			t.Fatalf("bad Bloom spec passed: %+v", sp)
		}
	case fsm.FamilyCF:
		if sp.BucketSize < 1 || sp.MaxIterations < 1 || sp.Expansion > maxExpansion ||
			bits.OnesCount32(sp.Expansion) > 1 || sp.Capacity < 2*uint64(min(sp.BucketSize, 2)) || sp.FingerprintBits != 8 {
			t.Fatalf("bad cuckoo spec passed: %+v", sp)
		}
	case fsm.FamilyCBF:
		if !(sp.ErrorRate > 0 && sp.ErrorRate <= bfErrorRateCap) || (sp.CounterBits != 4 && sp.CounterBits != 8) ||
			(sp.Kind != filters.KindCounting && sp.Kind != filters.KindDLeft) {
			t.Fatalf("bad counting spec passed: %+v", sp)
		}
	default:
		t.Fatalf("mutation without a family: %+v", c)
	}
}

// checkWindowSpec asserts an accepted windowed spec is in range: one window,
// of 1 ms to 3650 days or 1 to the capacity limit of insertions (BF only),
// and nothing a windowed filter does not take.
func checkWindowSpec(t *testing.T, c *fsm.Command) {
	sp, lim := c.Spec, fuzzConfig.withDefaults()
	okWindow := sp.Window >= 1e6 && sp.Window <= windowMaxMs*1e6 && sp.Last == 0 ||
		sp.Window == 0 && sp.Last >= 1 && sp.Last <= lim.MaxCapacity && c.Family == fsm.FamilyBF
	switch {
	case c.Op != fsm.OpReserve || !okWindow || sp.Expansion != 0 || sp.NonScaling:
	case c.Family == fsm.FamilyBF && sp.Kind == filters.KindWindowBloom && sp.ErrorRate >= 1e-6 && sp.ErrorRate <= bfErrorRateCap:
		return
	case c.Family == fsm.FamilyCF && sp.Kind == filters.KindWindowCuckoo && sp.MaxIterations >= 1 && sp.BucketSize == 0:
		return
	}
	t.Fatalf("bad windowed spec passed: %+v", c)
}

// checkOneReply asserts b holds exactly one well-formed RESP value.
func checkOneReply(t *testing.T, b []byte) {
	br := bufio.NewReader(bytes.NewReader(b))
	if _, err := readReply(br); err != nil {
		t.Fatalf("malformed reply %q: %v", b, err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("more than one reply in %q", b)
	}
}

// FuzzReader feeds arbitrary bytes to the request reader, one byte per Read, in
// three modes: an authenticated client; a stranger under the pre-AUTH limits
// that authenticates with its first AUTH request, drawing on a strangers'
// budget until then; and an authenticated client with a small budget. The reader
// must end, never panic, never hand out a request over its limits, hand out one
// request per batch before AUTH, and give back every byte of budget it took.
func FuzzReader(f *testing.F) {
	f.Add([]byte("*2\r\n$4\r\nECHO\r\n$1\r\na\r\nPING\r\n"))
	f.Add([]byte("*1\r\n$9223372036854775800\r\n"))
	f.Add([]byte("ECHO \"a\\x41\" 'b'\r\n*0\r\n"))
	f.Add([]byte(encode("AUTH", "pw") + encode("ECHO", strings.Repeat("x", 100)) + "*12\r\n"))
	f.Add([]byte("*11\r\n" + encode("AUTH", "pw")))
	f.Add([]byte("*1\r\n$16385\r\n"))
	f.Add([]byte("PING 1 2 3 4 5 6 7 8 9 10\r\nAUTH pw\r\nPING 1 2 3 4 5 6 7 8 9 10\r\n"))
	f.Add([]byte(encode("big", "k", "1", strings.Repeat("d", 300)) + encode("big", "k", "1", "2", strings.Repeat("d", 100))))
	f.Fuzz(func(t *testing.T, data []byte) {
		for mode := 0; mode < 3; mode++ {
			fuzzReaderMode(t, data, mode)
		}
	})
}

// fuzzReaderMode runs one of FuzzReader's modes.
func fuzzReaderMode(t *testing.T, data []byte, mode int) {
	const maxArgs, maxBulk, maxChunk = 16, 64, 512
	lim := &readLimits{maxReq: 1024, maxArgs: maxArgs, maxBulk: maxBulk, maxChunk: maxChunk,
		argBytes: func(req argView, i int) int {
			if i == 3 && string(req.arg(0)) == "big" {
				return maxChunk
			}
			return maxBulk
		}}
	all := newBudget(16<<10, nil)
	bud := all
	if mode == 1 {
		bud = newBudget(4<<10, all)
	} else if mode == 2 {
		all.limit = 3 << 10
	}
	rd := newReader(&oneByteReader{data: data}, lim, bud)
	rd.preAuth = mode == 1
	for {
		batch, err := rd.readBatch()
		if err != nil {
			break
		}
		if rd.preAuth && len(batch) != 1 {
			t.Fatalf("%d requests in a batch before AUTH", len(batch))
		}
		for _, args := range batch {
			if len(args) == 0 { // a request refused for its size and read past
				if rd.preAuth {
					t.Fatal("a stranger's oversized request was read past instead of refused")
				}
				if err := rd.takeRefusal(); !strings.HasPrefix(err.Error(), "ERR ") {
					t.Fatalf("refusal %q", err)
				}
				continue
			}
			n := 0
			for _, a := range args {
				n += len(a)
			}
			if len(args) > maxArgs || n > max(lim.maxReq, maxChunk+chunkSlack)+maxInlineBytes {
				t.Fatalf("request over the limits: %d args, %d bytes", len(args), n)
			}
			if rd.preAuth && len(args) > PreAuthMaxArgs {
				t.Fatalf("%d arguments before AUTH", len(args))
			}
			if rd.preAuth && bytes.EqualFold(args[0], []byte("AUTH")) {
				rd.preAuth = false
				rd.authenticated()
			}
		}
		rd.release()
	}
	rd.close()
	if all.inUse() != 0 || bud.inUse() != 0 {
		t.Fatalf("mode %d: the reader kept %d bytes of budget (%d of its own)", mode, all.inUse(), bud.inUse())
	}
}
