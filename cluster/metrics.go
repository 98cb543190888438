package cluster

import (
	"io"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rookerydb/rookery/fsm"
)

// metrics are the node's Prometheus instruments. With no registry they still
// count, unexported.
type metrics struct {
	applySeconds     prometheus.Histogram
	batchCommands    prometheus.Histogram
	applyErrors      prometheus.Counter
	readRounds       prometheus.Counter
	snapshotSeconds  prometheus.Histogram
	snapshotBytes    prometheus.Gauge
	snapshotFailures prometheus.Counter
	peerRefused      prometheus.Counter
	pendingRefused   *prometheus.CounterVec // by from: member, stranger (connlimit.go)
	dialRefused      *prometheus.CounterVec // by stream: raft, rpc (peerauth.go)
	gossipRefused    prometheus.Counter
}

func newMetrics(n *Node, reg *prometheus.Registry) *metrics {
	m := &metrics{
		applySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "rookery_raft_apply_seconds",
			Help:    "Time from proposing a batch of writes to the log until it is applied on the leader.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		batchCommands: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "rookery_raft_batch_commands",
			Help:    "Writes carried by one log entry.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		applyErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rookery_raft_apply_errors_total",
			Help: "Log entries proposed whose apply failed (leadership lost, shutdown).",
		}),
		readRounds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rookery_linearizable_reads_total",
			Help: "Linearizable read barriers passed.",
		}),
		snapshotSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "rookery_snapshot_persist_seconds",
			Help:    "Time to write a snapshot of the state machine.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		snapshotBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rookery_snapshot_size_bytes",
			Help: "Size of the last snapshot written.",
		}),
		snapshotFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rookery_snapshot_failures_total",
			Help: "Snapshots that failed to persist.",
		}),
		peerRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rookery_peer_connections_refused_total",
			Help: "Connections to the Raft port dropped before a byte of Raft was read (no or a bad TLS handshake, a certificate that names no node, an unknown stream, too many in their handshake), or later for a request from another sender than the certificate names.",
		}),
		pendingRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rookery_peer_connections_pending_refused_total",
			Help: "Connections to the Raft port closed at once because the pool of connections in their handshake was full for their source: member (an address of a known member) or stranger (any other address). Counted in rookery_peer_connections_refused_total too.",
		}, []string{"from"}),
		dialRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rookery_peer_dial_refused_total",
			Help: "Connections this node dialled to a peer and closed after the TLS handshake, before writing to them, because the certificate that answered is not the node's it meant to reach (by stream: raft, any group's; rpc, node-to-node requests).",
		}, []string{"stream"}),
		gossipRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rookery_gossip_connections_refused_total",
			Help: "Gossip TCP connections closed at once because too many were being handled.",
		}),
	}
	// Every label's series from the start, at 0.
	for _, k := range []peerKind{fromMember, fromStranger} {
		m.pendingRefused.WithLabelValues(k.String())
	}
	for _, s := range []string{"raft", "rpc"} {
		m.dialRefused.WithLabelValues(s)
	}
	if reg == nil {
		return m
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	reg.MustRegister(m.applySeconds, m.batchCommands, m.applyErrors, m.readRounds,
		m.snapshotSeconds, m.snapshotBytes, m.snapshotFailures, m.peerRefused, m.pendingRefused, m.dialRefused, m.gossipRefused,
		gauge("rookery_raft_commit_index", "The Raft commit index this node knows.", func() float64 {
			if n.meta.raft == nil {
				return 0
			}
			return float64(n.meta.raft.CommitIndex())
		}),
		gauge("rookery_raft_applied_index", "The last log index applied to the state machine.", func() float64 {
			return float64(n.meta.fsm.AppliedIndex())
		}),
		gauge("rookery_raft_term", "The current Raft term.", func() float64 {
			if n.meta.raft == nil {
				return 0
			}
			return float64(n.meta.raft.CurrentTerm())
		}),
		gauge("rookery_raft_leader", "1 if this node is the leader.", func() float64 {
			if n.meta.raft != nil && n.meta.raft.State() == raft.Leader {
				return 1
			}
			return 0
		}),
		gauge("rookery_raft_last_contact_seconds", "Time since the follower last heard from the leader.", func() float64 {
			if n.meta.raft == nil || n.meta.raft.State() == raft.Leader {
				return 0
			}
			lc := n.meta.raft.LastContact()
			if lc.IsZero() {
				return 0
			}
			return time.Since(lc).Seconds()
		}),
		gauge("rookery_filter_memory_bytes", "Memory held by all filters of this node (every shard it holds).", func() float64 {
			return float64(n.Status().MemoryBytes)
		}),
		gauge("rookery_memory_reserved_bytes", "Filter memory admitted on this node for writes not yet applied (--max-memory counts it).", func() float64 {
			return float64(n.budget.reservedBytes())
		}),
		gauge("rookery_log_engine_memory_bytes", "Memory the node's log engine holds (memtables and block cache; --max-memory counts it).", func() float64 {
			if n.budget.engine == nil {
				return 0
			}
			return float64(n.budget.engine())
		}),
		gauge("rookery_filters", "Number of filters on this node (every shard it holds).", func() float64 {
			return float64(n.Status().Filters)
		}),
		shardCollector{n},
		gauge("rookery_filters_with_deadline", "Filters whose key has a deadline (EXPIRE), on every shard this node holds.", func() float64 {
			e := 0
			for _, r := range n.Replicas() {
				e += r.FSM().Expires()
			}
			return float64(e)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "rookery_expired_keys_total",
			Help: "Keys this node removed because their deadline passed, on every shard it holds."},
			func() float64 {
				var e uint64
				for _, r := range n.Replicas() {
					e += r.FSM().ExpiredKeys()
				}
				return float64(e)
			}),
	)
	return m
}

func (m *metrics) observeApply(d time.Duration, commands int, err error) {
	if err != nil {
		m.applyErrors.Inc()
		return
	}
	m.applySeconds.Observe(d.Seconds())
	m.batchCommands.Observe(float64(commands))
}

// instrumentFSM wraps the state machine to time snapshots and count their bytes.
func instrumentFSM(f *fsm.FSM, m *metrics) raft.BatchingFSM {
	return &timedFSM{FSM: f, m: m}
}

type timedFSM struct {
	*fsm.FSM
	m *metrics
}

func (t *timedFSM) Snapshot() (raft.FSMSnapshot, error) {
	s, err := t.FSM.Snapshot()
	if err != nil {
		return nil, err
	}
	return &timedSnapshot{s: s, m: t.m}, nil
}

type timedSnapshot struct {
	s raft.FSMSnapshot
	m *metrics
}

func (t *timedSnapshot) Persist(sink raft.SnapshotSink) error {
	start := time.Now()
	cs := &countingSink{SnapshotSink: sink}
	if err := t.s.Persist(cs); err != nil {
		t.m.snapshotFailures.Inc()
		return err
	}
	t.m.snapshotSeconds.Observe(time.Since(start).Seconds())
	t.m.snapshotBytes.Set(float64(cs.n))
	return nil
}

func (t *timedSnapshot) Release() { t.s.Release() }

type countingSink struct {
	raft.SnapshotSink
	n int64
}

func (c *countingSink) Write(p []byte) (int, error) {
	n, err := c.SnapshotSink.Write(p)
	c.n += int64(n)
	return n, err
}

var _ io.Writer = (*countingSink)(nil)
