package transport

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
)

var (
	bfDefault = fsm.Spec{Kind: filters.KindScalable, Capacity: 100, ErrorRate: 0.01, Expansion: 2}
	cfDefault = fsm.Spec{Kind: filters.KindCuckoo, Capacity: 1024, BucketSize: 2, MaxIterations: 20,
		Expansion: 1, FingerprintBits: 8}
)

// TestParseWrites checks the fsm.Command each valid mutation becomes.
func TestParseWrites(t *testing.T) {
	s := mustNewParser(t, Config{})
	items := func(xs ...string) [][]byte { return toArgs(xs...) }
	bf := func(capacity uint64, rate float64, exp uint32, ns bool) fsm.Spec {
		return fsm.Spec{Kind: filters.KindScalable, Capacity: capacity, ErrorRate: rate, Expansion: exp, NonScaling: ns}
	}
	cf := func(capacity uint64, bs, mi uint16, exp uint32) fsm.Spec {
		return fsm.Spec{Kind: filters.KindCuckoo, Capacity: capacity, BucketSize: bs, MaxIterations: mi,
			Expansion: exp, FingerprintBits: 8}
	}
	cases := []struct {
		line string
		want fsm.Command
	}{
		{"BF.RESERVE k 0.01 1000", fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyBF, Key: "k", Spec: bf(1000, 0.01, 2, false)}},
		{"bf.reserve k 0.001 5 nonscaling", fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyBF, Key: "k", Spec: bf(5, 0.001, 0, true)}},
		{"BF.RESERVE k 0.01 1000 EXPANSION 4", fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyBF, Key: "k", Spec: bf(1000, 0.01, 4, false)}},
		{"BF.RESERVE k 0.01 1000 EXPANSION 0", fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyBF, Key: "k", Spec: bf(1000, 0.01, 0, true)}},
		{"BF.RESERVE k 0.9 1000", fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyBF, Key: "k", Spec: bf(1000, 0.25, 2, false)}},
		{"BF.RESERVE k 0.01 1000 whatever", fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyBF, Key: "k", Spec: bf(1000, 0.01, 2, false)}},
		{"BF.RESERVE EXPANSION 0.01 1073741824", fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyBF, Key: "EXPANSION", Spec: bf(1<<30, 0.01, 2, false)}},
		{"BF.ADD k a", fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyBF, Key: "k", Items: items("a"), Spec: bfDefault}},
		{"bf.madd k a b", fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyBF, Key: "k", Items: items("a", "b"), Multi: true, Spec: bfDefault}},
		{"BF.INSERT k ITEMS a b", fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyBF, Key: "k", Items: items("a", "b"), Multi: true, Spec: bfDefault}},
		{"BF.INSERT k CAPACITY 1000 ERROR 0.001 EXPANSION 4 NOCREATE ITEMS a", fsm.Command{Op: fsm.OpAdd,
			Family: fsm.FamilyBF, Key: "k", Items: items("a"), Multi: true, NoCreate: true, Spec: bf(1000, 0.001, 4, false)}},
		{"BF.INSERT k EXPANSION 4 NONSCALING ITEMS a", fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyBF, Key: "k",
			Items: items("a"), Multi: true, Spec: bf(100, 0.01, 0, true)}},
		{"BF.INSERT k EXPANSION 0 ITEMS ITEMS", fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyBF, Key: "k",
			Items: items("ITEMS"), Multi: true, Spec: bf(100, 0.01, 0, true)}},
		{"BF.LOADCHUNK k 1 data", fsm.Command{Op: fsm.OpLoadChunk, Family: fsm.FamilyBF, Key: "k", Iter: 1, Data: []byte("data")}},
		{"CF.RESERVE k 1000", fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyCF, Key: "k", Spec: cf(1000, 2, 20, 1)}},
		{"CF.RESERVE k 1000 BUCKETSIZE 4 MAXITERATIONS 50 EXPANSION 3", fsm.Command{Op: fsm.OpReserve,
			Family: fsm.FamilyCF, Key: "k", Spec: cf(1000, 4, 50, 4)}},
		{"CF.RESERVE k 4 expansion 0", fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyCF, Key: "k", Spec: cf(4, 2, 20, 0)}},
		{"CF.RESERVE k 510 BUCKETSIZE 255", fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyCF, Key: "k", Spec: cf(510, 255, 20, 1)}},
		{"CF.ADD k a", fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyCF, Key: "k", Items: items("a"), Spec: cfDefault}},
		{"cf.addnx k a", fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyCF, Key: "k", Items: items("a"), NX: true, Spec: cfDefault}},
		{"CF.INSERT k CAPACITY 5000 NOCREATE ITEMS a b", fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyCF, Key: "k",
			Items: items("a", "b"), Multi: true, NoCreate: true, Spec: cf(5000, 2, 20, 1)}},
		{"CF.INSERTNX k ITEMS a", fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyCF, Key: "k", Items: items("a"),
			Multi: true, NX: true, Spec: cfDefault}},
		{"CF.DEL k a", fsm.Command{Op: fsm.OpDelete, Family: fsm.FamilyCF, Key: "k", Items: items("a")}},
		{"CF.LOADCHUNK k 9 data", fsm.Command{Op: fsm.OpLoadChunk, Family: fsm.FamilyCF, Key: "k", Iter: 9, Data: []byte("data")}},
		{"CBF.RESERVE k 0.01 1000", fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyCBF, Key: "k",
			Spec: fsm.Spec{Kind: filters.KindCounting, Capacity: 1000, ErrorRate: 0.01, CounterBits: 4}}},
		{"CBF.RESERVE k 0.01 1000 COUNTERBITS 8 LAYOUT dleft", fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyCBF,
			Key: "k", Spec: fsm.Spec{Kind: filters.KindDLeft, Capacity: 1000, ErrorRate: 0.01, CounterBits: 8}}},
		{"CBF.ADD k a", fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyCBF, Key: "k", Items: items("a"),
			Spec: fsm.Spec{Kind: filters.KindCounting, Capacity: 100, ErrorRate: 0.01, CounterBits: 4}}},
		{"CBF.MADD k a b", fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyCBF, Key: "k", Items: items("a", "b"), Multi: true,
			Spec: fsm.Spec{Kind: filters.KindCounting, Capacity: 100, ErrorRate: 0.01, CounterBits: 4}}},
		{"CBF.DEL k a", fsm.Command{Op: fsm.OpDelete, Family: fsm.FamilyCBF, Key: "k", Items: items("a")}},
		{"DEL a b a", fsm.Command{Op: fsm.OpDelKeys, Keys: []string{"a", "b", "a"}}},
		{"IDEM 7 3 BF.ADD k a", fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyBF, Key: "k", Items: items("a"),
			Spec: bfDefault, Session: fsm.Session{ClientID: 7, Seq: 3}}},
		{"idem 18446744073709551615 1 cf.del k a", fsm.Command{Op: fsm.OpDelete, Family: fsm.FamilyCF, Key: "k",
			Items: items("a"), Session: fsm.Session{ClientID: 1<<64 - 1, Seq: 1}}},
	}
	for _, c := range cases {
		o, err := parseLine(s, c.line)
		if err != nil {
			t.Errorf("%s: %v", c.line, err)
			continue
		}
		if o.kind != opWrite || o.cmd == nil {
			t.Errorf("%s: not a write", c.line)
			continue
		}
		if !reflect.DeepEqual(*o.cmd, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.line, *o.cmd, c.want)
		}
	}
}

// TestParseErrors checks every refusal's exact text (RedisBloom's where it has
// one) and that nothing is proposed.
func TestParseErrors(t *testing.T) {
	s := mustNewParser(t, Config{})
	cases := []struct{ line, want string }{
		{"BF.RESERVE k 0.01", "ERR wrong number of arguments for 'BF.RESERVE' command"},
		{"BF.RESERVE k 0.01 100 EXPANSION 2 NONSCALING x", "ERR wrong number of arguments for 'BF.RESERVE' command"},
		{"BF.RESERVE k abc 100", "ERR bad error rate"},
		{"BF.RESERVE k nan 100", "ERR bad error rate"},
		{"BF.RESERVE k 0 100", "ERR error rate must be in the range (0.000000, 1.000000)"},
		{"BF.RESERVE k 1 100", "ERR error rate must be in the range (0.000000, 1.000000)"},
		{"BF.RESERVE k -0.5 100", "ERR error rate must be in the range (0.000000, 1.000000)"},
		{"BF.RESERVE k inf 100", "ERR error rate must be in the range (0.000000, 1.000000)"},
		{"BF.RESERVE k 0.01 abc", "ERR bad capacity"},
		{"BF.RESERVE k 0.01 1.5", "ERR bad capacity"},
		{"BF.RESERVE k 0.01 0", "ERR capacity must be in the range [1, 1073741824]"},
		{"BF.RESERVE k 0.01 1073741825", "ERR capacity must be in the range [1, 1073741824]"},
		{"BF.RESERVE k 0.01 100 EXPANSION", "ERR no expansion"},
		{"BF.RESERVE k 0.01 100 EXPANSION x", "ERR bad expansion"},
		{"BF.RESERVE k 0.01 100 EXPANSION 32769", "ERR expansion must be in the range [0, 32768]"},
		{"BF.RESERVE k 0.01 100 EXPANSION -1", "ERR expansion must be in the range [0, 32768]"},
		{"BF.RESERVE k 0.01 100 NONSCALING EXPANSION 2", "Nonscaling filters cannot expand"},
		{"BF.RESERVE k 0.01 100 EXPANSION 2 NONSCALING", "Nonscaling filters cannot expand"},
		{"bf.add k", "ERR wrong number of arguments for 'bf.add' command"},
		{"Bf.Add k a b", "ERR wrong number of arguments for 'Bf.Add' command"},
		{"BF.MADD k", "ERR wrong number of arguments for 'BF.MADD' command"},
		{"BF.INSERT k ITEMS", "ERR wrong number of arguments for 'BF.INSERT' command"},
		{"BF.INSERT k NOCREATE", "ERR wrong number of arguments for 'BF.INSERT' command"},
		{"BF.INSERT k NOCREATE NONSCALING", "ERR wrong number of arguments for 'BF.INSERT' command"},
		{"BF.INSERT k x CAPACITY", "Unknown argument received"},
		{"BF.INSERT k NOCREATE CAPACITY", "ERR wrong number of arguments for 'BF.INSERT' command"},
		{"BF.INSERT k CAPACITY x ITEMS a", "Bad capacity"},
		{"BF.INSERT k CAPACITY 0 ITEMS a", "Bad capacity"},
		{"BF.INSERT k ERROR 2 ITEMS a", "Bad error rate"},
		{"BF.INSERT k ERROR x ITEMS a", "Bad error rate"},
		{"BF.INSERT k EXPANSION -1 ITEMS a", "Bad expansion"},
		{"BF.INSERT k FOO ITEMS a", "Unknown argument received"},
		{"BF.EXISTS k", "ERR wrong number of arguments for 'BF.EXISTS' command"},
		{"BF.MEXISTS k", "ERR wrong number of arguments for 'BF.MEXISTS' command"},
		{"BF.INFO k CAPACITY x", "ERR wrong number of arguments for 'BF.INFO' command"},
		{"BF.CARD", "ERR wrong number of arguments for 'BF.CARD' command"},
		{"BF.LOADCHUNK k x data", "ERR Second argument must be numeric"},
		{"CF.RESERVE k", "ERR wrong number of arguments for 'CF.RESERVE' command"},
		{"CF.RESERVE k 1000 BUCKETSIZE", "ERR wrong number of arguments for 'CF.RESERVE' command"},
		{"CF.RESERVE k 1000 x MAXITERATIONS", "ERR wrong number of arguments for 'CF.RESERVE' command"},
		{"CF.RESERVE k x", "Bad capacity"},
		{"CF.RESERVE k 3", "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]"},
		{"CF.RESERVE k 100 BUCKETSIZE 100", "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]"},
		{"CF.RESERVE k 1073741825", "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]"},
		{"CF.RESERVE k 1000 BUCKETSIZE x", "Couldn't parse BUCKETSIZE"},
		{"CF.RESERVE k 1000 MAXITERATIONS x", "Couldn't parse MAXITERATIONS"},
		{"CF.RESERVE k 1000 EXPANSION x", "Couldn't parse EXPANSION"},
		{"CF.RESERVE k 1000 BUCKETSIZE 0", "BUCKETSIZE: value must be in the range [1, 255]"},
		{"CF.RESERVE k 1000 BUCKETSIZE 256", "BUCKETSIZE: value must be in the range [1, 255]"},
		{"CF.RESERVE k 1000 MAXITERATIONS 0", "MAXITERATIONS: value must be in the range [1, 65535]"},
		{"CF.RESERVE k 1000 MAXITERATIONS 65536", "MAXITERATIONS: value must be in the range [1, 65535]"},
		{"CF.RESERVE k 1000 EXPANSION 32769", "EXPANSION: value must be in the range [0, 32768]"},
		{"CF.RESERVE k 1000 EXPANSION -1", "EXPANSION: value must be in the range [0, 32768]"},
		{"CF.ADD k", "ERR wrong number of arguments for 'CF.ADD' command"},
		{"CF.INSERT k ITEMS", "ERR wrong number of arguments for 'CF.INSERT' command"},
		{"CF.INSERT k CAPACITY x ITEMS a", "Bad capacity"},
		{"CF.INSERT k CAPACITY 3 ITEMS a", "Capacity must be in the range [cf-bucket-size * 2, 1073741824]"},
		{"CF.INSERT k FOO ITEMS a", "Unknown argument received"},
		{"CF.INSERTNX k NOCREATE a", "Unknown argument received"},
		{"CF.DEL k", "ERR wrong number of arguments for 'CF.DEL' command"},
		{"CF.COUNT k a b", "ERR wrong number of arguments for 'CF.COUNT' command"},
		{"CF.SCANDUMP k -1", "Invalid position"},
		{"CF.SCANDUMP k x", "Invalid position"},
		{"CF.LOADCHUNK k 0 data", "Invalid position"},
		{"CF.LOADCHUNK k x data", "Invalid position"},
		{"CBF.RESERVE k 0.01 100 COUNTERBITS 5", "ERR counter bits must be 4 or 8"},
		{"CBF.RESERVE k 0.01 100 LAYOUT x", "ERR layout must be standard or dleft"},
		{"CBF.RESERVE k 0.01 100 LAYOUT", "ERR wrong number of arguments for 'CBF.RESERVE' command"},
		{"CBF.RESERVE k 0.01 100 FOO 1", "ERR syntax error"},
		{"CBF.RESERVE k x 100", "ERR bad error rate"},
		{"CBF.RESERVE k 0.01 0", "ERR capacity must be in the range [1, 1073741824]"},
		{"FOO a b", "ERR unknown command 'FOO', with args beginning with: 'a' 'b' "},
		{"FOO", "ERR unknown command 'FOO', with args beginning with: "},
		{"DEL", "ERR wrong number of arguments for 'DEL' command"},
		{"SCAN x", "ERR invalid cursor"},
		{"SCAN -1", "ERR invalid cursor"},
		{"SCAN 0 COUNT 0", "ERR syntax error"},
		{"SCAN 0 COUNT x", "ERR value is not an integer or out of range"},
		{"SCAN 0 MATCH", "ERR syntax error"},
		{"SCAN 0 FOO 1", "ERR syntax error"},
		{"IDEM x 1 BF.ADD k a", "ERR invalid client id"},
		{"IDEM 1 0 BF.ADD k a", "ERR invalid sequence number"},
		{"IDEM 1 -1 BF.ADD k a", "ERR invalid sequence number"},
		{"IDEM 1 1 IDEM 1 1 PING", "ERR IDEM cannot wrap IDEM"},
		{"IDEM 1 1 NOPE x", "ERR unknown command 'NOPE', with args beginning with: 'x' "},
		{"IDEM 1 1 BF.ADD k", "ERR wrong number of arguments for 'BF.ADD' command"},
		{"IDEM 1 1", "ERR wrong number of arguments for 'IDEM' command"},
		{"SELECT 1", "ERR DB index is out of range"},
		{"SELECT x", "ERR value is not an integer or out of range"},
		{"PING a b", "ERR wrong number of arguments for 'PING' command"},
		{"HELLO 4", "NOPROTO unsupported protocol version"},
		{"HELLO x", "ERR Protocol version is not an integer or out of range"},
		{"HELLO 3 FOO", "ERR Syntax error in HELLO option 'FOO'"},
		{"HELLO 3 AUTH default", "ERR Syntax error in HELLO option 'AUTH'"},
		{"AUTH x", "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"},
		{"AUTH a b c", "ERR syntax error"},
		{"CLIENT FOO", "ERR unknown subcommand 'FOO'. Try CLIENT HELP."},
		{"CLIENT SETNAME", "ERR wrong number of arguments for 'client|setname' command"},
		{"CLIENT SETINFO FOO x", "ERR Unrecognized option 'FOO'"},
		{"COMMAND FOO", "ERR unknown subcommand 'FOO'. Try COMMAND HELP."},
		{"CLUSTER FOO", "ERR unknown subcommand 'FOO'. Try CLUSTER HELP."},
	}
	for _, c := range cases {
		_, err := parseLine(s, c.line)
		if err == nil {
			t.Errorf("%s: no error, want %q", c.line, c.want)
			continue
		}
		if got := renderErr(err); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.line, got, c.want)
		}
	}
}

func TestParseUnknownCommandTruncates(t *testing.T) {
	s := mustNewParser(t, Config{})
	long := strings.Repeat("x", 300)
	_, err := parseLine(s, "NOPE "+long+" b")
	want := "ERR unknown command 'NOPE', with args beginning with: '" + strings.Repeat("x", 128) + "' "
	if err == nil || err.Error() != want {
		t.Fatalf("got %q", err)
	}
}

// TestParseLimits checks the configured limits: item size, items per command,
// key size, capacity. Each gets a clear error and nothing is proposed.
func TestParseLimits(t *testing.T) {
	s := mustNewParser(t, Config{MaxItemBytes: 8, MaxItemsPerCommand: 3, MaxCapacity: 1000})
	cases := []struct{ line, want string }{
		{"BF.ADD k 123456789", "ERR item too large: 9 bytes (max 8)"},
		{"BF.MADD k a b c d", "ERR too many items in one command: 4 (max 3)"},
		{"CF.INSERT k ITEMS a b c d", "ERR too many items in one command: 4 (max 3)"},
		{"BF.MEXISTS k a b c d", "ERR too many items in one command: 4 (max 3)"},
		{"DEL a b c d", "ERR too many items in one command: 4 (max 3)"},
		{"BF.ADD 123456789 a", "ERR key name too long: 9 bytes (max 8)"},
		{"CF.DEL k 123456789", "ERR item too large: 9 bytes (max 8)"},
		{"BF.RESERVE k 0.01 1001", "ERR capacity must be in the range [1, 1000]"},
		{"BF.INSERT k CAPACITY 1001 ITEMS a", "Bad capacity"},
		{"CF.RESERVE k 1001", "Capacity must be in the range [2 * BUCKETSIZE, 1000]"},
		{"CBF.RESERVE k 0.01 1001", "ERR capacity must be in the range [1, 1000]"},
	}
	for _, c := range cases {
		_, err := parseLine(s, c.line)
		if err == nil || renderErr(err) != c.want {
			t.Errorf("%s: got %v, want %q", c.line, err, c.want)
		}
	}
	if _, err := parseLine(s, "BF.MADD k a b c"); err != nil {
		t.Errorf("at the limit: %v", err)
	}
}

// TestParseAuth: before AUTH only AUTH, HELLO, PING and QUIT are served;
// anything else answers NOAUTH, unknown commands and arity errors included.
func TestParseAuth(t *testing.T) {
	s := mustNewParser(t, Config{RequirePass: "secret"})
	c := &session{proto: 2}
	for _, line := range []string{"BF.ADD k a", "IDEM 1 1 BF.ADD k a", "SELECT 0", "NOPE", "BF.ADD k", "CLIENT NOPE"} {
		if _, err := s.parse(c, toArgs(strings.Fields(line)...)); err != errNoAuth {
			t.Errorf("%s: %v, want NOAUTH", line, err)
		}
	}
	for _, line := range []string{"PING", "PING hi", "QUIT", "HELLO", "AUTH x"} {
		if _, err := s.parse(c, toArgs(strings.Fields(line)...)); err != nil {
			t.Errorf("%s before AUTH: %v", line, err)
		}
	}
	w := reply{proto: 2}
	o, err := s.parse(c, toArgs("AUTH", "wrong"))
	if err != nil {
		t.Fatal(err)
	}
	o.local(c, &w)
	if string(w.b) != "-"+string(errWrongPass)+"\r\n" || c.authed {
		t.Fatalf("wrong password: %q authed=%v", w.b, c.authed)
	}
	w.b = nil
	o, _ = s.parse(c, toArgs("AUTH", "default", "secret"))
	o.local(c, &w)
	if string(w.b) != "+OK\r\n" || !c.authed {
		t.Fatalf("right password: %q authed=%v", w.b, c.authed)
	}
	if _, err := s.parse(c, toArgs("PING")); err != nil {
		t.Fatalf("after auth: %v", err)
	}
}

// TestParseKinds checks which requests are reads, writes and local.
func TestParseKinds(t *testing.T) {
	s := mustNewParser(t, Config{})
	cases := map[string]opKind{
		"BF.EXISTS k a": opRead, "BF.MEXISTS k a b": opRead, "BF.CARD k": opRead, "BF.INFO k": opRead,
		"BF.SCANDUMP k 0": opRead, "CF.EXISTS k a": opRead, "CF.COUNT k a": opRead, "CF.INFO k": opRead,
		"CF.SCANDUMP k 0": opRead, "CBF.COUNT k a": opRead, "CBF.INFO k": opRead, "EXISTS a b": opRead,
		"TYPE k": opRead, "SCAN 0": opRead, "KEYS *": opRead, "DBSIZE": opRead,
		"IDEM 1 1 BF.EXISTS k a": opRead,
		"PING":                   opLocal, "READONLY": opLocal, "READWRITE": opLocal, "ROLE": opLocal, "CLUSTER NODES": opLocal,
		"HELLO": opLocal, "INFO": opLocal, "COMMAND": opLocal, "COMMAND COUNT": opLocal, "QUIT": opLocal,
		"CLIENT ID": opLocal, "ECHO x": opLocal,
	}
	for line, want := range cases {
		o, err := parseLine(s, line)
		if err != nil || o.kind != want {
			t.Errorf("%s: kind %v err %v, want kind %v", line, o.kind, err, want)
		}
	}
}

func TestParseNumbers(t *testing.T) {
	ints := map[string]bool{"0": true, "1": true, "-1": true, "9223372036854775807": true,
		"-9223372036854775808": true, "9223372036854775808": false, "01": false, "-0": false,
		"+1": false, " 1": false, "1 ": false, "": false, "-": false, "1e3": false,
		"99999999999999999999": false}
	for in, ok := range ints {
		if _, got := parseInt64([]byte(in)); got != ok {
			t.Errorf("parseInt64(%q) ok=%v", in, got)
		}
	}
	floats := map[string]bool{"0.01": true, "1e-3": true, "-1": true, ".5": true, "inf": true,
		"nan": false, " 1": false, "1 ": false, "": false, "x": false, "1e400": false}
	for in, ok := range floats {
		if _, got := parseFloat([]byte(in)); got != ok {
			t.Errorf("parseFloat(%q) ok=%v", in, got)
		}
	}
	if v, ok := parseUint64([]byte("18446744073709551615")); !ok || v != 1<<64-1 {
		t.Errorf("parseUint64 max: %d %v", v, ok)
	}
	for _, bad := range []string{"18446744073709551616", "-1", "01", "", "1x"} {
		if _, ok := parseUint64([]byte(bad)); ok {
			t.Errorf("parseUint64(%q) accepted", bad)
		}
	}
}

func TestReadLevelCommands(t *testing.T) {
	s := mustNewParser(t, Config{})
	c := &session{proto: 2, authed: true}
	for _, step := range []struct {
		cmd  string
		want cluster.ReadLevel
	}{{"READONLY", cluster.ReadStale}, {"READWRITE", cluster.ReadLinearizable}} {
		o, err := s.parse(c, toArgs(step.cmd))
		if err != nil {
			t.Fatal(err)
		}
		w := reply{proto: 2}
		o.local(c, &w)
		if c.level != step.want || string(w.b) != "+OK\r\n" {
			t.Errorf("%s: level %v reply %q", step.cmd, c.level, w.b)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"*", "abc", true}, {"a*", "abc", true}, {"a*", "bac", false},
		{"*c", "abc", true}, {"a*b*c", "axxbyyc", true}, {"a*b*c", "axxbyy", false},
		{"h?llo", "hello", true}, {"h?llo", "hllo", false}, {"h[ae]llo", "hallo", true},
		{"h[ae]llo", "hillo", false}, {"h[^e]llo", "hallo", true}, {"h[^e]llo", "hello", false},
		{"h[a-b]llo", "hbllo", true}, {"h[b-a]llo", "hallo", true}, {"h[a-b]llo", "hcllo", false},
		{`h\*llo`, "h*llo", true}, {`h\*llo`, "hello", false}, {`[\]]`, "]", true},
		{"[abc", "b", true}, {"[]", "a", false}, {"**a", "xa", true}, {"", "", true}, {"", "a", false},
		{`a\`, `a\`, true}, {strings.Repeat("*a", 30) + "b", strings.Repeat("a", 60), false},
	}
	for _, c := range cases {
		if got := globMatch([]byte(c.p), []byte(c.s)); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v", c.p, c.s, got)
		}
	}
}
