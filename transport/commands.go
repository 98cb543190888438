package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/acl"
)

// opKind says how a parsed request is executed.
type opKind uint8

const (
	// opLocal is answered from the connection's or the node's own state, at once.
	opLocal opKind = iota
	// opRead is answered from the state machine after the connection's earlier
	// writes and a read barrier.
	opRead
	// opWrite is submitted to the log; its reply comes from the applied result.
	opWrite
)

// op is one parsed, validated request.
type op struct {
	name string   // lower-case command name ("client|list" for a subcommand), for metrics
	def  *command // the table entry (its counters, CLIENT LIST cmd=); nil for an unknown command
	// rejected marks an error found before the command ran (arity,
	// authentication), which Redis counts as rejected_calls, not failed_calls.
	rejected bool
	kind     opKind
	cmd      *fsm.Command                  // opWrite
	render   func(w *reply, r *fsm.Result) // opWrite
	read     func(q queries, w *reply)     // opRead
	// tx gives an opRead as a transaction carries it: the read as a log
	// command (fsm.OpTest, OpCount) and its reply; nil for a read no
	// transaction can carry (commands_tx.go). Built only when queued, so
	// that a read outside MULTI pays nothing for it.
	tx    func() (*fsm.Command, func(w *reply, r *fsm.Result))
	local func(c *session, w *reply) // opLocal
}

// session is the state of one client connection.
type session struct {
	id      uint64
	proto   int
	authed  bool
	name    string
	libName string
	libVer  string
	level   cluster.ReadLevel
	quit    bool // QUIT: reply, flush, close
	// authFailures counts failed AUTHs; the connection closes at maxAuthFailures.
	authFailures int
	// account is the user the connection runs as (acl.go): the default user
	// until AUTH names another; nil before authentication, and on a
	// connection forwarded from another node, which checked the user there.
	account *acl.Account
	conn    *conn // the connection, for CLIENT LIST, INFO and KILL; nil in parse-only tests
	// clusterClient: the connection asked for the slot map or sent READONLY
	// (redirect.go): it gets MOVED rather than a forward, and per-node counts.
	clusterClient bool

	// mu guards what other connections read for CLIENT LIST (name, libName,
	// libVer, proto, authed, level): the connection's own goroutine writes
	// them under it and reads them without it.
	mu sync.Mutex
}

// command is one entry of the dispatch table.
type command struct {
	name  string // lower case
	arity int    // as Redis counts it: n exactly, -n at least n (the name included)
	flags []string
	// firstKey, lastKey and step locate the keys (COMMAND); lastKey -1 means all.
	firstKey, lastKey, step int
	parse                   func(s *Server, args [][]byte) (op, error)
	// chunkArg is the index of the argument that carries a SCANDUMP chunk
	// rather than an item (LOADCHUNK's data), 0 if none: the request reader
	// lets it be as large as a chunk.
	chunkArg int
	// subs are a container's subcommands (CLIENT LIST...), sorted by name;
	// each is named "container|sub" once the table is built, and parsed by its
	// own parse. A container's own parse serves it called alone (COMMAND);
	// without one, that is an arity error.
	subs []*command
	// stat is the command's INFO commandstats counters.
	stat cmdStat
	// aclID is the command's id in the registry of the server's users.
	aclID int
}

// sortedSubs lists a container's subcommands by name.
func (c *command) sortedSubs() []*command { return c.subs }

// sub finds a container's subcommand by its name, ignoring case.
func (c *command) sub(name []byte) *command {
	for _, sc := range c.subs {
		short := sc.name[len(c.name)+1:]
		if len(short) == len(name) && bytes.EqualFold([]byte(short), name) {
			return sc
		}
	}
	return nil
}

// maxChunkArgBytes bounds a LOADCHUNK's data: Redis's proto-max-bulk-len,
// 512 MB. SCANDUMP hands out chunks of at most 16 MiB (RedisBloom's
// filters.RBMaxChunkBytes; ours are at most filters.DumpChunkBytes and a
// checksum), but RedisBloom's LOADCHUNK takes whatever Redis reads (its own
// tests load 36 MB). A chunk is read within --max-request-buffer, and logged
// in pieces (splitChunk).
const maxChunkArgBytes = 512 << 20

// loadPieceBytes is the most chunk data one LOADCHUNK puts in one log entry. A
// chunk of one of RedisBloom's dumps may be 16 MiB; a log of entries that big
// would make a lagging follower's catch-up messages (up to 256 entries each)
// huge. RedisBloom's chunks are plain bytes written where their iterator points,
// so a larger one goes into the log as pieces, in order (splitChunk).
const loadPieceBytes = 1 << 20

// splitChunk returns the commands that carry cmd into the log: cmd itself, or,
// for a LOADCHUNK of RedisBloom-format data larger than any chunk of ours, one
// LOADCHUNK per loadPieceBytes piece, each with the iterator just past its
// bytes. Our own chunks (checksummed whole), headers, and commands under IDEM
// (one sequence number, one command) go as they are.
func splitChunk(cmd *fsm.Command) []*fsm.Command {
	// Our own chunks are at most filters.DumpChunkBytes and a checksum: only
	// RedisBloom's are larger.
	if cmd.Op != fsm.OpLoadChunk || len(cmd.Data) <= filters.DumpChunkBytes+4 || cmd.Iter <= 1 ||
		cmd.Session != (fsm.Session{}) || filters.IsDumpHeader(cmd.Data) {
		return []*fsm.Command{cmd}
	}
	n := int64(len(cmd.Data))
	if cmd.Iter < n {
		return []*fsm.Command{cmd} // bad data as it is: the state machine says so
	}
	var out []*fsm.Command
	for a := int64(0); a < n; a += loadPieceBytes {
		b := min(a+loadPieceBytes, n)
		pc := *cmd
		pc.Iter, pc.Data = cmd.Iter-n+b, cmd.Data[a:b]
		out = append(out, &pc)
	}
	return out
}

// bigChunk reports whether cmd is a LOADCHUNK of more than any chunk of our
// own format holds: only a filter of RedisBloom's layouts takes one, and the
// node checks it against the filter before logging it (conn.checkChunk).
func bigChunk(cmd *fsm.Command) bool {
	return cmd.Op == fsm.OpLoadChunk && len(cmd.Data) > fsm.MaxOwnChunkBytes
}

// maxEntryBytes bounds what one command puts in one log entry. An entry is
// written, replicated and applied whole, while the leader's other work (its
// heartbeats among it) waits behind it; RedisBloom's own dump chunks are at
// most 16 MiB. Chunks larger than loadPieceBytes are split (splitChunk); a
// transaction is bounded the same (maxTxBytes); any other command larger is
// refused before it is logged.
const maxEntryBytes = 16 << 20

// entryBound refuses commands that would make a log entry larger than
// maxEntryBytes.
func entryBound(cmds []*fsm.Command) error {
	for _, c := range cmds {
		if n := c.ApproxBytes(); n > maxEntryBytes {
			return redisError(fmt.Sprintf("ERR command too large for one log entry: %d bytes, at most %d; send it as smaller commands", n, maxEntryBytes))
		}
	}
	return nil
}

// idemPrefix is the arguments IDEM puts before the command it wraps
// (IDEM client_id seq command ...).
const idemPrefix = 3

// commandTable builds the dispatch table; it is read-only afterwards, but for
// each command's counters. Every server builds its own, so its counters are
// its own.
func commandTable() map[string]*command {
	t := map[string]*command{}
	for _, group := range [][]*command{
		bloomCommands(), cuckooCommands(), countingCommands(),
		keyspaceCommands(), replicatedKeyspaceCommands(), expireCommands(), connCommands(), clusterCommands(),
		clientCommands(), serverCommands(), txCommands(), aclCommands(),
	} {
		for _, c := range group {
			for _, sc := range c.subs {
				sc.name = c.name + "|" + sc.name
			}
			sort.Slice(c.subs, func(i, j int) bool { return c.subs[i].name < c.subs[j].name })
			t[c.name] = c
		}
	}
	return t
}

// argBytes is the request reader's limit for an argument longer than an item
// (readLimits.argBytes): the chunk argument of a command, directly or wrapped in
// IDEM, may hold a dump chunk; anything else is an item, a key or an option.
func (s *Server) argBytes(req argView, i int) int {
	if req.len() == 0 {
		return s.cfg.MaxItemBytes
	}
	cmd := s.lookup(req.arg(0))
	if cmd != nil && cmd.name == "idem" && i > idemPrefix && req.len() > idemPrefix {
		cmd, i = s.lookup(req.arg(idemPrefix)), i-idemPrefix
	}
	if cmd != nil && cmd.chunkArg != 0 && cmd.chunkArg == i {
		return max(s.cfg.MaxItemBytes, maxChunkArgBytes)
	}
	return s.cfg.MaxItemBytes
}

// chunkCheck is the request reader's check of a LOADCHUNK chunk of n bytes
// that argBytes let be longer than an item (readLimits.chunkCheck): when this
// node holds the key's shard and its filter could not take a chunk that big
// anywhere (fsm.ChunkLimit), confirmed at a linearizable read, the request is
// refused from its header and read past, never held. Anything it cannot judge
// here (a key it does not hold, no leader to confirm with) is read and checked
// again before it is proposed (conn.checkChunk). A chunk of this connection's
// own pipeline, sent before the requests ahead of it ran, is judged by the
// state before them: a DEL and a new, larger dump of the same key sent in one
// pipeline may meet this refusal, and succeed once sent after the DEL's reply.
func (s *Server) chunkCheck(req argView, i int, n int64) error {
	if n <= fsm.MaxOwnChunkBytes {
		return nil
	}
	base := 0
	cmd := s.lookup(req.arg(0))
	if cmd != nil && cmd.name == "idem" && req.len() > idemPrefix {
		base = idemPrefix
		cmd = s.lookup(req.arg(idemPrefix))
	}
	if cmd == nil || i != base+cmd.chunkArg || req.len() < base+3 {
		return nil
	}
	fam := fsm.FamilyBF
	if cmd.name == "cf.loadchunk" {
		fam = fsm.FamilyCF
	}
	key := string(req.arg(base + 1))
	iter, ok := parseInt64(req.arg(base + 2))
	if !ok {
		return nil // answered by the command's own parser
	}
	rep, err := s.be.Replica(s.be.ShardOf(key))
	if err != nil {
		return nil
	}
	var size *fsm.ChunkSizeError
	if !errors.As(rep.FSM().CheckChunkSize(fam, key, iter, uint64(n)), &size) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), chunkCheckTimeout)
	defer cancel()
	if rep.ReadBarrier(ctx, cluster.ReadLinearizable) != nil {
		return nil
	}
	err = rep.FSM().CheckChunkSize(fam, key, iter, uint64(n))
	if !errors.As(err, &size) {
		return nil
	}
	text := bfChunkText(err)
	if fam == fsm.FamilyCF {
		text = cfChunkText(err, iter == 1)
	}
	if text == "" {
		return nil // checked again, and answered, before it is logged
	}
	return redisError(text)
}

// chunkCheckTimeout bounds the read that confirms a chunk's refusal.
const chunkCheckTimeout = 2 * time.Second

// chunkSizes is what a chunk refused for its size adds to RedisBloom's words
// when it was aimed at a filter of our own format being loaded from its dump:
// its size and the most the filter takes; "" for any other refusal, which
// RedisBloom's clients and its own tests expect in its words alone.
func chunkSizes(err error) string {
	var size *fsm.ChunkSizeError
	if errors.As(err, &size) && size.Named {
		return " (" + size.Sizes() + ")"
	}
	return ""
}

// lookup finds a command by name, ignoring case, without allocating.
func (s *Server) lookup(name []byte) *command {
	var low [32]byte
	if len(name) > len(low) {
		return nil
	}
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		low[i] = c
	}
	return s.cmds[string(low[:len(name)])]
}

// sortedCommands lists the table by name (COMMAND).
func (s *Server) sortedCommands() []*command { return s.cmdList }

// listCommands lists a table by name.
func listCommands(t map[string]*command) []*command {
	out := make([]*command, 0, len(t))
	for _, c := range t {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// resolve finds the command args call for, its subcommand for a container
// (CLIENT LIST), and checks the arity, with Redis's errors. On an arity error
// it returns the command too, whose call is then counted as rejected.
func (s *Server) resolve(args [][]byte) (*command, error) {
	cmd := s.lookup(args[0])
	if cmd == nil {
		return nil, unknownCommand(args)
	}
	if cmd.subs == nil || len(args) < 2 {
		if !arityOK(cmd.arity, len(args)) {
			return cmd, arityError(args[0])
		}
		return cmd, nil
	}
	sc := cmd.sub(args[1])
	if sc == nil {
		return nil, redisError(fmt.Sprintf("ERR unknown subcommand '%s'. Try %s HELP.",
			clip(args[1], 128), bytes.ToUpper(args[0])))
	}
	if !arityOK(sc.arity, len(args)) {
		return sc, redisError("ERR wrong number of arguments for '" + sc.name + "' command")
	}
	return sc, nil
}

// clip cuts b to at most n bytes (Redis's "%.128s").
func clip(b []byte, n int) []byte { return b[:min(len(b), n)] }

// parse checks and parses one request: authentication first (a stranger
// learns nothing of which commands exist: refuseStranger), then, in Redis's
// order, unknown command, arity, and the command's own arguments.
func (s *Server) parse(c *session, args [][]byte) (op, error) {
	if o, err := s.refuseStranger(c, args); err != nil {
		return o, err
	}
	cmd, err := s.resolve(args)
	if cmd == nil {
		return op{name: "unknown"}, err
	}
	if err != nil {
		return op{name: cmd.name, def: cmd, rejected: true}, err
	}
	if err := s.checkACL(c, cmd, args); err != nil {
		return op{name: cmd.name, def: cmd, rejected: true}, err
	}
	o, err := cmd.parse(s, args)
	if o.name == "" { // IDEM names the command it wraps
		o.name, o.def = cmd.name, cmd
	}
	if err == nil && o.cmd != nil && s.cfg.FilterLayout == LayoutRedisBloom {
		o.cmd.Spec = redisBloomLayout(o.cmd.Spec)
	}
	return o, err
}

// Filter layouts (Config.FilterLayout): which layout BF.* and CF.* create.
const (
	// LayoutRookery is ours: murmur3, a blocked Bloom filter, cuckoo bucket
	// counts of any size (filters/doc.go). The default.
	LayoutRookery = "rookery"
	// LayoutRedisBloom is RedisBloom's own, bit for bit, so BF.INFO, CF.INFO,
	// BF.DEBUG, CF.DEBUG and dumps match a RedisBloom's byte for byte.
	LayoutRedisBloom = "redisbloom"
)

// redisBloomLayout is the Spec of RedisBloom's layout for what spec describes
// in ours. Counting filters, which RedisBloom lacks, stay as they are.
func redisBloomLayout(spec fsm.Spec) fsm.Spec {
	switch spec.Kind {
	case filters.KindScalable:
		spec.Kind = filters.KindRBChain
	case filters.KindCuckoo:
		spec.Kind, spec.FingerprintBits = filters.KindRBCuckoo, 0
	}
	return spec
}

func arityOK(arity, n int) bool {
	if arity >= 0 {
		return n == arity
	}
	return n >= -arity
}

// unknownCommand formats Redis's error, quoting at most about 128 bytes of the
// arguments.
func unknownCommand(args [][]byte) error {
	var b []byte
	for _, a := range args[1:] {
		if len(b) >= 128 {
			break
		}
		prec := 128 - len(b) // Redis: "'%.*s' " with 128 minus what is written
		b = append(b, '\'')
		b = append(b, a[:min(len(a), prec)]...)
		b = append(b, '\'', ' ')
	}
	name := args[0][:min(len(args[0]), 128)]
	return redisError(fmt.Sprintf("ERR unknown command '%s', with args beginning with: %s", name, b))
}

// keyword reports whether arg equals kw, ignoring case (kw is upper case).
func keyword(arg []byte, kw string) bool {
	return len(arg) == len(kw) && bytes.EqualFold(arg, []byte(kw))
}

// argIndex finds the first argument at or after from equal to kw, ignoring case,
// as RedisBloom's RMUtil_ArgIndex does (but never among the positional
// arguments, so a key named like a keyword stays a key); -1 if none.
func argIndex(args [][]byte, from int, kw string) int {
	for i := from; i < len(args); i++ {
		if keyword(args[i], kw) {
			return i
		}
	}
	return -1
}

// parseInt64 parses a decimal integer strictly, as Redis's string2ll: no
// spaces, no '+', no leading zeros, no overflow.
func parseInt64(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || b[0] < '1' || b[0] > '9' {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if v > (math.MaxUint64-9)/10 {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return int64(-v), true
	}
	if v > math.MaxInt64 {
		return 0, false
	}
	return int64(v), true
}

// parseUint64 parses an unsigned decimal integer strictly (IDEM, SCAN cursor).
func parseUint64(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 || (len(b) > 1 && b[0] == '0') {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(string(b), 10, 64)
	return v, err == nil
}

// parseFloat parses a number as Redis's string2d: no surrounding spaces, no NaN,
// nothing out of float64's range.
func parseFloat(b []byte) (float64, bool) {
	if len(b) == 0 || isSpace(b[0]) || isSpace(b[len(b)-1]) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

// writeOp builds a write.
func writeOp(cmd *fsm.Command, render func(*reply, *fsm.Result)) op {
	return op{kind: opWrite, cmd: cmd, render: render}
}

// readOp builds a read.
func readOp(read func(q queries, w *reply)) op { return op{kind: opRead, read: read} }

// localOp builds a request answered without the state machine.
func localOp(local func(c *session, w *reply)) op { return op{kind: opLocal, local: local} }

// flags used in the table.
var (
	flagsWrite    = []string{"write", "denyoom"}
	flagsRead     = []string{"readonly", "fast"}
	flagsConn     = []string{"fast", "loading", "stale"}
	flagsNoAuth   = []string{"fast", "noauth", "loading", "stale"}
	flagsAdminish = []string{"loading", "stale"}
)
