package transport

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clientLine matches one CLIENT LIST line in Redis 7.2's field order.
var clientLine = regexp.MustCompile(`^id=(\d+) addr=(\S+) laddr=(\S+) fd=(-?\d+) name=(\S*) age=(\d+) idle=(\d+) ` +
	`flags=([A-Za-z]+) db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=(\d+) qbuf-free=(\d+) argv-mem=0 multi-mem=0 ` +
	`rbs=(\d+) rbp=(\d+) obl=0 oll=0 omem=0 tot-mem=(\d+) events=r cmd=(\S+) user=default redir=-1 resp=([23]) ` +
	`lib-name=(\S*) lib-ver=(\S*)$`)

// clientLines parses a CLIENT LIST reply: one line each, ending in a newline.
func clientLines(t *testing.T, reply string) [][]string {
	t.Helper()
	text := infoText(t, reply)
	if text == "" {
		return nil
	}
	if !strings.HasSuffix(text, "\n") {
		t.Fatalf("CLIENT LIST does not end with a newline: %q", text)
	}
	var out [][]string
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		m := clientLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("bad CLIENT LIST line %q", l)
		}
		out = append(out, m)
	}
	return out
}

func TestClientListAndInfo(t *testing.T) {
	ts := mustStartServer(t, Config{})
	a, b := dialRaw(t, ts.addr), dialRaw(t, ts.addr)
	a.do("CLIENT", "SETNAME", "alpha")
	a.do("CLIENT", "SETINFO", "LIB-NAME", "go-redis(x)")
	a.do("CLIENT", "SETINFO", "LIB-VER", "9.7.3")
	a.do("BF.ADD", "k", "x")
	b.do("HELLO", "3")
	b.do("READONLY")
	idA, idB := a.do("CLIENT", "ID"), b.do("CLIENT", "ID")

	lines := clientLines(t, b.do("CLIENT", "LIST"))
	if len(lines) != 2 {
		t.Fatalf("CLIENT LIST: %d lines", len(lines))
	}
	la, lb := lines[0], lines[1]
	if ":"+la[1]+"\r\n" != idA || ":"+lb[1]+"\r\n" != idB {
		t.Fatalf("ids %s %s, want %q %q (in id order)", la[1], lb[1], idA, idB)
	}
	check := func(m []string, name, flags, cmd, resp, lib, ver string) {
		t.Helper()
		if m[5] != name || m[8] != flags || m[14] != cmd || m[15] != resp || m[16] != lib || m[17] != ver {
			t.Errorf("line %q: want name=%s flags=%s cmd=%s resp=%s lib-name=%s lib-ver=%s", m[0], name, flags, cmd, resp, lib, ver)
		}
		if m[3] != ts.addr {
			t.Errorf("laddr %s, want %s", m[3], ts.addr)
		}
		if m[4] == "-1" {
			t.Errorf("fd unknown in %q", m[0])
		}
	}
	check(la, "alpha", "N", "client|id", "2", "go-redis(x)", "9.7.3")
	check(lb, "", "r", "client|list", "3", "", "")

	// CLIENT INFO is the caller's own line, with its newline, as verbatim text.
	info := b.do("CLIENT", "INFO")
	if !strings.HasPrefix(info, "=") {
		t.Fatalf("CLIENT INFO in RESP3: %q", info)
	}
	if got := clientLines(t, info); len(got) != 1 || got[0][1] != lb[1] || got[0][14] != "client|info" {
		t.Errorf("CLIENT INFO: %q", info)
	}
	if got := a.do("CLIENT", "INFO"); !strings.HasPrefix(got, "$") || clientLines(t, got)[0][2] != la[2] {
		t.Errorf("CLIENT INFO in RESP2: %q", got)
	}

	// Filters.
	if got := clientLines(t, a.do("CLIENT", "LIST", "ID", lb[1], "999", lb[1])); len(got) != 2 || got[0][1] != lb[1] {
		t.Errorf("CLIENT LIST ID: %v", got)
	}
	if got := clientLines(t, a.do("CLIENT", "LIST", "TYPE", "normal")); len(got) != 2 {
		t.Errorf("CLIENT LIST TYPE normal: %d lines", len(got))
	}
	for _, tp := range []string{"master", "replica", "slave", "PUBSUB"} {
		if got := a.do("CLIENT", "LIST", "TYPE", tp); got != "$0\r\n\r\n" {
			t.Errorf("CLIENT LIST TYPE %s: %q", tp, got)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"CLIENT", "LIST", "TYPE", "bogus"}, "-ERR Unknown client type 'bogus'\r\n"},
		{[]string{"CLIENT", "LIST", "ID", "x"}, "-ERR Invalid client ID\r\n"},
		{[]string{"CLIENT", "LIST", "TYPE"}, "-ERR syntax error\r\n"},
		{[]string{"CLIENT", "LIST", "FOO", "bar"}, "-ERR syntax error\r\n"},
		{[]string{"CLIENT", "INFO", "x"}, "-ERR wrong number of arguments for 'client|info' command\r\n"},
		{[]string{"CLIENT"}, "-ERR wrong number of arguments for 'CLIENT' command\r\n"},
		{[]string{"client", "nosuch"}, "-ERR unknown subcommand 'nosuch'. Try CLIENT HELP.\r\n"},
	} {
		if got := a.do(tc.args...); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestClientListIdle: idle counts from the last request, age from the
// connection.
func TestClientListIdle(t *testing.T) {
	ts := mustStartServer(t, Config{})
	a, b := dialRaw(t, ts.addr), dialRaw(t, ts.addr)
	a.do("PING")
	time.Sleep(1100 * time.Millisecond)
	lines := clientLines(t, b.do("CLIENT", "LIST"))
	age, _ := strconv.Atoi(lines[0][6])
	idle, _ := strconv.Atoi(lines[0][7])
	if age < 1 || idle < 1 || idle > age || lines[1][7] != "0" {
		t.Errorf("age/idle of the sleeper %s/%s, of the caller idle %s", lines[0][6], lines[0][7], lines[1][7])
	}
}

func TestClientKill(t *testing.T) {
	ts := mustStartServer(t, Config{})
	me := dialRaw(t, ts.addr)
	victim := dialRaw(t, ts.addr)
	victim.do("PING")
	lines := clientLines(t, me.do("CLIENT", "LIST"))
	vAddr, vID, myAddr := lines[1][2], lines[1][1], lines[0][2]

	// Old form: OK, and the connection is closed.
	if got := me.do("CLIENT", "KILL", vAddr); got != "+OK\r\n" {
		t.Fatalf("CLIENT KILL addr: %q", got)
	}
	victim.expectClosed()
	waitFor(t, "the killed connection to go", func() bool { return len(ts.s.connList()) == 1 })
	if got := me.do("CLIENT", "KILL", vAddr); got != "-ERR No such client\r\n" {
		t.Errorf("CLIENT KILL of a gone address: %q", got)
	}
	_ = vID

	// New form: a count; every filter must match; the caller is skipped unless SKIPME no.
	v2 := dialRaw(t, ts.addr)
	v2.do("PING")
	l2 := clientLines(t, me.do("CLIENT", "LIST"))[1]
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ID", "999"}, ":0\r\n"},
		{[]string{"ID", l2[1], "ADDR", "1.2.3.4:5"}, ":0\r\n"},
		{[]string{"TYPE", "pubsub"}, ":0\r\n"},
		{[]string{"MAXAGE", "1000"}, ":0\r\n"},
		{[]string{"LADDR", ts.addr, "ADDR", myAddr}, ":0\r\n"}, // that is me, skipped
		{[]string{"ID", "0"}, "-ERR client-id should be greater than 0\r\n"},
		{[]string{"ID", "x"}, "-ERR client-id should be greater than 0\r\n"},
		{[]string{"MAXAGE", "0"}, "-ERR maxage should be greater than 0\r\n"},
		{[]string{"MAXAGE", "x"}, "-ERR maxage is not an integer or out of range\r\n"},
		{[]string{"TYPE", "x"}, "-ERR Unknown client type 'x'\r\n"},
		{[]string{"USER", "bob"}, "-ERR No such user 'bob'\r\n"},
		{[]string{"SKIPME", "maybe"}, "-ERR syntax error\r\n"},
		{[]string{"BOGUS", "1"}, "-ERR syntax error\r\n"},
		{[]string{"ID", "1", "ADDR"}, "-ERR syntax error\r\n"},
	} {
		if got := me.do(append([]string{"CLIENT", "KILL"}, tc.args...)...); got != tc.want {
			t.Errorf("CLIENT KILL %v: %q, want %q", tc.args, got, tc.want)
		}
	}
	if got := me.do("CLIENT", "KILL"); got != "-ERR wrong number of arguments for 'client|kill' command\r\n" {
		t.Errorf("CLIENT KILL alone: %q", got)
	}
	if got := me.do("CLIENT", "KILL", "USER", "default", "LADDR", ts.addr, "ID", l2[1]); got != ":1\r\n" {
		t.Fatalf("CLIENT KILL ID: %q", got)
	}
	v2.expectClosed()
	waitFor(t, "the second killed connection to go", func() bool { return len(ts.s.connList()) == 1 })

	// SKIPME no kills the caller too, after its reply.
	v3 := dialRaw(t, ts.addr)
	v3.do("PING")
	me.send(encode("CLIENT", "KILL", "USER", "default", "SKIPME", "no") + encode("PING"))
	if got := me.reply(); got != ":2\r\n" {
		t.Fatalf("CLIENT KILL SKIPME no: %q", got)
	}
	me.expectClosed() // the PING after it is not served
	v3.expectClosed()
}

func TestClientHelp(t *testing.T) {
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	for _, tc := range []struct {
		cmd   []string
		first string
		lines int
	}{
		{[]string{"CLIENT", "HELP"}, "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", len(clientHelp)},
		{[]string{"client", "help"}, "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", len(clientHelp)},
		{[]string{"CONFIG", "HELP"}, "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", len(configHelp)},
		{[]string{"COMMAND", "HELP"}, "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", len(commandHelp)},
		{[]string{"MEMORY", "HELP"}, "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", len(memoryHelp)},
		{[]string{"MODULE", "HELP"}, "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", len(moduleHelp)},
		{[]string{"CLUSTER", "HELP"}, "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", len(clusterHelpRedis)},
	} {
		got := c.do(tc.cmd...)
		want := fmt.Sprintf("*%d\r\n+%s\r\n", tc.lines+3, tc.first)
		if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "+HELP\r\n+    Print this help.\r\n") {
			t.Errorf("%v: %q", tc.cmd, got)
		}
		if n := strings.Count(got, "\r\n+"); n != tc.lines+3 {
			t.Errorf("%v: %d lines, want %d", tc.cmd, n, tc.lines+3)
		}
	}
	if got := c.do("CLIENT", "HELP", "x"); got != "-ERR wrong number of arguments for 'client|help' command\r\n" {
		t.Errorf("CLIENT HELP x: %q", got)
	}
}
