package transport

import (
	"context"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rookerydb/rookery/cluster"
)

// startWith serves a RESP server for be on 127.0.0.1:0 until the test ends.
func startWith(t *testing.T, cfg Config, be Backend) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	s := New(cfg, be)
	done := make(chan struct{})
	go func() { s.Serve(ln); close(done) }()
	t.Cleanup(func() { s.Close(); <-done })
	return s, ln.Addr().String()
}

// infoText is the text of an INFO (or CLIENT LIST) reply, bulk or verbatim.
func infoText(t *testing.T, reply string) string {
	t.Helper()
	switch {
	case strings.HasPrefix(reply, "$"):
		_, body, _ := strings.Cut(reply, "\r\n")
		return strings.TrimSuffix(body, "\r\n")
	case strings.HasPrefix(reply, "="):
		_, body, _ := strings.Cut(reply, "\r\n")
		return strings.TrimSuffix(strings.TrimPrefix(body, "txt:"), "\r\n")
	}
	t.Fatalf("not a bulk or verbatim reply: %q", reply)
	return ""
}

// infoFields parses INFO text into its fields, checking Redis's format: "#
// Section" headers, "field:value" lines, CRLF line ends, one blank line
// between sections, no blank line first or last. It returns the section
// names in order too.
func infoFields(t *testing.T, text string) (map[string]string, []string) {
	t.Helper()
	fields := map[string]string{}
	var sections []string
	if text == "" {
		return fields, nil
	}
	if !strings.HasSuffix(text, "\r\n") {
		t.Fatalf("INFO does not end with CRLF: %q", text)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\r\n"), "\r\n")
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "# "):
			if i > 0 && lines[i-1] != "" {
				t.Fatalf("section %q not after a blank line", l)
			}
			sections = append(sections, l[2:])
		case l == "":
			if i == 0 || i == len(lines)-1 || !strings.HasPrefix(lines[i+1], "# ") {
				t.Fatalf("stray blank line %d in %q", i, text)
			}
		default:
			k, v, ok := strings.Cut(l, ":")
			if !ok || strings.ContainsAny(l, "\r\n") || k == "" {
				t.Fatalf("bad INFO line %q", l)
			}
			fields[k] = v
		}
	}
	return fields, sections
}

func TestInfoSectionSelection(t *testing.T) {
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	c.do("BF.ADD", "k", "a")
	defaults := "Server Clients Memory Stats Replication CPU Modules Cluster Keyspace"
	all := "Server Clients Memory Stats Replication CPU Modules Commandstats Cluster Keyspace"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, defaults},
		{[]string{"default"}, defaults},
		{[]string{"all"}, all},
		{[]string{"everything"}, all},
		{[]string{"ALL"}, all},
		{[]string{"keyspace"}, "Keyspace"},
		{[]string{"KeySpace", "server"}, "Server Keyspace"}, // Redis's order, not the asking order
		{[]string{"commandstats", "replication", "memory"}, "Memory Replication Commandstats"},
		{[]string{"default", "commandstats"}, defaults[:strings.Index(defaults, "Cluster")] + "Commandstats Cluster Keyspace"},
		{[]string{"modules"}, "Modules"},
		{[]string{"module_list"}, "Modules"},
		{[]string{"nosuchsection"}, ""},
	} {
		_, secs := infoFields(t, infoText(t, c.do(append([]string{"INFO"}, tc.args...)...)))
		if got := strings.Join(secs, " "); got != tc.want {
			t.Errorf("INFO %v: sections %q, want %q", tc.args, got, tc.want)
		}
	}
	if got := c.do("INFO", "nosuchsection"); got != "$0\r\n\r\n" {
		t.Errorf("INFO of no known section: %q, want an empty string", got)
	}
	c.do("HELLO", "3")
	if got := c.do("INFO", "keyspace"); got != "=48\r\ntxt:# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n\r\n" {
		t.Errorf("INFO keyspace in RESP3: %q", got)
	}
}

func TestInfoServerClientsMemory(t *testing.T) {
	ts := mustStartServer(t, Config{Version: "1.2.3", MaxMemory: 3 << 20, SystemMemory: 8 << 30, MaxClients: 77})
	c := dialRaw(t, ts.addr)
	c.do("BF.RESERVE", "k", "0.01", "1000")
	f, _ := infoFields(t, infoText(t, c.do("INFO")))
	used := ts.be.fsm.MemoryBytes()
	want := map[string]string{
		"redis_version": "7.2.0", "rookery_version": "1.2.3", "redis_mode": "standalone",
		"arch_bits": "64", "tcp_port": ts.addr[strings.LastIndex(ts.addr, ":")+1:],
		"uptime_in_days": "0", "config_file": "", "process_supervised": "no",
		"connected_clients": "1", "maxclients": "77", "blocked_clients": "0",
		"used_memory": strconv.FormatUint(used, 10), "used_memory_human": humanBytes(used),
		"used_memory_peak": strconv.FormatUint(used, 10), "used_memory_peak_perc": "100.00%",
		"maxmemory": "3145728", "maxmemory_human": "3.00M", "maxmemory_policy": "noeviction",
		"total_system_memory": "8589934592", "total_system_memory_human": "8.00G",
		"cluster_enabled": "1", "module": "name=bf,ver=20628,api=1,filters=0,usedby=[],using=[],options=[]",
		"db0": "keys=1,expires=0,avg_ttl=0",
	}
	for k, v := range want {
		if f[k] != v {
			t.Errorf("%s:%s, want %s", k, f[k], v)
		}
	}
	for _, k := range []string{"process_id", "uptime_in_seconds", "used_memory_rss", "executable", "run_id",
		"mem_fragmentation_ratio", "used_cpu_sys", "used_cpu_user", "os", "server_time_usec"} {
		if f[k] == "" {
			t.Errorf("%s is empty", k)
		}
	}
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(f["run_id"]) {
		t.Errorf("run_id %q", f["run_id"])
	}
	if !regexp.MustCompile(`^\d+\.\d\d$`).MatchString(f["mem_fragmentation_ratio"]) {
		t.Errorf("mem_fragmentation_ratio %q", f["mem_fragmentation_ratio"])
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0B", 1023: "1023B", 1024: "1.00K", 1536: "1.50K",
		3 << 20: "3.00M", 5 << 30: "5.00G", 1 << 40: "1.00T", 1 << 50: "1.00P", 1 << 60: "1152921504606846976B"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestInfoStats: the counters count what happened, exactly.
func TestInfoStats(t *testing.T) {
	ts := mustStartServer(t, Config{MaxClients: 1})
	c := dialRaw(t, ts.addr)
	c.do("BF.ADD", "k", "a")     // write
	c.do("BF.EXISTS", "k", "a")  // hit
	c.do("BF.EXISTS", "no", "a") // miss
	c.do("BF.INFO", "no")        // miss, failed
	c.do("CF.COUNT", "no", "a")  // miss
	c.do("TYPE", "k")            // hit
	c.do("BF.ADD", "k")          // rejected: arity
	c.do("NOSUCH")               // unknown: an error, no command
	refused := dialRaw(t, ts.addr)
	if got := refused.reply(); got != "-ERR max number of clients reached\r\n" {
		t.Fatalf("second client: %q", got)
	}
	f, _ := infoFields(t, infoText(t, c.do("INFO", "stats")))
	want := map[string]string{
		"total_connections_received": "1", "rejected_connections": "1",
		"total_commands_processed": "6", // executed: ADD, EXISTS x2, INFO, COUNT, TYPE
		"keyspace_hits":            "2", "keyspace_misses": "3", "expired_keys": "0", "evicted_keys": "0",
		"total_error_replies": "3",
	}
	for k, v := range want {
		if f[k] != v {
			t.Errorf("%s:%s, want %s", k, f[k], v)
		}
	}
	in, _ := strconv.Atoi(f["total_net_input_bytes"])
	out, _ := strconv.Atoi(f["total_net_output_bytes"])
	sent := len(encode("BF.ADD", "k", "a")) + len(encode("BF.EXISTS", "k", "a")) + len(encode("BF.EXISTS", "no", "a")) +
		len(encode("BF.INFO", "no")) +
		len(encode("CF.COUNT", "no", "a")) + len(encode("TYPE", "k")) + len(encode("BF.ADD", "k")) +
		len(encode("NOSUCH")) + len(encode("INFO", "stats"))
	if in != sent {
		t.Errorf("total_net_input_bytes %d, want %d", in, sent)
	}
	if out < 60 {
		t.Errorf("total_net_output_bytes %d", out)
	}
	for _, k := range []string{"instantaneous_ops_per_sec", "instantaneous_input_kbps", "instantaneous_output_kbps"} {
		if _, ok := f[k]; !ok {
			t.Errorf("no %s", k)
		}
	}
}

func TestInstantaneousOps(t *testing.T) {
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	stop := time.Now().Add(2 * time.Second)
	var batch strings.Builder
	for range 50 {
		batch.WriteString(encode("PING"))
	}
	for time.Now().Before(stop) {
		c.send(batch.String())
		for range 50 {
			c.reply()
		}
	}
	f, _ := infoFields(t, infoText(t, c.do("INFO", "stats")))
	if ops, _ := strconv.Atoi(f["instantaneous_ops_per_sec"]); ops < 100 {
		t.Errorf("instantaneous_ops_per_sec %d while pinging flat out", ops)
	}
	if kbps, _ := strconv.ParseFloat(f["instantaneous_input_kbps"], 64); kbps <= 0 {
		t.Errorf("instantaneous_input_kbps %v", kbps)
	}
}

// TestInfoCommandStats: one line per command or subcommand, in Redis's
// format; errors before a command runs are rejected calls, errors it answers
// failed ones; CONFIG RESETSTAT zeroes them.
func TestInfoCommandStats(t *testing.T) {
	ts := mustStartServer(t, Config{RequirePass: "pw"})
	c := dialRaw(t, ts.addr)
	c.do("BF.ADD", "k", "a") // rejected: NOAUTH
	c.do("AUTH", "pw")
	c.do("BF.ADD", "k", "a")
	c.do("BF.ADD", "k", "b")
	c.do("BF.ADD", "k")                        // rejected: arity
	c.do("BF.RESERVE", "k", "x", "1")          // failed: bad error rate
	c.do("BF.INFO", "missing")                 // failed: not found
	c.do("CLIENT", "SETNAME", "me")            // client|setname
	c.do("CLIENT", "KILL")                     // rejected: client|kill arity
	c.do("CLIENT", "NOSUCH")                   // unknown subcommand: no line
	c.do("IDEM", "1", "1", "BF.ADD", "k", "c") // counted as bf.add
	text := infoText(t, c.do("INFO", "commandstats"))
	line := regexp.MustCompile(`^cmdstat_([a-z.|]+):calls=(\d+),usec=(\d+),usec_per_call=(\d+\.\d\d),rejected_calls=(\d+),failed_calls=(\d+)$`)
	got := map[string]string{}
	f, secs := infoFields(t, text)
	if strings.Join(secs, " ") != "Commandstats" {
		t.Fatalf("sections %v", secs)
	}
	for k, v := range f {
		m := line.FindStringSubmatch(k + ":" + v)
		if m == nil {
			t.Fatalf("bad commandstats line %q", k+":"+v)
		}
		calls, _ := strconv.Atoi(m[2])
		usec, _ := strconv.ParseFloat(m[3], 64)
		if per, _ := strconv.ParseFloat(m[4], 64); calls > 0 && (per < usec/float64(calls)-0.01 || per > usec/float64(calls)+0.01) {
			t.Errorf("%s: usec_per_call %v, usec %v, calls %d", m[1], per, usec, calls)
		}
		got[m[1]] = m[2] + "/" + m[5] + "/" + m[6]
	}
	want := map[string]string{ // calls/rejected/failed
		"bf.add": "3/2/0", "auth": "1/0/0", "bf.reserve": "1/0/1", "bf.info": "1/0/1",
		"client|setname": "1/0/0", "client|kill": "0/1/0",
	}
	if len(got) != len(want) {
		t.Errorf("commandstats %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("cmdstat_%s calls/rejected/failed %s, want %s", k, got[k], v)
		}
	}
	if r := c.do("CONFIG", "RESETSTAT"); r != "+OK\r\n" {
		t.Fatalf("CONFIG RESETSTAT: %q", r)
	}
	if got := infoText(t, c.do("INFO", "commandstats")); !regexp.MustCompile(
		`^# Commandstats\r\ncmdstat_config\|resetstat:calls=1,usec=\d+,usec_per_call=\d+\.\d\d,rejected_calls=0,failed_calls=0\r\n$`).MatchString(got) {
		t.Errorf("after CONFIG RESETSTAT: %q", got)
	}
	f, _ = infoFields(t, infoText(t, c.do("INFO", "stats")))
	if f["total_commands_processed"] != "2" || f["keyspace_hits"] != "0" || f["total_connections_received"] != "0" {
		t.Errorf("stats after RESETSTAT: %v", f)
	}
}

// replBackend is the fake backend as a leader with followers, or as a
// follower of one.
type replBackend struct {
	*fakeBackend
	st    cluster.Status
	nodes []cluster.NodeInfo
	peers []cluster.RaftPeer
}

func (b *replBackend) Status() cluster.Status    { return b.st }
func (b *replBackend) Nodes() []cluster.NodeInfo { return b.nodes }
func (b *replBackend) RaftPeers(context.Context, int) (cluster.RaftPeers, error) {
	return cluster.RaftPeers{Node: b.st.ID, Leader: b.st.LeaderID, Servers: b.peers}, nil
}
func (b *replBackend) RemovePeer(context.Context, int, string) error { return nil }
func (b *replBackend) TransferLeader(context.Context, int, string) (string, error) {
	return "", nil
}

func replicationInfo(t *testing.T, be Backend) string {
	_, addr := startWith(t, Config{}, be)
	return infoText(t, dialRaw(t, addr).do("INFO", "replication"))
}

func TestInfoReplicationLeader(t *testing.T) {
	be := &replBackend{fakeBackend: newFakeBackend(t),
		st: cluster.Status{ID: "n1", Role: "leader", LeaderID: "n1", LeaderRESP: "10.0.0.1:6479", Term: 7,
			CommitIndex: 120, AppliedIndex: 118},
		nodes: []cluster.NodeInfo{
			{ID: "n1", RESPAddr: "10.0.0.1:6479", Voter: true}, {ID: "n2", RESPAddr: "10.0.0.2:6479", Voter: true},
			{ID: "n3", RESPAddr: "10.0.0.3:6479", Voter: true}, {ID: "n4", RESPAddr: "10.0.0.4:6479"}},
		peers: []cluster.RaftPeer{
			{ID: "n1", State: "leader", Voter: true, Reachable: true, AppliedIndex: 118},
			{ID: "n2", State: "follower", Voter: true, Reachable: true, AppliedIndex: 117, LastContact: "12ms"},
			{ID: "n3", State: "unreachable", Voter: true},
			{ID: "n4", State: "nonvoter", Reachable: true, AppliedIndex: 90, LastContact: "2.5s"},
		}}
	want := "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n" +
		"slave0:ip=10.0.0.2,port=6479,state=online,offset=117,lag=0\r\n" +
		"slave1:ip=10.0.0.4,port=6479,state=online,offset=90,lag=2\r\n" +
		"master_failover_state:no-failover\r\nmaster_replid:" + replicationID(be.st) + "\r\n" +
		"master_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:118\r\nsecond_repl_offset:-1\r\n"
	if got := replicationInfo(t, be); got != want {
		t.Errorf("leader:\n got %q\nwant %q", got, want)
	}
}

func TestInfoReplicationFollower(t *testing.T) {
	st := cluster.Status{ID: "n2", Role: "follower", LeaderID: "n1", LeaderRESP: "10.0.0.1:6479", Term: 7,
		CommitIndex: 120, AppliedIndex: 118, LastContact: "1.2s"}
	nodes := []cluster.NodeInfo{{ID: "n1", Voter: true}, {ID: "n2", Voter: true}}
	be := &replBackend{fakeBackend: newFakeBackend(t), st: st, nodes: nodes}
	id := replicationID(st)
	tail := "slave_priority:100\r\nslave_read_only:1\r\nreplica_announced:1\r\nconnected_slaves:0\r\n" +
		"master_failover_state:no-failover\r\nmaster_replid:" + id + "\r\n" +
		"master_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:118\r\nsecond_repl_offset:-1\r\n"
	want := "# Replication\r\nrole:slave\r\nmaster_host:10.0.0.1\r\nmaster_port:6479\r\nmaster_link_status:up\r\n" +
		"master_last_io_seconds_ago:1\r\nmaster_sync_in_progress:0\r\nslave_read_repl_offset:120\r\nslave_repl_offset:118\r\n" + tail
	if got := replicationInfo(t, be); got != want {
		t.Errorf("follower:\n got %q\nwant %q", got, want)
	}
	if leader := (&replBackend{st: cluster.Status{ID: "n1", LeaderID: "n1", Term: 7}}).st; replicationID(leader) != id {
		t.Error("leader and follower disagree on the replication id")
	}

	// A candidate that lost its leader: the link is down, since last contact.
	st = cluster.Status{ID: "n2", Role: "candidate", Term: 8, CommitIndex: 120, AppliedIndex: 120, LastContact: "4s"}
	nodes[1].Voter = false // and a non-voter can never be promoted: priority 0
	be = &replBackend{fakeBackend: newFakeBackend(t), st: st, nodes: nodes}
	want = "# Replication\r\nrole:slave\r\nmaster_host:\r\nmaster_port:0\r\nmaster_link_status:down\r\n" +
		"master_last_io_seconds_ago:4\r\nmaster_sync_in_progress:0\r\nslave_read_repl_offset:120\r\nslave_repl_offset:120\r\n" +
		"master_link_down_since_seconds:4\r\nslave_priority:0\r\nslave_read_only:1\r\nreplica_announced:1\r\nconnected_slaves:0\r\n" +
		"master_failover_state:no-failover\r\nmaster_replid:0000000000000000000000000000000000000000\r\n" +
		"master_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:120\r\nsecond_repl_offset:-1\r\n"
	if got := replicationInfo(t, be); got != want {
		t.Errorf("candidate:\n got %q\nwant %q", got, want)
	}
}
