package transport

import (
	"fmt"
	"io"
	"sync"
)

// Requests too large to take, and requests large enough to hand over.
//
// A request that is well formed but larger than a limit allows (an item over
// --max-item-size, a LOADCHUNK chunk over proto-max-bulk-len, a request over
// --max-request-size) is refused from its header, before its bytes are read.
// From an authenticated client it is then read past and dropped, never held,
// and answered with an error in its place, so the connection goes on: closing
// it with the client's bytes still in flight made the client see a reset
// rather than the reason. A stranger's is a protocol error that closes the
// connection, as before (preauth_test.go).
//
// A request of at least handOffBytes (a big LOADCHUNK) is not copied out of
// the read buffer: its arguments keep the buffer, whose charge moves to what
// the batch holds, and the reader starts a new buffer with whatever followed
// the request. A 500 MB chunk then costs its buffer once, not twice.

const (
	// handOffBytes is the size from which a request takes the read buffer
	// instead of a copy of its arguments.
	handOffBytes = 1 << 20
	// chunkSlack is what a request carrying a chunk argument may hold besides
	// it (the command, key and iterator) over --max-request-size.
	chunkSlack = 64 << 10
	// maxSkipBytes is the largest argument read past; a larger one is a
	// protocol error, as every bulk over 512 MB is in Redis.
	maxSkipBytes = 4 << 30
)

// refusedRequest stands in a batch for a request that was refused and read
// past: no client request has no arguments (empty ones are skipped), so the
// connection knows it by its length and takes the reason from takeRefusal.
var refusedRequest = [][]byte{}

// skipState is a refused request being read past.
type skipState struct {
	on   bool
	left int64 // bytes of the current argument (header, data, CRLF) still to drop
	args int   // arguments after it still to drop
	why  error // the refusal, answered in the request's place
}

// refuse refuses the bulk of n bytes whose header ends at in[end] (relative to
// rd.r) for why: a protocol error before authentication; after it, the
// request is dropped as it arrives and answered with why.
func (rd *reader) refuse(n int64, end int, why string) error {
	if rd.preAuth || n > maxSkipBytes {
		return protocolError(why)
	}
	return rd.refuseWith(n, end, redisError("ERR "+why))
}

// refuseWith reads past the request whose bulk of n bytes has its header
// end at in[end] and answers it with why. Only after authentication.
func (rd *reader) refuseWith(n int64, end int, why error) error {
	if rd.preAuth || n > maxSkipBytes {
		return protocolError(why.Error())
	}
	i := len(rd.marks) / 2
	rd.skip = skipState{on: true, left: int64(end) + n + 2, args: rd.argc - i - 1, why: why}
	rd.argc, rd.pos, rd.need = 0, 0, 0
	rd.marks = rd.marks[:0]
	return errSkip
}

// errSkip tells next that multibulk started to read past a refused request.
var errSkip = protocolError("skip")

// skipping drops what has arrived of a refused request; once all of it has,
// it hands out refusedRequest.
func (rd *reader) skipping() ([][]byte, error) {
	for {
		if rd.skip.left > 0 {
			k := min(rd.skip.left, int64(rd.w-rd.r))
			rd.r += int(k)
			rd.skip.left -= k
			if rd.skip.left > 0 {
				return nil, errIncomplete
			}
		}
		if rd.skip.args == 0 {
			rd.refusals = append(rd.refusals, rd.skip.why)
			rd.skip = skipState{}
			return refusedRequest, nil
		}
		in := rd.buf[rd.r:rd.w]
		if len(in) == 0 {
			return nil, errIncomplete
		}
		if in[0] != '$' {
			return nil, protocolError(fmt.Sprintf("expected '$', got '%c'", in[0]))
		}
		n, end, err := header(in, 0, "invalid bulk length")
		if err != nil {
			return nil, err
		}
		if n < 0 || n > maxSkipBytes {
			return nil, protocolError("invalid bulk length")
		}
		rd.skip.left, rd.skip.args = int64(end)+n+2, rd.skip.args-1
	}
}

// takeRefusal returns why the oldest refusedRequest handed out was refused.
func (rd *reader) takeRefusal() error {
	if len(rd.refusals) == 0 {
		return redisError("ERR request refused")
	}
	err := rd.refusals[0]
	rd.refusals = rd.refusals[1:]
	if len(rd.refusals) == 0 {
		rd.refusals = nil
	}
	return err
}

// handOff returns the marked arguments of the request that fills in (the
// first rd.pos bytes from rd.r) as slices of the read buffer itself, and
// starts a new buffer holding what followed the request. The old buffer's
// charge moves to what the batch holds, given back when it is released.
func (rd *reader) handOff(in []byte, marks []int) ([][]byte, error) {
	args := make([][]byte, 0, len(marks)/2)
	for i := 0; i < len(marks); i += 2 {
		args = append(args, in[marks[i]:marks[i+1]:marks[i+1]])
	}
	if err := rd.owe(0, len(args)); err != nil {
		return nil, err
	}
	tail := rd.buf[rd.r+rd.pos : rd.w]
	// The buffer's charge (all of it but the idle size) and the argument
	// table's go with it.
	rd.held += rd.charged
	rd.charged = 0
	rd.marks = nil
	size := max(readBufIdle, len(tail))
	if !rd.recharge(size, 0) {
		return nil, errBudget
	}
	nb := make([]byte, size)
	rd.w = copy(nb, tail)
	rd.r, rd.buf = 0, nb
	rd.pos, rd.need = 0, 0
	return args, nil
}

// Reading past a refused request's bytes: once the read buffer is empty and
// at least discardMin of them are still to come, they are read into a shared
// scratch buffer of discardBytes and dropped, never into the connection's own
// buffer (which shrinks to its idle size when drained, and would then take a
// 300 MB chunk a kilobyte per read).
const (
	discardMin   = 64 << 10
	discardBytes = 256 << 10
)

var discardPool = sync.Pool{New: func() any { b := make([]byte, discardBytes); return &b }}

// discard reads and drops up to discardBytes of the refused request being
// read past, never more than is left of it: what follows it is the next
// request's, read as usual.
func (rd *reader) discard() error {
	p := discardPool.Get().(*[]byte)
	defer discardPool.Put(p)
	b := (*p)[:min(int64(len(*p)), rd.skip.left)]
	n, err := rd.src.Read(b)
	rd.nread += uint64(n)
	rd.skip.left -= int64(n)
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}
