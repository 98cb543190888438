package migratecmd

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The source of `rookery migrate` is read with a RESP client of its own, not
// go-redis: whatever the source sends is bounded before it is allocated. A
// reply may hold at most so many elements and bytes as the command it answers
// can need (replyLimits), every read must make progress within
// sourceReadTimeout, and listing the keys ends with an error when SCAN does not
// (migration.list). A source that announces a billion-element array, a 2 GB
// bulk or a cursor that never comes back to 0 gets the tool an error within
// seconds, not all of the machine's memory.

// Bounds on the source.
const (
	// sourceReadTimeout is the longest the source may send nothing while a
	// reply is due.
	sourceReadTimeout = 10 * time.Second
	// maxChunkBytes bounds one SCANDUMP chunk: Redis's proto-max-bulk-len.
	maxChunkBytes = 512 << 20
	// scanCount is the COUNT asked of each SCAN, and scanMargin how many times
	// more keys a page may bring (Redis returns a few more than COUNT).
	scanCount  = 1000
	scanMargin = 10
	// maxKeyBytes bounds one key name in a SCAN page, and maxListedBytes all
	// of them together.
	maxKeyBytes    = 1 << 20
	maxListedBytes = 64 << 20
	// maxScanPages bounds SCAN where the source does not say how many keys it
	// has (DBSIZE): twenty million keys' worth.
	maxScanPages = 20_000
)

// Errors of the source.
var (
	errSourceLimit = errors.New("the source's reply is over the tool's bounds")
)

// replyLimits bound one reply: elements of any one array, bytes of any one
// bulk, and bytes of all of it.
type replyLimits struct {
	array int
	bulk  int64
	total int64
}

// Reply limits per command.
var (
	limitsSmall = replyLimits{array: 64, bulk: 1 << 20, total: 4 << 20} // PING, INFO, TYPE, PTTL, DBSIZE
	limitsScan  = replyLimits{array: scanCount * scanMargin, bulk: maxKeyBytes, total: 16 << 20}
	limitsDump  = replyLimits{array: 2, bulk: maxChunkBytes, total: maxChunkBytes + 64}
)

// sourceErr is an error reply of the source.
type sourceErr string

func (e sourceErr) Error() string { return string(e) }

// source is one connection to the source, used by one goroutine.
type source struct {
	addr string
	nc   net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
}

// idleConn is a connection whose every read must make progress within
// timeout.
type idleConn struct {
	net.Conn
	timeout time.Duration
}

func (c idleConn) Read(p []byte) (int, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.timeout))
	return c.Conn.Read(p)
}

// dialSource connects to the source the options describe (address, TLS,
// user and password, database).
func dialSource(ctx context.Context, o *redis.Options) (*source, error) {
	d := &net.Dialer{Timeout: 10 * time.Second}
	var nc net.Conn
	var err error
	if o.TLSConfig != nil {
		nc, err = (&tls.Dialer{NetDialer: d, Config: o.TLSConfig}).DialContext(ctx, "tcp", o.Addr)
	} else {
		nc, err = d.DialContext(ctx, "tcp", o.Addr)
	}
	if err != nil {
		return nil, err
	}
	conn := idleConn{Conn: nc, timeout: sourceReadTimeout}
	s := &source{addr: o.Addr, nc: nc, br: bufio.NewReaderSize(conn, 64<<10), bw: bufio.NewWriterSize(nc, 64<<10)}
	if o.Password != "" {
		args := []any{"AUTH", o.Password}
		if o.Username != "" {
			args = []any{"AUTH", o.Username, o.Password}
		}
		if _, err := s.do(limitsSmall, args...); err != nil {
			nc.Close()
			return nil, fmt.Errorf("AUTH: %w", err)
		}
	}
	if o.DB != 0 {
		if _, err := s.do(limitsSmall, "SELECT", o.DB); err != nil {
			nc.Close()
			return nil, fmt.Errorf("SELECT %d: %w", o.DB, err)
		}
	}
	return s, nil
}

func (s *source) close() error { return s.nc.Close() }

// do sends one command and reads its reply within lim. An error reply is
// returned as a sourceErr.
func (s *source) do(lim replyLimits, args ...any) (any, error) {
	if err := s.send(args...); err != nil {
		return nil, err
	}
	if err := s.bw.Flush(); err != nil {
		return nil, err
	}
	return s.reply(lim)
}

// send writes one command without flushing it.
func (s *source) send(args ...any) error {
	fmt.Fprintf(s.bw, "*%d\r\n", len(args))
	for _, a := range args {
		var b []byte
		switch v := a.(type) {
		case string:
			b = []byte(v)
		case []byte:
			b = v
		case int:
			b = strconv.AppendInt(nil, int64(v), 10)
		case int64:
			b = strconv.AppendInt(nil, v, 10)
		case uint64:
			b = strconv.AppendUint(nil, v, 10)
		default:
			return fmt.Errorf("argument of type %T", a)
		}
		fmt.Fprintf(s.bw, "$%d\r\n", len(b))
		s.bw.Write(b)
		if _, err := s.bw.WriteString("\r\n"); err != nil {
			return err
		}
	}
	return nil
}

// reply reads one reply within lim: a string (simple), a []byte (bulk), an
// int64, nil, a sourceErr or a []any of those.
func (s *source) reply(lim replyLimits) (any, error) {
	left := lim.total
	v, err := s.value(lim, &left, 0)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	if se, ok := v.(sourceErr); ok && err == nil {
		return nil, se
	}
	return v, err
}

// value reads one RESP2 value, counting what it holds against left.
func (s *source) value(lim replyLimits, left *int64, depth int) (any, error) {
	line, err := s.line()
	if err != nil {
		return nil, err
	}
	if len(line) == 0 {
		return nil, errors.New("the source sent an empty line")
	}
	body := string(line[1:])
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return sourceErr(body), nil
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("the source sent a bad integer %q", body)
		}
		return n, nil
	case '$':
		n, err := strconv.ParseInt(body, 10, 64)
		switch {
		case err != nil || n < -1:
			return nil, fmt.Errorf("the source sent a bad bulk length %q", body)
		case n == -1:
			return nil, nil
		case n > lim.bulk || n > *left:
			return nil, fmt.Errorf("%w: a bulk string of %d bytes (at most %d here)", errSourceLimit, n, min(lim.bulk, *left))
		}
		*left -= n
		b := make([]byte, n+2) // zero pages until the bytes arrive: memory follows the data
		if _, err := io.ReadFull(s.br, b); err != nil {
			return nil, err
		}
		if b[n] != '\r' || b[n+1] != '\n' {
			return nil, errors.New("the source sent a bulk string without its CRLF")
		}
		return b[:n:n], nil
	case '*':
		n, err := strconv.ParseInt(body, 10, 64)
		switch {
		case err != nil || n < -1:
			return nil, fmt.Errorf("the source sent a bad array length %q", body)
		case n == -1:
			return nil, nil
		case n > int64(lim.array) || depth >= 4:
			return nil, fmt.Errorf("%w: an array of %d elements (at most %d here)", errSourceLimit, n, lim.array)
		case n*16 > *left:
			return nil, fmt.Errorf("%w: an array of %d elements over the reply's %d bytes", errSourceLimit, n, lim.total)
		}
		*left -= n * 16
		out := make([]any, 0, n)
		for range n {
			v, err := s.value(lim, left, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("the source sent %q, which is no RESP2 reply", line[0])
}

// line reads one line without its CRLF; a line longer than a header or a
// simple reply can be is refused.
func (s *source) line() ([]byte, error) {
	line, err := s.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("%w: a line of more than %d bytes", errSourceLimit, s.br.Size())
	}
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, errors.New("the source sent a line without CRLF")
	}
	return line[:len(line)-2], nil
}

// str, integer and array read a reply of one shape.
func str(v any, err error) (string, error) {
	if err != nil {
		return "", err
	}
	switch s := v.(type) {
	case string:
		return s, nil
	case []byte:
		return string(s), nil
	}
	return "", fmt.Errorf("a reply of type %T, want a string", v)
}

func integer(v any, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("a reply of type %T, want an integer", v)
	}
	return n, nil
}

func array(v any, err error) ([]any, error) {
	if err != nil {
		return nil, err
	}
	a, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("a reply of type %T, want an array", v)
	}
	return a, nil
}

// types asks TYPE of every key in one pipeline.
func (s *source) types(keys []string) ([]string, error) {
	for _, k := range keys {
		if err := s.send("TYPE", k); err != nil {
			return nil, err
		}
	}
	if err := s.bw.Flush(); err != nil {
		return nil, err
	}
	out := make([]string, len(keys))
	for i := range keys {
		t, err := str(s.reply(limitsSmall))
		var se sourceErr
		if err != nil && !errors.As(err, &se) {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}
