package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/cmd/node/internal/datadir"
	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/acl"
	"github.com/rookerydb/rookery/internal/certs"
	"github.com/rookerydb/rookery/internal/gcpace"
	"github.com/rookerydb/rookery/transport"
)

// version is reported by HELLO and INFO; release builds set it with -ldflags.
var version = "0.1.0-dev"

// shutdownTimeout bounds a clean shutdown (leadership transfers);
// leaveTimeout one that leaves the cluster for good (--leave-on-terminate),
// which first has the cluster re-create this node's shard replicas elsewhere.
const (
	shutdownTimeout = 10 * time.Second
	leaveTimeout    = 30 * time.Second
)

// run starts a node from args and the environment and serves until ctx ends or
// the node leaves the cluster.
func run(ctx context.Context, args []string, env func(string) (string, bool), stderr io.Writer) error {
	o, err := parseOptions(args, env, stderr)
	if err != nil {
		return err
	}
	level, _ := o.level()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	if o.dev {
		dir, err := os.MkdirTemp("", "rookery-dev-")
		if err != nil {
			return fmt.Errorf("dev data directory: %w", err)
		}
		defer os.RemoveAll(dir)
		if o.dataDir == "" {
			o.dataDir = dir
		}
	}

	// The data directory's lock and owner before any port or Raft: a second
	// process, or a node started with another --id, stops here (internal/datadir).
	if err := os.MkdirAll(o.dataDir, 0o755); err != nil {
		return fmt.Errorf("create data dir %s: %w", o.dataDir, err)
	}
	unlock, err := datadir.Lock(o.dataDir)
	if err != nil {
		return err
	}
	defer unlock()
	if err := datadir.Claim(o.dataDir, o.id, logger); err != nil {
		return err
	}

	o.warnExposure(logger)
	logger.Debug("Go scheduler", "GOMAXPROCS", raiseProcs(env), "cpus", runtime.NumCPU())
	// Garbage in proportion to the heap's live size, not GOGC's 100% of it: a
	// node holding 1 GB of filters would otherwise reach 2 GB.
	stopPace, paced := gcpace.Pace(100*time.Millisecond, gcpace.DefaultFraction, gcpace.DefaultFloor)
	defer stopPace()
	if !paced {
		logger.Info("GOMEMLIMIT is set: the Go heap follows it", "GOMEMLIMIT", os.Getenv("GOMEMLIMIT"))
	}
	var certSrc *certs.Source
	var reload func()
	if o.tlsOn() {
		if certSrc, reload, err = loadCerts(ctx, o, logger); err != nil {
			return err
		}
	}
	onHUP(ctx, logger, reload)

	// Client-facing listeners first, so a port in use fails before Raft starts.
	respLn, err := net.Listen("tcp", o.respAddr)
	if err != nil {
		return fmt.Errorf("listen resp %s: %w", o.respAddr, err)
	}
	defer respLn.Close()
	httpLn, err := net.Listen("tcp", o.httpAddr)
	if err != nil {
		return fmt.Errorf("listen http %s: %w", o.httpAddr, err)
	}
	defer httpLn.Close()
	respServe, httpServe := o.withTLS(certSrc, respLn, httpLn)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoGauge())

	ccfg, err := o.clusterConfig(advertised(o.respAdvertise, respLn.Addr()), advertised(o.httpAdvertise, httpLn.Addr()))
	if err != nil {
		return err
	}
	ccfg.Logger, ccfg.Registry = logger, reg
	// The node's users: group 0's log holds them, every face checks them.
	users, aclFile, err := o.users()
	if err != nil {
		return err
	}
	ccfg.Users, ccfg.RequirePass = users, o.requirePass
	if certSrc != nil {
		ccfg.PeerTLS = &cluster.PeerTLS{Server: certSrc.PeerServerConfig(), Client: certSrc.PeerClientConfig(), Local: certSrc.Leaf}
	}
	var faults *cluster.Faults
	self := o.raftAdvertise // this node's end of every Raft link
	if self == "" {
		self = o.raftAddr
	}
	if o.faults {
		faults = cluster.NewFaults()
		ccfg.Dial = faults.Dial(func() string { return self })
		logger.Warn("fault injection enabled: /debug/faults can cut this node's links")
	}
	if o.mutant != "" {
		logger.Warn("this node plants a deliberate bug for testing the checker", "mutant", o.mutant)
	}
	node, err := startNode(ctx, ccfg, logger)
	if err != nil {
		return err
	}

	tcfg, err := o.transportConfig()
	if err != nil {
		node.Shutdown(context.Background())
		return err
	}
	tcfg.Logger, tcfg.Registry, tcfg.Version = logger, reg, version
	tcfg.Users = users
	tcfg.ACLLog = acl.NewLog(acl.DefaultLogMax)  // one per node: ACL LOG shows HTTP's refusals beside RESP's
	tcfg.AuthGuard = transport.NewAuthGuard(reg) // one per node: RESP and HTTP failures count together
	tcfg.MaxMemory, tcfg.SystemMemory = ccfg.MaxMemory, totalMemory()
	if faults != nil {
		tcfg.Routes = faultRoutes(faults, self)
	}
	be := backend{node}
	resp := transport.New(tcfg, be)
	node.SetCommandHandler(func(ctx context.Context, rep *cluster.Replica, args [][]byte, proto int, stale bool) []byte {
		return resp.ExecShard(ctx, rep, args, proto, stale)
	})
	web := transport.NewHTTP(tcfg, be)
	if aclFile != nil {
		go seedUsers(ctx, node, aclFile, o.aclFile, logger)
	}
	errc := make(chan error, 2)
	go func() { errc <- resp.Serve(respServe) }()
	go func() { errc <- web.Serve(httpServe) }()
	logger.Info("listening", "id", ccfg.ID, "resp", respLn.Addr().String(), "http", httpLn.Addr().String(),
		"raft", node.RaftAddr(), "gossip", node.GossipAddr(), "data_dir", o.dataDir, "max_memory", ccfg.MaxMemory,
		"tls", o.tlsOn(), "resp_tls", o.respTLS, "http_tls", o.httpTLS, "version", version)

	var serveErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case <-node.Left():
		logger.Info("left the cluster; shutting down")
	case serveErr = <-errc:
		logger.Error("server stopped", "err", serveErr)
	}

	stop := shutdownTimeout
	if o.leaveOnTerminate {
		stop = leaveTimeout
	}
	sctx, cancel := context.WithTimeout(context.Background(), stop)
	defer cancel()
	// Stop taking requests, then hand leadership over (or leave), then stop
	// answering health checks.
	errs := []error{serveErr, resp.Close(), node.Shutdown(sctx), web.Close(sctx)}
	for i, e := range errs {
		if errors.Is(e, transport.ErrServerClosed) {
			errs[i] = nil
		}
	}
	return errors.Join(errs...)
}

// backend is the node as transport sees it: its replica handles as
// transport's interface.
type backend struct{ *cluster.Node }

// The operator routes find these on the backend by assertion: the compiler
// checks here that the node still offers them.
var (
	_ transport.RaftOperator  = backend{}
	_ transport.ShardOperator = backend{}
)

func (b backend) Replica(s int) (transport.Replica, error) {
	r, err := b.Node.Replica(s)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (b backend) UsersReplica() (transport.Replica, error) {
	r, err := b.Node.UsersReplica()
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (b backend) Replicas() []transport.Replica {
	rs := b.Node.Replicas()
	out := make([]transport.Replica, len(rs))
	for i, r := range rs {
		out[i] = r
	}
	return out
}

// startNode is cluster.New, given up when ctx ends first: a node still
// starting (rejoining after a recovery, opening a large log) ends promptly on
// SIGTERM or SIGINT rather than once it has started.
func startNode(ctx context.Context, cfg cluster.Config, logger *slog.Logger) (*cluster.Node, error) {
	type started struct {
		node *cluster.Node
		err  error
	}
	done := make(chan started, 1)
	go func() {
		n, err := cluster.New(cfg)
		done <- started{n, err}
	}()
	select {
	case s := <-done:
		return s.node, s.err
	case <-ctx.Done():
		logger.Warn("stopped while starting: the node had not finished opening its stores and joining",
			"cause", context.Cause(ctx))
		go func() {
			if s := <-done; s.node != nil {
				_ = s.node.Shutdown(context.Background())
			}
		}()
		return nil, errors.New("stopped while starting")
	}
}

// clusterConfig builds the node's configuration; respAddr and httpAddr are the
// bound client addresses other nodes advertise in ROLE and the node list.
func (o *options) clusterConfig(respAddr, httpAddr string) (cluster.Config, error) {
	maxMem, _ := o.maxMemoryBytes()
	key, err := o.gossipKeyBytes()
	if err != nil {
		return cluster.Config{}, err
	}
	if o.maxLogFormat > fsm.CodecVersion {
		return cluster.Config{}, fmt.Errorf("--max-log-format %d: this build reads log formats 1 to %d", o.maxLogFormat, fsm.CodecVersion)
	}
	return cluster.Config{
		ID:                 o.id,
		DataDir:            o.dataDir,
		RaftAddr:           o.raftAddr,
		RaftAdvertise:      o.raftAdvertise,
		GossipAddr:         o.gossipAddr,
		GossipAdvertise:    o.gossipAdvertise,
		GossipKey:          key,
		RESPAddr:           respAddr,
		HTTPAddr:           httpAddr,
		BootstrapExpect:    o.bootstrapExpect,
		Shards:             o.shards,
		Replicas:           o.replicas,
		Join:               o.joinAddrs(),
		DeadServerTimeout:  o.deadServerTimeout,
		LeaveOnTerminate:   o.leaveOnTerminate,
		MaxMemory:          maxMem,
		HeartbeatTimeout:   o.heartbeatTimeout,
		ElectionTimeout:    o.electionTimeout,
		LeaderLeaseTimeout: o.leaderLeaseTimeout,
		CommitTimeout:      o.commitTimeout,
		SnapshotThreshold:  o.snapshotThreshold,
		SnapshotInterval:   o.snapshotInterval,
		TrailingLogs:       o.trailingLogs,
		ApplyTimeout:       o.applyTimeout,
		MaxLogFormat:       byte(o.maxLogFormat),
	}, nil
}

func (o *options) transportConfig() (transport.Config, error) {
	itemSize, _ := parseBytes(o.maxItemSize)
	reqSize, _ := parseBytes(o.maxRequestSize)
	reqBuffer, _ := parseBytes(o.maxRequestBuffer)
	authTimeout := time.Duration(o.authTimeout)
	if authTimeout == 0 {
		authTimeout = -1 // the flag's 0 is "never"; the Config's 0 is its default
	}
	if itemSize == 0 || itemSize > 1<<30 || reqSize == 0 || reqSize > 1<<31 {
		return transport.Config{}, errors.New("--max-item-size must be in (0, 1gb] and --max-request-size in (0, 2gb]")
	}
	if reqBuffer < reqSize {
		return transport.Config{}, fmt.Errorf("--max-request-buffer (%d) must be at least --max-request-size (%d)", reqBuffer, reqSize)
	}
	reads := cluster.ReadLinearizable
	if o.reads == "stale" {
		reads = cluster.ReadStale
	}
	return transport.Config{
		FilterLayout:       o.filterLayout,
		DefaultReadLevel:   reads,
		MaxItemBytes:       int(itemSize),
		MaxItemsPerCommand: o.maxItems,
		MaxCapacity:        o.maxCapacity,
		MaxClients:         o.maxClients,
		MaxRequestBytes:    int(reqSize),
		MaxRequestBuffer:   int64(reqBuffer),
		RequirePass:        o.requirePass,
		AuthTimeout:        authTimeout,
		IdleTimeout:        time.Duration(o.idleTimeout),
		ClientCerts:        o.tlsClientAuth,
		MetricsPublic:      o.metricsPublic,
		RequestTimeout:     o.applyTimeout,
		Pprof:              o.pprof,
	}, nil
}

// advertised is the address others should use for a listener: the flag if set,
// else the bound address with an unspecified host (0.0.0.0, ::) replaced by the
// host name.
func advertised(flag string, bound net.Addr) string {
	if flag != "" {
		return flag
	}
	host, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return bound.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return net.JoinHostPort(host, port)
}
