package transport

// Documentation of the keyspace, connection, server and cluster commands, in
// Redis's groups and with the Redis release each appeared in; rookery's own
// (IDEM, and what ROLE and CLUSTER MEMBERS answer) say so.

func doc(group, since, complexity, summary string, args ...argDoc) *cmdDoc {
	return &cmdDoc{summary: summary, since: since, group: group, complexity: complexity, args: args}
}

var serverDocs = map[string]*cmdDoc{
	// Keyspace.
	"del":    doc("generic", "1.0.0", "O(N), where N is the number of keys", "Deletes one or more keys", many(keyArg())),
	"unlink": doc("generic", "4.0.0", "O(N), where N is the number of keys", "Deletes one or more keys (as DEL: a filter is freed at once)", many(keyArg())),
	"exists": doc("generic", "1.0.0", "O(N), where N is the number of keys", "Counts how many of the keys exist", many(keyArg())),
	"type":   doc("generic", "1.0.0", "O(1)", "Returns the type of the filter a key holds", keyArg()),
	"scan": doc("generic", "2.8.0", "O(1) per call, O(N) for a whole iteration", "Iterates over the key names",
		integer("cursor"), opt(tok("MATCH", pattern("pattern"))), opt(tok("COUNT", integer("count"))),
		opt(tok("TYPE", str("type")))),
	"keys":     doc("generic", "1.0.0", "O(N), where N is the number of keys", "Returns every key name matching a pattern", pattern("pattern")),
	"dbsize":   doc("server", "1.0.0", "O(1)", "Returns the number of keys"),
	"rename":   doc("generic", "1.0.0", "O(1)", "Renames a key, replacing the destination", keyArg(), keyNamed("newkey")),
	"renamenx": doc("generic", "1.0.0", "O(1)", "Renames a key unless the destination exists", keyArg(), keyNamed("newkey")),
	"flushall": doc("server", "1.0.0", "O(N), where N is the number of keys", "Deletes every key on every node",
		opt(oneOf("flush-type", pure("ASYNC"), pure("SYNC")))),
	"flushdb": doc("server", "1.0.0", "O(N), where N is the number of keys", "Deletes every key of the (one) database",
		opt(oneOf("flush-type", pure("ASYNC"), pure("SYNC")))),

	// Expiry.
	"expire": doc("generic", "1.0.0", "O(1)", "Sets a key's time to live in seconds, counted from the leader's clock",
		keyArg(), integer("seconds"), opt(expireCond())),
	"pexpire": doc("generic", "2.6.0", "O(1)", "Sets a key's time to live in milliseconds, counted from the leader's clock",
		keyArg(), integer("milliseconds"), opt(expireCond())),
	"expireat": doc("generic", "1.2.0", "O(1)", "Sets a key's expiry to a Unix time in seconds",
		keyArg(), integer("unix-time-seconds"), opt(expireCond())),
	"pexpireat": doc("generic", "2.6.0", "O(1)", "Sets a key's expiry to a Unix time in milliseconds",
		keyArg(), integer("unix-time-milliseconds"), opt(expireCond())),
	"ttl":         doc("generic", "1.0.0", "O(1)", "Returns a key's time to live in seconds", keyArg()),
	"pttl":        doc("generic", "2.6.0", "O(1)", "Returns a key's time to live in milliseconds", keyArg()),
	"expiretime":  doc("generic", "7.0.0", "O(1)", "Returns a key's expiry as a Unix time in seconds", keyArg()),
	"pexpiretime": doc("generic", "7.0.0", "O(1)", "Returns a key's expiry as a Unix time in milliseconds", keyArg()),
	"persist":     doc("generic", "2.2.0", "O(1)", "Removes a key's expiry", keyArg()),

	// Transactions.
	"multi":   doc("transactions", "1.2.0", "O(1)", "Starts a transaction: later commands are queued until EXEC"),
	"exec":    doc("transactions", "1.2.0", "Depends on the commands in the transaction", "Applies the queued commands as one log entry, all at once on every replica"),
	"discard": doc("transactions", "2.0.0", "O(N), where N is the number of queued commands", "Discards the queued commands"),
	"watch":   doc("transactions", "2.2.0", "O(1) for every key", "Makes EXEC apply nothing if one of the keys changes first", many(keyArg())),
	"unwatch": doc("transactions", "2.2.0", "O(1)", "Forgets every watched key"),

	// Connection.
	"ping":   doc("connection", "1.0.0", "O(1)", "Returns PONG, or the message", opt(str("message"))),
	"echo":   doc("connection", "1.0.0", "O(1)", "Returns the message", str("message")),
	"select": doc("connection", "1.0.0", "O(1)", "Selects the database: there is only database 0", integer("index")),
	"quit":   doc("connection", "1.0.0", "O(1)", "Closes the connection"),
	"auth": doc("connection", "1.0.0", "O(N), where N is the number of passwords of the user",
		"Authenticates the connection", opt(str("username")), str("password")),
	"hello": doc("connection", "6.0.0", "O(1)", "Chooses the protocol, optionally authenticates and names the connection, and describes the server",
		opt(block("arguments", integer("protover"),
			opt(tok("AUTH", block("auth", str("username"), str("password")))),
			opt(tok("SETNAME", str("clientname")))))),
	"client":         doc("connection", "2.4.0", "Depends on subcommand.", "A container for client connection commands"),
	"client|setname": doc("connection", "2.6.9", "O(1)", "Names the connection", str("connection-name")),
	"client|getname": doc("connection", "2.6.9", "O(1)", "Returns the name of the connection"),
	"client|id":      doc("connection", "5.0.0", "O(1)", "Returns the id of the connection"),
	"client|setinfo": doc("connection", "7.2.0", "O(1)", "Records the client library's name or version",
		oneOf("attr", tok("LIB-NAME", str("libname")), tok("LIB-VER", str("libver")))),
	"client|info": doc("connection", "6.2.0", "O(1)", "Returns information about this connection"),
	"client|list": doc("connection", "2.4.0", "O(N), where N is the number of connections", "Lists the connections",
		opt(tok("TYPE", oneOf("client-type", pure("NORMAL"), pure("MASTER"), pure("REPLICA"), pure("PUBSUB")))),
		opt(many(tok("ID", integer("client-id"))))),
	"client|kill": doc("connection", "2.4.0", "O(N), where N is the number of connections", "Closes connections",
		oneOf("filter", str("old-format"), many(oneOf("new-format",
			tok("ID", integer("client-id")),
			tok("TYPE", oneOf("client-type", pure("NORMAL"), pure("MASTER"), pure("SLAVE"), pure("REPLICA"), pure("PUBSUB"))),
			tok("USER", str("username")), tok("ADDR", str("ip:port")), tok("LADDR", str("ip:port")),
			tok("SKIPME", oneOf("yes/no", pure("YES"), pure("NO"))), tok("MAXAGE", integer("maxage")))))),
	"client|help": doc("connection", "5.0.0", "O(1)", "Returns help on CLIENT's subcommands"),

	// Users.
	"acl":     doc("server", "6.0.0", "Depends on subcommand.", "A container for Access List Control commands"),
	"acl|cat": doc("server", "6.0.0", "O(1) since the categories and commands are a fixed set.", "Lists the ACL categories, or the commands inside a category", opt(str("category"))),
	"acl|deluser": doc("server", "6.0.0", "O(1) amortized time considering the typical user.", "Deletes ACL users, and closes their connections",
		many(str("username"))),
	"acl|dryrun": doc("server", "7.0.0", "O(1).", "Simulates the execution of a command by a user, without executing the command",
		str("username"), str("command"), opt(many(str("arg")))),
	"acl|genpass": doc("server", "6.0.0", "O(1)", "Generates a pseudorandom, secure password that can be used to identify ACL users", opt(integer("bits"))),
	"acl|getuser": doc("server", "6.0.0", "O(N). Where N is the number of password, command and pattern rules that the user has.", "Lists the ACL rules of a user",
		str("username")),
	"acl|help": doc("server", "6.0.0", "O(1)", "Returns helpful text about the different subcommands"),
	"acl|list": doc("server", "6.0.0", "O(N). Where N is the number of configured users.", "Dumps the effective rules in ACL file format"),
	"acl|log": doc("server", "6.0.0", "O(N) with N being the number of entries shown.", "Lists recent security events generated due to ACL rules",
		opt(oneOf("operation", integer("count"), pure("RESET")))),
	"acl|setuser": doc("server", "6.0.0", "O(N). Where N is the number of rules provided.", "Creates and modifies an ACL user and its rules",
		str("username"), opt(many(str("rule")))),
	"acl|users":  doc("server", "6.0.0", "O(N). Where N is the number of configured users.", "Lists all ACL users"),
	"acl|whoami": doc("server", "6.0.0", "O(1)", "Returns the authenticated username of the current connection"),

	// Server.
	"info": doc("server", "1.0.0", "O(1)", "Returns the server's information and statistics",
		opt(many(str("section")))),
	"time":             doc("server", "2.6.0", "O(1)", "Returns the server's time"),
	"config":           doc("server", "2.0.0", "Depends on subcommand.", "A container for server configuration commands"),
	"config|get":       doc("server", "2.0.0", "O(N), where N is the number of parameters", "Returns the parameters matching the patterns", many(pattern("parameter"))),
	"config|set":       doc("server", "2.0.0", "O(N), where N is the number of parameters", "Sets parameters: RedisBloom's bf-* and cf-* settings", many(block("data", str("parameter"), str("value")))),
	"config|resetstat": doc("server", "2.0.0", "O(1)", "Zeroes the statistics INFO reports"),
	"config|help":      doc("server", "5.0.0", "O(1)", "Returns help on CONFIG's subcommands"),
	"command":          doc("server", "2.8.13", "O(N), where N is the number of commands", "Returns details about every command"),
	"command|count":    doc("server", "2.8.13", "O(1)", "Returns the number of commands"),
	"command|info":     doc("server", "2.8.13", "O(N), where N is the number of commands asked for", "Returns details about commands", opt(many(str("command-name")))),
	"command|docs":     doc("server", "7.0.0", "O(N), where N is the number of commands asked for", "Returns documentation about commands", opt(many(str("command-name")))),
	"command|list": doc("server", "7.0.0", "O(N), where N is the number of commands", "Returns the names of the commands",
		opt(tok("FILTERBY", oneOf("filterby", tok("MODULE", str("module-name")), tok("ACLCAT", str("category")),
			tok("PATTERN", pattern("pattern")))))),
	"command|getkeys": doc("server", "2.8.13", "O(N), where N is the number of arguments", "Returns the keys of a full command",
		str("command"), opt(many(str("arg")))),
	"command|help":  doc("server", "5.0.0", "O(1)", "Returns help on COMMAND's subcommands"),
	"module":        doc("server", "4.0.0", "Depends on subcommand.", "A container for module commands"),
	"module|list":   doc("server", "4.0.0", "O(1)", "Lists the modules: RedisBloom's bf"),
	"module|help":   doc("server", "5.0.0", "O(1)", "Returns help on MODULE's subcommands"),
	"module|load":   doc("server", "4.0.0", "O(1)", "Refused: the module is built in", str("path"), opt(many(str("arg")))),
	"module|loadex": doc("server", "7.0.0", "O(1)", "Refused: the module is built in", str("path"), opt(many(str("arg")))),
	"module|unload": doc("server", "4.0.0", "O(1)", "Refused: the module is built in", str("name")),
	"memory":        doc("server", "4.0.0", "Depends on subcommand.", "A container for memory diagnostics commands"),
	"memory|usage": doc("server", "4.0.0", "O(1)", "Returns the bytes a key takes, as counted against the memory limit",
		keyArg(), opt(tok("SAMPLES", integer("count")))),
	"memory|help": doc("server", "4.0.0", "O(1)", "Returns help on MEMORY's subcommands"),

	// Cluster (rookery's answers under Redis's names).
	"readonly":        doc("cluster", "3.0.0", "O(1)", "Lets this connection read the node's local state (stale reads)"),
	"readwrite":       doc("cluster", "3.0.0", "O(1)", "Returns this connection to linearizable reads"),
	"asking":          doc("cluster", "3.0.0", "O(1)", "Accepted for Redis Cluster clients; slots never migrate key by key here"),
	"role":            doc("server", "2.8.12", "O(1)", "Returns the node's Raft role, leader, term and indexes (rookery's form)"),
	"cluster":         doc("cluster", "3.0.0", "Depends on subcommand.", "A container for cluster commands"),
	"cluster|nodes":   doc("cluster", "3.0.0", "O(N), where N is the number of nodes", "Returns the cluster's nodes in Redis Cluster's format"),
	"cluster|members": doc("cluster", "0.3.0", "O(N), where N is the number of nodes", "Lists the cluster's members, one per line (rookery's own)"),
	"cluster|slots":   doc("cluster", "3.0.0", "O(N), where N is the number of shards", "Returns each slot range with its master and replicas"),
	"cluster|shards":  doc("cluster", "7.0.0", "O(N), where N is the number of shards", "Returns each shard's slot ranges and nodes"),
	"cluster|keyslot": doc("cluster", "3.0.0", "O(N), where N is the number of bytes in the key", "Returns the hash slot of a key", str("key")),
	"cluster|info":    doc("cluster", "3.0.0", "O(1)", "Returns the state of the cluster"),
	"cluster|myid":    doc("cluster", "3.0.0", "O(1)", "Returns this node's id"),
	"cluster|help":    doc("cluster", "5.0.0", "O(1)", "Returns help on CLUSTER's subcommands"),
	"cluster|countkeysinslot": doc("cluster", "3.0.0", "O(N) where N is the number of keys this node holds",
		"Returns the number of keys in a hash slot", integer("slot")),
	"cluster|getkeysinslot": doc("cluster", "3.0.0", "O(N) where N is the number of keys this node holds",
		"Returns the key names in a hash slot", integer("slot"), integer("count")),
	"idem": doc("generic", "0.1.0", "Depends on the command", "Runs a write at most once for a client id and sequence number (rookery's own)",
		integer("client-id"), integer("seq"), str("command"), opt(many(str("arg")))),
}

// expireCond is the condition EXPIRE and its kin take (Redis 7).
func expireCond() argDoc {
	return oneOf("condition", pure("NX"), pure("XX"), pure("GT"), pure("LT"))
}
