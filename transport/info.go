package transport

import (
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// INFO, in Redis 7.2's format: "# Section" headers, "field:value" lines ending
// in CRLF, a blank line between sections, the sections in Redis's order
// whatever the order asked. Fields are Redis's where Redis has one that means
// the same thing here, and only those the node can measure or knows to be
// true; rookery_* fields and the Cluster section's raft fields are our own.

// infoSection is one section: its name as INFO prints it, whether plain INFO
// (and INFO default) includes it, and its fields.
type infoSection struct {
	name     string
	dflt     bool
	generate func(s *Server, b *infoBuf)
}

// infoSections lists the sections in Redis's order.
var infoSections = []infoSection{
	{"Server", true, (*Server).infoServer},
	{"Clients", true, (*Server).infoClients},
	{"Memory", true, (*Server).infoMemory},
	{"Stats", true, (*Server).infoStats},
	{"Replication", true, (*Server).infoReplication},
	{"CPU", true, infoCPU},
	{"Modules", true, (*Server).infoModules},
	{"Commandstats", false, (*Server).infoCommandStats},
	{"Cluster", true, (*Server).infoCluster},
	{"Keyspace", true, (*Server).infoKeyspace},
}

// infoBuf accumulates a section's lines.
type infoBuf struct {
	strings.Builder
	ks *keyspaceCount // Keyspace's counts, when not this node's own
}

// keyspaceCount is what INFO's Keyspace section counts: keys, keys with a
// time to live, and the shards a fan-out could not count.
type keyspaceCount struct {
	keys, expires uint64
	missing       int
}

func (b *infoBuf) field(k string, v any) { fmt.Fprintf(b, "%s:%v\r\n", k, v) }

// parseInfo: INFO [section ...]. No section means the default ones, as do
// "default"; "all" and "everything" mean all of them; "modules" is the
// Modules section (Redis's module_list); an unknown name adds nothing, and
// names are matched ignoring case. On a sharded node a connection's INFO that
// includes Keyspace counts every shard (route.go, infoFanOut); INFO run for one
// shard (a fan-out reaching this node) counts that shard.
func parseInfo(s *Server, args [][]byte) (op, error) {
	want, all := infoWant(args)
	return localOp(func(c *session, w *reply) {
		var ks *keyspaceCount
		if c.conn != nil && c.conn.scope != nil {
			ks = shardKeyspace(c.conn.scope)
		}
		w.verbatim(s.info(want, all, ks))
	}), nil
}

// infoWant is the sections INFO's arguments ask for, or all of them.
func infoWant(args [][]byte) (want map[string]bool, all bool) {
	want = map[string]bool{}
	for _, a := range args[1:] {
		switch name := strings.ToLower(string(a)); name {
		case "all", "everything":
			all = true
		case "default":
			for _, sec := range infoSections {
				if sec.dflt {
					want[strings.ToLower(sec.name)] = true
				}
			}
		case "module_list":
			want["modules"] = true
		default:
			want[name] = true
		}
	}
	if len(args) == 1 {
		for _, sec := range infoSections {
			want[strings.ToLower(sec.name)] = sec.dflt
		}
	}
	return want, all
}

// info renders the sections wanted (all of them with all); ks, when not nil,
// is what the Keyspace section counts instead of this node's own filters.
func (s *Server) info(want map[string]bool, all bool, ks *keyspaceCount) string {
	b := infoBuf{ks: ks}
	for _, sec := range infoSections {
		if !all && !want[strings.ToLower(sec.name)] {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		fmt.Fprintf(&b, "# %s\r\n", sec.name)
		sec.generate(s, &b)
	}
	return b.String()
}

// infoServer: what the server is. os is the kernel's name, release and
// machine, as uname gives them; tcp_port the port of the first listener
// served; there is no configuration file (flags configure a node).
func (s *Server) infoServer(b *infoBuf) {
	up := time.Since(s.started)
	exe, _ := os.Executable()
	b.field("redis_version", RedisVersion)
	b.field("rookery_version", s.cfg.Version)
	b.field("redis_git_sha1", "00000000")
	b.field("redis_git_dirty", 0)
	b.field("redis_mode", "standalone")
	b.field("os", osString())
	b.field("arch_bits", strconv.IntSize)
	b.field("go_version", runtime.Version())
	b.field("process_id", os.Getpid())
	b.field("process_supervised", "no")
	b.field("run_id", s.runID)
	b.field("tcp_port", s.port.Load())
	b.field("server_time_usec", time.Now().UnixMicro())
	b.field("uptime_in_seconds", int64(up/time.Second))
	b.field("uptime_in_days", int64(up/(24*time.Hour)))
	b.field("hz", int(time.Second/statInterval))
	b.field("configured_hz", int(time.Second/statInterval))
	b.field("executable", exe)
	b.field("config_file", "")
	b.field("io_threads_active", 0)
}

// infoClients: connections. Every connection holding a slot counts, as Redis
// counts every client but replicas; none ever blocks.
func (s *Server) infoClients(b *infoBuf) {
	var maxIn int64
	for _, cn := range s.connList() {
		maxIn = max(maxIn, cn.rbs.Load())
	}
	b.field("connected_clients", s.clients.Load())
	b.field("cluster_connections", 0)
	b.field("maxclients", s.cfg.MaxClients)
	b.field("client_recent_max_input_buffer", maxIn)
	b.field("client_recent_max_output_buffer", 0)
	b.field("blocked_clients", 0)
	b.field("tracking_clients", 0)
	b.field("clients_in_timeout_table", 0)
	b.field("total_blocking_keys", 0)
	b.field("total_blocking_keys_on_nokey", 0)
}

// infoMemory: used_memory is the filters' memory as the node counts it against
// --max-memory (maxmemory), so that used_memory/maxmemory is how full the node
// is; used_memory_rss is the whole process's resident memory, and the
// fragmentation ratio compares the two (the Go runtime, buffers and the Raft
// log cache are the difference). A node never evicts: it refuses writes past
// its limit, which is Redis's noeviction.
func (s *Server) infoMemory(b *infoBuf) {
	used := s.notePeakMemory()
	peak := max(s.stats.peakMemory.Load(), used)
	rss := residentBytes()
	b.field("used_memory", used)
	b.field("used_memory_human", humanBytes(used))
	b.field("used_memory_rss", rss)
	b.field("used_memory_rss_human", humanBytes(rss))
	b.field("used_memory_peak", peak)
	b.field("used_memory_peak_human", humanBytes(peak))
	b.field("used_memory_peak_perc", percent(used, peak))
	b.field("used_memory_dataset", used)
	mu := s.be.Memory()
	b.field("rookery_memory_reserved", mu.Reserved)
	b.field("rookery_log_engine_memory", mu.Engine)
	// Each shard replica's share of used_memory, a number per field as
	// exporters read them.
	for _, sh := range slices.Sorted(maps.Keys(mu.Shards)) {
		b.field(fmt.Sprintf("rookery_shard%d_memory", sh), mu.Shards[sh])
	}
	if total := s.cfg.SystemMemory; total > 0 {
		b.field("total_system_memory", total)
		b.field("total_system_memory_human", humanBytes(total))
	}
	b.field("maxmemory", s.cfg.MaxMemory)
	b.field("maxmemory_human", humanBytes(s.cfg.MaxMemory))
	b.field("maxmemory_policy", "noeviction")
	ratio := 0.0
	if used > 0 {
		ratio = float64(rss) / float64(used)
	}
	b.field("mem_fragmentation_ratio", fmt.Sprintf("%.2f", ratio))
	b.field("mem_fragmentation_bytes", int64(rss)-int64(used))
	b.field("mem_allocator", "go-"+runtime.Version())
	b.field("lazyfree_pending_objects", 0)
}

// percent is Redis's "%.2f%%" of part in whole (100.00% of nothing).
func percent(part, whole uint64) string {
	if whole == 0 {
		return "100.00%"
	}
	return fmt.Sprintf("%.2f%%", 100*float64(part)/float64(whole))
}

// infoStats: counters since start or the last CONFIG RESETSTAT. A node never
// evicts (evicted_keys is 0); keyspace hits and misses count reads of filter
// keys that did and did not exist.
func (s *Server) infoStats(b *infoBuf) {
	ss := &s.stats
	ops, in, out := ss.rates()
	_, expired := s.expiryCounts()
	b.field("total_connections_received", ss.connections.Load())
	b.field("total_commands_processed", s.totalCalls())
	b.field("instantaneous_ops_per_sec", int64(ops))
	b.field("total_net_input_bytes", ss.netIn.Load())
	b.field("total_net_output_bytes", ss.netOut.Load())
	b.field("instantaneous_input_kbps", fmt.Sprintf("%.2f", in/1024))
	b.field("instantaneous_output_kbps", fmt.Sprintf("%.2f", out/1024))
	b.field("rejected_connections", ss.rejected.Load())
	b.field("expired_keys", expired)
	b.field("evicted_keys", 0)
	b.field("keyspace_hits", ss.hits.Load())
	b.field("keyspace_misses", ss.misses.Load())
	b.field("pubsub_channels", 0)
	b.field("pubsub_patterns", 0)
	b.field("total_error_replies", ss.errors.Load())
}

// infoModules: the bf module, as Redis lists a loaded module.
func (s *Server) infoModules(b *infoBuf) {
	b.field("module", fmt.Sprintf("name=bf,ver=%d,api=1,filters=0,usedby=[],using=[],options=[]", BloomModuleVersion))
}

// infoCommandStats: one line per command or subcommand called since start
// (or CONFIG RESETSTAT), as Redis 7 prints it.
func (s *Server) infoCommandStats(b *infoBuf) {
	s.eachStat(func(name string, st *cmdStat) {
		calls, usec := st.calls.Load(), st.usec.Load()
		rejected, failed := st.rejected.Load(), st.failed.Load()
		if calls == 0 && rejected == 0 && failed == 0 {
			return
		}
		perCall := 0.0
		if calls > 0 {
			perCall = float64(usec) / float64(calls)
		}
		b.field("cmdstat_"+name, fmt.Sprintf("calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d",
			calls, usec, perCall, rejected, failed))
	})
}

// infoCluster: cluster_enabled is Redis Cluster's (1: clients may ask for
// slots, CLUSTER SLOTS); the rest is the node's Raft state.
func (s *Server) infoCluster(b *infoBuf) {
	st := s.be.Status()
	b.field("cluster_enabled", 1)
	b.field("node_id", st.ID)
	b.field("raft_role", st.Role)
	b.field("leader_id", st.LeaderID)
	b.field("leader_resp_addr", st.LeaderRESP)
	b.field("term", st.Term)
	b.field("commit_index", st.CommitIndex)
	b.field("applied_index", st.AppliedIndex)
	b.field("ready", b2i(st.Ready))
}

// infoKeyspace: the one database, listed only when it holds keys, as Redis
// does. A sharded cluster's count is every shard's, and names the shards it
// could not reach (rookery_shards_not_counted).
func (s *Server) infoKeyspace(b *infoBuf) {
	ks := b.ks
	if ks == nil {
		expires, _ := s.expiryCounts()
		ks = &keyspaceCount{keys: uint64(s.be.Status().Filters), expires: expires}
	}
	if ks.keys != 0 || ks.expires != 0 {
		b.field("db0", fmt.Sprintf("keys=%d,expires=%d,avg_ttl=0", ks.keys, ks.expires))
	}
	if ks.missing > 0 {
		b.field("rookery_shards_not_counted", ks.missing)
	}
}

// shardKeyspace counts one shard's replica here.
func shardKeyspace(rep Replica) *keyspaceCount {
	f := rep.FSM()
	return &keyspaceCount{keys: uint64(f.Len()), expires: uint64(f.Expires())}
}

// expiryCounts is how many keys have a time to live (INFO keyspace expires=)
// and how many this node's state machines have removed by expiry since it
// started (INFO stats expired_keys): every shard's it holds, when sharded.
func (s *Server) expiryCounts() (expires, expired uint64) {
	for _, r := range s.be.Replicas() {
		f := r.FSM()
		expires += uint64(f.Expires())
		expired += f.ExpiredKeys()
	}
	return expires, expired
}

// parseKeyspace reads the db0 line of an INFO keyspace reply.
func parseKeyspace(text []byte) (keys, expires uint64) {
	for _, line := range strings.Split(string(text), "\r\n") {
		v, found := strings.CutPrefix(line, "db0:")
		if !found {
			continue
		}
		for _, kv := range strings.Split(v, ",") {
			k, n, _ := strings.Cut(kv, "=")
			x, err := strconv.ParseUint(n, 10, 64)
			if err != nil {
				continue
			}
			switch k {
			case "keys":
				keys = x
			case "expires":
				expires = x
			}
		}
	}
	return keys, expires
}

// osString is the kernel's name, release and machine, as Redis prints uname's.
func osString() string {
	name := runtime.GOOS
	if name != "" {
		name = strings.ToUpper(name[:1]) + name[1:]
	}
	machine := map[string]string{"amd64": "x86_64", "arm64": "aarch64", "386": "i686"}[runtime.GOARCH]
	if machine == "" {
		machine = runtime.GOARCH
	}
	release := "unknown"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		release = strings.TrimSpace(string(b))
	}
	return name + " " + release + " " + machine
}

// residentBytes is the process's resident set: /proc/self/statm where there
// is one, else what the Go runtime has obtained from the system.
func residentBytes() uint64 {
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			if pages, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				return pages * uint64(os.Getpagesize())
			}
		}
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Sys - m.HeapReleased
}
