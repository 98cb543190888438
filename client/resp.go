package client

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"
)

// The client speaks RESP2 (the nodes' default; it never sends HELLO): requests
// are arrays of bulk strings, replies are read into reply values.

// appendCommand appends args as one RESP request.
func appendCommand(b []byte, args []string) []byte {
	b = appendHeader(b, '*', len(args))
	for _, a := range args {
		b = appendBulk(b, a)
	}
	return b
}

// encodedSize bounds the bytes appendIdem writes for args.
func encodedSize(args []string) int {
	n := 3*32 + 16 // the array header, IDEM and two numbers
	for _, a := range args {
		n += len(a) + 16 // $len\r\n...\r\n
	}
	return n
}

// appendIdem appends IDEM session seq args... as one RESP request.
func appendIdem(b []byte, session, seq uint64, args []string) []byte {
	b = appendHeader(b, '*', len(args)+3)
	b = appendBulk(b, "IDEM")
	b = appendUint(b, session)
	b = appendUint(b, seq)
	for _, a := range args {
		b = appendBulk(b, a)
	}
	return b
}

func appendHeader(b []byte, kind byte, n int) []byte {
	b = append(b, kind)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

func appendBulk(b []byte, s string) []byte {
	b = appendHeader(b, '$', len(s))
	b = append(b, s...)
	return append(b, '\r', '\n')
}

func appendUint(b []byte, v uint64) []byte {
	var d [20]byte
	return appendBulk(b, string(strconv.AppendUint(d[:0], v, 10)))
}

// reply is one RESP2 reply.
type reply struct {
	kind byte    // '+' status, '-' error, ':' integer, '$' bulk, '*' array, 0 null
	str  string  // status, error or bulk text
	num  int64   // integer
	arr  []reply // array elements
}

func (r reply) isError() bool { return r.kind == '-' }

// Bounds on what a reply may announce, so a broken or hostile peer cannot make
// the client allocate without limit: a bulk string of at most maxBulk bytes
// (Redis's own proto-max-bulk-len), arrays of at most maxArray elements,
// nested at most maxDepth deep. Memory is taken as bytes arrive, never from a
// header alone.
const (
	maxBulk  = 512 << 20
	maxArray = 1 << 24
	maxDepth = 8
)

// errProtocol is a reply the client cannot parse; the connection is dropped.
var errProtocol = errors.New("protocol error")

// readReply reads one reply.
func readReply(br *bufio.Reader) (reply, error) { return readDepth(br, 0) }

func readDepth(br *bufio.Reader, depth int) (reply, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return reply{}, fmt.Errorf("%w: reply line too long", errProtocol)
		}
		return reply{}, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return reply{}, fmt.Errorf("%w: bad line %q", errProtocol, clip(line))
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+', '-':
		return reply{kind: kind, str: string(body)}, nil
	case ':':
		n, ok := parseInt(body)
		if !ok {
			return reply{}, fmt.Errorf("%w: bad integer %q", errProtocol, clip(body))
		}
		return reply{kind: ':', num: n}, nil
	case '$':
		n, ok := parseInt(body)
		switch {
		case ok && n == -1:
			return reply{}, nil
		case !ok || n < 0 || n > maxBulk:
			return reply{}, fmt.Errorf("%w: bad bulk length %q", errProtocol, clip(body))
		}
		return readBulk(br, int(n))
	case '*':
		n, ok := parseInt(body)
		switch {
		case ok && n == -1:
			return reply{}, nil
		case !ok || n < 0 || n > maxArray:
			return reply{}, fmt.Errorf("%w: bad array length %q", errProtocol, clip(body))
		case depth >= maxDepth:
			return reply{}, fmt.Errorf("%w: arrays nested too deep", errProtocol)
		}
		// Room for up to 65536 elements at once (3.5 MiB): a batch's answer
		// is read without regrowing, a hostile header costs no more.
		arr := make([]reply, 0, min(int(n), 1<<16))
		for range n {
			e, err := readDepth(br, depth+1)
			if err != nil {
				return reply{}, err
			}
			arr = append(arr, e)
		}
		return reply{kind: '*', arr: arr}, nil
	}
	return reply{}, fmt.Errorf("%w: unknown reply type %q", errProtocol, kind)
}

// readBulk reads n bytes and their CRLF, growing its buffer as bytes arrive.
func readBulk(br *bufio.Reader, n int) (reply, error) {
	buf := make([]byte, 0, min(n+2, 64<<10))
	for len(buf) < n+2 {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		m, err := br.Read(buf[len(buf):min(cap(buf), n+2)])
		buf = buf[:len(buf)+m]
		if err != nil {
			return reply{}, err
		}
	}
	if buf[n] != '\r' || buf[n+1] != '\n' {
		return reply{}, fmt.Errorf("%w: bulk string not terminated", errProtocol)
	}
	return reply{kind: '$', str: string(buf[:n])}, nil
}

// parseInt parses a decimal integer strictly: an optional minus and 1 to 19
// digits.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if n > 1<<63-1 {
		return 0, false
	}
	if neg {
		return -int64(n), true
	}
	return int64(n), true
}

func clip(b []byte) []byte { return b[:min(len(b), 40)] }
