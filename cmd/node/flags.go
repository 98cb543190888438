package main

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/cmd/node/internal/flagerr"
	"github.com/rookerydb/rookery/internal/mutant"
	"github.com/rookerydb/rookery/internal/slot"
	"github.com/rookerydb/rookery/transport"
)

// options is every flag of the rookery binary. Each flag can also come from the
// environment as ROOKERY_<FLAG> (upper case, dashes as underscores); a flag on
// the command line wins over the environment.
type options struct {
	id               string
	dataDir          string
	respAddr         string
	respAdvertise    string
	httpAddr         string
	httpAdvertise    string
	raftAddr         string
	raftAdvertise    string
	gossipAddr       string
	gossipAdvertise  string
	gossipKey        string
	shards, replicas int
	bootstrapExpect  int
	join             string
	maxMemory        string
	requirePass      string
	aclFile          string
	logLevel         string
	dev              bool

	deadServerTimeout  time.Duration
	leaveOnTerminate   bool
	heartbeatTimeout   time.Duration
	electionTimeout    time.Duration
	leaderLeaseTimeout time.Duration
	commitTimeout      time.Duration
	snapshotThreshold  uint64
	snapshotInterval   time.Duration
	trailingLogs       uint64
	applyTimeout       time.Duration

	maxItemSize      string
	maxItems         int
	maxCapacity      uint64
	maxClients       int
	maxRequestSize   string
	maxRequestBuffer string
	authTimeout      seconds
	idleTimeout      seconds
	pprof            bool
	reads            string
	filterLayout     string
	faults           bool
	mutant           string
	maxLogFormat     uint

	tlsCA         string
	tlsCert       string
	tlsKey        string
	respTLS       bool
	httpTLS       bool
	tlsClientAuth bool
	insecure      bool
	metricsPublic bool
}

func newFlagSet(o *options, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("rookery", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.id, "id", "", "node id, unique and stable across restarts (default: the host name; \"dev\" with --dev)")
	fs.StringVar(&o.dataDir, "data-dir", "", "directory for the Raft log and snapshots (required unless --dev)")
	fs.StringVar(&o.respAddr, "resp-addr", "127.0.0.1:6479", "RESP (Redis protocol) listen address")
	fs.StringVar(&o.respAdvertise, "resp-advertise", "", "RESP address clients are told to use for this node in ROLE and the node list (default: --resp-addr as bound)")
	fs.StringVar(&o.httpAddr, "http-addr", "127.0.0.1:6480", "HTTP listen address (status, health, metrics)")
	fs.StringVar(&o.httpAdvertise, "http-advertise", "", "HTTP address other nodes and tools are told to use (default: --http-addr as bound)")
	fs.StringVar(&o.raftAddr, "raft-addr", "127.0.0.1:6481", "Raft and node-to-node listen address")
	fs.StringVar(&o.raftAdvertise, "raft-advertise", "", "Raft address other nodes dial (default: --raft-addr)")
	fs.StringVar(&o.gossipAddr, "gossip-addr", "127.0.0.1:6482", "gossip (memberlist) listen address")
	fs.StringVar(&o.gossipAdvertise, "gossip-advertise", "", "gossip address other nodes use (default: --gossip-addr)")
	fs.StringVar(&o.gossipKey, "gossip-key", "", "base64 key (16, 24 or 32 bytes) encrypting gossip; members without it cannot join")
	fs.IntVar(&o.bootstrapExpect, "bootstrap-expect", 0, "wait for this many members, then bootstrap the cluster with them (1: a single node)")
	fs.StringVar(&o.join, "join", "", "gossip addresses of existing members, host:port[,host:port]")
	fs.IntVar(&o.shards, "shards", 0, "split the keys over this many shards (1 to 16384), each its own Raft group (chosen when the cluster bootstraps; left out: one group on every node)")
	fs.IntVar(&o.replicas, "replicas", 0, "replicas of each shard (1 to 15), with --shards (left out: 3, or fewer while fewer nodes exist)")
	fs.StringVar(&o.maxMemory, "max-memory", "auto", "cap on the memory all filters may take, e.g. 4gb; auto: half of the machine's memory; 0: no cap")
	fs.StringVar(&o.requirePass, "requirepass", "", "password RESP clients must give with AUTH or HELLO AUTH")
	fs.StringVar(&o.aclFile, "aclfile", "", "users in Redis's ACL file format, loaded into a cluster that has never set users (ACL SETUSER changes them after)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.BoolVar(&o.dev, "dev", false, "a single node with its data in a temporary directory (implies --bootstrap-expect 1)")
	fs.DurationVar(&o.deadServerTimeout, "dead-server-timeout", time.Hour, "remove a member dead this long, if a healthy quorum remains")
	fs.BoolVar(&o.leaveOnTerminate, "leave-on-terminate", false, "leave the cluster for good on SIGTERM/SIGINT instead of restarting later as the same member")
	fs.DurationVar(&o.heartbeatTimeout, "heartbeat-timeout", 400*time.Millisecond, "Raft heartbeat timeout")
	fs.DurationVar(&o.electionTimeout, "election-timeout", 400*time.Millisecond, "Raft election timeout")
	fs.DurationVar(&o.leaderLeaseTimeout, "leader-lease-timeout", 200*time.Millisecond, "Raft leader lease timeout")
	fs.DurationVar(&o.commitTimeout, "commit-timeout", 50*time.Millisecond, "Raft commit timeout: how soon a follower learns of a commit when nothing else tells it (a read there asks the leader, which tells it at once)")
	fs.Uint64Var(&o.snapshotThreshold, "snapshot-threshold", 16384, "log entries between snapshots")
	fs.DurationVar(&o.snapshotInterval, "snapshot-interval", 30*time.Second, "how often to check whether to snapshot")
	fs.Uint64Var(&o.trailingLogs, "trailing-logs", 10240, "log entries kept after a snapshot, so a lagging follower catches up without a snapshot install")
	fs.DurationVar(&o.applyTimeout, "apply-timeout", 10*time.Second, "how long a write may wait for the log")
	fs.StringVar(&o.maxItemSize, "max-item-size", "64kb", "largest item a command may carry")
	fs.IntVar(&o.maxItems, "max-items", transport.DefaultMaxItemsPerCommand, "most items (or keys) one command may carry; their bytes count against --max-request-size and --max-request-buffer")
	fs.Uint64Var(&o.maxCapacity, "max-capacity", 1<<30, "largest capacity a filter may be created with")
	fs.IntVar(&o.maxClients, "max-clients", 10000, "most RESP client connections at once")
	fs.StringVar(&o.maxRequestSize, "max-request-size", "512mb", "largest RESP request")
	fs.StringVar(&o.maxRequestBuffer, "max-request-buffer", "1gb", "most bytes all RESP connections together may hold for requests in flight")
	o.authTimeout = seconds(10 * time.Second)
	fs.Var(&o.authTimeout, "auth-timeout", "close a connection that has not authenticated this long after connecting (with --requirepass); seconds or a duration, 0: never")
	fs.Var(&o.idleTimeout, "timeout", "close a RESP connection idle this long (as Redis's timeout); seconds or a duration, 0: never")
	fs.StringVar(&o.tlsCA, "tls-ca", "", "PEM file of the cluster CA: peers (and, with --tls-client-auth, clients) must present a certificate it signed")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "PEM file of this node's certificate (see rookery tls cert); reloaded on SIGHUP or when it changes")
	fs.StringVar(&o.tlsKey, "tls-key", "", "PEM file of this node's private key")
	fs.BoolVar(&o.respTLS, "resp-tls", false, "serve RESP over TLS with the node certificate (redis-cli --tls --cacert ca.pem)")
	fs.BoolVar(&o.httpTLS, "http-tls", false, "serve HTTP over TLS with the node certificate")
	fs.BoolVar(&o.tlsClientAuth, "tls-client-auth", false, "require clients of --resp-tls (and of HTTP endpoints other than the health probes with --http-tls) to present a certificate the CA signed")
	fs.BoolVar(&o.insecure, "insecure", false, "allow plain-text Raft, gossip, RESP and HTTP, and clients without a password or certificate, on addresses other than loopback (a trusted network only)")
	fs.BoolVar(&o.metricsPublic, "metrics-public", false, "serve /metrics without credentials")
	fs.StringVar(&o.reads, "read-consistency", "linearizable", "how new RESP connections read until they send READONLY or READWRITE: linearizable or stale")
	fs.StringVar(&o.filterLayout, "filter-layout", transport.LayoutRookery, "the layout BF.* and CF.* create filters in: rookery (ours: faster, leaner) or redisbloom (RedisBloom's own, bit for bit: INFO, DEBUG and dumps match RedisBloom's); set it alike on every node")
	fs.UintVar(&o.maxLogFormat, "max-log-format", 0, "for upgrade tests only: hold this node at log format N, as a build that reads no later one would (0: this build's)")
	fs.BoolVar(&o.faults, "fault-injection", false, "for fault-injection tests only: serve POST /debug/faults/cut?peer=RAFTADDR and /debug/faults/heal, which break and restore this node's Raft links (needs an explicit --raft-addr or --raft-advertise)")
	fs.BoolVar(&o.pprof, "pprof", false, "serve Go profiles under /debug/pprof/ on the HTTP address")
	if mutant.Enabled {
		fs.StringVar(&o.mutant, "mutant", "", "for jepsen-lite's own tests only: plant this deliberate bug: "+strings.Join(mutant.Names, ", "))
	}
	return fs
}

// parseOptions reads args, then fills every flag not given from the environment.
func parseOptions(args []string, env func(string) (string, bool), out io.Writer) (*options, error) {
	o := &options{}
	fs := newFlagSet(o, io.Discard)
	// The flag package's own report is the error twice around the whole
	// usage; one line and a hint read better.
	fs.Usage = func() {}
	watch := watchFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			writeHelp(out)
			return nil, err
		}
		return nil, fmt.Errorf("%w\n%s", watch.Explain(args, err), helpHint)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q\n%s", fs.Arg(0), helpHint)
	}
	if err := checkEnviron(fs, environ()); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	from := map[string]string{} // where each flag given came from, for messages
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			from[f.Name] = "--" + f.Name
			return
		}
		name := envName(f.Name)
		// An empty variable is as if unset: compose writes one for a
		// setting left empty in .env (ROOKERY_SHARDS).
		if v, ok := env(name); ok && strings.TrimSpace(v) != "" {
			from[f.Name] = name
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, flagerr.EnvValueError(name, v, err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := checkShardFlags(o, from); err != nil {
		return nil, err
	}
	if o.dev {
		// A single node elects itself after one heartbeat timeout: keep --dev
		// ready well within a second unless the timing was set explicitly.
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		for name, v := range map[string]string{"heartbeat-timeout": "100ms", "election-timeout": "100ms", "leader-lease-timeout": "50ms"} {
			if !given[name] {
				_ = fs.Set(name, v)
			}
		}
	}
	return o, o.check()
}

func (o *options) check() error {
	if err := mutant.Set(o.mutant); err != nil {
		return fmt.Errorf("--mutant: %w", err)
	}
	if o.dev && o.bootstrapExpect == 0 {
		o.bootstrapExpect = 1
	}
	if o.id == "" {
		if o.dev {
			o.id = "dev"
		} else if h, err := os.Hostname(); err == nil {
			o.id = h
		}
	}
	if o.dataDir == "" && !o.dev {
		return errors.New("--data-dir is required (or run with --dev)")
	}
	if o.bootstrapExpect < 0 {
		return errors.New("--bootstrap-expect must not be negative")
	}
	if _, err := o.gossipKeyBytes(); err != nil {
		return err
	}
	if err := o.checkLimits(); err != nil {
		return err
	}
	if _, err := o.level(); err != nil {
		return err
	}
	if err := o.checkSecurity(); err != nil {
		return err
	}
	if o.reads != "linearizable" && o.reads != "stale" {
		return fmt.Errorf("--read-consistency must be linearizable or stale, got %q", o.reads)
	}
	if o.filterLayout != transport.LayoutRookery && o.filterLayout != transport.LayoutRedisBloom {
		return fmt.Errorf("--filter-layout must be %s or %s, got %q", transport.LayoutRookery, transport.LayoutRedisBloom, o.filterLayout)
	}
	return nil
}

// checkShardFlags refuses --shards 0 and --replicas 0 given explicitly
// (issue 29): left out, --shards means one group on every node and
// --replicas 3, but a 0 written out was taken for those without a word, and
// it reads as "none" or "automatic" as often.
func checkShardFlags(o *options, from map[string]string) error {
	say := func(name string) string {
		if f := from[name]; strings.HasPrefix(f, "ROOKERY_") {
			return f + "=0"
		}
		return "--" + name + " 0"
	}
	unset := func(name string) string {
		if f := from[name]; strings.HasPrefix(f, "ROOKERY_") {
			return "leave " + f + " unset (or empty)"
		}
		return "leave --" + name + " out"
	}
	switch {
	case from["shards"] != "" && o.shards == 0:
		return fmt.Errorf("%s: want 1 to %d shards; %s for a cluster of one group on every node", say("shards"), slot.Count, unset("shards"))
	case from["replicas"] != "" && o.replicas == 0:
		return fmt.Errorf("%s: want 1 to 15 replicas of each shard; %s for the default, %d", say("replicas"), unset("replicas"), cluster.DefaultReplicas)
	}
	return nil
}

// sizeLimits are the sane bounds of the size flags: outside them a value is
// a typo (--max-memory 10, 999tb) far more often than a wish.
var sizeLimits = []struct {
	name     string
	min, max uint64
}{
	{"max-memory", 1 << 20, 64 << 40},
	{"max-item-size", 1 << 10, 1 << 30},
	{"max-request-size", 1 << 10, 2 << 30},
	{"max-request-buffer", 1 << 20, 1 << 40},
}

// checkLimits refuses sizes out of their bounds and counts and durations that
// mean nothing at zero or below.
func (o *options) checkLimits() error {
	sizes := map[string]string{"max-memory": o.maxMemory, "max-item-size": o.maxItemSize,
		"max-request-size": o.maxRequestSize, "max-request-buffer": o.maxRequestBuffer}
	got := map[string]uint64{}
	for _, l := range sizeLimits {
		v := strings.TrimSpace(sizes[l.name])
		if l.name == "max-memory" && (strings.EqualFold(v, "auto") || v == "0") {
			continue
		}
		n, err := parseBytes(v)
		if err == nil && (n < l.min || n > l.max) {
			err = errors.New("out of range")
		}
		if err != nil {
			extra := ""
			if l.name == "max-memory" {
				extra = ", 0 (no cap) or auto"
			}
			return fmt.Errorf("--%s %s: want a size from %s to %s%s (units b, kb, mb, gb, tb)",
				l.name, sizes[l.name], formatBytes(l.min), formatBytes(l.max), extra)
		}
		got[l.name] = n
	}
	if got["max-request-buffer"] < got["max-request-size"] {
		return fmt.Errorf("--max-request-buffer %s: must be at least --max-request-size (%s)", o.maxRequestBuffer, o.maxRequestSize)
	}
	for _, c := range []struct {
		name string
		v    int64
		min  int64
	}{
		{"max-items", int64(o.maxItems), 1}, {"max-clients", int64(o.maxClients), 1},
		{"max-capacity", int64(min(o.maxCapacity, 1<<62)), 1},
		{"snapshot-threshold", int64(min(o.snapshotThreshold, 1<<62)), 1},
		{"trailing-logs", int64(min(o.trailingLogs, 1<<62)), 1},
	} {
		if c.v < c.min {
			return fmt.Errorf("--%s %d: must be at least %d", c.name, c.v, c.min)
		}
	}
	// Raft refuses timeouts below these (raft.ValidateConfig); the others
	// are at least a millisecond.
	for _, d := range []struct {
		name string
		v    time.Duration
		min  time.Duration
	}{
		{"heartbeat-timeout", o.heartbeatTimeout, 5 * time.Millisecond},
		{"election-timeout", o.electionTimeout, 5 * time.Millisecond},
		{"leader-lease-timeout", o.leaderLeaseTimeout, 5 * time.Millisecond},
		{"commit-timeout", o.commitTimeout, time.Millisecond},
		{"snapshot-interval", o.snapshotInterval, 5 * time.Millisecond},
		{"apply-timeout", o.applyTimeout, time.Millisecond},
		{"dead-server-timeout", o.deadServerTimeout, time.Second},
	} {
		if d.v < d.min {
			return fmt.Errorf("--%s %v: must be at least %v", d.name, d.v, d.min)
		}
	}
	return nil
}

// formatBytes writes n in the largest unit that divides it.
func formatBytes(n uint64) string {
	for _, u := range []struct {
		s string
		m uint64
	}{{"tb", 1 << 40}, {"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}} {
		if n >= u.m && n%u.m == 0 {
			return fmt.Sprintf("%d%s", n/u.m, u.s)
		}
	}
	return fmt.Sprintf("%db", n)
}

// helpHint follows an error in the flags.
const helpHint = "Run 'rookery -h' for the flags."

// environ lists the environment as os.Environ does.
var environ = os.Environ

// knownEnv are the ROOKERY_ variables that are not flags but that the
// project's tests, scripts and docker-compose.yml use; the node accepts them.
var knownEnv = map[string]bool{
	"ROOKERY_TARGET":          true, // docker-compose.yml: build the image or use bin/rookery
	"ROOKERY_TEST_NORACE":     true, // cmd/node tests: build without the race detector
	"ROOKERY_TEST_LOG":        true, // cluster tests: show the nodes' logs
	"ROOKERY_UPDATE_GOLDEN":   true, // fsm tests: rewrite golden files
	"ROOKERY_FLOOD_ADDR":      true, // transport flood test's child process
	"ROOKERY_FLOOD_CONNS":     true,
	"ROOKERY_JEPSEN_DURATION": true, // jepsen-lite run length
}

// toolEnv are the variables the tools read (internal/toolclient): a node
// refuses them as it refuses any ROOKERY_ variable that names none of its
// flags, but says what they are for and what the node takes instead.
var toolEnv = map[string]string{
	"ROOKERY_USER":     "user",
	"ROOKERY_PASSWORD": "password",
	"ROOKERY_CACERT":   "cacert",
	"ROOKERY_ADDR":     "addr",
}

// securitySwitches are flags that turn protection off or down: never offered
// as the meaning of a name that looks like a credential.
var securitySwitches = map[string]bool{"insecure": true, "metrics-public": true}

// credentialWords mark a variable's name as a credential's; the first four
// as a password's, which a node takes only as --requirepass.
var credentialWords = []string{"PASS", "PWD", "SECRET", "TOKEN", "AUTH", "CRED", "CERT", "KEY"}

// isCredential reports whether a variable's name looks like a credential's.
func isCredential(name string) bool {
	for _, w := range credentialWords {
		if strings.Contains(strings.TrimPrefix(name, "ROOKERY_"), w) {
			return true
		}
	}
	return false
}

// checkEnviron refuses a ROOKERY_ variable that names no flag, with the flag
// it most likely meant: a misspelt setting ignored is a setting silently lost.
func checkEnviron(fs *flag.FlagSet, env []string) error {
	flags := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { flags[envName(f.Name)] = f.Name })
	var errs []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "ROOKERY_") || knownEnv[name] || flags[name] != "" {
			continue
		}
		if tool, ok := toolEnv[name]; ok {
			errs = append(errs, fmt.Sprintf("environment variable %s is read by %s, not by a node: %s",
				name, toolNames, toolOnly[tool]))
			continue
		}
		credential := isCredential(name)
		best, dist := "", -1
		for _, w := range credentialWords[:4] {
			if strings.Contains(name, w) {
				best, dist = envName("requirepass"), 0
			}
		}
		for e, f := range flags {
			if dist == 0 {
				break
			}
			// A credential's name is offered only credentials, never a
			// switch that turns protection off.
			if credential && (securitySwitches[f] || !isCredential(e)) || hiddenFlags[f] {
				continue
			}
			if d := flagerr.Distance(name, e); dist < 0 || d < dist || d == dist && e < best {
				best, dist = e, d
			}
		}
		errs = append(errs, fmt.Sprintf("unknown environment variable %s; did you mean %s (--%s)?", name, best, flags[best]))
	}
	if len(errs) == 0 {
		return nil
	}
	sort.Strings(errs)
	return errors.New(strings.Join(errs, "\n"))
}

// toolOnly are the names of the tools' flags that a node does not take, with
// what the node takes instead. A user who guesses one (--password,
// ROOKERY_PASSWORD) gets this, never the nearest spelling.
var toolOnly = map[string]string{
	"user":     "a node's users are made with ACL SETUSER over RESP, or read at the cluster's start from --aclfile (ROOKERY_ACLFILE)",
	"password": "a node's password is --requirepass (ROOKERY_REQUIREPASS)",
	"cacert":   "a node's CA is --tls-ca (ROOKERY_TLS_CA)",
	"addr":     "a node listens on --resp-addr, --http-addr, --raft-addr and --gossip-addr (ROOKERY_RESP_ADDR, ...)",
}

// toolNames are the tools that read toolOnly's flags and variables.
const toolNames = "the tools (rookery members, status, wait, raft, snapshot, import, migrate)"

// toolFlagError is the error of a tool's flag given to a node, nil for any
// other flag.
func toolFlagError(name string) error {
	if what, ok := toolOnly[name]; ok {
		return fmt.Errorf("unknown flag --%s: it is a flag of %s, not of a node: %s", name, toolNames, what)
	}
	return nil
}

// watchFlags explains the parse errors of the node's flags: never offering a
// hidden flag, and naming what a node takes instead of a tool's flag.
func watchFlags(fs *flag.FlagSet) *flagerr.Watcher {
	w := flagerr.Watch(fs)
	w.Hidden, w.Elsewhere = hiddenFlags, toolFlagError
	return w
}

// seconds is a flag holding a duration written as Redis writes it, a number of
// seconds ("300"), or as Go does ("5m").
type seconds time.Duration

func (s *seconds) String() string { return time.Duration(*s).String() }

func (s *seconds) Set(v string) error {
	v = strings.TrimSpace(v)
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		*s = seconds(time.Duration(n) * time.Second)
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return fmt.Errorf("bad duration %q: want seconds (300) or a duration (5m)", v)
	}
	*s = seconds(d)
	return nil
}

// maxMemoryBytes is --max-memory in bytes; "auto" is half of the machine's
// memory, so that a filter too large for the machine is refused rather than
// taking every replica down with it.
func (o *options) maxMemoryBytes() (uint64, error) {
	if strings.EqualFold(strings.TrimSpace(o.maxMemory), "auto") {
		if total := totalMemory(); total > 0 {
			return total / 2, nil
		}
		return 4 << 30, nil
	}
	return parseBytes(o.maxMemory)
}

func (o *options) gossipKeyBytes() ([]byte, error) {
	if o.gossipKey == "" {
		return nil, nil
	}
	k, err := base64.StdEncoding.DecodeString(o.gossipKey)
	if err != nil {
		return nil, fmt.Errorf("--gossip-key: not base64: %w", err)
	}
	if n := len(k); n != 16 && n != 24 && n != 32 {
		return nil, fmt.Errorf("--gossip-key: must decode to 16, 24 or 32 bytes, got %d", n)
	}
	return k, nil
}

func (o *options) level() (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(o.logLevel)); err != nil {
		return 0, fmt.Errorf("--log-level %s: want debug, info, warn or error", o.logLevel)
	}
	return l, nil
}

func (o *options) joinAddrs() []string { return splitList(o.join) }

// parseBytes reads a size such as 1048576, 64kb, 512MB or 4g.
func parseBytes(s string) (uint64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := uint64(1)
	for _, u := range []struct {
		suffix string
		m      uint64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40}, {"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"tb", 1 << 40}, {"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40}, {"b", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.m
			break
		}
	}
	v, err := strconv.ParseUint(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad size %q", s)
	}
	if v != 0 && v > ^uint64(0)/mult {
		return 0, fmt.Errorf("size %q too large", s)
	}
	return v * mult, nil
}

// splitList splits a comma-separated list, trimming spaces and dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
