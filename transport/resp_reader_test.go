package transport

import (
	"bytes"
	"errors"
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
			got, err := readAll(newReader(src, 1<<20, 1<<10))
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
		{"*1\r\n$100000\r\n", "Protocol error: request larger than"},
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
			_, err = readAll(newReader(strings.NewReader(c.in), 1<<16, 1<<10))
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
	rd := newReader(strings.NewReader("*1\r\n$4\r\nPING\r\n*1\r\n+x\r\n"), 1<<16, 16)
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
	rd := newReader(&oneByteReader{data: in.Bytes()}, 1<<16, 16)
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
	rd := newReader(&in, 2<<20, 16)
	b, err := rd.readBatch()
	if err != nil || len(b) < 1 || !bytes.Equal(b[0][1], item) {
		t.Fatalf("big request: %d requests, %v", len(b), err)
	}
	rest, err := readAll(rd)
	if !errors.Is(err, io.EOF) || argsString(append(b[1:], rest...)) != "PING" {
		t.Fatalf("after big request: %q, %v", argsString(rest), err)
	}
	if len(rd.buf) > readBufSize {
		t.Fatalf("buffer stayed at %d bytes", len(rd.buf))
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
