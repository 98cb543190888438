package cluster

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
)

// A node may speak Raft only as the node its certificate names. hashicorp/raft's
// NetworkTransport reads requests from an accepted connection as
//
//	u8 rpc type | msgpack request (a map of the request's fields)
//	            | for InstallSnapshot, Size bytes of snapshot
//
// and every request's map holds RPCHeader's fields inline, ID (the sender's
// server id) among them. raftGuard stands between the connection and the
// transport: it walks each request's msgpack tokens as they pass, without
// decoding what it does not need (entries' data pass through as they are),
// checks every top-level ID field against the peer's id, and withholds the
// last byte of a request until it has seen one, so a request that claims
// another sender, or none, never completes and never reaches raft: the
// connection is closed instead.

// The rpc types of raft v1.7's NetworkTransport (net_transport.go).
const (
	rpcAppendEntries byte = iota
	rpcRequestVote
	rpcInstallSnapshot
	rpcTimeoutNow
	rpcRequestPreVote
)

// Bounds of what the guard reads: a deeper nesting than raft's requests use,
// a sender id longer than a certificate name may be, or a key longer than any
// field name of raft's requests is refused or not looked at.
const (
	guardMaxDepth = 32
	guardMaxID    = 255
	guardMaxKey   = 32
	guardBuffer   = 64 << 10
)

var (
	errGuardWouldBlock = errors.New("raft guard: more bytes needed")
	errSenderMismatch  = errors.New("raft request from another sender than the certificate names")
	errSenderFenced    = errors.New("raft request from a replica a recovery of the shard cut off")
)

// guardState is what the guard expects next.
type guardState byte

const (
	guardType guardState = iota // the rpc type byte
	guardBody                   // a token of the msgpack request
)

// fieldKey is a top-level key of a request the guard cares about.
type fieldKey byte

const (
	keyOther fieldKey = iota
	keyID
	keySize
)

// raftGuard is an accepted Raft connection as the transport reads it.
type raftGuard struct {
	net.Conn
	br       *bufio.Reader
	check    func(id []byte) error // the sender id a request names
	onRefuse func(error)           // told once why the connection is closed

	ok      int64 // bytes checked and not yet handed on
	pending error // a refusal, raised once the bytes checked before it are handed on
	err     error
	state   guardState

	// the request being read
	rpcType byte
	stack   []uint64 // items left in each open container (a map counts keys and values)
	topIdx  uint64   // items read of the request's map: keys at even positions
	key     fieldKey // the top-level key just read
	idSeen  bool
	size    int64 // InstallSnapshot's Size
}

func newRaftGuard(c net.Conn, peer string, onRefuse func(error)) *raftGuard {
	return newSenderGuard(c, senderIs(peer, nil), onRefuse)
}

// newSenderGuard is a guard whose check decides which sender ids may speak.
func newSenderGuard(c net.Conn, check func(id []byte) error, onRefuse func(error)) *raftGuard {
	return &raftGuard{Conn: c, br: bufio.NewReaderSize(c, guardBuffer), check: check, onRefuse: onRefuse,
		stack: make([]uint64, 0, 8)}
}

// Read hands on checked bytes. It checks more only when it has none to hand
// on, or when more are already buffered, so it never blocks while it holds
// bytes the transport is waiting for.
func (g *raftGuard) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && g.err == nil {
		if g.ok == 0 {
			if g.pending != nil {
				g.fail(g.pending)
				break
			}
			if err := g.scan(n > 0); err != nil {
				if !errors.Is(err, errGuardWouldBlock) {
					g.fail(err)
				}
				break
			}
			continue
		}
		want := min(int64(len(p)-n), g.ok)
		if n > 0 {
			want = min(want, int64(g.br.Buffered()))
			if want == 0 {
				break
			}
		}
		m, err := g.br.Read(p[n : n+int(want)])
		n += m
		g.ok -= int64(m)
		if err != nil {
			g.err = err
		}
	}
	if n > 0 {
		return n, nil
	}
	return 0, g.err
}

// fail closes the connection for err; a read error of the connection itself
// is passed on as it is.
func (g *raftGuard) fail(err error) {
	g.err = err
	var ge guardError
	if errors.As(err, &ge) || errors.Is(err, errSenderMismatch) || errors.Is(err, errSenderFenced) {
		g.Conn.Close()
		if g.onRefuse != nil {
			g.onRefuse(err)
		}
	}
}

// senderIs is the check of a guard: the sender must be peer (the node its
// certificate names; "" without TLS: any), and not one fenced says a
// recovery cut off (nil: none).
func senderIs(peer string, fenced func(id string) bool) func(id []byte) error {
	want := []byte(peer)
	return func(id []byte) error {
		if peer != "" && !bytes.Equal(id, want) {
			return fmt.Errorf("%w: %q", errSenderMismatch, id)
		}
		if fenced != nil && fenced(string(id)) {
			return fmt.Errorf("%w: %q", errSenderFenced, id)
		}
		return nil
	}
}

// guardError is a request the guard refuses for its form.
type guardError string

func (e guardError) Error() string { return "raft request refused: " + string(e) }

// scan checks every unit (a type byte or a token) that is whole in the read
// buffer, at least one, waiting for it unless nonBlocking, and adds their
// bytes (with any payload that follows them) to those it may hand on.
func (g *raftGuard) scan(nonBlocking bool) error {
	need := 1
	for {
		if g.br.Buffered() < need {
			if nonBlocking {
				return errGuardWouldBlock
			}
			if _, err := g.br.Peek(need); err != nil {
				return err
			}
		}
		buf, _ := g.br.Peek(g.br.Buffered())
		var pos int64
		for pos < int64(len(buf)) {
			n, more, err := g.unit(buf[pos:])
			if err != nil {
				if pos == 0 {
					return err
				}
				g.pending = err
				break
			}
			if more > 0 {
				need = more
				break
			}
			pos += n
		}
		if pos > 0 {
			g.ok = pos
			return nil
		}
	}
}

// unit checks the unit at the start of b. It returns its length with what
// follows it unchecked (a payload, a snapshot), or, changing nothing, how many
// bytes it needs to be checked.
func (g *raftGuard) unit(b []byte) (n int64, more int, err error) {
	if g.state == guardType {
		if b[0] > rpcRequestPreVote {
			return 0, 0, guardError(fmt.Sprintf("unknown rpc type %d", b[0]))
		}
		g.rpcType, g.state = b[0], guardBody
		g.stack, g.topIdx, g.key, g.idSeen, g.size = g.stack[:0], 0, keyOther, false, 0
		return 1, 0, nil
	}
	var t token
	need := headOf(b, &t)
	if t.hdr == 0 {
		if need == 0 {
			return 0, 0, guardError(fmt.Sprintf("byte 0x%02x starts no msgpack value", b[0]))
		}
		return 0, need, nil
	}
	if len(g.stack) == 1 || len(g.stack) == 0 || (t.children > 0 && len(g.stack) >= guardMaxDepth) {
		if more, err := g.inspect(&t, b); err != nil || more > 0 {
			return 0, more, err
		}
	}
	n, err = g.advance(&t)
	return n, 0, err
}

// inspect looks at a token where it matters: the request itself must be a
// map, its keys strings, its ID the peer's and InstallSnapshot's Size a
// number. b starts with the token; if the token's payload must be read and b
// does not hold it, inspect changes nothing and says how many bytes it needs.
func (g *raftGuard) inspect(t *token, b []byte) (int, error) {
	if t.children > 0 && len(g.stack) >= guardMaxDepth {
		return 0, guardError("nested too deep")
	}
	switch len(g.stack) {
	case 0:
		if t.class != tokMap {
			return 0, guardError("the request is not a map")
		}
		return 0, nil
	case 1:
	default:
		return 0, nil
	}
	end := t.hdr + int(min(t.payload, guardMaxID+1))
	if g.topIdx%2 == 0 {
		if t.class != tokStr && t.class != tokBin {
			return 0, guardError("a field name that is not a string")
		}
		g.key = keyOther
		if t.payload <= guardMaxKey {
			if len(b) < end {
				return end, nil
			}
			switch string(b[t.hdr:end]) {
			case "ID":
				g.key = keyID
			case "Size":
				g.key = keySize
			}
		}
		g.topIdx++
		return 0, nil
	}
	switch g.key {
	case keyID:
		if (t.class != tokStr && t.class != tokBin) || t.payload > guardMaxID {
			return 0, guardError("a sender id that is not a short string")
		}
		if len(b) < end {
			return end, nil
		}
		if err := g.check(b[t.hdr:end]); err != nil {
			return 0, err
		}
		g.idSeen = true
	case keySize:
		if g.rpcType == rpcInstallSnapshot {
			if t.class != tokInt {
				return 0, guardError("a snapshot size that is not an integer")
			}
			g.size = max(t.value, 0)
		}
	}
	g.topIdx++
	return 0, nil
}

// advance counts a token into the structure and returns its length with its
// payload; at the end of a request it requires the sender id, and adds a
// snapshot's bytes to the length of the request's last token.
func (g *raftGuard) advance(t *token) (int64, error) {
	if d := len(g.stack); d > 0 {
		g.stack[d-1]--
	}
	if t.children > 0 {
		g.stack = append(g.stack, t.children)
	}
	for len(g.stack) > 0 && g.stack[len(g.stack)-1] == 0 {
		g.stack = g.stack[:len(g.stack)-1]
	}
	n := int64(t.hdr) + int64(t.payload)
	if len(g.stack) > 0 {
		return n, nil
	}
	if !g.idSeen {
		return 0, guardError("no sender id")
	}
	g.state = guardType
	if g.rpcType == rpcInstallSnapshot {
		n += g.size
	}
	return n, nil
}

// tokClass is what a token is, as far as the guard cares.
type tokClass byte

const (
	tokOther tokClass = iota
	tokMap
	tokArray
	tokStr
	tokBin
	tokInt
)

// token is one msgpack token's header.
type token struct {
	class    tokClass
	hdr      int    // bytes of the header: the type byte and what follows it before the payload
	payload  uint64 // bytes after the header (strings, binaries, extensions' data)
	children uint64 // items it opens (a map's keys and values)
	value    int64  // an integer's value
}

// headOf reads a token's header from b into t. If b is too short it returns
// how many bytes it needs, leaving t.hdr zero; a byte no msgpack token starts
// with leaves t.hdr zero and needs nothing.
func headOf(b []byte, t *token) int {
	c := b[0]
	switch {
	case c <= 0x7f:
		*t = token{class: tokInt, hdr: 1, value: int64(c)}
		return 1
	case c >= 0xe0:
		*t = token{class: tokInt, hdr: 1, value: int64(int8(c))}
		return 1
	case c <= 0x8f:
		*t = token{class: tokMap, hdr: 1, children: 2 * uint64(c&0x0f)}
		return 1
	case c <= 0x9f:
		*t = token{class: tokArray, hdr: 1, children: uint64(c & 0x0f)}
		return 1
	case c <= 0xbf:
		*t = token{class: tokStr, hdr: 1, payload: uint64(c & 0x1f)}
		return 1
	}
	size := &fixedSizes[c-0xc0]
	if size.hdr == 0 || len(b) < size.hdr {
		*t = token{}
		return size.hdr
	}
	*t = token{class: size.class, hdr: size.hdr}
	var n uint64
	switch size.lenBytes {
	case 1:
		n = uint64(b[1])
	case 2:
		n = uint64(binary.BigEndian.Uint16(b[1:]))
	case 4:
		n = uint64(binary.BigEndian.Uint32(b[1:]))
	case 8:
		n = binary.BigEndian.Uint64(b[1:])
	}
	switch {
	case size.class == tokMap:
		t.children = 2 * n
	case size.class == tokArray:
		t.children = n
	case size.class == tokInt:
		t.value = intValue(c, n)
		if c == 0xcf && n > 1<<63-1 {
			t.class = tokOther // beyond an int64: no size
		}
	case size.fixed >= 0:
		t.payload = uint64(size.fixed)
	default:
		t.payload = n
	}
	return size.hdr
}

// intValue is the value of an integer token of type c whose big-endian bytes
// read as n.
func intValue(c byte, n uint64) int64 {
	switch c {
	case 0xd0:
		return int64(int8(n))
	case 0xd1:
		return int64(int16(n))
	case 0xd2:
		return int64(int32(n))
	}
	return int64(n)
}

// tokSize is the shape of a token starting with one of msgpack's fixed type
// bytes: its header length, how many of those bytes give a length or count,
// and for fixed-size values the payload after the header (-1: given by the
// length).
type tokSize struct {
	class    tokClass
	hdr      int
	lenBytes int
	fixed    int
}

// fixedSizes is indexed by the type byte less 0xc0; a zero hdr marks 0xc1,
// which starts no value.
var fixedSizes = [32]tokSize{
	0x00: {tokOther, 1, 0, 0},                            // nil
	0x02: {tokOther, 1, 0, 0}, 0x03: {tokOther, 1, 0, 0}, // false, true
	0x04: {tokBin, 2, 1, -1}, 0x05: {tokBin, 3, 2, -1}, 0x06: {tokBin, 5, 4, -1},
	0x07: {tokOther, 3, 1, -1}, 0x08: {tokOther, 4, 2, -1}, 0x09: {tokOther, 6, 4, -1}, // ext: length, then a type byte
	0x0a: {tokOther, 1, 0, 4}, 0x0b: {tokOther, 1, 0, 8}, // floats
	0x0c: {tokInt, 2, 1, 0}, 0x0d: {tokInt, 3, 2, 0}, 0x0e: {tokInt, 5, 4, 0}, 0x0f: {tokInt, 9, 8, 0},
	0x10: {tokInt, 2, 1, 0}, 0x11: {tokInt, 3, 2, 0}, 0x12: {tokInt, 5, 4, 0}, 0x13: {tokInt, 9, 8, 0},
	0x14: {tokOther, 2, 0, 1}, 0x15: {tokOther, 2, 0, 2}, 0x16: {tokOther, 2, 0, 4}, 0x17: {tokOther, 2, 0, 8}, 0x18: {tokOther, 2, 0, 16},
	0x19: {tokStr, 2, 1, -1}, 0x1a: {tokStr, 3, 2, -1}, 0x1b: {tokStr, 5, 4, -1},
	0x1c: {tokArray, 3, 2, 0}, 0x1d: {tokArray, 5, 4, 0},
	0x1e: {tokMap, 3, 2, 0}, 0x1f: {tokMap, 5, 4, 0},
}

var _ io.Reader = (*raftGuard)(nil)
