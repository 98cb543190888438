package acl

import "sort"

// Access is what a command does with a key, which decides the key patterns
// that let it: %R~ patterns grant reading, %W~ writing, ~ both.
type Access uint8

const (
	// KeyRead: the command reads the key's value (Redis's ACCESS key flag).
	KeyRead Access = 1 << iota
	// KeyWrite: the command creates, changes or deletes the key (INSERT,
	// UPDATE, DELETE).
	KeyWrite
)

// KeySpec locates keys among a request's arguments (the name is argument 0)
// and says what the command does with them. An Access of 0 (EXISTS, TYPE,
// WATCH, MEMORY USAGE, whose key specs in Redis carry neither flag) is
// allowed by any pattern that matches the key.
type KeySpec struct {
	First, Last, Step int // Last < 0 counts from the end: -1 is the last argument
	Access            Access
}

// Command is one row of the table: a command or subcommand the server may
// register, with its categories and what a user needs to run it.
type Command struct {
	Name       string // lower case; "container|sub" for a subcommand
	Categories CategorySet
	// NoAuth marks AUTH, HELLO and QUIT, which Redis lets every user run
	// whatever its rules (they carry its no-auth flag).
	NoAuth bool
	// Wrapper marks IDEM, which runs the command it wraps with a session:
	// every user may send it, and the wrapped command is what is checked
	// (doc.go).
	Wrapper bool
	Keys    []KeySpec
}

// Shorthands for the table.
const (
	kR  = KeyRead
	kW  = KeyWrite
	kRW = KeyRead | KeyWrite
)

func key1(a Access) []KeySpec    { return []KeySpec{{First: 1, Last: 1, Step: 1, Access: a}} }
func keysAll(a Access) []KeySpec { return []KeySpec{{First: 1, Last: -1, Step: 1, Access: a}} }

func cmd(name string, keys []KeySpec, cs ...Category) Command {
	return Command{Name: name, Categories: Cats(cs...), Keys: keys}
}

// table is every command the server registers or is about to, with its
// categories. Redis's own commands carry Redis 7.2's categories (those of
// its commands/*.json together with the ones their flags imply: write,
// read, admin and dangerous, fast, else slow). BF.* and CF.* carry exactly
// what RedisBloom gives its commands (rebloom.c, RegisterCommand ...
// "write fast" and the module's category); module commands get no category
// from their flags in Redis, so BF.EXISTS is @read @bloom but neither @fast
// nor @slow, and CF.COMPACT is @read. CBF.* follows its BF and CF
// counterparts. Key access follows Redis's key specs for its own commands
// and what each filter command does for ours (DESIGN.md).
var table = []Command{
	// BF: RedisBloom's categories, command by command.
	cmd("bf.reserve", key1(kW), CatWrite, CatFast, CatBloom),
	cmd("bf.add", key1(kW), CatWrite, CatBloom),
	cmd("bf.madd", key1(kW), CatWrite, CatBloom),
	cmd("bf.insert", key1(kW), CatWrite, CatBloom),
	cmd("bf.exists", key1(kR), CatRead, CatBloom),
	cmd("bf.mexists", key1(kR), CatRead, CatBloom),
	cmd("bf.info", key1(kR), CatRead, CatFast, CatBloom),
	cmd("bf.card", key1(kR), CatRead, CatFast, CatBloom),
	cmd("bf.debug", key1(kR), CatRead, CatBloom),
	cmd("bf.scandump", key1(kR), CatRead, CatBloom),
	cmd("bf.loadchunk", key1(kW), CatWrite, CatBloom),

	// CF: RedisBloom's categories. CF.COMPACT is @read there ("readonly
	// fast" / "read"): it changes how a filter is laid out, not what it
	// answers. It still writes the key, so it needs write access to it.
	cmd("cf.reserve", key1(kW), CatWrite, CatFast, CatCuckoo),
	cmd("cf.add", key1(kW), CatWrite, CatCuckoo),
	cmd("cf.addnx", key1(kW), CatWrite, CatCuckoo),
	cmd("cf.insert", key1(kW), CatWrite, CatCuckoo),
	cmd("cf.insertnx", key1(kW), CatWrite, CatCuckoo),
	cmd("cf.exists", key1(kR), CatRead, CatCuckoo),
	cmd("cf.mexists", key1(kR), CatRead, CatCuckoo),
	cmd("cf.count", key1(kR), CatRead, CatCuckoo),
	cmd("cf.del", key1(kW), CatWrite, CatCuckoo),
	cmd("cf.compact", key1(kW), CatRead, CatCuckoo),
	cmd("cf.scandump", key1(kR), CatRead, CatCuckoo),
	cmd("cf.loadchunk", key1(kW), CatWrite, CatCuckoo),
	cmd("cf.info", key1(kR), CatRead, CatFast, CatCuckoo),
	cmd("cf.debug", key1(kR), CatRead, CatCuckoo),

	// CBF (ours), placed as the BF and CF commands they mirror.
	cmd("cbf.reserve", key1(kW), CatWrite, CatFast, CatCBF),
	cmd("cbf.add", key1(kW), CatWrite, CatCBF),
	cmd("cbf.madd", key1(kW), CatWrite, CatCBF),
	cmd("cbf.del", key1(kW), CatWrite, CatCBF),
	cmd("cbf.exists", key1(kR), CatRead, CatCBF),
	cmd("cbf.mexists", key1(kR), CatRead, CatCBF),
	cmd("cbf.count", key1(kR), CatRead, CatCBF),
	cmd("cbf.info", key1(kR), CatRead, CatFast, CatCBF),

	// Keyspace.
	cmd("del", keysAll(kW), CatKeyspace, CatWrite, CatSlow),
	cmd("unlink", keysAll(kW), CatKeyspace, CatWrite, CatFast),
	cmd("exists", keysAll(0), CatKeyspace, CatRead, CatFast),
	cmd("type", key1(0), CatKeyspace, CatRead, CatFast),
	cmd("scan", nil, CatKeyspace, CatRead, CatSlow),
	cmd("keys", nil, CatKeyspace, CatRead, CatSlow, CatDangerous),
	cmd("dbsize", nil, CatKeyspace, CatRead, CatFast),
	cmd("rename", []KeySpec{{1, 1, 1, kRW}, {2, 2, 1, kW}}, CatKeyspace, CatWrite, CatSlow),
	cmd("renamenx", []KeySpec{{1, 1, 1, kRW}, {2, 2, 1, kW}}, CatKeyspace, CatWrite, CatFast),
	cmd("flushall", nil, CatKeyspace, CatWrite, CatSlow, CatDangerous),
	cmd("flushdb", nil, CatKeyspace, CatWrite, CatSlow, CatDangerous),
	cmd("expire", key1(kW), CatKeyspace, CatWrite, CatFast),
	cmd("pexpire", key1(kW), CatKeyspace, CatWrite, CatFast),
	cmd("expireat", key1(kW), CatKeyspace, CatWrite, CatFast),
	cmd("pexpireat", key1(kW), CatKeyspace, CatWrite, CatFast),
	cmd("persist", key1(kW), CatKeyspace, CatWrite, CatFast),
	cmd("ttl", key1(kR), CatKeyspace, CatRead, CatFast),
	cmd("pttl", key1(kR), CatKeyspace, CatRead, CatFast),
	cmd("expiretime", key1(kR), CatKeyspace, CatRead, CatFast),
	cmd("pexpiretime", key1(kR), CatKeyspace, CatRead, CatFast),

	// Connection.
	{Name: "auth", Categories: Cats(CatFast, CatConnection), NoAuth: true},
	{Name: "hello", Categories: Cats(CatFast, CatConnection), NoAuth: true},
	{Name: "quit", Categories: Cats(CatFast, CatConnection), NoAuth: true},
	cmd("ping", nil, CatFast, CatConnection),
	cmd("echo", nil, CatFast, CatConnection),
	cmd("select", nil, CatFast, CatConnection),
	cmd("readonly", nil, CatFast, CatConnection),
	cmd("readwrite", nil, CatFast, CatConnection),
	cmd("asking", nil, CatFast, CatConnection),
	cmd("client", nil, CatSlow),
	cmd("client|setname", nil, CatSlow, CatConnection),
	cmd("client|getname", nil, CatSlow, CatConnection),
	cmd("client|id", nil, CatSlow, CatConnection),
	cmd("client|setinfo", nil, CatSlow, CatConnection),
	cmd("client|info", nil, CatSlow, CatConnection),
	cmd("client|help", nil, CatSlow, CatConnection),
	cmd("client|list", nil, CatAdmin, CatSlow, CatDangerous, CatConnection),
	cmd("client|kill", nil, CatAdmin, CatSlow, CatDangerous, CatConnection),
	// IDEM (ours) carries a client's session with the command it wraps: a
	// connection-level wrapper, never a permission of its own.
	{Name: "idem", Categories: Cats(CatFast, CatConnection), Wrapper: true},

	// Transactions.
	cmd("multi", nil, CatFast, CatTransaction),
	cmd("exec", nil, CatSlow, CatTransaction),
	cmd("discard", nil, CatFast, CatTransaction),
	cmd("watch", keysAll(0), CatFast, CatTransaction),
	cmd("unwatch", nil, CatFast, CatTransaction),

	// Server.
	cmd("info", nil, CatSlow, CatDangerous),
	cmd("time", nil, CatFast),
	cmd("role", nil, CatAdmin, CatFast, CatDangerous),
	cmd("command", nil, CatSlow, CatConnection),
	cmd("command|count", nil, CatSlow, CatConnection),
	cmd("command|info", nil, CatSlow, CatConnection),
	cmd("command|docs", nil, CatSlow, CatConnection),
	cmd("command|list", nil, CatSlow, CatConnection),
	cmd("command|getkeys", nil, CatSlow, CatConnection),
	cmd("command|help", nil, CatSlow, CatConnection),
	cmd("config", nil, CatSlow),
	cmd("config|get", nil, CatAdmin, CatSlow, CatDangerous),
	cmd("config|set", nil, CatAdmin, CatSlow, CatDangerous),
	cmd("config|resetstat", nil, CatAdmin, CatSlow, CatDangerous),
	cmd("config|help", nil, CatSlow),
	cmd("memory", nil, CatSlow),
	cmd("memory|usage", []KeySpec{{2, 2, 1, 0}}, CatRead, CatSlow),
	cmd("memory|help", nil, CatSlow),
	cmd("module", nil, CatSlow),
	cmd("module|list", nil, CatAdmin, CatSlow, CatDangerous),
	cmd("module|load", nil, CatAdmin, CatSlow, CatDangerous),
	cmd("module|loadex", nil, CatAdmin, CatSlow, CatDangerous),
	cmd("module|unload", nil, CatAdmin, CatSlow, CatDangerous),
	cmd("module|help", nil, CatSlow),
	cmd("acl", nil, CatSlow),
	cmd("acl|setuser", nil, CatAdmin, CatSlow, CatDangerous),
	cmd("acl|getuser", nil, CatAdmin, CatSlow, CatDangerous),
	cmd("acl|deluser", nil, CatAdmin, CatSlow, CatDangerous),
	cmd("acl|list", nil, CatAdmin, CatSlow, CatDangerous),
	cmd("acl|users", nil, CatAdmin, CatSlow, CatDangerous),
	cmd("acl|dryrun", nil, CatAdmin, CatSlow, CatDangerous),
	cmd("acl|log", nil, CatAdmin, CatSlow, CatDangerous),
	cmd("acl|whoami", nil, CatSlow),
	cmd("acl|cat", nil, CatSlow),
	cmd("acl|genpass", nil, CatSlow),
	cmd("acl|help", nil, CatSlow),

	// Redis Cluster's CLUSTER, all @slow in Redis 7.2; MEMBERS is ours.
	cmd("cluster", nil, CatSlow),
	cmd("cluster|slots", nil, CatSlow),
	cmd("cluster|shards", nil, CatSlow),
	cmd("cluster|nodes", nil, CatSlow),
	cmd("cluster|members", nil, CatSlow),
	cmd("cluster|keyslot", nil, CatSlow),
	cmd("cluster|info", nil, CatSlow),
	cmd("cluster|myid", nil, CatSlow),
	cmd("cluster|countkeysinslot", nil, CatSlow),
	cmd("cluster|getkeysinslot", nil, CatSlow),
	cmd("cluster|help", nil, CatSlow),
}

// tableIndex finds rows by name.
var tableIndex = func() map[string]int {
	m := make(map[string]int, len(table))
	for i, c := range table {
		if _, dup := m[c.Name]; dup {
			panic("acl: command " + c.Name + " twice in the table")
		}
		m[c.Name] = i
	}
	return m
}()

// Lookup returns the table's row for a command ("bf.add") or subcommand
// ("client|list"), by its lower-case name.
func Lookup(name string) (Command, bool) {
	i, ok := tableIndex[name]
	if !ok {
		return Command{}, false
	}
	return clone(table[i]), true
}

// Commands lists the table's rows by name: what a test of the server's own
// table checks against, and what COMMAND INFO's categories come from.
func Commands() []Command {
	out := make([]Command, len(table))
	for i, c := range table {
		out[i] = clone(c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func clone(c Command) Command {
	c.Keys = append([]KeySpec(nil), c.Keys...)
	return c
}
