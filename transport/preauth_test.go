package transport

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestPreAuthLimits: before AUTH a client may announce at most 10 arguments of at
// most 16 KB each, as in Redis since CVE-2021-32675. A violation is answered
// with Redis's own error as soon as the header arrives (the tests send no body)
// and the connection is closed.
func TestPreAuthLimits(t *testing.T) {
	ts := mustStartServer(t, Config{RequirePass: "pw"})
	refused := []struct{ in, want string }{
		{"*11\r\n", "-ERR Protocol error: unauthenticated multibulk length\r\n"},
		{"*1\r\n$16385\r\n", "-ERR Protocol error: unauthenticated bulk length\r\n"},
		{"*2\r\n$4\r\nAUTH\r\n$314572800\r\n", "-ERR Protocol error: unauthenticated bulk length\r\n"},
		{"*1\r\n$9223372036854775800\r\n", "-ERR Protocol error: unauthenticated bulk length\r\n"},
		{"PING 1 2 3 4 5 6 7 8 9 10\r\n", "-ERR Protocol error: unauthenticated inline request of 11 arguments (max 10)\r\n"},
	}
	for _, r := range refused {
		c := dialRaw(t, ts.addr)
		c.send(r.in)
		if got := c.reply(); got != r.want {
			t.Errorf("%.30q: got %q want %q", r.in, got, r.want)
		}
		c.expectClosed()
	}
	c := dialRaw(t, ts.addr)
	ten := strings.Fields("BF.MADD k 1 2 3 4 5 6 7 8")
	for _, args := range [][]string{ten, {"ECHO", strings.Repeat("x", PreAuthMaxBulkBytes)}} {
		if got := c.do(args...); got != "-NOAUTH Authentication required.\r\n" {
			t.Fatalf("%d arguments, %d bytes at most: %.60q", len(args), len(args[len(args)-1]), got)
		}
	}
	c.send(strings.Join(ten, " ") + "\r\n")
	if got := c.reply(); got != "-NOAUTH Authentication required.\r\n" {
		t.Fatalf("inline request of 10 arguments: %q", got)
	}
	if got := c.do("AUTH", "pw"); got != "+OK\r\n" {
		t.Fatalf("AUTH: %q", got)
	}
	many := append([]string{"BF.MADD", "k"}, strings.Fields(strings.Repeat("i ", 20))...)
	if got := c.do(many...); !strings.HasPrefix(got, "*20\r\n") {
		t.Fatalf("22 arguments after AUTH: %.40q", got)
	}
	big := strings.Repeat("y", 60<<10)
	if got := c.do("ECHO", big); got != "$61440\r\n"+big+"\r\n" {
		t.Fatalf("60 KB argument after AUTH: %.40q", got)
	}
	if n := testutil.ToFloat64(ts.s.m.protoErr); n != float64(len(refused)) {
		t.Errorf("protocol errors counted %v, want %d", n, len(refused))
	}
}

// TestPreAuthPipelinedAuth: a client may pipeline AUTH and requests that only an
// authenticated client may send; they are read after AUTH took effect. A
// pipeline behind a failed AUTH stays under the strangers' limits.
func TestPreAuthPipelinedAuth(t *testing.T) {
	ts := mustStartServer(t, Config{RequirePass: "pw"})
	big := strings.Repeat("z", 40<<10)
	many := append([]string{"BF.MADD", "k"}, strings.Fields(strings.Repeat("i ", 12))...)

	c := dialRaw(t, ts.addr)
	c.send(encode("AUTH", "pw") + encode("ECHO", big) + encode(many...) + encode("PING"))
	if got := c.reply(); got != "+OK\r\n" {
		t.Fatalf("AUTH: %q", got)
	}
	if got := c.reply(); got != "$40960\r\n"+big+"\r\n" {
		t.Fatalf("40 KB ECHO after pipelined AUTH: %.40q", got)
	}
	if got := c.reply(); !strings.HasPrefix(got, "*12\r\n") {
		t.Fatalf("14 arguments after pipelined AUTH: %.40q", got)
	}
	if got := c.reply(); got != "+PONG\r\n" {
		t.Fatalf("PING: %q", got)
	}

	c = dialRaw(t, ts.addr)
	c.send(encode("HELLO", "3", "AUTH", "default", "pw") + encode("ECHO", big))
	if got := c.reply(); !strings.HasPrefix(got, "%7\r\n") {
		t.Fatalf("HELLO AUTH: %.40q", got)
	}
	if got := c.reply(); got != "$40960\r\n"+big+"\r\n" {
		t.Fatalf("40 KB ECHO after pipelined HELLO AUTH: %.40q", got)
	}

	c = dialRaw(t, ts.addr)
	c.send(encode("AUTH", "wrong") + encode("ECHO", big))
	if got := c.reply(); got != "-WRONGPASS invalid username-password pair or user is disabled.\r\n" {
		t.Fatalf("wrong AUTH: %q", got)
	}
	if got := c.reply(); got != "-ERR Protocol error: unauthenticated bulk length\r\n" {
		t.Fatalf("40 KB ECHO after a failed AUTH: %.40q", got)
	}
	c.expectClosed()
}

// TestPreAuthNoPassword: without a password every client is authenticated from
// the start, and the strangers' limits never apply.
func TestPreAuthNoPassword(t *testing.T) {
	ts := mustStartServer(t, Config{AuthTimeout: 50 * time.Millisecond})
	c := dialRaw(t, ts.addr)
	big := strings.Repeat("x", 20<<10)
	many := append([]string{"BF.MADD", "k"}, strings.Fields(strings.Repeat("i ", 12))...)
	c.send(encode("ECHO", big) + encode(many...))
	if got := c.reply(); got != "$20480\r\n"+big+"\r\n" {
		t.Fatalf("20 KB ECHO: %.40q", got)
	}
	if got := c.reply(); !strings.HasPrefix(got, "*12\r\n") {
		t.Fatalf("14 arguments: %.40q", got)
	}
	time.Sleep(150 * time.Millisecond) // past AuthTimeout, which needs a password to apply
	if got := c.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("after the authentication deadline: %q", got)
	}
}

// TestPreAuthDeadline: a connection that has not authenticated AuthTimeout after
// it was accepted is closed, even if it keeps sending; one that authenticated
// in time stays open.
func TestPreAuthDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ts := mustStartServer(t, Config{RequirePass: "pw", AuthTimeout: timeout})
	start := time.Now()
	idle, busy, good := dialRaw(t, ts.addr), dialRaw(t, ts.addr), dialRaw(t, ts.addr)
	if got := good.do("AUTH", "pw"); got != "+OK\r\n" {
		t.Fatalf("AUTH: %q", got)
	}
	for time.Since(start) < timeout-50*time.Millisecond {
		if got := busy.do("PING"); got != "+PONG\r\n" {
			t.Fatalf("PING before the deadline: %q", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	idle.expectClosed()
	busy.expectClosed()
	if d := time.Since(start); d < timeout-50*time.Millisecond || d > timeout+2*time.Second {
		t.Errorf("strangers closed after %v, want about %v", d, timeout)
	}
	time.Sleep(timeout / 2)
	if got := good.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("authenticated connection after the deadline: %q", got)
	}
	waitFor(t, "timeouts counted", func() bool {
		return testutil.ToFloat64(ts.s.m.timedOut.WithLabelValues("auth")) == 2
	})
}

// TestPreAuthNoDeadline: a negative AuthTimeout lets a stranger wait.
func TestPreAuthNoDeadline(t *testing.T) {
	ts := mustStartServer(t, Config{RequirePass: "pw", AuthTimeout: -1})
	c := dialRaw(t, ts.addr)
	time.Sleep(100 * time.Millisecond)
	if got := c.do("AUTH", "pw"); got != "+OK\r\n" {
		t.Fatalf("AUTH: %q", got)
	}
}

// TestNoAuthBeforeAuth: with a password set, everything a stranger sends but
// AUTH, HELLO, PING and QUIT answers NOAUTH: known commands, unknown ones,
// unknown subcommands of known containers and wrong arities alike, so that a
// stranger cannot tell which commands exist. Once authenticated, the same
// requests get their ordinary answers.
func TestNoAuthBeforeAuth(t *testing.T) {
	ts := mustStartServer(t, Config{RequirePass: "s3cret"})
	const noAuth = "-NOAUTH Authentication required.\r\n"
	cases := []struct {
		what  string
		args  []string
		after string // the start of the answer once authenticated
	}{
		{"known", []string{"BF.EXISTS", "k", "a"}, ":0"},
		{"known", []string{"ECHO", "hi"}, "$2\r\nhi"},
		{"known", []string{"SELECT", "0"}, "+OK"},
		{"known", []string{"ASKING"}, "+OK"},
		{"known", []string{"EXEC"}, "-ERR EXEC without MULTI"},
		{"known", []string{"IDEM", "1", "1", "BF.EXISTS", "k", "a"}, ":0"},
		{"known subcommand", []string{"CLIENT", "ID"}, ":"},
		{"known subcommand", []string{"CLUSTER", "MYID"}, "$"},
		{"known subcommand", []string{"COMMAND", "COUNT"}, ":"},
		{"known subcommand", []string{"CONFIG", "GET", "bf-error-rate"}, "*2"},
		{"unknown", []string{"NOPE"}, "-ERR unknown command 'NOPE'"},
		{"unknown", []string{"SET", "k", "v"}, "-ERR unknown command 'SET'"},
		{"unknown", []string{"GETDEL", "k"}, "-ERR unknown command 'GETDEL'"},
		{"unknown subcommand", []string{"CLUSTER", "SETSLOT", "1", "NODE", "x"}, "-ERR unknown subcommand 'SETSLOT'"},
		{"unknown subcommand", []string{"CLUSTER", "MEET", "127.0.0.1", "6379"}, "-ERR unknown subcommand 'MEET'"},
		{"unknown subcommand", []string{"CLIENT", "NOPE"}, "-ERR unknown subcommand 'NOPE'"},
		{"unknown subcommand", []string{"CONFIG", "NOPE"}, "-ERR unknown subcommand 'NOPE'"},
		{"arity", []string{"BF.ADD", "k"}, "-ERR wrong number of arguments for 'BF.ADD' command"},
		{"arity", []string{"ECHO"}, "-ERR wrong number of arguments for 'ECHO' command"},
		{"arity", []string{"ASKING", "x"}, "-ERR wrong number of arguments for 'ASKING' command"},
		{"arity", []string{"CLIENT", "ID", "x"}, "-ERR wrong number of arguments for 'client|id' command"},
		{"arity", []string{"DEL"}, "-ERR wrong number of arguments for 'DEL' command"},
	}
	c := dialRaw(t, ts.addr)
	for _, tc := range cases {
		if got := c.do(tc.args...); got != noAuth {
			t.Errorf("%s %v before AUTH: %q, want NOAUTH", tc.what, tc.args, got)
		}
	}
	// The four a stranger may send.
	if got := c.do("PING"); got != "+PONG\r\n" {
		t.Errorf("PING before AUTH: %q", got)
	}
	if got := c.do("PING", "hi"); got != "$2\r\nhi\r\n" {
		t.Errorf("PING hi before AUTH: %q", got)
	}
	if got := c.do("HELLO", "3"); !strings.HasPrefix(got, "-NOAUTH HELLO must be called") {
		t.Errorf("HELLO 3 before AUTH: %q", got)
	}
	if got := c.do("AUTH"); got != "-ERR wrong number of arguments for 'AUTH' command\r\n" {
		t.Errorf("AUTH without arguments: %q", got)
	}
	if got := c.do("AUTH", "s3cret"); got != "+OK\r\n" {
		t.Fatalf("AUTH: %q", got)
	}
	for _, tc := range cases {
		if got := c.do(tc.args...); !strings.HasPrefix(got, tc.after) {
			t.Errorf("%s %v after AUTH: %q, want %q...", tc.what, tc.args, got, tc.after)
		}
	}
	if n := len(ts.be.submitted()); n != 0 {
		t.Fatalf("%d writes", n)
	}
	q := dialRaw(t, ts.addr)
	if got := q.do("QUIT"); got != "+OK\r\n" {
		t.Fatalf("QUIT before AUTH: %q", got)
	}
	q.expectClosed()
}
