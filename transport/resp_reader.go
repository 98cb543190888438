package transport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Limits of the request reader that do not depend on Config.
const (
	readBufIdle    = 1 << 10  // a new or idle connection's buffer
	readBufBusy    = 16 << 10 // most a buffer grows to for throughput; beyond, only for one big request
	maxInlineBytes = 64 << 10 // an inline (telnet) request line, as Redis
	maxHeaderBytes = 32       // a "*N" or "$N" line including CRLF
	maxBatch       = 1024     // requests handed out per batch
	marksFree      = 512      // argument table entries (two per argument) held without charge
	chargeQuantum  = 16 << 10 // argument copies a batch holds before the budget is charged
	sliceHeader    = 24       // bytes of a []byte header: a copied argument costs this besides its data
	bigGrowth      = 1 << 20  // a buffer this big grows straight to what its request needs
)

// protocolError is a malformed request; the connection answers
// "ERR Protocol error: ..." and closes, as Redis does.
type protocolError string

func (e protocolError) Error() string { return "Protocol error: " + string(e) }

// protocolReply is the error reply that ends a connection after a
// protocol error, as Redis words it.
func protocolReply(e protocolError) string { return "ERR " + e.Error() }

// errIncomplete reports that the buffer ends inside a request.
var errIncomplete = errors.New("incomplete request")

// readLimits are what a server's readers enforce; all of them share one value.
type readLimits struct {
	maxReq  int // most bytes one request may occupy on the wire
	maxArgs int // most arguments one request may announce
	maxBulk int // most bytes one argument may hold, unless argBytes allows more
	// maxChunk is the most argBytes allows any argument (0: no more than maxBulk).
	maxChunk int
	// argBytes, if set, is asked about an argument longer than maxBulk: the most
	// bytes argument i (counting the command name as 0) may hold, given the
	// arguments before it. The common path never calls it.
	argBytes func(req argView, i int) int
	// chunkCheck, if set, is asked about an argument that argBytes let be
	// longer than maxBulk, of n bytes: the refusal of a chunk its filter could
	// not take, so that it is read past rather than held, or nil.
	chunkCheck func(req argView, i int, n int64) error
}

// bufCap is the largest buffer a request can need: once it holds maxReq bytes
// (or a chunk argument and chunkSlack) plus one header (or a whole inline
// line), the request is complete or refused.
func (l *readLimits) bufCap() int {
	return max(max(l.maxReq, l.maxChunk+chunkSlack)+maxHeaderBytes, maxInlineBytes+1)
}

// argView shows a limit function the arguments of the request being parsed,
// without copying them.
type argView struct {
	in    []byte
	marks []int
}

// len is the number of arguments parsed so far.
func (v argView) len() int { return len(v.marks) / 2 }

// arg is argument i, which must be below len.
func (v argView) arg(i int) []byte { return v.in[v.marks[2*i]:v.marks[2*i+1]] }

// reader reads RESP requests, multibulk or inline, from a client. It parses
// incrementally: a request split over many reads is scanned once, not from its
// start on every read, and its limits are checked from its headers, before the
// bytes they announce arrive.
type reader struct {
	src io.Reader
	lim *readLimits
	bud *budget // what the reader holds is charged here; nil for no bound
	// preAuth applies the limits of a connection that has not authenticated yet
	// (PreAuthMaxArgs, PreAuthMaxBulkBytes) and hands out one request per batch,
	// so that the request after an AUTH is parsed under the limits AUTH lifted.
	// The connection sets it before each readBatch.
	preAuth bool

	buf   []byte // nil until the first read
	r, w  int    // buf[r:w] is input not yet handed out
	burst int    // bytes read since the buffer was last drained
	full  bool   // the last Read filled the buffer: the client sends faster than it drains

	// State of the multibulk request that starts at buf[r].
	argc  int   // arguments announced; 0 when no multibulk header has been parsed
	pos   int   // parse position relative to r
	need  int   // bytes from r the request needs up to the end of the bulk being read
	marks []int // start, end of each argument parsed so far, relative to r

	err   error  // a read or protocol error held back until the batch before it is served
	nread uint64 // bytes read since the connection opened (INFO total_net_input_bytes)

	// A refused request being read past, and the reasons of those handed out
	// as refusedRequest and not yet taken (resp_reader_big.go).
	skip     skipState
	refusals []error

	// Budget accounting (see budget.go).
	charged int64 // for buf and marks beyond their free sizes
	held    int64 // for the copies handed out since the last release
	owed    int64 // copies handed out since the last release and not charged yet
}

func newReader(src io.Reader, lim *readLimits, bud *budget) *reader {
	return &reader{src: src, lim: lim, bud: bud}
}

// readBatch returns every complete request already received (at most maxBatch,
// or one before authentication), blocking only while there is none. Each
// request's arguments are a private copy. An error is returned only when no
// request precedes it.
func (rd *reader) readBatch() ([][][]byte, error) {
	limit := maxBatch
	if rd.preAuth {
		limit = 1
	}
	for {
		var batch [][][]byte
		for len(batch) < limit && rd.err == nil {
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
		fill := rd.fill
		if rd.skip.on && rd.r == rd.w && rd.skip.left >= discardMin {
			fill = rd.discard
		}
		if err := fill(); err != nil {
			rd.err = err
		}
	}
}

// fill reads more input, first making room. The buffer starts small, so an idle
// connection costs little; it doubles when one request needs more room, and
// when a read filled it (a pipelining client: fewer reads, bigger batches) up to
// readBufBusy. Once drained, before the connection waits again, it goes back
// to the idle size if it was grown for a big request, or if less than a quarter
// of it was read since it was last drained: the client no longer sends enough to
// need it. (So a pipelining client that goes quiet keeps at most readBufBusy;
// the budget counts it.)
func (rd *reader) fill() error {
	if rd.r == rd.w {
		rd.r, rd.w = 0, 0
		if len(rd.buf) > readBufIdle && (len(rd.buf) > readBufBusy || rd.burst < len(rd.buf)/4) {
			rd.recharge(0, cap(rd.marks))
			rd.buf = nil
		}
		rd.burst = 0
	}
	switch {
	case rd.buf == nil:
		rd.buf = make([]byte, readBufIdle)
	case rd.w < len(rd.buf):
	case rd.r == 0 || rd.full && len(rd.buf) < readBufBusy:
		if err := rd.grow(); err != nil {
			if rd.r == 0 {
				return err // one request fills the buffer and cannot have more
			}
			rd.compact() // growing was only for speed
		}
	default:
		rd.compact()
	}
	n, err := rd.src.Read(rd.buf[rd.w:])
	rd.w += n
	rd.nread += uint64(n)
	rd.burst += n
	rd.full = rd.w == len(rd.buf)
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// grow doubles the buffer, moving the pending input to its front, if the budget
// allows. Once a big bulk is arriving (the buffer has reached bigGrowth), it
// grows at once to what the request needs up to that bulk's end: a 36 MB chunk
// is not copied through every power of two on the way.
func (rd *reader) grow() error {
	size := 2 * len(rd.buf)
	if len(rd.buf) >= bigGrowth && rd.need > size {
		size = rd.need
	}
	size = min(size, rd.lim.bufCap())
	if size <= len(rd.buf) { // cannot happen: the parser refuses such a request first
		return protocolError(fmt.Sprintf("request larger than %d bytes", rd.lim.maxReq))
	}
	if !rd.recharge(size, cap(rd.marks)) {
		return errBudget
	}
	grown := make([]byte, size)
	rd.w = copy(grown, rd.buf[rd.r:rd.w])
	rd.r, rd.buf = 0, grown
	return nil
}

// compact moves the pending input to the front of the buffer.
func (rd *reader) compact() {
	rd.w = copy(rd.buf, rd.buf[rd.r:rd.w])
	rd.r = 0
}

// growMarks doubles the argument table if the budget allows.
func (rd *reader) growMarks() error {
	size := max(16, 2*cap(rd.marks))
	if !rd.recharge(len(rd.buf), size) {
		return errBudget
	}
	rd.marks = append(make([]int, 0, size), rd.marks...)
	return nil
}

// next parses one request from the buffer. It returns (nil, nil) for an empty
// request, which Redis skips, and errIncomplete when more input is needed.
func (rd *reader) next() ([][]byte, error) {
	if rd.skip.on {
		return rd.skipping()
	}
	if rd.r == rd.w {
		return nil, errIncomplete
	}
	if rd.argc == 0 && rd.buf[rd.r] != '*' {
		return rd.inline()
	}
	args, err := rd.multibulk()
	if err == errSkip {
		return rd.skipping()
	}
	return args, err
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
		if rd.preAuth && n > PreAuthMaxArgs {
			return nil, protocolError("unauthenticated multibulk length")
		}
		if n > int64(rd.lim.maxArgs) {
			return nil, protocolError(fmt.Sprintf("too many arguments: %d (max %d)", n, rd.lim.maxArgs))
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
		if n < 0 || n > int64(rd.lim.maxBulk) || rd.preAuth || n > int64(rd.lim.maxReq)-int64(end)-2 {
			if err := rd.checkBulk(in, n, end); err != nil {
				return nil, err
			}
		}
		stop := end + int(n)
		if stop+2 > len(in) {
			rd.need = stop + 2
			return nil, errIncomplete
		}
		if in[stop] != '\r' || in[stop+1] != '\n' {
			return nil, protocolError("invalid bulk length")
		}
		if len(rd.marks) == cap(rd.marks) {
			if err := rd.growMarks(); err != nil {
				return nil, err
			}
		}
		rd.marks = append(rd.marks, end, stop)
		rd.pos = stop + 2
	}
	if rd.pos >= handOffBytes {
		args, err := rd.handOff(in, rd.marks)
		rd.argc = 0
		return args, err
	}
	args, err := rd.copyArgs(in, rd.marks)
	if err != nil {
		return nil, err
	}
	rd.r += rd.pos
	rd.argc, rd.pos, rd.need = 0, 0, 0
	if cap(rd.marks) > marksFree {
		rd.marks = nil // a request of many arguments does not pin its table
		rd.recharge(len(rd.buf), 0)
	}
	return args, nil
}

// checkBulk applies the limits to a bulk string of n bytes whose header ends at
// in[end], the next argument of the request being parsed: before
// authentication Redis's 16 KB; for everybody the item size, unless the
// server's argBytes allows this argument more (a LOADCHUNK's chunk), and the
// request size, which a chunk may exceed by chunkSlack. A request over a limit
// is refused (refuse).
func (rd *reader) checkBulk(in []byte, n int64, end int) error {
	switch {
	case n < 0:
		return protocolError("invalid bulk length")
	case rd.preAuth && n > PreAuthMaxBulkBytes:
		return protocolError("unauthenticated bulk length")
	}
	lim := rd.lim.maxBulk
	if i := len(rd.marks) / 2; n > int64(lim) && rd.lim.argBytes != nil && i > 0 {
		lim = rd.lim.argBytes(argView{in: in, marks: rd.marks}, i)
	}
	reqLim := rd.lim.maxReq
	if lim > rd.lim.maxBulk {
		reqLim = max(reqLim, lim+chunkSlack)
	}
	switch {
	case n > int64(reqLim)-int64(end)-2: // written so it cannot overflow
		return rd.refuse(n, end, fmt.Sprintf("request larger than %d bytes", reqLim))
	case n <= int64(lim):
		if lim > rd.lim.maxBulk && rd.lim.chunkCheck != nil {
			if err := rd.lim.chunkCheck(argView{in: in, marks: rd.marks}, len(rd.marks)/2, n); err != nil {
				return rd.refuseWith(n, end, err)
			}
		}
		return nil
	case lim == rd.lim.maxBulk:
		return rd.refuse(n, end, fmt.Sprintf("bulk string of %d bytes exceeds --max-item-size (%d)", n, lim))
	}
	return rd.refuse(n, end, fmt.Sprintf("bulk string of %d bytes exceeds the %d this argument may hold", n, lim))
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
func (rd *reader) copyArgs(in []byte, marks []int) ([][]byte, error) {
	total := 0
	for i := 0; i < len(marks); i += 2 {
		total += marks[i+1] - marks[i]
	}
	if err := rd.owe(total, len(marks)/2); err != nil {
		return nil, err
	}
	data := make([]byte, 0, total)
	args := make([][]byte, 0, len(marks)/2)
	for i := 0; i < len(marks); i += 2 {
		start := len(data)
		data = append(data, in[marks[i]:marks[i+1]]...)
		args = append(args, data[start:len(data):len(data)])
	}
	return args, nil
}

// inline parses a telnet-style request line, split as Redis's sdssplitargs does.
// The line's 64 KB bound the arguments, so neither the item size nor, before
// authentication, the bulk size applies; the argument counts do.
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
	if rd.preAuth && len(args) > PreAuthMaxArgs {
		return nil, protocolError(fmt.Sprintf("unauthenticated inline request of %d arguments (max %d)",
			len(args), PreAuthMaxArgs))
	}
	if len(args) > rd.lim.maxArgs {
		return nil, protocolError(fmt.Sprintf("too many arguments: %d (max %d)", len(args), rd.lim.maxArgs))
	}
	if len(args) == 0 {
		return nil, nil
	}
	if err := rd.owe(len(line), len(args)); err != nil {
		return nil, err
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
