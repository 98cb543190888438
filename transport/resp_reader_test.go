package transport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// oneByteReader hands out its input one byte per Read, the worst case for an
// incremental parser.
type oneByteReader struct{ data []byte }

func (r *oneByteReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	p[0] = r.data[0]
	r.data = r.data[1:]
	return 1, nil
}

// newTestReader is a reader with the given request and argument limits, no item
// limit below the request size, no per-argument limits and no budget.
func newTestReader(src io.Reader, maxReq, maxArgs int) *reader {
	return newReader(src, &readLimits{maxReq: maxReq, maxArgs: maxArgs, maxBulk: maxReq}, nil)
}

func argsString(cmds [][][]byte) string {
	var parts []string
	for _, c := range cmds {
		var as []string
		for _, a := range c {
			as = append(as, string(a))
		}
		parts = append(parts, strings.Join(as, "|"))
	}
	return strings.Join(parts, "; ")
}

// readAll reads batches until the input ends and returns all requests and the
// final error.
func readAll(rd *reader) ([][][]byte, error) {
	var all [][][]byte
	for {
		b, err := rd.readBatch()
		if err != nil {
			return all, err
		}
		all = append(all, b...)
	}
}

func TestReaderRequests(t *testing.T) {
	cases := []struct{ in, want string }{
		{"*1\r\n$4\r\nPING\r\n", "PING"},
		{"*3\r\n$6\r\nBF.ADD\r\n$1\r\nk\r\n$0\r\n\r\n", "BF.ADD|k|"},
		{"*2\r\n$4\r\nECHO\r\n$4\r\na\r\nb\r\n*1\r\n$4\r\nPING\r\n", "ECHO|a\r\nb; PING"},
		{"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n", "PING"},
		{"PING\r\n", "PING"},
		{"  set   a  b \n", "set|a|b"},
		{"ECHO \"a b\\n\\x41\"\r\n", "ECHO|a b\nA"},
		{"ECHO 'it\\'s'\n", "ECHO|it's"},
		{"ECHO a\"b c\"\n", "ECHO|ab c"},
		{"\r\n\n*1\r\n$4\r\nPING\r\n", "PING"},
	}
	for _, c := range cases {
		for _, slow := range []bool{false, true} {
			var src io.Reader = strings.NewReader(c.in)
			if slow {
				src = &oneByteReader{data: []byte(c.in)}
			}
			got, err := readAll(newTestReader(src, 1<<20, 1<<10))
			if !errors.Is(err, io.EOF) {
				t.Errorf("%q (slow %v): err %v, want EOF", c.in, slow, err)
			}
			if s := argsString(got); s != c.want {
				t.Errorf("%q (slow %v): got %q, want %q", c.in, slow, s, c.want)
			}
		}
	}
}

func TestReaderProtocolErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{"*9223372036854775807\r\n$1\r\na\r\n", "Protocol error: too many arguments"},
		{"*99999999999999999999999\r\n", "Protocol error: invalid multibulk length"},
		{"*1\r\n$9223372036854775800\r\nabc\r\n", "Protocol error: request larger than"},
		{"*1\r\n$-5\r\n", "Protocol error: invalid bulk length"},
		{"*1\r\n$x\r\n", "Protocol error: invalid bulk length"},
		{"*1\r\n+PING\r\n", "Protocol error: expected '$', got '+'"},
		{"*1\r\n$4\r\nPINGxx", "Protocol error: invalid bulk length"},
		{"*1\n$4\r\nPING\r\n", "Protocol error: invalid multibulk length"},
		{"*" + strings.Repeat("1", 40), "Protocol error: invalid multibulk length"},
		{"ECHO \"abc\n", "Protocol error: unbalanced quotes in request"},
		{"ECHO \"abc\"d\n", "Protocol error: unbalanced quotes in request"},
		{strings.Repeat("a", 70<<10), "Protocol error: too big inline request"},
	}
	for _, c := range cases {
		done := make(chan struct{})
		var err error
		go func() {
			defer close(done)
			_, err = readAll(newTestReader(strings.NewReader(c.in), 1<<16, 1<<10))
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%.40q: reader did not return", c.in)
		}
		var pe protocolError
		if !errors.As(err, &pe) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%.40q: err %v, want %q", c.in, err, c.want)
		}
	}
}

// A request before a protocol error is still handed out first, so its reply is
// written before the connection closes.
func TestReaderServesRequestsBeforeAnError(t *testing.T) {
	rd := newTestReader(strings.NewReader("*1\r\n$4\r\nPING\r\n*1\r\n+x\r\n"), 1<<16, 16)
	b, err := rd.readBatch()
	if err != nil || argsString(b) != "PING" {
		t.Fatalf("first batch %q, %v", argsString(b), err)
	}
	if _, err := rd.readBatch(); err == nil {
		t.Fatal("second batch: no error")
	}
}

// The arguments handed out stay intact while the reader reuses its buffer.
func TestReaderArgumentsAreCopies(t *testing.T) {
	var in bytes.Buffer
	for i := 0; i < 3000; i++ {
		in.WriteString("*2\r\n$4\r\nECHO\r\n$8\r\nabcdefgh\r\n")
	}
	rd := newTestReader(&oneByteReader{data: in.Bytes()}, 1<<16, 16)
	all, err := readAll(rd)
	if !errors.Is(err, io.EOF) || len(all) != 3000 {
		t.Fatalf("%d requests, %v", len(all), err)
	}
	for _, a := range all {
		if string(a[1]) != "abcdefgh" {
			t.Fatalf("argument changed: %q", a[1])
		}
	}
}

// A big request grows the buffer as its bytes arrive, and the buffer shrinks back
// once it is served.
func TestReaderBigRequest(t *testing.T) {
	item := bytes.Repeat([]byte("x"), 1<<20)
	var in bytes.Buffer
	in.WriteString("*2\r\n$4\r\nECHO\r\n$1048576\r\n")
	in.Write(item)
	in.WriteString("\r\n*1\r\n$4\r\nPING\r\n")
	rd := newTestReader(&in, 2<<20, 16)
	b, err := rd.readBatch()
	if err != nil || len(b) < 1 || !bytes.Equal(b[0][1], item) {
		t.Fatalf("big request: %d requests, %v", len(b), err)
	}
	rest, err := readAll(rd)
	if !errors.Is(err, io.EOF) || argsString(append(b[1:], rest...)) != "PING" {
		t.Fatalf("after big request: %q, %v", argsString(rest), err)
	}
	if len(rd.buf) > readBufIdle {
		t.Fatalf("buffer stayed at %d bytes", len(rd.buf))
	}
}

// A reader holds no buffer until its first read and a small one after it, so an
// idle connection costs little.
func TestReaderIdleBuffer(t *testing.T) {
	rd := newTestReader(strings.NewReader(encode("PING")), 1<<20, 16)
	if rd.buf != nil {
		t.Fatalf("buffer of %d bytes before any read", len(rd.buf))
	}
	if b, err := rd.readBatch(); err != nil || argsString(b) != "PING" {
		t.Fatalf("%q, %v", argsString(b), err)
	}
	if len(rd.buf) != readBufIdle {
		t.Fatalf("buffer of %d bytes after a PING", len(rd.buf))
	}
}

// A pipelining client's buffer grows to take a pipeline per read, no further,
// and goes back to the idle size when the client sends little again.
func TestReaderPipelineBuffer(t *testing.T) {
	var pipeline bytes.Buffer
	for i := 0; i < 100; i++ {
		pipeline.WriteString(encode("BF.ADD", "k", fmt.Sprint("item-", i)))
	}
	src := &repeatReader{data: pipeline.Bytes()}
	rd := newTestReader(src, 1<<20, 16)
	for i := 0; i < 20; i++ {
		if _, err := rd.readBatch(); err != nil {
			t.Fatal(err)
		}
	}
	b, err := rd.readBatch()
	if err != nil || len(b) != 100 || len(rd.buf) > readBufBusy {
		t.Fatalf("steady pipeline: batches of %d, buffer of %d bytes, %v", len(b), len(rd.buf), err)
	}
	src.data, src.off = []byte(encode("PING")), 0
	rd.readBatch() // read into the pipeline's buffer...
	rd.readBatch() // ...which, a PING later, is seen to be too big
	if len(rd.buf) != readBufIdle {
		t.Fatalf("buffer of %d bytes after the client went back to single requests", len(rd.buf))
	}
}

// Before authentication the reader hands out one request per batch and applies
// Redis's limits; the request after AUTH is parsed under the normal ones.
func TestReaderPreAuth(t *testing.T) {
	in := encode("AUTH", "pw") + encode("ECHO", strings.Repeat("x", 20000)) + encode("PING") + encode("PING")
	rd := newTestReader(strings.NewReader(in), 1<<20, 16)
	rd.preAuth = true
	b, err := rd.readBatch()
	if err != nil || argsString(b) != "AUTH|pw" {
		t.Fatalf("first batch before AUTH: %q, %v", argsString(b), err)
	}
	rd.preAuth = false
	b, err = rd.readBatch()
	if err != nil || len(b) != 3 || len(b[0][1]) != 20000 {
		t.Fatalf("after AUTH: %d requests, %v", len(b), err)
	}
	for in, want := range map[string]string{
		"*11\r\n":                       "Protocol error: unauthenticated multibulk length",
		"*1\r\n$16385\r\n":              "Protocol error: unauthenticated bulk length",
		encode("PING") + encode("PING"): "",
	} {
		rd := newTestReader(strings.NewReader(in), 1<<20, 16)
		rd.preAuth = true
		var err error
		for err == nil {
			var b [][][]byte
			if b, err = rd.readBatch(); len(b) > 1 {
				t.Fatalf("%q: %d requests in a batch", in, len(b))
			}
		}
		if want == "" && !errors.Is(err, io.EOF) || want != "" && (err == nil || err.Error() != want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}

// The limit function may let one argument be larger than an item; it is asked
// only about arguments over the item size.
func TestReaderArgumentLimit(t *testing.T) {
	asked := 0
	lim := &readLimits{maxReq: 1 << 20, maxArgs: 16, maxBulk: 10, argBytes: func(req argView, i int) int {
		asked++
		if string(req.arg(0)) == "LOAD" && i == 2 {
			return 100
		}
		return 10
	}}
	in := encode("LOAD", "k", strings.Repeat("d", 100)) + encode("LOAD", "k", "short") +
		encode("LOAD", strings.Repeat("k", 11), "d")
	rd := newReader(strings.NewReader(in), lim, nil)
	all, err := readAll(rd)
	if len(all) != 3 || len(all[2]) != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("%d requests, %v", len(all), err)
	}
	if why := rd.takeRefusal(); why.Error() != "ERR bulk string of 11 bytes exceeds --max-item-size (10)" {
		t.Fatalf("refusal: %v", why)
	}
	if asked != 2 {
		t.Fatalf("limit function asked %d times, want 2", asked)
	}
	rd = newReader(strings.NewReader(encode("LOAD", "k", strings.Repeat("d", 101))), lim, nil)
	if all, _ = readAll(rd); len(all) != 1 || len(all[0]) != 0 {
		t.Fatalf("over the argument's limit: %v", all)
	}
	if why := rd.takeRefusal(); why.Error() != "ERR bulk string of 101 bytes exceeds the 100 this argument may hold" {
		t.Fatalf("over the argument's limit: %v", why)
	}
}

// TestReaderSkipsOversizedRequests: a well-formed request over a limit is
// read past, arriving in any pieces, and stands in the batch as a refusal
// between the requests around it; a stranger's closes instead, and so does a
// bulk larger than any ever read past.
func TestReaderSkipsOversizedRequests(t *testing.T) {
	lim := &readLimits{maxReq: 1 << 12, maxArgs: 16, maxBulk: 10}
	big := strings.Repeat("x", 5000)
	in := encode("PING") + encode("ECHO", big) + encode("SET", strings.Repeat("k", 11), "v", "more") + encode("PING", "after")
	for _, slow := range []bool{false, true} {
		var src io.Reader = strings.NewReader(in)
		if slow {
			src = &oneByteReader{data: []byte(in)}
		}
		rd := newReader(src, lim, nil)
		all, err := readAll(rd)
		if !errors.Is(err, io.EOF) || len(all) != 4 || len(all[1]) != 0 || len(all[2]) != 0 {
			t.Fatalf("slow %v: %q, %v", slow, argsString(all), err)
		}
		if got := argsString([][][]byte{all[0], all[3]}); got != "PING; PING|after" {
			t.Fatalf("slow %v: around the refusals: %q", slow, got)
		}
		for _, want := range []string{"ERR request larger than 4096 bytes", "ERR bulk string of 11 bytes exceeds --max-item-size (10)"} {
			if why := rd.takeRefusal(); why.Error() != want {
				t.Fatalf("slow %v: refusal %q, want %q", slow, why, want)
			}
		}
		if rd.charged != 0 || len(rd.buf) > readBufBusy {
			t.Fatalf("slow %v: the skipped bytes were held: buffer %d, charged %d", slow, len(rd.buf), rd.charged)
		}
	}
	rd := newReader(strings.NewReader(encode("ECHO", big)), lim, nil)
	rd.preAuth = true
	if _, err := readAll(rd); err == nil || !strings.Contains(err.Error(), "Protocol error: request larger than 4096 bytes") {
		t.Fatalf("a stranger's: %v", err)
	}
	rd = newReader(strings.NewReader("*1\r\n$9000000000\r\n"), lim, nil)
	if _, err := readAll(rd); err == nil || !strings.Contains(err.Error(), "Protocol error: request larger than") {
		t.Fatalf("beyond what is read past: %v", err)
	}
}

// TestReaderHandsOffBigRequests: a request of handOffBytes or more keeps the
// read buffer instead of a copy; the requests after it are read as usual, and
// the budget gets everything back.
func TestReaderHandsOffBigRequests(t *testing.T) {
	bud := newBudget(64<<20, nil)
	lim := &readLimits{maxReq: 8 << 20, maxArgs: 16, maxBulk: 8 << 20}
	data := strings.Repeat("d", 3<<20)
	in := encode("LOAD", "k", data) + encode("PING")
	rd := newReader(strings.NewReader(in), lim, bud)
	var all [][][]byte
	for len(all) < 2 {
		b, err := rd.readBatch()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	if len(all) != 2 || string(all[0][2]) != data || string(all[1][0]) != "PING" {
		t.Fatalf("requests %d", len(all))
	}
	if bud.inUse() < 3<<20-readBufIdle {
		t.Fatalf("the handed-off buffer is not charged: %d", bud.inUse())
	}
	rd.release()
	rd.close()
	if bud.inUse() != 0 {
		t.Fatalf("budget kept %d", bud.inUse())
	}
}

// A reader charges its budget for buffer growth and big copies, refuses what
// does not fit, and gives everything back.
func TestReaderBudget(t *testing.T) {
	bud := newBudget(100<<10, nil)
	lim := &readLimits{maxReq: 1 << 20, maxArgs: 16, maxBulk: 1 << 20}
	small := encode("ECHO", strings.Repeat("s", 30<<10))
	rd := newReader(strings.NewReader(small+encode("ECHO", strings.Repeat("b", 60<<10))), lim, bud)
	b, err := rd.readBatch()
	if err != nil || len(b) != 1 {
		t.Fatalf("request within the budget: %d, %v", len(b), err)
	}
	if n := bud.inUse(); n < 30<<10+32<<10-readBufIdle {
		t.Fatalf("budget holds %d bytes for a 32 KB buffer and a 30 KB copy", n)
	}
	rd.release()
	if _, err := rd.readBatch(); err != errBudget {
		t.Fatalf("request over the budget: %v", err)
	}
	rd.close()
	if n := bud.inUse(); n != 0 {
		t.Fatalf("budget holds %d bytes after close", n)
	}
}

func TestSplitArgs(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		ok   bool
	}{
		{`a b  c`, []string{"a", "b", "c"}, true},
		{`"a\tb" 'c\'d'`, []string{"a\tb", "c'd"}, true},
		{`"\x4"`, []string{"x4"}, true},
		{`""`, []string{""}, true},
		{`"abc`, nil, false},
		{`'abc`, nil, false},
		{`'a'b`, nil, false},
		{"a\x00b c", []string{"a"}, true},
	}
	for _, c := range cases {
		got, ok := splitArgs([]byte(c.in))
		if ok != c.ok {
			t.Errorf("%q: ok %v", c.in, ok)
			continue
		}
		var gs []string
		for _, g := range got {
			gs = append(gs, string(g))
		}
		if strings.Join(gs, "|") != strings.Join(c.want, "|") || len(gs) != len(c.want) {
			t.Errorf("%q: got %q, want %q", c.in, gs, c.want)
		}
	}
}

// repeatReader is a stream of the same pipeline over and over, handing out at
// most the rest of the current copy per Read, as a client that sends its next
// pipeline when the last one is answered.
type repeatReader struct {
	data []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := copy(p, r.data[r.off:])
	r.off = (r.off + n) % len(r.data)
	return n, nil
}

// BenchmarkReader measures reading and copying a pipeline of 100 BF.ADD requests,
// one batch per read. One op is one request.
func BenchmarkReader(b *testing.B) {
	var in bytes.Buffer
	for i := 0; i < 100; i++ {
		in.WriteString(encode("BF.ADD", "bench", "item-"+strings.Repeat("x", i%10)))
	}
	rd := newTestReader(&repeatReader{data: in.Bytes()}, 1<<20, 1<<10)
	b.ReportAllocs()
	b.SetBytes(int64(in.Len()) / 100)
	for done := 0; done < b.N; {
		batch, err := rd.readBatch()
		if err != nil {
			b.Fatal(err)
		}
		done += len(batch)
		rd.release()
	}
}
