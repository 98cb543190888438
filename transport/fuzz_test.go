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
		"cf":  {Op: fsm.OpReserve, Family: fsm.FamilyCF, Spec: defaultCFSpec(64)},
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

// FuzzReader feeds arbitrary bytes to the request reader: it must end, never
// panic, and never hand out a request over its limits.
func FuzzReader(f *testing.F) {
	f.Add([]byte("*2\r\n$4\r\nECHO\r\n$1\r\na\r\nPING\r\n"))
	f.Add([]byte("*1\r\n$9223372036854775800\r\n"))
	f.Add([]byte("ECHO \"a\\x41\" 'b'\r\n*0\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rd := newReader(&oneByteReader{data: data}, 1024, 16)
		for {
			batch, err := rd.readBatch()
			if err != nil {
				return
			}
			for _, args := range batch {
				n := 0
				for _, a := range args {
					n += len(a)
				}
				if len(args) == 0 || len(args) > 16 || n > 1024+maxInlineBytes {
					t.Fatalf("request over the limits: %d args, %d bytes", len(args), n)
				}
			}
		}
	})
}
