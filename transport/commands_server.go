package transport

import (
	"fmt"
	"strconv"
	"time"
)

// The versions the server answers as. Tools decide what to ask by them
// (transport/DESIGN.md, "Versions claimed").
const (
	// RedisVersion is the Redis release whose replies the server follows:
	// INFO's fields, CLIENT LIST's line, COMMAND's shapes. 7.2.0 is the first
	// with everything served here (CLIENT SETINFO, lib-name and lib-ver in
	// CLIENT LIST); INFO keyspace and CLIENT LIST have 7.2's fields, without
	// the subexpiry and watch fields 7.4 and 8.0 added.
	RedisVersion = "7.2.0"
	// BloomModuleVersion is the RedisBloom release MODULE LIST and HELLO
	// report for the "bf" module: 2.6.28, the RedisBloom line that targets
	// Redis 7.2, encoded as RedisBloom does (major*10000 + minor*100 + patch).
	BloomModuleVersion = 20628
)

// Commands of Redis's server group that tools call.
func serverCommands() []*command {
	admin := flagsAdminish
	return []*command{
		{name: "info", arity: -1, flags: admin, parse: parseInfo},
		{name: "time", arity: 1, flags: []string{"loading", "stale", "fast"}, parse: parseTime},
		{name: "module", arity: -2, flags: nil, subs: []*command{
			{name: "list", arity: 2, flags: []string{"admin", "noscript"}, parse: parseModuleList},
			{name: "help", arity: 2, flags: admin, parse: helpParser(moduleHelp)},
			{name: "load", arity: -3, flags: []string{"admin", "noscript", "protected"}, parse: parseModuleRefused},
			{name: "loadex", arity: -3, flags: []string{"admin", "noscript", "protected"}, parse: parseModuleRefused},
			{name: "unload", arity: 3, flags: []string{"admin", "noscript", "protected"}, parse: parseModuleRefused},
		}},
		{name: "memory", arity: -2, flags: nil, subs: []*command{
			{name: "usage", arity: -3, flags: []string{"readonly"}, firstKey: 2, lastKey: 2, step: 1, parse: parseMemoryUsage},
			{name: "help", arity: 2, flags: admin, parse: helpParser(memoryHelp)},
		}},
		{name: "command", arity: -1, flags: admin, parse: parseCommandAll, subs: commandSubcommands()},
		{name: "config", arity: -2, flags: nil, subs: configSubcommands()},
	}
}

var moduleHelp = []string{
	"LIST",
	"    Return a list of loaded modules.",
	"LOAD <path> [<arg> ...]",
	"    Load a module library from <path>, passing to it any optional arguments.",
	"LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
	"    Load a module library from <path>, while passing it module configurations and optional arguments.",
	"UNLOAD <name>",
	"    Unload a module.",
}

var memoryHelp = []string{
	"USAGE <key> [SAMPLES <count>]",
	"    Return memory in bytes used by <key> and its value: the bytes the node",
	"    counts for it against its memory limit (SAMPLES is accepted and ignored).",
}

// parseModuleList: MODULE LIST, the one module whose commands are served:
// RedisBloom's "bf".
func parseModuleList(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) {
		w.array(1)
		writeBloomModule(w)
	}), nil
}

// writeBloomModule renders the "bf" module as MODULE LIST and HELLO do. There
// is no module file: path is empty.
func writeBloomModule(w *reply) {
	w.mapHeader(4)
	w.bulkString("name")
	w.bulkString("bf")
	w.bulkString("ver")
	w.int(BloomModuleVersion)
	w.bulkString("path")
	w.bulkString("")
	w.bulkString("args")
	w.array(0)
}

// parseModuleRefused: MODULE LOAD, LOADEX and UNLOAD are refused as Redis
// refuses them with its default enable-module-command no: modules are built
// in here.
func parseModuleRefused(s *Server, args [][]byte) (op, error) {
	return op{}, redisError("ERR MODULE command not allowed. If the enable-module-command option is set to " +
		"\"local\", you can run it from a local connection, otherwise you need to set this option in the " +
		"configuration file, and then restart the server.")
}

// parseMemoryUsage: MEMORY USAGE key [SAMPLES count], the key's bytes as the
// node counts them against --max-memory (its filter's arrays and struct, its
// name and its entry), or nil for a missing key. Filters have no nested values
// to sample, so SAMPLES is checked as Redis checks it and changes nothing.
func parseMemoryUsage(s *Server, args [][]byte) (op, error) {
	for j := 3; j < len(args); j++ {
		if !keyword(args[j], "SAMPLES") || j+1 >= len(args) {
			return op{}, errSyntax
		}
		n, ok := parseInt64(args[j+1])
		if !ok {
			return op{}, errNotInteger
		}
		if n < 0 {
			return op{}, errSyntax
		}
		j++
	}
	key := string(args[2])
	return readOp(func(q queries, w *reply) {
		n, ok := q.MemoryUsage(key)
		if !ok {
			w.null()
			return
		}
		w.uint(n)
	}), nil
}

// parseTime: TIME, [unix seconds, microseconds] as bulk strings.
func parseTime(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) {
		now := time.Now()
		w.array(2)
		w.bulkString(strconv.FormatInt(now.Unix(), 10))
		w.bulkString(strconv.Itoa(now.Nanosecond() / 1000))
	}), nil
}

// humanBytes formats n as Redis's bytesToHuman: 512B, 1.50K, 2.00M ...
func humanBytes(n uint64) string {
	units := []string{"K", "M", "G", "T", "P"}
	if n < 1024 {
		return fmt.Sprintf("%dB", n)
	}
	d := float64(n) / 1024
	for _, u := range units {
		if d < 1024 {
			return fmt.Sprintf("%.2f%s", d, u)
		}
		d /= 1024
	}
	return fmt.Sprintf("%dB", n)
}
