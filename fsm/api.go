package fsm

import (
	"errors"
	"fmt"

	"github.com/rookerydb/rookery/filters"
)

// This file is the contract between fsm and its callers (cluster proposes Commands
// and reads through the FSM's query methods; transport builds Commands from RESP and
// renders Results). Everything here is plain data.

// Type is the first byte of a log entry. Types are only ever appended, never
// renumbered or reused. A type with IgnoreUnknownFlag set may be skipped by a node
// that does not know it; any other unknown type is a bug and panics.
type Type uint8

// Log entry types.
const (
	TypeCommand Type = 1 // one Command
	TypeBatch   Type = 2 // several Commands, applied in order, one Result each
	TypeNoop    Type = 3 // nothing; written by a new leader (barrier) or tests

	// IgnoreUnknownFlag marks types that an older node may skip.
	IgnoreUnknownFlag Type = 0x80
)

// CodecVersion is the second byte of every log entry: the version of the entry
// codec this build writes. A decoder reads every version up to it and refuses
// the others.
//
//	1  [Type][1][payload]
//	2  [Type][2][payload][CRC-32C of type, version and payload, little endian]
//	3  as 2, each command ending with its fields (codec.go)
//	4  as 3, with ops RENAME, FLUSH and COMPACT
//	5  as 4, with ops EXPIRE, PERSIST and EXPIRE_TICK, the expire field and
//	   the max filters field (a cuckoo add's cf-max-expansions)
//	6  as 5, with the window field: a spec of a windowed filter
//	7  as 6, with the memory limit field (the cluster's smallest
//	   --max-memory, which creating and growing filters may not pass)
//	8  as 7, with op SET_MAP (the cluster map, docs/SHARDING.md)
//	9  SET_MAP of map codec 2
//	10 as 9, with ops EXEC, TEST and COUNT and the watch field (transactions)
//	11 as 10, with ops ACL_SETUSER, ACL_DELUSER, ACL_LOAD and ACL_RESTORE
//	   (users)
//
// The version is also the "log format" a node advertises: the highest it can
// apply. A leader writes the highest version every member can read (cluster
// negotiates it over gossip), so a rolling upgrade never hands an old node an
// entry it cannot apply.
const CodecVersion = CodecV11

// Entry codec versions.
const (
	CodecV1  = 1  // no checksum; still read, for logs written by older builds
	CodecV2  = 2  // a CRC-32C closes every entry
	CodecV3  = 3  // commands carry fields: optional, or ones a node must understand
	CodecV4  = 4  // ops RENAME, FLUSH and COMPACT
	CodecV5  = 5  // expiry: ops EXPIRE, PERSIST and EXPIRE_TICK; field max filters
	CodecV6  = 6  // windowed filters: field window
	CodecV7  = 7  // field memory limit
	CodecV8  = 8  // shards: op SET_MAP
	CodecV9  = 9  // SET_MAP of map codec 2: replicas a recovery fenced off
	CodecV10 = 10 // transactions: ops EXEC, TEST and COUNT, field watch
	CodecV11 = 11 // users: ops ACL_SETUSER, ACL_DELUSER, ACL_LOAD and ACL_RESTORE
)

// Op is what a Command does.
type Op uint8

// Mutations. Values are never renumbered.
const (
	OpReserve   Op = 1 // create Key from Spec; ErrExists if Key exists
	OpAdd       Op = 2 // add Items (create from Spec first unless NoCreate)
	OpDelete    Op = 3 // delete Items[0] (CF.DEL, CBF.DEL)
	OpDelKeys   Op = 4 // DEL Keys...: Ints[0] = how many existed
	OpLoadChunk Op = 5 // LOADCHUNK Key Iter Data (Family BF or CF)
	// Log format 4 on (MinCodec).
	OpRename  Op = 6 // RENAME Key to Keys[0], replacing it unless NX: Ints[0] = 1 renamed, 0 not (NX, taken)
	OpFlush   Op = 7 // FLUSHALL: delete every filter; Ints[0] = how many there were
	OpCompact Op = 8 // CF.COMPACT Key: move fingerprints into older sub-filters, drop emptied ones
	// Log format 5 on (expire.go).
	OpExpire     Op = 9  // EXPIRE family: give Key a deadline (Expire, ExpireAt, ExpireIf): Ints[0] = 1 set, 0 not
	OpPersist    Op = 10 // PERSIST Key: drop its deadline: Ints[0] = 1 dropped, 0 none or no key
	OpExpireTick Op = 11 // nothing but its Time: the leader's clock passed a deadline
	// Log format 8 on (clustermap.go).
	OpSetMap Op = 12 // the cluster map Data (EncodeMap) replaces the one held, if its version is one more
	// Log format 10 on (tx.go).
	OpExec  Op = 13 // MULTI/EXEC: Subs applied in order, one Result each in Result.Subs, unless a watched key of Keys changed (ErrWatched)
	OpTest  Op = 14 // inside EXEC only: EXISTS/MEXISTS Key Items, Ints[i] = 1 maybe present, 0 not
	OpCount Op = 15 // inside EXEC only: COUNT Key Items[0], Ints[0] = the count
	// Log format 11 on (acl.go): users, in the group that holds them.
	OpACLSetUser Op = 16 // ACL SETUSER Key Items (rules, passwords as digests); ErrACLRule, Ints[0] = the rule's index
	OpACLDelUser Op = 17 // ACL DELUSER Keys: Ints[0] = how many existed
	OpACLLoad    Op = 18 // Data (acl.Encode) becomes the users unless users were ever set: Ints[0] = 1 loaded, 0 not
	OpACLRestore Op = 19 // Data (a users section, FSM.UsersSection; empty: none) replaces the users: Ints[0] = how many
)

// MinCodec is the lowest log format that can carry c: a leader proposes c only
// once every member reads it.
func MinCodec(c *Command) byte {
	v := opCodec(c.Op)
	if c.MaxFilters != 0 {
		v = max(v, CodecV5)
	}
	if c.Spec.Window != 0 || c.Spec.Last != 0 || IsWindowed(c.Spec.Kind) {
		v = max(v, CodecV6)
	}
	if c.MemLimit != 0 {
		v = max(v, CodecV7)
	}
	if c.Op == OpSetMap && mapNeedsV9(c.Data) {
		v = max(v, CodecV9)
	}
	for _, sub := range c.Subs {
		v = max(v, MinCodec(sub))
	}
	return v
}

// opCodec is the log format that introduced op.
func opCodec(op Op) byte {
	switch {
	case op >= OpACLSetUser:
		return CodecV11
	case op >= OpExec:
		return CodecV10
	case op >= OpSetMap:
		return CodecV8
	case op >= OpExpire:
		return CodecV5
	case op >= OpRename:
		return CodecV4
	}
	return CodecV1
}

// ExpireCond is the set of conditions an OpExpire applies under, as Redis 7's
// EXPIRE options: NX alone, or XX with or without one of GT and LT.
type ExpireCond uint8

// Expire conditions.
const (
	ExpireNX ExpireCond = 1 << 0 // only if the key has no deadline
	ExpireXX ExpireCond = 1 << 1 // only if it has one
	ExpireGT ExpireCond = 1 << 2 // only if the new deadline is later (none counts as infinite)
	ExpireLT ExpireCond = 1 << 3 // only if it is earlier (none counts as infinite)

	expireCondKnown = 1<<4 - 1
)

// Family is the command family a Command or query belongs to; it decides which
// kinds of filter the key may hold (others answer ErrWrongType) and which kind an
// auto-create makes.
type Family uint8

// Families.
const (
	FamilyNone Family = 0 // keyspace commands
	FamilyBF   Family = 1 // filters.KindBloom, filters.KindScalable, filters.KindWindowBloom
	FamilyCF   Family = 2 // filters.KindCuckoo, filters.KindWindowCuckoo
	FamilyCBF  Family = 3 // filters.KindCounting, filters.KindDLeft
)

// Spec describes a filter to create. Only the fields of Kind matter; the others are
// zero.
type Spec struct {
	Kind            filters.Kind
	Capacity        uint64
	ErrorRate       float64 // BF, CBF
	Expansion       uint32  // BF (0 with NonScaling), CF (0: never grows)
	NonScaling      bool    // BF
	BucketSize      uint16  // CF, 1..255
	MaxIterations   uint16  // CF, 1..65535
	FingerprintBits uint8   // CF: 8, 12 or 16
	CounterBits     uint8   // CBF: 4 or 8
	// Window is a windowed filter's time window in nanoseconds, and Last its
	// count window (the most recent Last insertions); exactly one is set for
	// the windowed kinds, neither for the others. Log format 6 on (MinCodec).
	Window int64
	Last   uint64
}

// Session identifies a request for exactly-once application (Raft dissertation,
// 6.3). The zero Session means "no de-duplication".
type Session struct {
	ClientID uint64
	Seq      uint64
}

// Command is one mutation as it travels through the log.
type Command struct {
	Op       Op
	Family   Family
	Key      string
	Keys     []string // OpDelKeys
	Items    [][]byte // OpAdd, OpDelete
	Spec     Spec     // OpReserve, and OpAdd's auto-create
	NoCreate bool     // OpAdd: ErrNotFound when Key is missing
	NX       bool     // OpAdd, CF: add only items not (maybe) present: ADDNX/INSERTNX
	Multi    bool     // OpAdd: an array reply (MADD/INSERT), per-item outcomes instead of one error
	Iter     int64    // OpLoadChunk
	Data     []byte   // OpLoadChunk; OpSetMap: the map (EncodeMap)
	// Expire is OpExpire's deadline in milliseconds: a Unix time when
	// ExpireAt, else a time to live counted from the log's clock (the
	// largest Time applied, this command's included) when it applies.
	Expire   int64
	ExpireAt bool
	ExpireIf ExpireCond // OpExpire: the conditions (zero: none)
	// MaxFilters, on an OpAdd of the CF family, refuses the add
	// (ErrMaxExpansions) when the filter already has this many sub-filters:
	// the proposing node's cf-max-expansions, carried in the command so that
	// every replica refuses the same adds. 0 leaves the filters' own limit
	// (filters.MaxCuckooFilters); log format 5 on (MinCodec).
	MaxFilters uint32
	// MemLimit is the most bytes all filters of the group together may take
	// once the command applies: the leader's view of the least room any
	// replica's node leaves the group under its --max-memory (its limit less
	// what its other groups hold), carried in the command so that every
	// replica refuses the same creation or growth (ErrOutOfMemory) at the
	// same index. 0 is no limit; log format 6 on (MinCodec).
	MemLimit uint64
	// Subs are an OpExec's commands (MULTI ... EXEC), applied in order as
	// one log entry; Keys are then the keys the client WATCHed and Watch,
	// for each, the applied index it saw the key at: if any changed since,
	// nothing applies (ErrWatched). Log format 10 on (tx.go).
	Subs    []*Command
	Watch   []uint64
	Session Session
	// Time is the leader's clock (Unix nanoseconds) when it proposed the command.
	// Sessions and keys expire by it (the largest seen is the log's clock),
	// never by a replica's own clock.
	Time int64
}

// Result is the outcome of one Command, identical on every replica.
type Result struct {
	// Err is a domain outcome (one of the errors below) or nil.
	Err error
	// Ints holds one outcome per item: 1 added / deleted, 0 not (maybe present, not
	// found), -1 no room (CF.INSERT). For OpDelKeys, Ints[0] is the count.
	Ints []int64
	// Stopped marks an Err that ended a multi-item command part way: the items in
	// Ints were applied, the rest were not tried, and the reply is the array of
	// Ints followed by Err (BF.MADD on a full non-scaling filter).
	Stopped bool
	// Subs are an OpExec's results, one per command of Command.Subs.
	Subs []*Result
}

// Domain outcomes. transport renders each with RedisBloom's exact string.
var (
	ErrNotFound       = errors.New("not found")                  // key required but absent
	ErrExists         = errors.New("item exists")                // create on an existing key
	ErrWrongType      = errors.New("wrong type")                 // key holds another family
	ErrFull           = errors.New("filter is full")             // CF.ADD: no room
	ErrMaxExpansions  = errors.New("maximum expansions reached") // CF: 32 sub-filters
	ErrNonScalingFull = errors.New("non scaling filter is full") // BF NONSCALING
	ErrBadPosition    = errors.New("invalid position")           // LOADCHUNK iterator
	ErrBadData        = errors.New("received bad data")          // LOADCHUNK data
	// ErrChunkOutside answers a LOADCHUNK whose iterator places the chunk past
	// the end of the filter; ErrChunkTooBig one that starts inside it and runs
	// past the end; ErrBadHeader a cuckoo header chunk that is no header at all
	// (RedisBloom tells these apart).
	ErrChunkOutside = errors.New("invalid offset - no link found")
	ErrChunkTooBig  = errors.New("invalid chunk - too big for the filter")
	ErrBadHeader    = errors.New("invalid header")
	ErrBadSpec      = errors.New("bad filter parameters") // Spec refused by filters
	ErrBadExpire    = errors.New("invalid expire time")   // OpExpire: the deadline overflows
	// ErrCannotGrow answers a Bloom add that needed a new sub-filter the
	// filter could not make (its limits, or an overflow).
	ErrCannotGrow = errors.New("problem inserting into filter")
	// ErrOutOfMemory answers a command that would create or grow a filter
	// past its MemLimit: it changes nothing (a multi-item add keeps the items
	// before it, and a cuckoo insert of several items answers -1 for each
	// that needed the growth, as RedisBloom does when it cannot allocate).
	ErrOutOfMemory = errors.New("the filters would take more memory than --max-memory leaves this shard on one of its replicas' nodes")
	// ErrStaleMap answers an OpSetMap whose version is not one more than the
	// map held: another controller changed it first.
	ErrStaleMap = errors.New("the cluster map changed meanwhile")
	// ErrMapGroup answers a filter command that reached a sharded cluster's
	// map group (group 0 once it holds a map) from a node that had not yet
	// learned the map: the map group keeps the map alone, so nothing is
	// applied and the writer retries on the key's shard.
	ErrMapGroup = errors.New("this group holds the cluster map, not filters")
	// ErrHoldsFilters answers the first OpSetMap of a group that holds
	// filters: a cluster is sharded when it bootstraps, never over the
	// filters of a cluster of one group, which would be hidden.
	ErrHoldsFilters = errors.New("the cluster holds filters in one group: shards are chosen when a cluster bootstraps")
	// ErrSessionExpired answers a request whose session sequence number is older
	// than the results the session table still keeps: it may have been applied,
	// and it is not applied again.
	ErrSessionExpired = errors.New("session sequence too old to de-duplicate")
	// ErrWatched answers an OpExec one of whose watched keys changed after
	// the client watched it: nothing applied (EXEC's null reply).
	ErrWatched = errors.New("a watched key changed")
)

// Info describes one filter (BF.INFO, CF.INFO, CBF.INFO, /v1/filters).
type Info struct {
	Key      string
	Kind     filters.Kind
	Capacity uint64 // BF: sum over sub-filters; CF: buckets*bucket size over sub-filters
	Size     uint64 // bytes (MemoryBytes)
	// ReportedSize is the Size BF.INFO and CF.INFO report: RedisBloom's count,
	// the filter's arrays and a fixed size per filter and per sub-filter (its
	// structs in RedisBloom), so the same filter reports the same Size on both.
	// It leaves out what the node spends besides (page tables, the key itself),
	// which MEMORY USAGE and Size include.
	ReportedSize uint64
	Filters      uint64  // sub-filters (1 for kinds that do not scale)
	Items        uint64  // BF: inserted; CF: held now; CBF: adds minus deletes
	Deleted      uint64  // CF
	Buckets      uint64  // CF, of the first sub-filter
	BucketSize   uint64  // CF
	MaxIter      uint64  // CF
	Expansion    uint64  // BF, CF
	NonScaling   bool    // BF
	ErrorRate    float64 // BF, CBF: as requested
	CounterBits  uint64  // CBF
	EstimatedFPP float64 // from the fill, where the kind can tell; else the target
	Links        []Link  // BF: each Bloom filter of the chain, oldest first (BF.DEBUG)
	// Debug is the kind's own BF.DEBUG or CF.DEBUG reply, line by line, where
	// the kind has one (RedisBloom's layouts, windowed filters); transport
	// formats the others.
	Debug []string
	// Window describes a windowed filter's window, slack and generations
	// (BF.INFO and CF.INFO with WINDOW); nil for the other kinds.
	Window *filters.WindowInfo
}

// Link is one Bloom filter of a BF key, as BF.DEBUG shows it.
type Link struct {
	Bytes     uint64 // of its bit array
	Bits      uint64
	Hashes    int
	Capacity  uint64
	Items     uint64 // added to it
	ErrorRate float64
}

// ChunkSizeError refuses a LOADCHUNK chunk larger than its filter could take
// anywhere, before it is logged: Err is what applying it would answer, and the
// error names both sizes.
type ChunkSizeError struct {
	Key      string
	Got, Max uint64
	Err      error
	// Named: the filter is one of our own format being loaded from its dump,
	// whose loader is told both sizes. Into any other filter RedisBloom's
	// clients and tests expect RedisBloom's words alone.
	Named bool
}

func (e *ChunkSizeError) Error() string {
	return fmt.Sprintf("%v (%s)", e.Err, e.Sizes())
}

// Sizes says how large the chunk is and how large a chunk its filter takes.
func (e *ChunkSizeError) Sizes() string {
	return fmt.Sprintf("a chunk of %d bytes, and %q takes at most %d bytes per chunk", e.Got, e.Key, e.Max)
}

func (e *ChunkSizeError) Unwrap() error { return e.Err }

// ApproxBytes is about what c takes in a log entry: its keys, items and data,
// a few bytes for each, and its fixed fields. Proposers batch by it and refuse
// a command too large for one entry by it.
func (c *Command) ApproxBytes() int {
	n := len(c.Key) + len(c.Data) + 32
	for _, it := range c.Items {
		n += len(it) + 2
	}
	for _, k := range c.Keys {
		n += len(k) + 10
	}
	for _, sub := range c.Subs {
		n += sub.ApproxBytes()
	}
	return n
}
