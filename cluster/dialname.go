package cluster

import (
	"io"
	"strings"

	"github.com/hashicorp/raft"
)

// Every dial names the node it means to reach, so that with peer TLS the
// dialler can refuse a node answering with another's certificate (stream.go,
// dialGroupStream). raft's NetworkTransport knows a server's id when it sends
// a request but hands its stream layer the address alone; namedTransport hands
// it both, in one raft.ServerAddress ("id@host:port"), and raftLayer.Dial
// splits them again. The transport pools connections by what it hands the
// layer, so a connection dialled for one server is never reused for another
// at the same address.

// dialTarget is the address raftLayer.Dial takes for server id at addr.
func dialTarget(id raft.ServerID, addr raft.ServerAddress) raft.ServerAddress {
	return raft.ServerAddress(string(id) + "@" + string(addr))
}

// splitDialTarget undoes dialTarget. A host and port never hold '@', so the
// last one ends the id; a target without one names no id (and a TLS dial of
// it is refused).
func splitDialTarget(t raft.ServerAddress) (id, addr string) {
	s := string(t)
	i := strings.LastIndexByte(s, '@')
	if i < 0 {
		return "", s
	}
	return s[:i], s[i+1:]
}

// namedTransport is raft's NetworkTransport with every request dialled as
// dialTarget(id, target). What raft is told (its configuration, the leader's
// address in a request's header) keeps the plain address.
type namedTransport struct {
	*raft.NetworkTransport
}

var _ raft.WithPreVote = namedTransport{}

func (t namedTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	return t.NetworkTransport.AppendEntriesPipeline(id, dialTarget(id, target))
}

func (t namedTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	return t.NetworkTransport.AppendEntries(id, dialTarget(id, target), args, resp)
}

func (t namedTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return t.NetworkTransport.RequestVote(id, dialTarget(id, target), args, resp)
}

func (t namedTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.NetworkTransport.RequestPreVote(id, dialTarget(id, target), args, resp)
}

func (t namedTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	return t.NetworkTransport.InstallSnapshot(id, dialTarget(id, target), args, resp, data)
}

func (t namedTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.NetworkTransport.TimeoutNow(id, dialTarget(id, target), args, resp)
}
