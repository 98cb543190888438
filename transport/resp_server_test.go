package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
)

// rawConn is a raw-socket client that reads replies as their exact RESP text.
type rawConn struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// encode renders a request as a RESP multibulk.
func encode(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

func (c *rawConn) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, s); err != nil {
		c.t.Fatal(err)
	}
}

// do sends one request and returns its reply.
func (c *rawConn) do(args ...string) string {
	c.t.Helper()
	c.send(encode(args...))
	return c.reply()
}

func (c *rawConn) reply() string {
	c.t.Helper()
	s, err := readReply(c.br)
	if err != nil {
		c.t.Fatalf("reading reply: %v", err)
	}
	return s
}

// expectClosed asserts the server closed the connection.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	if s, err := readReply(c.br); err == nil {
		c.t.Fatalf("connection open, got %q", s)
	} else if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") {
		c.t.Fatalf("want EOF, got %v", err)
	}
}

// readReply reads one complete reply and returns its exact bytes.
func readReply(br *bufio.Reader) (string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return "", fmt.Errorf("bad line %q", line)
	}
	n, _ := strconv.Atoi(line[1 : len(line)-2])
	switch line[0] {
	case '$', '=':
		if n < 0 {
			return line, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return "", err
		}
		return line + string(buf), nil
	case '*', '~', '%':
		if line[0] == '%' {
			n *= 2
		}
		out := line
		for i := 0; i < n; i++ {
			s, err := readReply(br)
			if err != nil {
				return "", err
			}
			out += s
		}
		return out, nil
	}
	return line, nil
}

func TestServerPingEchoInline(t *testing.T) {
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	if got := c.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING: %q", got)
	}
	if got := c.do("ping", "hi"); got != "$2\r\nhi\r\n" {
		t.Fatalf("PING hi: %q", got)
	}
	c.send("ECHO \"a b\"\r\nPING\r\n")
	if got := c.reply() + c.reply(); got != "$3\r\na b\r\n+PONG\r\n" {
		t.Fatalf("inline: %q", got)
	}
	if got := c.do("NOPE", "x"); got != "-ERR unknown command 'NOPE', with args beginning with: 'x' \r\n" {
		t.Fatalf("unknown: %q", got)
	}
}

// TestServerPipelineOrder: replies come back in request order, reads see the
// connection's earlier writes, and one flush carries the whole batch.
func TestServerPipelineOrder(t *testing.T) {
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	var req strings.Builder
	var want []string
	for i := 0; i < 200; i++ {
		item := fmt.Sprint("item-", i)
		req.WriteString(encode("CF.ADD", "k", item))
		req.WriteString(encode("CF.EXISTS", "k", item))
		req.WriteString(encode("PING"))
		req.WriteString(encode("BF.ADD"))
		want = append(want, ":1\r\n", ":1\r\n", "+PONG\r\n", "-ERR wrong number of arguments for 'BF.ADD' command\r\n")
	}
	c.send(req.String())
	for i, w := range want {
		if got := c.reply(); got != w {
			t.Fatalf("reply %d: got %q want %q", i, got, w)
		}
	}
}

// TestServerBatchesWrites: consecutive pipelined writes are all submitted before
// the first is applied, and a read waits for them and then takes one barrier for
// the reads that follow it.
func TestServerBatchesWrites(t *testing.T) {
	ts := mustStartServer(t, Config{})
	gate := make(chan struct{})
	ts.be.set(func(b *fakeBackend) { b.gate = gate })
	c := dialRaw(t, ts.addr)
	c.send(encode("BF.ADD", "k", "a") + encode("BF.ADD", "k", "b") + encode("BF.ADD", "k", "c") +
		encode("BF.EXISTS", "k", "a") + encode("BF.EXISTS", "k", "z") + encode("BF.CARD", "k") +
		encode("BF.ADD", "k", "d") + encode("BF.EXISTS", "k", "d"))
	waitFor(t, "three submits", func() bool { return count(ts.be.eventLog(), "submit") == 3 })
	time.Sleep(20 * time.Millisecond)
	if ev := ts.be.eventLog(); count(ev, "resolve") != 0 || count(ev, "barrier:lin") != 0 {
		t.Fatalf("applied or read before the gate opened: %v", ev)
	}
	close(gate)
	var got []string
	for i := 0; i < 8; i++ {
		got = append(got, c.reply())
	}
	want := []string{":1\r\n", ":1\r\n", ":1\r\n", ":1\r\n", ":0\r\n", ":3\r\n", ":1\r\n", ":1\r\n"}
	if strings.Join(got, "") != strings.Join(want, "") {
		t.Fatalf("replies %q, want %q", got, want)
	}
	ev := strings.Join(ts.be.eventLog(), " ")
	wantEv := "submit submit submit resolve resolve resolve barrier:lin submit resolve barrier:lin"
	if ev != wantEv {
		t.Fatalf("events\n got %s\nwant %s", ev, wantEv)
	}
}

func TestServerReadOnlyUsesStaleReads(t *testing.T) {
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	c.do("READONLY")
	c.do("BF.EXISTS", "k", "a")
	c.do("READWRITE")
	c.do("BF.EXISTS", "k", "a")
	ev := strings.Join(ts.be.eventLog(), " ")
	if ev != "barrier:stale barrier:lin" {
		t.Fatalf("events %s", ev)
	}
}

func TestServerRESP3(t *testing.T) {
	ts := mustStartServer(t, Config{Version: "9.9.9"})
	c := dialRaw(t, ts.addr)
	hello := c.do("HELLO", "3", "SETNAME", "me")
	if !strings.HasPrefix(hello, "%7\r\n$6\r\nserver\r\n$7\r\nrookery\r\n$7\r\nversion\r\n$5\r\n9.9.9\r\n$5\r\nproto\r\n:3\r\n") {
		t.Fatalf("HELLO 3: %q", hello)
	}
	checks := []struct {
		args []string
		want string
	}{
		{[]string{"BF.ADD", "k", "a"}, "#t\r\n"},
		{[]string{"BF.ADD", "k", "a"}, "#f\r\n"},
		{[]string{"BF.EXISTS", "k", "a"}, "#t\r\n"},
		{[]string{"CF.INSERTNX", "c", "ITEMS", "a", "a"}, "*2\r\n:1\r\n:0\r\n"},
		{[]string{"CF.COUNT", "c", "a"}, ":1\r\n"},
		{[]string{"BF.INFO", "nope"}, "-ERR not found\r\n"},
		{[]string{"CLIENT", "GETNAME"}, "$2\r\nme\r\n"},
		{[]string{"CLIENT", "SETNAME", ""}, "+OK\r\n"},
		{[]string{"CLIENT", "GETNAME"}, "_\r\n"},
		{[]string{"COMMAND", "DOCS", "nosuchcommand"}, "%0\r\n"},
	}
	for _, ch := range checks {
		if got := c.do(ch.args...); got != ch.want {
			t.Errorf("%v: got %q want %q", ch.args, got, ch.want)
		}
	}
	if got := c.do("INFO", "keyspace"); !strings.HasPrefix(got, "=") || !strings.Contains(got, "txt:# Keyspace\r\ndb0:keys=") {
		t.Errorf("INFO in RESP3: %q", got)
	}
	if got := c.do("HELLO", "2"); !strings.HasPrefix(got, "*14\r\n") {
		t.Errorf("HELLO 2: %q", got)
	}
	if got := c.do("CLIENT", "GETNAME"); got != "$-1\r\n" {
		t.Errorf("null in RESP2: %q", got)
	}
	if got := c.do("HELLO", "5"); got != "-NOPROTO unsupported protocol version\r\n" {
		t.Errorf("HELLO 5: %q", got)
	}
}

// TestServerGarbage: a malformed request gets "ERR Protocol error" and the
// connection closes; requests before it are answered; other clients carry on.
func TestServerGarbage(t *testing.T) {
	ts := mustStartServer(t, Config{MaxRequestBytes: 1 << 12})
	other := dialRaw(t, ts.addr)
	cases := []struct{ in, want string }{
		{encode("PING") + "*1\r\n+PING\r\n", "-ERR Protocol error: expected '$', got '+'\r\n"},
		{"*9223372036854775807\r\n", "-ERR Protocol error: too many arguments: 9223372036854775807 (max 1048576)\r\n"},
		{"*1\r\n$9223372036854775800\r\nxx", "-ERR Protocol error: request larger than 4096 bytes\r\n"},
		{"ECHO \"unterminated\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
		{"*1\r\n$4\r\nPINGPONG\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
	}
	for _, cs := range cases {
		c := dialRaw(t, ts.addr)
		c.send(cs.in)
		if strings.HasPrefix(cs.in, encode("PING")) {
			if got := c.reply(); got != "+PONG\r\n" {
				t.Fatalf("request before garbage: %q", got)
			}
		}
		if got := c.reply(); got != cs.want {
			t.Errorf("%.30q: got %q want %q", cs.in, got, cs.want)
		}
		c.expectClosed()
	}
	if got := other.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("other client: %q", got)
	}
}

// TestServerHalfClosed: a client that closes in the middle of a request harms
// nobody, and its goroutine ends (Close in cleanup waits for it).
func TestServerHalfClosed(t *testing.T) {
	ts := mustStartServer(t, Config{})
	for _, partial := range []string{"*3\r\n$6\r\nBF.ADD\r\n$1\r\nk", "*2\r\n", "PIN", "*1\r\n$4\r\nPI"} {
		c := dialRaw(t, ts.addr)
		c.send(partial)
		c.nc.(*net.TCPConn).CloseWrite()
		c.expectClosed()
	}
	waitFor(t, "connections to end", func() bool { return ts.s.clients.Load() == 0 })
	if n := len(ts.be.submitted()); n != 0 {
		t.Fatalf("%d writes submitted from partial requests", n)
	}
	c := dialRaw(t, ts.addr)
	if got := c.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("after half-closed clients: %q", got)
	}
}

func TestServerQuit(t *testing.T) {
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	c.send(encode("PING") + encode("QUIT") + encode("BF.ADD", "k", "a"))
	if got := c.reply() + c.reply(); got != "+PONG\r\n+OK\r\n" {
		t.Fatalf("got %q", got)
	}
	c.expectClosed()
	if n := len(ts.be.submitted()); n != 0 {
		t.Fatalf("a request after QUIT was served (%d writes)", n)
	}
}

func TestServerAuth(t *testing.T) {
	ts := mustStartServer(t, Config{RequirePass: "s3cret"})
	c := dialRaw(t, ts.addr)
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"PING"}, "+PONG\r\n"},
		{[]string{"BF.ADD", "k", "a"}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"HELLO", "3"}, "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n"},
		{[]string{"AUTH", "bob", "s3cret"}, "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{[]string{"HELLO", "3", "AUTH", "default", "nope"}, "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{[]string{"ECHO", "x"}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"AUTH", "s3cret"}, "+OK\r\n"},
		{[]string{"PING"}, "+PONG\r\n"},
	}
	for _, s := range steps {
		if got := c.do(s.args...); got != s.want {
			t.Fatalf("%v: got %q want %q", s.args, got, s.want)
		}
	}
	if n := len(ts.be.submitted()); n != 0 {
		t.Fatalf("%d writes before auth", n)
	}
	c2 := dialRaw(t, ts.addr)
	if got := c2.do("HELLO", "3", "AUTH", "default", "s3cret"); !strings.HasPrefix(got, "%7\r\n") {
		t.Fatalf("HELLO AUTH: %q", got)
	}
	if got := c2.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("after HELLO AUTH: %q", got)
	}
}

func TestServerMaxClients(t *testing.T) {
	ts := mustStartServer(t, Config{MaxClients: 2})
	a, b := dialRaw(t, ts.addr), dialRaw(t, ts.addr)
	a.do("PING")
	b.do("PING")
	c := dialRaw(t, ts.addr)
	if got := c.reply(); got != "-ERR max number of clients reached\r\n" {
		t.Fatalf("third client: %q", got)
	}
	c.expectClosed()
	a.nc.Close()
	waitFor(t, "a slot", func() bool { return ts.s.clients.Load() < 2 })
	d := dialRaw(t, ts.addr)
	if got := d.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("after a client left: %q", got)
	}
}

// TestServerClusterErrors: each cluster error reaches the client with its class.
func TestServerClusterErrors(t *testing.T) {
	ts := mustStartServer(t, Config{RequestTimeout: 200 * time.Millisecond})
	c := dialRaw(t, ts.addr)
	for _, cs := range []struct {
		err  error
		want string
	}{
		{cluster.ErrNoLeader, "-CLUSTERDOWN no leader\r\n"},
		{cluster.ErrNotLeader, "-TRYAGAIN leadership changed, not applied\r\n"},
		{cluster.ErrShutdown, "-SHUTDOWN node is shutting down\r\n"},
		{fmt.Errorf("%w: 3 GiB over", cluster.ErrTooLarge), "-OOM command not allowed: memory limit exceeded: 3 GiB over\r\n"},
		{fmt.Errorf("%w: leadership lost", cluster.ErrIndeterminate), "-INDETERMINATE outcome unknown: leadership lost: the write may or may not have been applied\r\n"},
	} {
		ts.be.set(func(b *fakeBackend) { b.submitErr = cs.err })
		if got := c.do("CF.DEL", "k", "a"); got != cs.want {
			t.Errorf("%v: got %q want %q", cs.err, got, cs.want)
		}
	}
	ts.be.set(func(b *fakeBackend) { b.submitErr, b.barrierErr = nil, cluster.ErrNoLeader })
	if got := c.do("BF.EXISTS", "k", "a"); got != "-CLUSTERDOWN no leader\r\n" {
		t.Errorf("read without leader: %q", got)
	}
	ts.be.set(func(b *fakeBackend) { b.barrierErr, b.never = nil, true })
	got := c.do("BF.ADD", "k", "a")
	if !strings.HasPrefix(got, "-INDETERMINATE outcome unknown: context deadline exceeded") {
		t.Errorf("write timeout: %q", got)
	}
}

func TestServerIdemSetsSession(t *testing.T) {
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	c.do("IDEM", "42", "7", "BF.ADD", "k", "a")
	c.do("BF.ADD", "k", "b")
	cmds := ts.be.submitted()
	if len(cmds) != 2 || cmds[0].Session != (fsm.Session{ClientID: 42, Seq: 7}) || cmds[1].Session != (fsm.Session{}) {
		t.Fatalf("sessions: %+v", cmds)
	}
}

func TestServerRoleAndNodes(t *testing.T) {
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	want := "*6\r\n$6\r\nleader\r\n$2\r\nn1\r\n$14\r\n127.0.0.1:6379\r\n:3\r\n:0\r\n:0\r\n"
	if got := c.do("ROLE"); got != want {
		t.Errorf("ROLE: %q", got)
	}
	lines := "n1 127.0.0.1:6379 127.0.0.1:8080 127.0.0.1:7000 leader voter alive\n" +
		"n2 127.0.0.1:6380 - 127.0.0.1:7001 follower nonvoter suspect\n"
	if got := c.do("cluster", "members"); got != fmt.Sprintf("$%d\r\n%s\r\n", len(lines), lines) {
		t.Errorf("CLUSTER MEMBERS: %q", got)
	}
}

func TestServerCloseEndsConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{}, newFakeBackend(t))
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	c := dialRaw(t, ln.Addr().String())
	c.do("PING")
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	c.expectClosed()
	if err := <-done; err != ErrServerClosed {
		t.Fatalf("Serve: %v", err)
	}
	if err := s.Serve(ln); err != ErrServerClosed {
		t.Fatalf("Serve after Close: %v", err)
	}
}

// TestServerConfigGet: the settings tools ask for, fixed at start.
func TestServerConfigGet(t *testing.T) {
	ts := mustStartServer(t, Config{MaxClients: 7})
	c := dialRaw(t, ts.addr)
	if got := c.do("CONFIG", "GET", "save"); got != "*2\r\n$4\r\nsave\r\n$0\r\n\r\n" {
		t.Errorf("CONFIG GET save: %q", got)
	}
	if got := c.do("config", "get", "APPEND*", "maxclients"); got != "*6\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n$11\r\nappendfsync\r\n$6\r\nalways\r\n$10\r\nmaxclients\r\n$1\r\n7\r\n" {
		t.Errorf("CONFIG GET append* maxclients: %q", got)
	}
	if got := c.do("CONFIG", "GET", "nothing"); got != "*0\r\n" {
		t.Errorf("CONFIG GET nothing: %q", got)
	}
	if got := c.do("CONFIG", "SET", "save", ""); got != "-ERR CONFIG SET failed (possibly related to argument 'save') - can't set immutable config\r\n" {
		t.Errorf("CONFIG SET: %q", got)
	}
}

// TestServerDefaultReadLevel: a server configured for stale reads starts every
// connection there; READWRITE still returns it to linearizable reads.
func TestServerDefaultReadLevel(t *testing.T) {
	ts := mustStartServer(t, Config{DefaultReadLevel: cluster.ReadStale})
	c := dialRaw(t, ts.addr)
	c.do("BF.EXISTS", "k", "a")
	c.do("READWRITE")
	c.do("BF.EXISTS", "k", "a")
	ev := ts.be.eventLog()
	if count(ev, "barrier:stale") != 1 || count(ev, "barrier:lin") != 1 {
		t.Fatalf("barriers %v, want one stale then one linearizable", ev)
	}
}

// TestServerIdleTimeout: a connection that sends nothing for IdleTimeout is
// closed; one that keeps sending is not.
func TestServerIdleTimeout(t *testing.T) {
	// Long enough that the active client's pauses, a tenth of it, stay well
	// under it on a loaded machine.
	const idle = time.Second
	ts := mustStartServer(t, Config{IdleTimeout: idle})
	start := time.Now()
	quiet, active := dialRaw(t, ts.addr), dialRaw(t, ts.addr)
	quiet.do("PING")
	for time.Since(start) < 2*idle {
		if got := active.do("PING"); got != "+PONG\r\n" {
			t.Fatalf("active connection after %v: %q", time.Since(start), got)
		}
		time.Sleep(idle / 10)
	}
	quiet.expectClosed()
	if d := time.Since(start); d < idle {
		t.Errorf("idle connection closed after %v, before %v", d, idle)
	}
	waitFor(t, "the timeout counted", func() bool {
		return testutil.ToFloat64(ts.s.m.timedOut.WithLabelValues("idle")) == 1
	})
}

// TestServerItemLimitFromHeader: a bulk string over MaxItemBytes, or a
// request over MaxRequestBytes, is refused from its header: its bytes are read
// past and dropped, it is answered with the reason, and the connection goes
// on. LOADCHUNK's data may be as large as Redis's proto-max-bulk-len, directly
// or under IDEM.
func TestServerItemLimitFromHeader(t *testing.T) {
	ts := mustStartServer(t, Config{MaxItemBytes: 1000, MaxRequestBytes: 1 << 16})
	chunk := func(n int) string { return "$" + strconv.Itoa(n) + "\r\n" + strings.Repeat("c", n) + "\r\n" }
	cases := []struct{ in, want string }{
		{"*2\r\n$4\r\nECHO\r\n" + chunk(1001), "-ERR bulk string of 1001 bytes exceeds --max-item-size (1000)\r\n"},
		{"*1\r\n" + chunk(5000), "-ERR bulk string of 5000 bytes exceeds --max-item-size (1000)\r\n"},
		{"*2\r\n$4\r\nECHO\r\n" + chunk(70000), "-ERR request larger than 65536 bytes\r\n"},
		{"*4\r\n$12\r\nBF.LOADCHUNK\r\n" + chunk(1001) + "$1\r\n1\r\n$1\r\nx\r\n",
			"-ERR bulk string of 1001 bytes exceeds --max-item-size (1000)\r\n"},
		{"*7\r\n$4\r\nIDEM\r\n$1\r\n1\r\n$1\r\n1\r\n$12\r\ncf.loadchunk\r\n$1\r\nk\r\n" + chunk(5000) + "$1\r\nx\r\n",
			"-ERR bulk string of 5000 bytes exceeds --max-item-size (1000)\r\n"},
	}
	for _, cs := range cases {
		c := dialRaw(t, ts.addr)
		c.send(cs.in + encode("PING"))
		if got := c.reply(); got != cs.want {
			t.Errorf("%.50q: got %q want %q", cs.in, got, cs.want)
		}
		if got := c.reply(); got != "+PONG\r\n" {
			t.Errorf("%.50q: the next request got %q", cs.in, got)
		}
	}
	// A chunk over the item size and the request size, within 512 MB: read
	// and loaded (refused by the state machine here, not by the reader).
	c := dialRaw(t, ts.addr)
	c.send("*4\r\n$12\r\nBF.LOADCHUNK\r\n$1\r\nk\r\n$1\r\n2\r\n" + chunk(200000))
	if got := c.reply(); strings.Contains(got, "larger") || strings.Contains(got, "exceeds") {
		t.Fatalf("a 200 KB chunk was refused by the reader: %q", got)
	}
	if len(ts.be.submitted()) == 0 {
		t.Fatal("the chunk was not submitted")
	}
}

// TestServerChunkOverProtoMaxBulk: a LOADCHUNK whose data is one byte over
// Redis's proto-max-bulk-len gets an error reply and the connection goes on:
// the client that sent it hears why, not a reset.
func TestServerChunkOverProtoMaxBulk(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 512 MB")
	}
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	c.nc.SetDeadline(time.Now().Add(2 * time.Minute))
	n := maxChunkArgBytes + 1
	go func() {
		c.nc.Write([]byte("*4\r\n$12\r\nCF.LOADCHUNK\r\n$1\r\nk\r\n$1\r\n9\r\n$" + strconv.Itoa(n) + "\r\n"))
		io.CopyN(c.nc, zeroReader{}, int64(n))
		c.nc.Write([]byte("\r\n" + encode("PING")))
	}()
	want := fmt.Sprintf("-ERR bulk string of %d bytes exceeds the %d this argument may hold\r\n", n, maxChunkArgBytes)
	if got := c.reply(); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := c.reply(); got != "+PONG\r\n" {
		t.Fatalf("after the refused chunk: %q", got)
	}
	if n := len(ts.be.submitted()); n != 0 {
		t.Fatalf("%d writes submitted", n)
	}
}

// zeroReader reads zeros for ever.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestServerLoadLargestChunk: the biggest chunks SCANDUMP hands out (a full
// payload chunk, filters.DumpChunkBytes and its checksum) load back through
// LOADCHUNK with the default item size, for both families and under IDEM.
func TestServerLoadLargestChunk(t *testing.T) {
	ts := mustStartServer(t, Config{})
	ctx := context.Background()
	c := newGoRedis(t, ts.addr, 2, "")
	res(c.BFReserve(ctx, "bf", 0.0001, 1_000_000).Result()).must(t)
	res(c.CFReserve(ctx, "cf", 2_000_000).Result()).must(t)
	for _, key := range []string{"bf", "cf"} {
		res(c.Do(ctx, strings.ToUpper(key)+".ADD", key, "here").Result()).must(t)
		largest, seq := 0, 0
		for it := int64(0); ; {
			d := res(c.Do(ctx, strings.ToUpper(key)+".SCANDUMP", key, it).Slice()).must(t)
			next, _ := d[0].(int64)
			data, _ := d[1].(string) // nil after a cuckoo dump's last chunk
			if next == 0 {
				break
			}
			largest = max(largest, len(data))
			load := []any{strings.ToUpper(key) + ".LOADCHUNK", key + "-copy", next, data}
			if key == "cf" {
				seq++
				load = append([]any{"IDEM", 7, seq}, load...)
			}
			res(c.Do(ctx, load...).Result()).must(t)
			it = next
		}
		if largest != filters.DumpChunkBytes+4 {
			t.Errorf("%s: largest chunk %d bytes, want a full one of %d", key, largest, filters.DumpChunkBytes+4)
		}
		if !res(c.Do(ctx, strings.ToUpper(key)+".EXISTS", key+"-copy", "here").Bool()).must(t) {
			t.Errorf("%s: the copy lost its item", key)
		}
	}
}
