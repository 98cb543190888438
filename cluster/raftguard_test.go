package cluster

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// memConn is a net.Conn that reads from a buffer, for the guard's tests.
type memConn struct {
	r      io.Reader
	closed bool
}

func (c *memConn) Read(p []byte) (int, error) {
	if c.closed {
		return 0, net.ErrClosed
	}
	return c.r.Read(p)
}
func (c *memConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *memConn) Close() error                     { c.closed = true; return nil }
func (c *memConn) LocalAddr() net.Addr              { return hostAddr("127.0.0.1:1") }
func (c *memConn) RemoteAddr() net.Addr             { return hostAddr("127.0.0.1:2") }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

// raftFrame is one request as raft's NetworkTransport writes it: the type
// byte, the request in raft's msgpack handle, then a snapshot's bytes.
func raftFrame(t testing.TB, typ byte, req any, snapshot []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteByte(typ)
	h := &codec.MsgpackHandle{}
	h.TimeNotBuiltin = true // as raft's transport encodes
	enc := codec.NewEncoder(&b, h)
	if err := enc.Encode(req); err != nil {
		t.Fatal(err)
	}
	b.Write(snapshot)
	return b.Bytes()
}

func header(id string) raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte("127.0.0.1:7000")}
}

// everyRequest is one request of each kind raft sends, from id, with a
// snapshot behind the InstallSnapshot.
func everyRequest(t testing.TB, id string) []byte {
	t.Helper()
	snap := bytes.Repeat([]byte("snapshot"), 5000)
	entries := []*raft.Log{
		{Index: 7, Term: 3, Type: raft.LogCommand, Data: bytes.Repeat([]byte{0xc1, 0xff, 0x00}, 3000), AppendedAt: time.Unix(1, 5)},
		{Index: 8, Term: 3, Type: raft.LogNoop, Extensions: []byte("x")},
		{Index: 9, Term: 3, Type: raft.LogConfiguration, Data: []byte("config")},
	}
	var all []byte
	for _, f := range [][]byte{
		raftFrame(t, rpcAppendEntries, &raft.AppendEntriesRequest{RPCHeader: header(id), Term: 3, PrevLogEntry: 6, PrevLogTerm: 2,
			Entries: entries, LeaderCommitIndex: 6}, nil),
		raftFrame(t, rpcAppendEntries, &raft.AppendEntriesRequest{RPCHeader: header(id), Term: 3}, nil), // a heartbeat
		raftFrame(t, rpcRequestVote, &raft.RequestVoteRequest{RPCHeader: header(id), Term: 4, LastLogIndex: 9, LastLogTerm: 3}, nil),
		raftFrame(t, rpcRequestPreVote, &raft.RequestPreVoteRequest{RPCHeader: header(id), Term: 4, LastLogIndex: 9}, nil),
		raftFrame(t, rpcInstallSnapshot, &raft.InstallSnapshotRequest{RPCHeader: header(id), SnapshotVersion: 1, Term: 4,
			LastLogIndex: 9, LastLogTerm: 3, Configuration: []byte("cfg"), ConfigurationIndex: 9, Size: int64(len(snap))}, snap),
		raftFrame(t, rpcTimeoutNow, &raft.TimeoutNowRequest{RPCHeader: header(id)}, nil),
	} {
		all = append(all, f...)
	}
	return all
}

// readThrough reads everything the guard hands on, chunk bytes at a time.
func readThrough(g *raftGuard, chunk int) ([]byte, error) {
	var out []byte
	buf := make([]byte, chunk)
	for {
		n, err := g.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return out, err
		}
	}
}

// TestRaftGuardPassesOwnRequests: every request raft sends, from the peer
// the certificate names, passes byte for byte, whatever the reader's size.
func TestRaftGuardPassesOwnRequests(t *testing.T) {
	in := everyRequest(t, "n3")
	for _, chunk := range []int{1, 7, 4096, 256 << 10} {
		var refused error
		g := newRaftGuard(&memConn{r: bytes.NewReader(in)}, "n3", func(err error) { refused = err })
		out, err := readThrough(g, chunk)
		if !errors.Is(err, io.EOF) || refused != nil {
			t.Fatalf("chunk %d: %v (refused %v)", chunk, err, refused)
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("chunk %d: %d bytes out of %d, or altered", chunk, len(out), len(in))
		}
	}
}

// TestRaftGuardRefusesOtherSenders: a request that names another sender, or
// none, never completes: the guard stops short of its last byte and closes the
// connection. Requests before it pass.
func TestRaftGuardRefusesOtherSenders(t *testing.T) {
	good := raftFrame(t, rpcRequestVote, &raft.RequestVoteRequest{RPCHeader: header("n3"), Term: 1}, nil)
	enc := func(v any) []byte {
		var b bytes.Buffer
		h := &codec.MsgpackHandle{}
		h.Canonical = true
		if err := codec.NewEncoder(&b, h).Encode(v); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	cases := map[string][]byte{
		"append entries as n1":  raftFrame(t, rpcAppendEntries, &raft.AppendEntriesRequest{RPCHeader: header("n1"), Term: 9}, nil),
		"vote as n1":            raftFrame(t, rpcRequestVote, &raft.RequestVoteRequest{RPCHeader: header("n1"), Term: 9}, nil),
		"pre-vote as n1":        raftFrame(t, rpcRequestPreVote, &raft.RequestPreVoteRequest{RPCHeader: header("n1"), Term: 9}, nil),
		"timeout now as n1":     raftFrame(t, rpcTimeoutNow, &raft.TimeoutNowRequest{RPCHeader: header("n1")}, nil),
		"snapshot as n1":        raftFrame(t, rpcInstallSnapshot, &raft.InstallSnapshotRequest{RPCHeader: header("n1"), Size: 3}, []byte("abc")),
		"no sender id":          raftFrame(t, rpcRequestVote, &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{Addr: []byte("x")}, Term: 9}, nil),
		"id as a prefix":        raftFrame(t, rpcRequestVote, &raft.RequestVoteRequest{RPCHeader: header("n33"), Term: 9}, nil),
		"id late, another's":    append([]byte{rpcRequestVote}, enc(map[string]any{"Term": 9, "ZZ": []any{1, 2}, "ID": []byte("n1")})...),
		"a positional request":  append([]byte{rpcRequestVote}, enc([]any{1, []byte("n3"), []byte("a"), 9})...),
		"an id that is a list":  append([]byte{rpcRequestVote}, enc(map[string]any{"ID": []any{110, 51}, "Term": 9})...),
		"a number for a key":    append([]byte{rpcRequestVote}, enc(map[any]any{1: "n3", "ID": "n3"})...),
		"an unknown rpc type":   append([]byte{9}, enc(map[string]any{"ID": "n3"})...),
		"a byte of no msgpack":  {rpcRequestVote, 0xc1},
		"an empty request":      {rpcRequestVote, 0x80},
		"deeply nested":         append(append([]byte{rpcRequestVote, 0x82, 0xa2, 'I', 'D', 0xa2, 'n', '3', 0xa1, 'X'}, bytes.Repeat([]byte{0x91}, 40)...), 0xc0),
		"snapshot size as text": append([]byte{rpcInstallSnapshot}, enc(map[string]any{"ID": "n3", "Size": "12"})...),
	}
	// Two ID fields: raft's decoder keeps the last one.
	two := []byte{rpcRequestVote, 0x83, 0xa2, 'I', 'D', 0xa2, 'n', '3', 0xa4, 'T', 'e', 'r', 'm', 0x09, 0xa2, 'I', 'D', 0xa2, 'n', '1'}
	cases["two ids, second n1"] = two
	for name, bad := range cases {
		in := append(append([]byte{}, good...), bad...)
		var refused error
		conn := &memConn{r: bytes.NewReader(in)}
		g := newRaftGuard(conn, "n3", func(err error) { refused = err })
		out, err := readThrough(g, 4096)
		if errors.Is(err, io.EOF) || refused == nil || !conn.closed {
			t.Errorf("%s: not refused: err %v, refused %v, closed %v", name, err, refused, conn.closed)
			continue
		}
		t.Logf("%s: %v", name, refused)
		if len(out) < len(good) || !bytes.Equal(out[:len(good)], good) {
			t.Errorf("%s: the good request before it did not pass", name)
		}
		if len(out) >= len(in) {
			t.Errorf("%s: the whole request passed", name)
		}
	}
	// The same forms from the right sender pass (the refusals above are the id's doing).
	ok := raftFrame(t, rpcRequestVote, &raft.RequestVoteRequest{RPCHeader: header("n1"), Term: 9}, nil)
	g := newRaftGuard(&memConn{r: bytes.NewReader(ok)}, "n1", nil)
	if out, err := readThrough(g, 3); !errors.Is(err, io.EOF) || !bytes.Equal(out, ok) {
		t.Fatalf("n1 as n1: %v", err)
	}
}

// TestRaftGuardOverTransport: raft's own transports talk through the guard: a
// peer's requests as itself are answered (a snapshot streamed whole), as
// another node they fail and reach nothing.
func TestRaftGuardOverTransport(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: &guardedLayer{Listener: ln, peer: "n3"}, MaxPool: 2, Timeout: 2 * time.Second})
	defer server.Close()
	got := make(chan raft.RPC, 10)
	go func() {
		for rpc := range server.Consumer() {
			if rpc.Reader != nil {
				b, _ := io.ReadAll(rpc.Reader)
				rpc.Command = string(b)
			}
			got <- rpc
			rpc.Respond(&raft.InstallSnapshotResponse{Success: true}, nil)
		}
	}()
	client, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	target := raft.ServerAddress(ln.Addr().String())
	snap := strings.Repeat("s", 1<<20)
	var resp raft.InstallSnapshotResponse
	if err := client.InstallSnapshot("x", target, &raft.InstallSnapshotRequest{RPCHeader: header("n3"), Size: int64(len(snap))},
		&resp, strings.NewReader(snap)); err != nil || !resp.Success {
		t.Fatalf("snapshot from n3: %v %+v", err, resp)
	}
	if rpc := <-got; rpc.Command != snap {
		t.Fatalf("the snapshot arrived altered: %d bytes", len(rpc.Command.(string)))
	}
	var vresp raft.RequestVoteResponse
	if err := client.RequestVote("x", target, &raft.RequestVoteRequest{RPCHeader: header("n1"), Term: 5}, &vresp); err == nil {
		t.Fatal("a vote request as n1 over n3's connection was answered")
	}
	var aresp raft.AppendEntriesResponse
	if err := client.AppendEntries("x", target, &raft.AppendEntriesRequest{RPCHeader: header("n1"), Term: 5}, &aresp); err == nil {
		t.Fatal("an append as n1 over n3's connection was answered")
	}
	select {
	case rpc := <-got:
		t.Fatalf("raft received %T", rpc.Command)
	case <-time.After(200 * time.Millisecond):
	}
}

// guardedLayer is a stream layer that reads every connection through a guard
// for peer.
type guardedLayer struct {
	net.Listener
	peer string
}

func (l *guardedLayer) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newRaftGuard(c, l.peer, nil), nil
}

func (l *guardedLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}

// FuzzRaftGuard: whatever a peer sends, the guard hands on a prefix of it,
// unaltered, and every request raft's own decoder reads from that prefix
// names the peer as its sender.
func FuzzRaftGuard(f *testing.F) {
	f.Add(everyRequest(f, "n3"))
	f.Add(everyRequest(f, "n1"))
	f.Add(raftFrame(f, rpcInstallSnapshot, &raft.InstallSnapshotRequest{RPCHeader: header("n3"), Size: -1}, nil))
	f.Add([]byte{rpcRequestVote, 0x83, 0xa2, 'I', 'D', 0xa2, 'n', '3', 0xa4, 'T', 'e', 'r', 'm', 0x09, 0xa2, 'I', 'D', 0xa2, 'n', '1'})
	f.Fuzz(func(t *testing.T, in []byte) {
		g := newRaftGuard(&memConn{r: bytes.NewReader(in)}, "n3", nil)
		out, _ := readThrough(g, 61)
		if !bytes.HasPrefix(in, out) {
			t.Fatal("the guard altered the stream")
		}
		for _, id := range decodeRequests(out) {
			if id != "n3" {
				t.Fatalf("a complete request from %q passed", id)
			}
		}
	})
}

// decodeRequests decodes requests from b as raft's transport does and returns
// their sender ids, stopping at the first it cannot decode whole.
func decodeRequests(b []byte) []string {
	r := bytes.NewReader(b)
	dec := codec.NewDecoder(r, &codec.MsgpackHandle{})
	var ids []string
	for {
		typ, err := r.ReadByte()
		if err != nil {
			return ids
		}
		var hdr raft.RPCHeader
		var size int64
		var derr error
		func() {
			defer func() {
				if recover() != nil {
					derr = errors.New("panic")
				}
			}()
			switch typ {
			case rpcAppendEntries:
				var req raft.AppendEntriesRequest
				derr, hdr = dec.Decode(&req), req.RPCHeader
			case rpcRequestVote:
				var req raft.RequestVoteRequest
				derr, hdr = dec.Decode(&req), req.RPCHeader
			case rpcRequestPreVote:
				var req raft.RequestPreVoteRequest
				derr, hdr = dec.Decode(&req), req.RPCHeader
			case rpcTimeoutNow:
				var req raft.TimeoutNowRequest
				derr, hdr = dec.Decode(&req), req.RPCHeader
			case rpcInstallSnapshot:
				var req raft.InstallSnapshotRequest
				derr, hdr, size = dec.Decode(&req), req.RPCHeader, req.Size
			default:
				derr = errors.New("type")
			}
		}()
		if derr != nil {
			return ids
		}
		ids = append(ids, string(hdr.ID))
		if size > 0 {
			if _, err := io.CopyN(io.Discard, r, size); err != nil {
				return ids
			}
		}
	}
}

// BenchmarkRaftGuard is the guard's cost on the replication path: a stream of
// AppendEntries read straight, and through the guard. The decode benchmark is
// raft's own cost for the same stream, for scale.
func BenchmarkRaftGuard(b *testing.B) {
	for _, shape := range []struct {
		name    string
		entries int
		size    int
	}{{"1x64KiB", 1, 64 << 10}, {"16x4KiB", 16, 4 << 10}, {"256x100B", 256, 100}, {"heartbeat", 0, 0}} {
		var entries []*raft.Log
		for i := range shape.entries {
			entries = append(entries, &raft.Log{Index: uint64(i + 1), Term: 3, Type: raft.LogCommand,
				Data: bytes.Repeat([]byte{byte(i)}, shape.size), AppendedAt: time.Unix(1700000000, 0)})
		}
		frame := raftFrame(b, rpcAppendEntries, &raft.AppendEntriesRequest{RPCHeader: header("n3"), Term: 3,
			PrevLogEntry: 1, PrevLogTerm: 3, Entries: entries, LeaderCommitIndex: 1}, nil)
		stream := bytes.Repeat(frame, 64)
		buf := make([]byte, 256<<10)
		b.Run(shape.name+"/plain", func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			for b.Loop() {
				c := &memConn{r: bytes.NewReader(stream)}
				for {
					if _, err := c.Read(buf); err != nil {
						break
					}
				}
			}
		})
		b.Run(shape.name+"/guarded", func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			for b.Loop() {
				g := newRaftGuard(&memConn{r: bytes.NewReader(stream)}, "n3", nil)
				for {
					if _, err := g.Read(buf); err != nil {
						break
					}
				}
			}
		})
		b.Run(shape.name+"/raft-decode", func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			for b.Loop() {
				decodeRequests(stream)
			}
		})
	}
}
