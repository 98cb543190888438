package transport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Limits of the request reader that do not depend on Config.
const (
	readBufSize    = 16 << 10 // initial and idle buffer size
	maxInlineBytes = 64 << 10 // an inline (telnet) request line, as Redis
	maxHeaderBytes = 32       // a "*N" or "$N" line including CRLF
	maxBatch       = 1024     // requests handed out per batch
)

// protocolError is a malformed request; the connection answers
// "ERR Protocol error: ..." and closes, as Redis does.
type protocolError string

func (e protocolError) Error() string { return "Protocol error: " + string(e) }

// errIncomplete reports that the buffer ends inside a request.
var errIncomplete = errors.New("incomplete request")

// reader reads RESP requests, multibulk or inline, from a client. It parses
// incrementally: a request split over many reads is scanned once, not from its
// start on every read, and its limits are checked from its headers, before the
// bytes they announce arrive.
type reader struct {
	src     io.Reader
	maxReq  int // most bytes one request may occupy on the wire
	maxArgs int // most arguments one request may announce

	buf  []byte
	r, w int // buf[r:w] is input not yet handed out

	// State of the multibulk request that starts at buf[r].
	argc  int   // arguments announced; 0 when no multibulk header has been parsed
	pos   int   // parse position relative to r
	marks []int // start, end of each argument parsed so far, relative to r

	err error // a read or protocol error held back until the batch before it is served
}

func newReader(src io.Reader, maxReq, maxArgs int) *reader {
	return &reader{src: src, maxReq: maxReq, maxArgs: maxArgs, buf: make([]byte, readBufSize)}
}

// readBatch returns every complete request already received (at most maxBatch),
// blocking only while there is none. Each request's arguments are a private copy.
// An error is returned only when no request precedes it.
func (rd *reader) readBatch() ([][][]byte, error) {
	for {
		var batch [][][]byte
		for len(batch) < maxBatch && rd.err == nil {
			args, err := rd.next()
			if err == errIncomplete {
				break
			}
			if err != nil {
				rd.err = err
				break
			}
			if args != nil {
				batch = append(batch, args)
			}
		}
		if len(batch) > 0 {
			return batch, nil
		}
		if rd.err != nil {
			return nil, rd.err
		}
		if err := rd.fill(); err != nil {
			rd.err = err
		}
	}
}

// fill reads more input, first making room: it moves the pending request to the
// front of the buffer and doubles the buffer when that is not enough, so the buffer
// is never more than twice the bytes actually received.
func (rd *reader) fill() error {
	if rd.r == rd.w {
		rd.r, rd.w = 0, 0
		if len(rd.buf) > readBufSize {
			rd.buf = make([]byte, readBufSize)
		}
	}
	if rd.w == len(rd.buf) {
		if rd.r > 0 {
			n := copy(rd.buf, rd.buf[rd.r:rd.w])
			rd.r, rd.w = 0, n
		} else {
			grown := make([]byte, 2*len(rd.buf))
			copy(grown, rd.buf[:rd.w])
			rd.buf = grown
		}
	}
	n, err := rd.src.Read(rd.buf[rd.w:])
	rd.w += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// next parses one request from the buffer. It returns (nil, nil) for an empty
// request, which Redis skips, and errIncomplete when more input is needed.
func (rd *reader) next() ([][]byte, error) {
	if rd.r == rd.w {
		return nil, errIncomplete
	}
	if rd.argc == 0 && rd.buf[rd.r] != '*' {
		return rd.inline()
	}
	return rd.multibulk()
}

// multibulk parses "*<argc>\r\n" then argc times "$<len>\r\n<bytes>\r\n".
func (rd *reader) multibulk() ([][]byte, error) {
	in := rd.buf[rd.r:rd.w]
	if rd.argc == 0 {
		n, end, err := header(in, 0, "invalid multibulk length")
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			rd.r += end // "*0" and "*-1" are empty requests
			return nil, nil
		}
		if n > int64(rd.maxArgs) {
			return nil, protocolError(fmt.Sprintf("too many arguments: %d (max %d)", n, rd.maxArgs))
		}
		rd.argc, rd.pos = int(n), end
		rd.marks = rd.marks[:0]
	}
	for len(rd.marks)/2 < rd.argc {
		if rd.pos >= len(in) {
			return nil, errIncomplete
		}
		if in[rd.pos] != '$' {
			return nil, protocolError(fmt.Sprintf("expected '$', got '%c'", in[rd.pos]))
		}
		n, end, err := header(in, rd.pos, "invalid bulk length")
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, protocolError("invalid bulk length")
		}
		if n > int64(rd.maxReq)-int64(end)-2 { // written so it cannot overflow
			return nil, protocolError(fmt.Sprintf("request larger than %d bytes", rd.maxReq))
		}
		stop := end + int(n)
		if stop+2 > len(in) {
			return nil, errIncomplete
		}
		if in[stop] != '\r' || in[stop+1] != '\n' {
			return nil, protocolError("invalid bulk length")
		}
		rd.marks = append(rd.marks, end, stop)
		rd.pos = stop + 2
	}
	args := rd.copyArgs(in, rd.marks)
	rd.r += rd.pos
	rd.argc, rd.pos = 0, 0
	return args, nil
}

// header parses a "*N\r\n" or "$N\r\n" line starting at in[at] and returns N and
// the offset after the line.
func header(in []byte, at int, what string) (int64, int, error) {
	line := in[at:min(len(in), at+maxHeaderBytes)]
	nl := bytes.IndexByte(line, '\n')
	if nl < 0 {
		if len(line) == maxHeaderBytes {
			return 0, 0, protocolError(what)
		}
		return 0, 0, errIncomplete
	}
	if nl < 2 || line[nl-1] != '\r' {
		return 0, 0, protocolError(what)
	}
	n, ok := parseInt64(line[1 : nl-1])
	if !ok {
		return 0, 0, protocolError(what)
	}
	return n, at + nl + 1, nil
}

// copyArgs copies the marked arguments into one allocation owned by the caller:
// the buffer is reused, and a write's items live on in the log queue.
func (rd *reader) copyArgs(in []byte, marks []int) [][]byte {
	total := 0
	for i := 0; i < len(marks); i += 2 {
		total += marks[i+1] - marks[i]
	}
	data := make([]byte, 0, total)
	args := make([][]byte, 0, len(marks)/2)
	for i := 0; i < len(marks); i += 2 {
		start := len(data)
		data = append(data, in[marks[i]:marks[i+1]]...)
		args = append(args, data[start:len(data):len(data)])
	}
	return args
}

// inline parses a telnet-style request line, split as Redis's sdssplitargs does.
func (rd *reader) inline() ([][]byte, error) {
	in := rd.buf[rd.r:rd.w]
	nl := bytes.IndexByte(in, '\n')
	if nl < 0 {
		if len(in) > maxInlineBytes {
			return nil, protocolError("too big inline request")
		}
		return nil, errIncomplete
	}
	if nl > maxInlineBytes {
		return nil, protocolError("too big inline request")
	}
	line := bytes.TrimSuffix(in[:nl], []byte{'\r'})
	rd.r += nl + 1
	args, ok := splitArgs(line)
	if !ok {
		return nil, protocolError("unbalanced quotes in request")
	}
	if len(args) > rd.maxArgs {
		return nil, protocolError(fmt.Sprintf("too many arguments: %d (max %d)", len(args), rd.maxArgs))
	}
	if len(args) == 0 {
		return nil, nil
	}
	return args, nil
}

// splitArgs splits an inline request line the way Redis's sdssplitargs does:
// arguments separated by white space, "double quotes" with C escapes (\n \r \t
// \b \a \xHH), 'single quotes' with only \' escaped. A closing quote must be
// followed by white space or the end of the line; ok is false otherwise and for an
// unterminated quote.
func splitArgs(line []byte) (args [][]byte, ok bool) {
	if i := bytes.IndexByte(line, 0); i >= 0 {
		line = line[:i] // Redis works on C strings
	}
	p := 0
	for {
		for p < len(line) && isSpace(line[p]) {
			p++
		}
		if p == len(line) {
			return args, true
		}
		var cur []byte
		var end int
		switch line[p] {
		case '"':
			cur, end, ok = splitDoubleQuoted(line, p+1)
		case '\'':
			cur, end, ok = splitSingleQuoted(line, p+1)
		default:
			end = p
			for end < len(line) && !isSpace(line[end]) && line[end] != '"' && line[end] != '\'' {
				end++
			}
			cur, ok = append([]byte{}, line[p:end]...), true
			if end < len(line) && (line[end] == '"' || line[end] == '\'') {
				// A quote inside a word opens a quoted part of the same argument.
				var rest []byte
				if line[end] == '"' {
					rest, end, ok = splitDoubleQuoted(line, end+1)
				} else {
					rest, end, ok = splitSingleQuoted(line, end+1)
				}
				cur = append(cur, rest...)
			}
		}
		if !ok {
			return nil, false
		}
		args = append(args, cur)
		p = end
	}
}

// splitDoubleQuoted scans from just after an opening '"' and returns the
// unescaped text and the offset after the closing quote.
func splitDoubleQuoted(line []byte, p int) ([]byte, int, bool) {
	cur := []byte{}
	for p < len(line) {
		c := line[p]
		switch {
		case c == '\\' && p+3 < len(line) && line[p+1] == 'x' && isHex(line[p+2]) && isHex(line[p+3]):
			cur = append(cur, unhex(line[p+2])<<4|unhex(line[p+3]))
			p += 4
		case c == '\\' && p+1 < len(line):
			cur = append(cur, unescape(line[p+1]))
			p += 2
		case c == '"':
			if p+1 < len(line) && !isSpace(line[p+1]) {
				return nil, 0, false
			}
			return cur, p + 1, true
		default:
			cur = append(cur, c)
			p++
		}
	}
	return nil, 0, false
}

// splitSingleQuoted is splitDoubleQuoted for '...', where only \' is an escape.
func splitSingleQuoted(line []byte, p int) ([]byte, int, bool) {
	cur := []byte{}
	for p < len(line) {
		c := line[p]
		switch {
		case c == '\\' && p+1 < len(line) && line[p+1] == '\'':
			cur = append(cur, '\'')
			p += 2
		case c == '\'':
			if p+1 < len(line) && !isSpace(line[p+1]) {
				return nil, 0, false
			}
			return cur, p + 1, true
		default:
			cur = append(cur, c)
			p++
		}
	}
	return nil, 0, false
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return c
}
