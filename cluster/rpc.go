package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Node-to-node requests travel on the Raft port (stream 'P') as frames:
//
//	request   u32 length | u64 id | u8 op   | body
//	response  u32 length | u64 id | u8 code | body
//
// A connection carries many requests at once; responses come back in any order,
// matched by id. Requests of one connection are read in order and forwarded writes
// are submitted in that order, so a client's pipeline keeps its order across the
// hop to the leader.

// Request ops: the one table of every node-to-node request. Ops are only
// ever appended; a peer of an older build answers an op it does not know
// with errUnknownOp.
const (
	opApply     byte = 1 // body: an fsm log entry of one command; reply: fsm.EncodeResult
	opReadIndex byte = 2 // reply: u64 index the caller must apply before reading
	opStatus    byte = 3 // reply: peerStatus
	opRemove    byte = 4 // body: node id to remove from the configuration
	opConfirm   byte = 5 // body: u64 term; OK if this node is still in that term (readindex.go)
	// opGroup addresses one of the requests above to a group other than
	// group 0: body: uvarint group id, the request's op, its body.
	opGroup byte = 6
	// opMap asks for the cluster map: body empty; reply fsm.EncodeMap, or
	// empty when the node has none (clustermap.go).
	opMap byte = 7
	// opCommand runs a client command against the receiving node's replica
	// of one shard (forward.go).
	opCommand byte = 8
	// opReport pushes the sender's report (reports.go): body JSON nodeReport.
	opReport byte = 9
	// opReserve sets memory aside for a group's writes (budget.go): body JSON
	// reserveRequest; reply JSON reserveAnswer. opRelease lets it go: body
	// the JSON token.
	opReserve byte = 10
	opRelease byte = 11
	// opDrainSelf asks group 0's leader to drain the sender (a node leaving
	// for good, lifecycle.go): body the sender's id.
	opDrainSelf byte = 12
	// opFence tells group 0's leader that recovery of a shard left replicas
	// out (fence.go): body JSON fenceRequest.
	opFence byte = 13
)

// groupOp wraps request op for group g; group 0's go as they always have.
func groupOp(g int, op byte, body []byte) (byte, []byte) {
	if g == 0 {
		return op, body
	}
	b := binary.AppendUvarint(make([]byte, 0, 4+len(body)), uint64(g))
	b = append(b, op)
	return opGroup, append(b, body...)
}

// decodeGroupOp reads opGroup's body.
func decodeGroupOp(body []byte) (g int, op byte, rest []byte, err error) {
	id, n := binary.Uvarint(body)
	if n <= 0 || id == 0 || id > maxGroupID || len(body) <= n {
		return 0, 0, nil, errors.New("bad group request")
	}
	return int(id), body[n], body[n+1:], nil
}

// Response codes.
const (
	codeOK            byte = 0
	codeNoLeader      byte = 1
	codeNotLeader     byte = 2
	codeIndeterminate byte = 3
	codeShutdown      byte = 4
	codeTooLarge      byte = 5
	codeError         byte = 6  // body: message
	codeDiskFull      byte = 7  // body: message
	codeDiskError     byte = 8  // body: message
	codeNeedsUpgrade  byte = 9  // body: message
	codeRemoved       byte = 10 // body: message
	codeNotHosted     byte = 11 // body: message
	codeMapGroup      byte = 12 // body: message
)

const (
	maxFrame       = 256 << 20
	rpcDialTimeout = time.Second
)

var errConnLost = errors.New("connection to peer lost")

// codeOf is the response code of err on the wire (Contract; codeError for
// any other error, its text in the body).
func codeOf(err error) byte {
	if err == nil {
		return codeOK
	}
	if k, ok := KindOf(err); ok {
		return k.Code
	}
	return codeError
}

// errOf rebuilds the error a peer answered with: its text as sent, and its
// kind for errors.Is.
func errOf(code byte, body []byte) error {
	if code == codeOK {
		return nil
	}
	for _, k := range Contract {
		if k.Code == code {
			return &remoteError{kind: k.Err, msg: string(body)}
		}
	}
	if string(body) == string(errUnknownOp) {
		// A peer of a build that does not know the request: the one answer
		// builds since the first agree on, word for word.
		return errUnknownOp
	}
	return fmt.Errorf("peer: %s", body)
}

type rpcResp struct {
	code byte
	body []byte
	err  error // transport failure
}

func writeFrame(w *bufio.Writer, id uint64, tag byte, body []byte) error {
	var hdr [13]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(9+len(body)))
	binary.BigEndian.PutUint64(hdr[4:12], id)
	hdr[12] = tag
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(body)
	return err
}

func readFrame(r *bufio.Reader) (id uint64, tag byte, body []byte, err error) {
	var hdr [13]byte
	if _, err = io.ReadFull(r, hdr[:]); err != nil {
		return
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n < 9 || n > maxFrame {
		return 0, 0, nil, fmt.Errorf("bad frame length %d", n)
	}
	id = binary.BigEndian.Uint64(hdr[4:12])
	tag = hdr[12]
	body = make([]byte, n-9)
	_, err = io.ReadFull(r, body)
	return
}

// frameWriter serialises frames onto a connection and flushes them in groups: a
// burst of requests becomes one write system call.
type frameWriter struct {
	mu    sync.Mutex
	w     *bufio.Writer
	err   error
	kick  chan struct{}
	done  chan struct{}
	close func()
}

func newFrameWriter(c net.Conn, onErr func()) *frameWriter {
	fw := &frameWriter{w: bufio.NewWriterSize(c, 64<<10), kick: make(chan struct{}, 1), done: make(chan struct{}), close: onErr}
	go fw.flushLoop()
	return fw
}

func (fw *frameWriter) send(id uint64, tag byte, body []byte) error {
	fw.mu.Lock()
	if fw.err == nil {
		fw.err = writeFrame(fw.w, id, tag, body)
	}
	err := fw.err
	fw.mu.Unlock()
	if err != nil {
		fw.close()
		return err
	}
	select {
	case fw.kick <- struct{}{}:
	default:
	}
	return nil
}

func (fw *frameWriter) flushLoop() {
	for {
		select {
		case <-fw.kick:
		case <-fw.done:
			return
		}
		fw.mu.Lock()
		if fw.err == nil {
			fw.err = fw.w.Flush()
		}
		err := fw.err
		fw.mu.Unlock()
		if err != nil {
			fw.close()
			return
		}
	}
}

func (fw *frameWriter) stop() {
	select {
	case <-fw.done:
	default:
		close(fw.done)
	}
}

// rpcClient is one multiplexed connection to a peer, redialled on demand.
type rpcClient struct {
	addr string
	dial func(ctx context.Context) (net.Conn, error)

	mu      sync.Mutex
	conn    net.Conn
	fw      *frameWriter
	pending map[uint64]chan rpcResp
	nextID  uint64
	closed  bool
}

func newRPCClient(addr string, dial func(ctx context.Context) (net.Conn, error)) *rpcClient {
	return &rpcClient{addr: addr, dial: dial}
}

// send queues a request and returns the channel its response arrives on. Requests
// sent by one goroutine go out in that order. A send error means the request
// never left this node.
func (c *rpcClient) send(op byte, body []byte) (<-chan rpcResp, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrShutdown
	}
	if c.conn == nil {
		ctx, cancel := context.WithTimeout(context.Background(), rpcDialTimeout)
		conn, err := c.dial(ctx)
		cancel()
		if err != nil {
			return nil, err
		}
		c.conn = conn
		c.pending = make(map[uint64]chan rpcResp)
		c.fw = newFrameWriter(conn, func() { conn.Close() })
		go c.readLoop(conn, c.pending)
	}
	c.nextID++
	id := c.nextID
	ch := make(chan rpcResp, 1)
	c.pending[id] = ch
	if err := c.fw.send(id, op, body); err != nil {
		delete(c.pending, id)
		return nil, err
	}
	return ch, nil
}

func (c *rpcClient) readLoop(conn net.Conn, pending map[uint64]chan rpcResp) {
	r := bufio.NewReaderSize(conn, 64<<10)
	for {
		id, code, body, err := readFrame(r)
		if err != nil {
			break
		}
		c.mu.Lock()
		ch := pending[id]
		delete(pending, id)
		c.mu.Unlock()
		if ch != nil {
			ch <- rpcResp{code: code, body: body}
		}
	}
	conn.Close()
	c.mu.Lock()
	if c.conn == conn {
		c.fw.stop()
		c.conn, c.fw = nil, nil
	}
	for id, ch := range pending {
		ch <- rpcResp{err: errConnLost}
		delete(pending, id)
	}
	c.mu.Unlock()
}

// call sends a request and waits for its answer.
func (c *rpcClient) call(ctx context.Context, op byte, body []byte) ([]byte, error) {
	ch, err := c.send(op, body)
	if err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		return r.body, errOf(r.code, r.body)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *rpcClient) close() {
	c.mu.Lock()
	c.closed = true
	conn := c.conn
	c.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
}
