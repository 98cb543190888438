package transport

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/fsm"
)

func TestModule(t *testing.T) {
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	if got := c.do("MODULE", "LIST"); got != "*1\r\n*8\r\n$4\r\nname\r\n$2\r\nbf\r\n$3\r\nver\r\n:20628\r\n$4\r\npath\r\n$0\r\n\r\n$4\r\nargs\r\n*0\r\n" {
		t.Errorf("MODULE LIST: %q", got)
	}
	refused := "-ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it " +
		"from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.\r\n"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"MODULE", "LOAD", "/x.so"}, refused},
		{[]string{"module", "loadex", "/x.so", "ARGS", "a"}, refused},
		{[]string{"MODULE", "UNLOAD", "bf"}, refused},
		{[]string{"MODULE", "LOAD"}, "-ERR wrong number of arguments for 'module|load' command\r\n"},
		{[]string{"MODULE", "LIST", "x"}, "-ERR wrong number of arguments for 'module|list' command\r\n"},
		{[]string{"MODULE", "nope"}, "-ERR unknown subcommand 'nope'. Try MODULE HELP.\r\n"},
	} {
		if got := c.do(tc.args...); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
	}
	help := c.do("MODULE", "HELP")
	want := "*11\r\n+MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+LIST\r\n+    Return a list of loaded modules.\r\n"
	if !strings.HasPrefix(help, want) {
		t.Errorf("MODULE HELP: %q", help)
	}
	c.do("HELLO", "3")
	if got := c.do("MODULE", "LIST"); got != "*1\r\n%4\r\n$4\r\nname\r\n$2\r\nbf\r\n$3\r\nver\r\n:20628\r\n$4\r\npath\r\n$0\r\n\r\n$4\r\nargs\r\n*0\r\n" {
		t.Errorf("MODULE LIST in RESP3: %q", got)
	}
	// go-redis parses it.
	rc := newGoRedis(t, ts.addr, 3, "")
	if ms, err := rc.Do(context.Background(), "MODULE", "LIST").Slice(); err != nil || len(ms) != 1 {
		t.Errorf("go-redis MODULE LIST: %v %v", ms, err)
	}
}

func TestMemoryUsage(t *testing.T) {
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	c.do("CF.RESERVE", "cuckoo", "1000")
	c.do("BF.ADD", "bloom", "x")
	total := uint64(0)
	for _, k := range []string{"cuckoo", "bloom"} {
		n, ok := ts.be.fsm.MemoryUsage(k)
		if !ok {
			t.Fatalf("%s missing", k)
		}
		total += n
		if got := c.do("MEMORY", "USAGE", k); got != ":"+strconv.FormatUint(n, 10)+"\r\n" {
			t.Errorf("MEMORY USAGE %s: %q, want %d", k, got, n)
		}
		if got := c.do("MEMORY", "USAGE", k, "SAMPLES", "0"); got != ":"+strconv.FormatUint(n, 10)+"\r\n" {
			t.Errorf("MEMORY USAGE %s SAMPLES 0: %q", k, got)
		}
	}
	if total != ts.be.fsm.MemoryBytes() {
		t.Errorf("MEMORY USAGE of every key sums to %d, the node counts %d", total, ts.be.fsm.MemoryBytes())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"MEMORY", "USAGE", "missing"}, "$-1\r\n"},
		{[]string{"MEMORY", "USAGE", "bloom", "SAMPLES"}, "-ERR syntax error\r\n"},
		{[]string{"MEMORY", "USAGE", "bloom", "SAMPLES", "-1"}, "-ERR syntax error\r\n"},
		{[]string{"MEMORY", "USAGE", "bloom", "SAMPLES", "x"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"MEMORY", "USAGE", "bloom", "FOO", "1"}, "-ERR syntax error\r\n"},
		{[]string{"MEMORY", "USAGE"}, "-ERR wrong number of arguments for 'memory|usage' command\r\n"},
		{[]string{"MEMORY", "DOCTOR"}, "-ERR unknown subcommand 'DOCTOR'. Try MEMORY HELP.\r\n"},
	} {
		if got := c.do(tc.args...); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
	}
	c.do("HELLO", "3")
	if got := c.do("MEMORY", "USAGE", "missing"); got != "_\r\n" {
		t.Errorf("MEMORY USAGE of a missing key in RESP3: %q", got)
	}
}

func TestUnlinkAndTime(t *testing.T) {
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	c.do("BF.ADD", "a", "x")
	c.do("BF.ADD", "b", "x")
	if got := c.do("UNLINK", "a", "b", "c", "a"); got != ":2\r\n" {
		t.Errorf("UNLINK: %q", got)
	}
	cmds := ts.be.submitted()
	if u := cmds[len(cmds)-1]; u.Op != fsm.OpDelKeys || strings.Join(u.Keys, ",") != "a,b,c,a" {
		t.Errorf("UNLINK submitted %+v, want DEL's command", u)
	}
	if got := c.do("UNLINK"); got != "-ERR wrong number of arguments for 'UNLINK' command\r\n" {
		t.Errorf("UNLINK alone: %q", got)
	}

	before := time.Now()
	got := c.do("TIME")
	after := time.Now()
	parts := strings.Split(got, "\r\n")
	if len(parts) != 6 || parts[0] != "*2" {
		t.Fatalf("TIME: %q", got)
	}
	sec, _ := strconv.ParseInt(parts[2], 10, 64)
	usec, _ := strconv.ParseInt(parts[4], 10, 64)
	at := time.Unix(sec, usec*1000)
	if usec < 0 || usec > 999999 || at.Before(before.Truncate(time.Microsecond)) || at.After(after) {
		t.Errorf("TIME %v not between %v and %v", at, before, after)
	}
	if got := c.do("TIME", "x"); got != "-ERR wrong number of arguments for 'TIME' command\r\n" {
		t.Errorf("TIME x: %q", got)
	}
}

func TestCommandSubcommands(t *testing.T) {
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"COMMAND", "COUNT"}, ":" + strconv.Itoa(len(ts.s.cmds)) + "\r\n"},
		{[]string{"COMMAND", "INFO", "nosuch"}, "*1\r\n$-1\r\n"},
		{[]string{"COMMAND", "INFO", "config|get"}, "*1\r\n*10\r\n$10\r\nconfig|get\r\n:-3\r\n*2\r\n+loading\r\n+stale\r\n:0\r\n:0\r\n:0\r\n*3\r\n+@admin\r\n+@slow\r\n+@dangerous\r\n*0\r\n*0\r\n*0\r\n"},
		{[]string{"COMMAND", "GETKEYS", "BF.ADD", "k", "x"}, "*1\r\n$1\r\nk\r\n"},
		{[]string{"COMMAND", "GETKEYS", "DEL", "a", "b"}, "*2\r\n$1\r\na\r\n$1\r\nb\r\n"},
		{[]string{"COMMAND", "GETKEYS", "RENAME", "a", "b"}, "*2\r\n$1\r\na\r\n$1\r\nb\r\n"},
		{[]string{"COMMAND", "GETKEYS", "memory", "usage", "k"}, "*1\r\n$1\r\nk\r\n"},
		{[]string{"COMMAND", "GETKEYS", "PING"}, "-ERR The command has no key arguments\r\n"},
		{[]string{"COMMAND", "GETKEYS", "nosuch", "x"}, "-ERR Invalid command specified\r\n"},
		{[]string{"COMMAND", "GETKEYS", "BF.ADD", "k"}, "-ERR Invalid number of arguments specified for command\r\n"},
		{[]string{"COMMAND", "LIST", "FILTERBY", "PATTERN", "cf.*x*"}, "*4\r\n$8\r\ncf.addnx\r\n$9\r\ncf.exists\r\n$11\r\ncf.insertnx\r\n$10\r\ncf.mexists\r\n"},
		{[]string{"COMMAND", "LIST", "FILTERBY", "PATTERN", "config|*"}, "*4\r\n$10\r\nconfig|get\r\n$11\r\nconfig|help\r\n$16\r\nconfig|resetstat\r\n$10\r\nconfig|set\r\n"},
		{[]string{"COMMAND", "LIST", "FILTERBY", "ACLCAT", "bloom"}, "*11\r\n$6\r\nbf.add\r\n$7\r\nbf.card\r\n$8\r\nbf.debug\r\n$9\r\nbf.exists\r\n$7\r\nbf.info\r\n$9\r\nbf.insert\r\n$12\r\nbf.loadchunk\r\n$7\r\nbf.madd\r\n$10\r\nbf.mexists\r\n$10\r\nbf.reserve\r\n$11\r\nbf.scandump\r\n"},
		{[]string{"COMMAND", "LIST", "FILTERBY", "ACLCAT", "nosuch"}, "-ERR Unknown category 'nosuch'\r\n"},
		{[]string{"COMMAND", "LIST", "FILTERBY", "MODULE", "nosuch"}, "*0\r\n"},
		{[]string{"COMMAND", "LIST", "FILTERBY", "BOGUS", "x"}, "-ERR syntax error\r\n"},
		{[]string{"COMMAND", "LIST", "x"}, "-ERR syntax error\r\n"},
		{[]string{"COMMAND", "NOPE"}, "-ERR unknown subcommand 'NOPE'. Try COMMAND HELP.\r\n"},
		{[]string{"COMMAND", "COUNT", "x"}, "-ERR wrong number of arguments for 'command|count' command\r\n"},
	} {
		if got := c.do(tc.args...); got != tc.want {
			t.Errorf("%v:\n got %q\nwant %q", tc.args, got, tc.want)
		}
	}
	mods := c.do("COMMAND", "LIST", "FILTERBY", "MODULE", "bf")
	if n := strings.Count(mods, "\r\n$"); n != len(filterDocs) || !strings.Contains(mods, "$7\r\nbf.card\r\n") || strings.Contains(mods, "$4\r\nping\r\n") {
		t.Errorf("COMMAND LIST FILTERBY MODULE bf: %d names, want %d: %q", n, len(filterDocs), mods)
	}
	all := c.do("COMMAND", "LIST")
	if !strings.Contains(all, "$11\r\nclient|list\r\n") || !strings.Contains(all, "$6\r\nbf.add\r\n") {
		t.Errorf("COMMAND LIST: %q", all)
	}
	// Containers list their subcommands as COMMAND entries.
	info := c.do("COMMAND", "INFO", "memory")
	want := "*1\r\n*10\r\n$6\r\nmemory\r\n:-2\r\n*0\r\n:0\r\n:0\r\n:0\r\n*1\r\n+@slow\r\n*0\r\n*0\r\n*2\r\n*10\r\n$11\r\nmemory|help\r\n"
	if !strings.HasPrefix(info, want) {
		t.Errorf("COMMAND INFO memory: %q", info)
	}
	c.do("HELLO", "3")
	if got := c.do("COMMAND", "INFO", "bf.card"); got != "*1\r\n*10\r\n$7\r\nbf.card\r\n:2\r\n~2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n~3\r\n+@read\r\n+@fast\r\n+@bloom\r\n*0\r\n*0\r\n~0\r\n" {
		t.Errorf("COMMAND INFO in RESP3: %q", got)
	}
}

// TestCommandDocs: every command served is documented, the filter commands
// argument by argument, in Redis 7's shape.
func TestCommandDocs(t *testing.T) {
	s := mustNewParser(t, Config{})
	for _, cmd := range s.cmdList {
		for _, x := range append([]*command{cmd}, cmd.subs...) {
			d := docOf(x.name)
			if d.summary == "" || d.since == "" || d.complexity == "" {
				t.Errorf("%s has no documentation", x.name)
			}
			if strings.Contains(x.name, ".") != (d.module == "bf") || (d.module == "bf") != (d.group == "module") {
				t.Errorf("%s: group %q module %q", x.name, d.group, d.module)
			}
			min := x.arity
			if min < 0 {
				min = -min
			}
			if x.subs == nil && requiredArgs(d.args)+1+strings.Count(x.name, "|") != min {
				t.Errorf("%s: %d required arguments documented, arity %d", x.name, requiredArgs(d.args), x.arity)
			}
		}
	}
	for name := range filterDocs {
		if s.cmds[name] == nil {
			t.Errorf("documented %s is not served", name)
		}
	}
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	want := "*2\r\n$7\r\nbf.card\r\n*12\r\n$7\r\nsummary\r\n$51\r\nReturns the number of items added to a Bloom filter\r\n" +
		"$5\r\nsince\r\n$5\r\n2.4.4\r\n$5\r\ngroup\r\n$6\r\nmodule\r\n$10\r\ncomplexity\r\n$4\r\nO(1)\r\n" +
		"$6\r\nmodule\r\n$2\r\nbf\r\n$9\r\narguments\r\n*1\r\n*6\r\n$4\r\nname\r\n$3\r\nkey\r\n$4\r\ntype\r\n$3\r\nkey\r\n" +
		"$12\r\ndisplay_text\r\n$3\r\nkey\r\n"
	if got := c.do("COMMAND", "DOCS", "BF.CARD", "nosuch"); got != want {
		t.Errorf("COMMAND DOCS BF.CARD:\n got %q\nwant %q", got, want)
	}
	c.do("HELLO", "3")
	want = "%1\r\n$9\r\nbf.insert\r\n%6\r\n"
	got := c.do("COMMAND", "DOCS", "bf.insert")
	if !strings.HasPrefix(got, want) || !strings.Contains(got, "$5\r\ntoken\r\n$5\r\nITEMS\r\n$5\r\nflags\r\n~1\r\n+multiple\r\n") {
		t.Errorf("COMMAND DOCS bf.insert in RESP3: %q", got)
	}
	if got := c.do("COMMAND", "DOCS", "client|kill"); !strings.HasPrefix(got, "%1\r\n$11\r\nclient|kill\r\n%5\r\n") {
		t.Errorf("COMMAND DOCS client|kill: %q", got)
	}
}

// requiredArgs counts the arguments a command cannot do without.
func requiredArgs(args []argDoc) int {
	n := 0
	for _, a := range args {
		switch {
		case a.optional:
		case a.typ == "oneof":
			n += requiredArgs(a.args[:1])
		case a.typ == "block":
			n += requiredArgs(a.args)
		case a.token != "" && a.typ != "pure-token":
			n += 2
		default:
			n++
		}
	}
	return n
}

// TestRedisCLIHelp runs redis-cli against the server: it builds its help and
// argument hints from COMMAND DOCS (and would abort on a reply of the wrong
// shape), and shows each filter command's syntax.
func TestRedisCLIHelp(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redis-cli is needed for this test: %v", err)
	}
	ts := mustStartServer(t, Config{})
	port := ts.addr[strings.LastIndex(ts.addr, ":")+1:]
	for _, tc := range []struct{ cmd, hint string }{
		{"bf.insert", "BF.INSERT key [CAPACITY capacity] [ERROR error] [EXPANSION expansion] [NOCREATE] [NONSCALING] ITEMS item [item ...]"},
		{"bf.reserve", "BF.RESERVE key error_rate capacity [EXPANSION expansion] [NONSCALING] [WINDOW duration|LAST n]"},
		{"bf.info", "BF.INFO key [CAPACITY|SIZE|FILTERS|ITEMS|EXPANSION|WINDOW]"},
		{"bf.madd", "BF.MADD key item [item ...]"},
		{"cf.reserve", "CF.RESERVE key capacity [BUCKETSIZE bucketsize] [MAXITERATIONS maxiterations] [EXPANSION expansion] [WINDOW duration]"},
		{"cf.insertnx", "CF.INSERTNX key [CAPACITY capacity] [NOCREATE] ITEMS item [item ...]"},
		{"cf.loadchunk", "CF.LOADCHUNK key iterator data"},
		{"cbf.reserve", "CBF.RESERVE key error_rate capacity [COUNTERBITS 4|8] [LAYOUT STANDARD|DLEFT]"},
		{"client list", "CLIENT LIST [TYPE NORMAL|MASTER|REPLICA|PUBSUB] [ID client-id [client-id ...]]"},
		{"config set", "CONFIG SET parameter value [parameter value ...]"},
	} {
		out, err := exec.Command(cli, append([]string{"-p", port, "help"}, strings.Fields(tc.cmd)...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli help %s: %v\n%s", tc.cmd, err, out)
		}
		plain := strings.NewReplacer("\x1b[1m", "", "\x1b[0m", "", "\x1b[90m", "", "\x1b[33m", "", "\r", "").Replace(string(out))
		if !strings.Contains(plain, "  "+tc.hint+"\n") || !strings.Contains(plain, "summary: "+docOf(strings.ReplaceAll(tc.cmd, " ", "|")).summary) {
			t.Errorf("redis-cli help %s:\n%s\nwant the line %q", tc.cmd, plain, tc.hint)
		}
	}
}
