package transport

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the transport's Prometheus instruments. Without a registry they
// still count, unexported.
type metrics struct {
	commands *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	conns    prometheus.Gauge
	accepted prometheus.Counter
	rejected prometheus.Counter
	evicted  prometheus.Counter
	timedOut *prometheus.CounterVec
	protoErr prometheus.Counter
	// bufferFull counts requests refused because the request-buffer budget was
	// spent (also counted as protocol errors).
	bufferFull prometheus.Counter

	cache sync.Map // seriesKey -> *series
}

func newMetrics(reg *prometheus.Registry, be Backend) *metrics {
	m := &metrics{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rookery_commands_total",
			Help: "RESP commands served, by command and outcome (ok, error, unavailable, indeterminate).",
		}, []string{"command", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rookery_command_duration_seconds",
			Help:    "Time from reading a RESP command to having its reply, by command and outcome.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 18),
		}, []string{"command", "outcome"}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rookery_client_connections",
			Help: "Open RESP client connections.",
		}),
		accepted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rookery_client_connections_accepted_total",
			Help: "RESP connections accepted.",
		}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rookery_client_connections_rejected_total",
			Help: "RESP connections refused because every slot was held by an authenticated client.",
		}),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rookery_client_connections_evicted_total",
			Help: "Unauthenticated RESP connections closed to make room for a new connection.",
		}),
		timedOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rookery_client_connections_timed_out_total",
			Help: "RESP connections closed for idleness (reason idle) or for not authenticating in time (reason auth).",
		}, []string{"reason"}),
		protoErr: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rookery_protocol_errors_total",
			Help: "RESP connections closed for a malformed request.",
		}),
		bufferFull: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rookery_request_buffer_refusals_total",
			Help: "RESP requests refused because all connections' request buffers together were at --max-request-buffer.",
		}),
	}
	if reg == nil {
		return m
	}
	m.commands = register(reg, m.commands)
	m.latency = register(reg, m.latency)
	m.conns = register(reg, m.conns)
	m.accepted = register(reg, m.accepted)
	m.rejected = register(reg, m.rejected)
	m.evicted = register(reg, m.evicted)
	m.timedOut = register(reg, m.timedOut)
	m.protoErr = register(reg, m.protoErr)
	m.bufferFull = register(reg, m.bufferFull)
	registerNodeGauges(reg, be)
	return m
}

// registerBudgetGauge exports what the request readers hold. A second server on
// the same registry (tests) keeps the first one's series.
func registerBudgetGauge(reg *prometheus.Registry, bud *budget) {
	if reg == nil {
		return
	}
	_ = reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rookery_request_buffer_bytes",
		Help: "Bytes the RESP request readers hold beyond their idle buffers, against --max-request-buffer.",
	}, func() float64 { return float64(bud.inUse()) }))
}

// register registers c, or returns the collector already registered under the
// same name (two servers sharing a registry, as in tests, share counters).
func register[C prometheus.Collector](reg *prometheus.Registry, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

// registerNodeGauges exports the node's indices, term and filter totals. The
// cluster package registers the same series on a shared registry; whichever
// registers first wins and the other registration is dropped, so the series
// exist exactly once either way.
func registerNodeGauges(reg *prometheus.Registry, be Backend) {
	gauge := func(name, help string, f func() float64) {
		_ = reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	gauge("rookery_raft_commit_index", "The Raft commit index this node knows.",
		func() float64 { return float64(be.Status().CommitIndex) })
	gauge("rookery_raft_applied_index", "The last log index applied to the state machine.",
		func() float64 { return float64(be.Status().AppliedIndex) })
	gauge("rookery_raft_term", "The current Raft term.",
		func() float64 { return float64(be.Status().Term) })
	gauge("rookery_filters", "Number of filters.",
		func() float64 { return float64(be.Status().Filters) })
	gauge("rookery_filter_memory_bytes", "Memory held by all filters.",
		func() float64 { return float64(be.Status().MemoryBytes) })
}

// series is the pair of instruments of one (command, outcome).
type series struct {
	count   prometheus.Counter
	latency prometheus.Observer
}

func (s *series) observeDuration(d time.Duration) {
	s.count.Inc()
	s.latency.Observe(d.Seconds())
}

type seriesKey struct{ name, outcome string }

// series resolves the instruments of (name, outcome) once; looking labels up
// on every request cost a tenth of a read's CPU.
func (m *metrics) series(name, outcome string) *series {
	k := seriesKey{name, outcome}
	if s, ok := m.cache.Load(k); ok {
		return s.(*series)
	}
	s := &series{count: m.commands.WithLabelValues(name, outcome),
		latency: m.latency.WithLabelValues(name, outcome)}
	v, _ := m.cache.LoadOrStore(k, s)
	return v.(*series)
}
