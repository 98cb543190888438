package transport

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestGoRedisTools: go-redis v9's own parsers read what the tools commands
// answer, in both protocols: INFO as a map of sections, CLIENT INFO field by
// field (it refuses a field or flag it does not know), TIME, MEMORY USAGE,
// CONFIG, COMMAND LIST and CLIENT KILL.
func TestGoRedisTools(t *testing.T) {
	bothProtocols(t, func(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
		res(c.BFAdd(ctx, "bloom", "x").Result()).must(t)
		info := res(c.InfoMap(ctx, "all").Result()).must(t)
		for section, field := range map[string]string{"Server": "redis_version", "Clients": "connected_clients",
			"Memory": "used_memory", "Stats": "total_commands_processed", "Replication": "role",
			"Commandstats": "cmdstat_bf.add", "Keyspace": "db0"} {
			if info[section][field] == "" {
				t.Errorf("InfoMap: no %s in %s: %v", field, section, info[section])
			}
		}
		// Fields an exporter reads as numbers are numbers.
		for section, fields := range info {
			for k, v := range fields {
				if _, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64); err != nil && !textField(k) && section != "Modules" {
					t.Errorf("INFO %s %s:%s is not a number", section, k, v)
				}
			}
		}
		ci := res(c.ClientInfo(ctx).Result()).must(t)
		if ci.ID == 0 || ci.User != "default" || ci.Resp != proto || ci.LibName == "" || ci.LastCmd != "client|info" {
			t.Errorf("ClientInfo %+v", ci)
		}
		if list := res(c.ClientList(ctx).Result()).must(t); !strings.Contains(list, "id="+strconv.FormatInt(ci.ID, 10)+" ") {
			t.Errorf("ClientList %q", list)
		}
		if tm := res(c.Time(ctx).Result()).must(t); time.Since(tm).Abs() > time.Minute {
			t.Errorf("Time %v", tm)
		}
		if n := res(c.MemoryUsage(ctx, "bloom").Result()).must(t); n < 100 {
			t.Errorf("MemoryUsage %d", n)
		}
		if err := c.MemoryUsage(ctx, "missing").Err(); err != redis.Nil {
			t.Errorf("MemoryUsage of a missing key: %v", err)
		}
		res(c.ConfigSet(ctx, "bf-initial-size", "321").Result()).must(t)
		if got := res(c.ConfigGet(ctx, "bf-init*").Result()).must(t); got["bf-initial-size"] != "321" {
			t.Errorf("ConfigGet %v", got)
		}
		res(c.ConfigResetStat(ctx).Result()).must(t)
		names := res(c.CommandList(ctx, &redis.FilterBy{Module: "bf"}).Result()).must(t)
		if len(names) != len(filterDocs) {
			t.Errorf("CommandList FILTERBY MODULE bf: %d names", len(names))
		}
		if n := res(c.ClientKillByFilter(ctx, "ID", "99999").Result()).must(t); n != 0 {
			t.Errorf("ClientKillByFilter of no one: %d", n)
		}
	})
}

// textField reports whether INFO's field k holds text rather than a number.
func textField(k string) bool {
	switch k {
	case "redis_version", "rookery_version", "redis_git_sha1", "redis_mode", "os", "go_version",
		"process_supervised", "run_id", "executable", "config_file", "used_memory_human",
		"used_memory_rss_human", "used_memory_peak_human", "total_system_memory_human", "maxmemory_human",
		"maxmemory_policy", "mem_allocator", "role", "master_failover_state", "master_replid", "master_replid2",
		"module", "node_id", "raft_role", "leader_id", "leader_resp_addr", "db0", "master_host",
		"master_link_status":
		return true
	}
	return strings.HasPrefix(k, "cmdstat_") || strings.HasPrefix(k, "slave")
}
