package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"github.com/rookerydb/rookery/internal/acl"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rookerydb/rookery/internal/slot"
)

// DialFunc opens a TCP connection; tests replace it to cut links between nodes.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Config is everything a Node needs. cmd/node fills it from flags.
type Config struct {
	// Users are the node's users (ACL), which group 0's log holds and
	// changes (fsm/acl.go); RequirePass is the default user's password until
	// that log sets it. nil: group 0 holds no users.
	Users       *acl.Store
	RequirePass string

	// ID names the node in the Raft configuration and in gossip; it must be unique
	// and stable across restarts.
	ID string
	// DataDir holds the Raft log engine (raftlog/) and snapshots.
	DataDir string
	// RaftAddr is where Raft and node-to-node requests listen (host:port; port 0
	// picks a free port). Other nodes reach this node at RaftAdvertise, or at
	// RaftAddr when that is empty.
	RaftAddr      string
	RaftAdvertise string
	// GossipAddr is where memberlist listens (host:port; port 0 picks one).
	GossipAddr      string
	GossipAdvertise string
	// GossipKey encrypts gossip (16, 24 or 32 bytes); nil means plain text.
	GossipKey []byte
	// PeerTLS, when set, carries Raft and every node-to-node request over mutual
	// TLS: a connection to the Raft port must complete a handshake with a
	// certificate the cluster CA signed before a byte of it is read.
	PeerTLS *PeerTLS
	// RESPAddr and HTTPAddr are advertised to other nodes (ROLE, the node list).
	RESPAddr string
	HTTPAddr string

	// BootstrapExpect: wait until this many members are known, then the member
	// with the lowest id bootstraps the configuration with all of them. 0 never
	// bootstraps (the node joins an existing cluster).
	BootstrapExpect int
	// Join lists gossip addresses of existing members, retried until one answers.
	Join []string
	// DeadServerTimeout: a member dead this long is removed from the
	// configuration, if a healthy quorum remains without it.
	DeadServerTimeout time.Duration
	// Shards, when set, splits the keyspace into that many shards, each its
	// own Raft group placed on Replicas nodes (docs/SHARDING.md); the node
	// that writes the cluster's first map records them. 0 keeps the cluster
	// one group on every node, as before shards.
	Shards int
	// Replicas is R, the replicas of each shard (default 3; fewer while
	// fewer nodes exist).
	Replicas int
	// LeaveOnTerminate makes Shutdown leave the cluster for good.
	LeaveOnTerminate bool
	// MaxMemory caps the filter memory of the node, in bytes; 0 means no cap.
	MaxMemory uint64

	// Raft timing, tuned for a LAN.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	// SnapshotThreshold is how many log entries trigger a snapshot.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	// TrailingLogs is how many applied entries stay in the log after a snapshot,
	// so a briefly lagging follower catches up without a snapshot install.
	TrailingLogs uint64
	// ApplyTimeout bounds a write from submission to its result.
	ApplyTimeout time.Duration

	// SessionTTL: how long an idle client session is remembered (exactly-once).
	SessionTTL time.Duration
	// MaxLogFormat, when set below fsm.CodecVersion, holds the node at an
	// older log format, as an older build: it advertises that format and halts
	// at an entry above it (tests of rolling upgrades; codec.go).
	MaxLogFormat byte

	Logger   *slog.Logger
	Registry *prometheus.Registry // nil: metrics are not registered
	Dial     DialFunc             // nil: net.Dialer

	// testLogStore, in tests, wraps the log store on disk (fault injection).
	testLogStore func(raft.LogStore) raft.LogStore
	// testClock, in tests, is the node's clock (a skewed one): what it stamps
	// into commands and compares deadlines with (expire.go).
	testClock func() time.Time
	// testOnExpire, in tests, hears of every key the node's state machine
	// removes by expiry, with the entry's index (fsm.Options.OnExpire).
	testOnExpire func(key string, index uint64)
}

// PeerTLS is the two sides of mutual TLS between nodes. Server must require and
// verify client certificates; Client must present one. Both may read material
// that is reloaded (certs.Source), since they are consulted per handshake.
// Peers are then taken as the node their certificate names (peerauth.go).
type PeerTLS struct {
	Server, Client *tls.Config
	// Local returns the node's own certificate now in use (certs.Source.Leaf);
	// while it is of the old kind (certs.KindLegacy), peers with certificates
	// of that kind are taken as before. Nil: the node holds a node certificate.
	Local func() *x509.Certificate
}

// Default values for the Config fields left zero.
const (
	DefaultHeartbeatTimeout   = 400 * time.Millisecond
	DefaultElectionTimeout    = 400 * time.Millisecond
	DefaultLeaderLeaseTimeout = 200 * time.Millisecond
	DefaultCommitTimeout      = 50 * time.Millisecond
	DefaultDeadServerTimeout  = time.Hour
	DefaultApplyTimeout       = 10 * time.Second
	DefaultSnapshotThreshold  = 16384
	DefaultSnapshotInterval   = 30 * time.Second
	DefaultReplicas           = 3
)

func (c *Config) withDefaults() (Config, error) {
	cfg := *c
	if cfg.ID == "" {
		return cfg, errors.New("cluster: a node id is required")
	}
	if cfg.DataDir == "" {
		return cfg, errors.New("cluster: a data directory is required")
	}
	if cfg.RaftAddr == "" || cfg.GossipAddr == "" {
		return cfg, errors.New("cluster: raft and gossip addresses are required")
	}
	switch len(cfg.GossipKey) {
	case 0, 16, 24, 32:
	default:
		return cfg, fmt.Errorf("cluster: gossip key must be 16, 24 or 32 bytes, got %d", len(cfg.GossipKey))
	}
	if cfg.PeerTLS != nil && (cfg.PeerTLS.Server == nil || cfg.PeerTLS.Client == nil) {
		return cfg, errors.New("cluster: peer TLS needs both a server and a client configuration")
	}
	if cfg.BootstrapExpect < 0 {
		return cfg, errors.New("cluster: bootstrap-expect must not be negative")
	}
	if cfg.Shards < 0 || cfg.Shards > slot.Count {
		return cfg, fmt.Errorf("cluster: shards must be from 1 to %d", slot.Count)
	}
	if cfg.Replicas < 0 || cfg.Replicas > 15 {
		return cfg, errors.New("cluster: replicas must be from 1 to 15")
	}
	if cfg.Shards > 0 && cfg.Replicas == 0 {
		cfg.Replicas = DefaultReplicas
	}
	setDur := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	setDur(&cfg.HeartbeatTimeout, DefaultHeartbeatTimeout)
	setDur(&cfg.ElectionTimeout, DefaultElectionTimeout)
	setDur(&cfg.LeaderLeaseTimeout, DefaultLeaderLeaseTimeout)
	setDur(&cfg.CommitTimeout, DefaultCommitTimeout)
	setDur(&cfg.DeadServerTimeout, DefaultDeadServerTimeout)
	setDur(&cfg.ApplyTimeout, DefaultApplyTimeout)
	setDur(&cfg.SnapshotInterval, DefaultSnapshotInterval)
	if cfg.LeaderLeaseTimeout > cfg.HeartbeatTimeout {
		cfg.LeaderLeaseTimeout = cfg.HeartbeatTimeout
	}
	if cfg.TrailingLogs == 0 {
		cfg.TrailingLogs = 10240
	}
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Dial == nil {
		var d net.Dialer
		cfg.Dial = d.DialContext
	}
	return cfg, nil
}
