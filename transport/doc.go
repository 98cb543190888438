// Package transport is Rookery's network faces: a RESP server that speaks
// RedisBloom's BF.* and CF.* commands (plus CBF.* for counting filters, the usual
// connection and keyspace commands, and a few cluster commands), and an HTTP server
// for health, status and Prometheus metrics.
//
// transport parses and validates every request (arity, types, ranges, limits) into
// an fsm.Command, hands writes to a Backend (a cluster.Node in production), reads
// through the Backend's state machine after a read barrier, and renders results and
// errors exactly as RedisBloom does, so redis-cli, go-redis and other Redis clients
// work unchanged. It never touches a filter; bad input is answered here and never
// reaches the log.
//
// # Pipelining
//
// Each connection has one goroutine. It reads every request the client has already
// sent, submits consecutive writes at once and in order (the cluster batches them
// into one log entry and one fsync), makes a read wait for the connection's earlier
// writes, shares one read barrier among a run of consecutive reads, writes the
// replies strictly in request order and flushes once per batch.
//
// # Protocol versions
//
// Connections speak RESP2 until HELLO 3; then yes/no replies of the BF, CF and CBF
// families become booleans, INFO replies become maps, and nil becomes RESP3's null,
// following RedisBloom's rebloom.c reply by reply (CF.INSERTNX and CF.COUNT stay
// integers).
//
// # Errors a client can see
//
// Every failed write is one of two things: definitely not applied (a domain error
// such as "ERR item exists", CLUSTERDOWN, TRYAGAIN, SHUTDOWN, OOM) or indeterminate
// (INDETERMINATE ...: the write may or may not have been applied). An indeterminate
// outcome is never reported as a plain failure; only a client that sent the write
// with a session (IDEM client seq ...) may retry it blindly.
//
// # Redis tools
//
// The commands redis-cli, RedisInsight, redis_exporter and go-redis call are
// answered as a Redis 7.2 server with RedisBloom loaded would answer them:
// MODULE LIST, INFO (its sections and fields, the counters kept where commands
// run), CLIENT LIST/INFO/KILL, MEMORY USAGE, CONFIG GET/SET (RedisBloom's
// settings, this node's own), COMMAND DOCS (argument hints) and the HELP of
// each container command. DESIGN.md says what each maps to.
//
// # Request reader
//
// Requests are read by a small RESP reader of our own rather than redcon.Reader,
// because limits must hold while parsing: redcon's reader trusts the announced
// argument count (a "*9223372036854775807" header spins it for ever) and an
// overflowing bulk length can make it index out of range. Ours refuses headers over
// the limits, resumes parsing where it stopped when more bytes arrive, and never
// buffers more than the configured request size. Replies go through redcon.Writer.
package transport
