package fsm

import (
	"context"
	"errors"
	"fmt"
	"github.com/rookerydb/rookery/internal/acl"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Options configure an FSM. Every replica of a cluster must use the same values,
// since they shape what Apply does.
type Options struct {
	// SessionTTL is how long, in the leader's clock as stamped into entries, a
	// client session is remembered after its last request. Zero means
	// DefaultSessionTTL.
	SessionTTL time.Duration
	// Logger receives the state machine's few messages; nil means slog.Default().
	Logger *slog.Logger
	// MaxFormat, when set, is the highest log format (codec version) applied:
	// the node halts at an entry above it, as a build of that format would.
	// Zero means CodecVersion.
	MaxFormat byte
	// OnExpire, when set, is called on the apply goroutine for each key
	// removed because its deadline passed, with the index of the entry that
	// removed it. It must not call back into the state machine.
	OnExpire func(key string, index uint64)
	// OnMap, when set, is called on the apply goroutine (and after a restore)
	// with each new cluster map. It must not call back into the state machine.
	OnMap func(m *Map)
	// Users, when set, are the node's users (ACL), which this group's log
	// holds: group 0 alone. RequirePass is the default user's password
	// until the log sets the default user (acl.go).
	Users       *acl.Store
	RequirePass string
	// OnUsers, when set, is called on the apply goroutine after each change
	// to the users. It must not block or call back into the state machine.
	OnUsers func()
}

// DefaultSessionTTL is the session lifetime when Options.SessionTTL is zero.
const DefaultSessionTTL = 15 * time.Minute

// FSM is Rookery's replicated state machine: a registry of named filters and a
// session table, changed only by Apply (raft.FSM and raft.BatchingFSM) and read
// concurrently through the query methods.
type FSM struct {
	log        *slog.Logger
	reg        *registry
	sessionTTL int64 // ns
	maxFormat  byte  // the highest log format applied (Options.MaxFormat)

	// applyMu serialises Apply, Snapshot and Restore. raft calls them from one
	// goroutine, but tests and fakes may not.
	applyMu  sync.Mutex
	sessions *sessionTable
	handlers [lastOp + 1]func(c *Command) *Result

	// Users (acl.go): nil in a group that holds none.
	users       *acl.Store
	requirePass string
	onUsers     func()
	usersState  // changed by Apply and Restore only

	memory  atomic.Uint64 // sum of the entries' mem
	applied atomic.Uint64 // last log index applied

	// Deadlines (expire.go). deadlines, applying and onExpire belong to the
	// apply goroutine; the atomics publish to readers.
	deadlines deadlineHeap
	applying  uint64 // the index of the entry being applied
	onExpire  func(key string, index uint64)
	expires   atomic.Int64  // len(deadlines)
	next      atomic.Int64  // earliest deadline, 0 if none
	nextCh    chan struct{} // a value when next changes
	expired   atomic.Uint64 // keys removed by expiry

	// tx is what WATCH compares (tx.go); apply goroutine only.
	tx txState

	// retires orders the windowed filters by their next retirement
	// (window.go); apply goroutine only.
	retires retireHeap

	// Snapshot generations (copy-on-write, see entry.gen).
	gen      uint64 // current generation; apply goroutine only
	snapMu   sync.Mutex
	snapLive map[uint64]int // generation -> unreleased snapshots of it
	snapMax  atomic.Uint64  // highest live generation, 0 if none

	waitMu sync.Mutex
	waitCh chan struct{} // closed and replaced whenever applied advances

	halt   atomic.Pointer[Halt] // set when an entry could not be read
	haltCh chan struct{}        // closed when halt is first set

	cmap  atomic.Pointer[Map] // the cluster map (group 0 only), nil before one
	onMap func(m *Map)
}

// Halt is why a state machine stopped applying: a log entry it could not read
// (a checksum mismatch, or bytes that do not decode). Applying anything else in
// its place would fork the replicas, and skipping it would lose a write, so the
// state machine stops at the entry before it. It is an error.
type Halt struct {
	Index uint64 // the entry that could not be read
	Err   error
}

func (h *Halt) Error() string {
	var fe *FormatError
	if errors.As(h.Err, &fe) {
		return fmt.Sprintf("log entry at index %d needs a newer rookery (%s): upgrade this node", h.Index, fe.Detail())
	}
	return fmt.Sprintf("corrupt log entry at index %d: %v", h.Index, h.Err)
}

func (h *Halt) Unwrap() error { return h.Err }

// New returns an empty state machine.
func New(opts Options) *FSM {
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxFormat == 0 || opts.MaxFormat > CodecVersion {
		opts.MaxFormat = CodecVersion
	}
	f := &FSM{
		maxFormat:   opts.MaxFormat,
		log:         opts.Logger.With("component", "fsm"),
		reg:         newRegistry(),
		sessionTTL:  int64(opts.SessionTTL),
		sessions:    newSessionTable(int64(opts.SessionTTL)),
		gen:         1,
		snapLive:    make(map[uint64]int),
		waitCh:      make(chan struct{}),
		haltCh:      make(chan struct{}),
		onExpire:    opts.OnExpire,
		onMap:       opts.OnMap,
		nextCh:      make(chan struct{}, 1),
		users:       opts.Users,
		onUsers:     opts.OnUsers,
		requirePass: opts.RequirePass,
	}
	f.handlers = [lastOp + 1]func(c *Command) *Result{
		OpReserve:   f.applyReserve,
		OpAdd:       f.applyAdd,
		OpDelete:    f.applyDelete,
		OpDelKeys:   f.applyDelKeys,
		OpLoadChunk: f.applyLoadChunk,
		OpRename:    f.applyRename,
		OpFlush:     f.applyFlush,
		OpCompact:   f.applyCompact,

		OpExpire:     f.applyExpire,
		OpPersist:    f.applyPersist,
		OpExpireTick: f.applyExpireTick,

		OpSetMap: f.applySetMap,

		OpExec:  f.applyExec,
		OpTest:  f.applyTest,
		OpCount: f.applyCount,

		OpACLSetUser: f.applyACLSetUser,
		OpACLDelUser: f.applyACLDelUser,
		OpACLLoad:    f.applyACLLoad,
		OpACLRestore: f.applyACLRestore,
	}
	return f
}

var _ raft.BatchingFSM = (*FSM)(nil)

// Apply applies one log entry: a *Result for a TypeCommand, a []*Result for a
// TypeBatch, nil for anything else, and the *Halt once the state machine has
// stopped at an entry it could not read.
func (f *FSM) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies consecutive log entries under one lock and returns one
// response per entry, as Apply would.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	if len(logs) == 0 {
		return out
	}
	f.applyMu.Lock()
	var last uint64
	for i, l := range logs {
		if h := f.halt.Load(); h != nil {
			out[i] = h
			continue
		}
		out[i] = f.applyLog(l)
		if f.halt.Load() == nil {
			last = l.Index
		}
	}
	f.applyMu.Unlock()
	f.setApplied(last)
	return out
}

func (f *FSM) applyLog(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil // configuration changes: nothing of ours
	}
	f.applying = l.Index
	t, cmds, err := decodeEntry(l.Data, f.maxFormat)
	if err != nil {
		// Damaged on disk or on the way: applying anything else would fork the
		// replicas and skipping it would lose a write. Stop here, say so, and
		// let the operator recover the node from its peers or a backup.
		h := &Halt{Index: l.Index, Err: err}
		f.halt.Store(h)
		close(f.haltCh)
		if errors.Is(err, ErrNewerFormat) {
			f.log.Error(h.Error()+"; this node stops applying the log until it runs a build that reads it",
				"index", l.Index)
			return h
		}
		f.log.Error("corrupt log entry: this node stops applying the log; stop it and run `rookery recover` "+
			"(see README, Recovering a node)", "index", l.Index, "err", err)
		return h
	}
	switch t {
	case TypeCommand:
		return f.applyCommand(cmds[0])
	case TypeBatch:
		rs := make([]*Result, len(cmds))
		for i, c := range cmds {
			rs[i] = f.applyCommand(c)
		}
		return rs
	}
	return nil // TypeNoop, or a skippable type from a newer version
}

// ApplyCommand applies c as the entry at index, without Raft: the path Apply
// takes, for tests and fakes.
func (f *FSM) ApplyCommand(index uint64, c *Command) *Result {
	f.applyMu.Lock()
	f.applying = index
	r := f.applyCommand(c)
	f.applyMu.Unlock()
	f.setApplied(index)
	return r
}

// applyCommand advances the log's clock to c's time, removes the keys whose
// deadline it passed, ages the windowed filters whose generation it ended,
// and runs c through the session table and its handler.
func (f *FSM) applyCommand(c *Command) *Result {
	f.sessions.advance(c.Time)
	f.expireDue()
	f.ageDue()
	if f.cmap.Load() != nil && TouchesFilters(c.Op) {
		// A write sent here by a node that had not learned the map: kept
		// here, no read would ever find it (reads go to the key's shard).
		return &Result{Err: ErrMapGroup}
	}
	if c.Session.Seq == 0 {
		return f.dispatch(c)
	}
	if r, ok := f.sessions.lookup(c.Session); ok {
		return r
	}
	r := f.dispatch(c)
	f.sessions.store(c.Session, c.Time, r)
	return r
}

// TouchesFilters reports whether op creates, changes or removes filters:
// what a group holding the cluster map refuses. The users are that group's
// own state (acl.go), so their ops do not count.
func TouchesFilters(op Op) bool {
	switch op {
	case OpSetMap, OpExpireTick, OpACLSetUser, OpACLDelUser, OpACLLoad, OpACLRestore:
		return false
	}
	return true
}

func (f *FSM) dispatch(c *Command) *Result {
	if int(c.Op) >= len(f.handlers) || f.handlers[c.Op] == nil {
		panic(fmt.Sprintf("fsm: no handler for op %d", c.Op))
	}
	return f.handlers[c.Op](c)
}

func (f *FSM) setApplied(index uint64) {
	if index <= f.applied.Load() {
		return
	}
	f.applied.Store(index)
	f.waitMu.Lock()
	close(f.waitCh)
	f.waitCh = make(chan struct{})
	f.waitMu.Unlock()
}

// Halted returns why the state machine stopped applying, or nil.
func (f *FSM) Halted() *Halt { return f.halt.Load() }

// HaltedCh is closed when the state machine stops applying.
func (f *FSM) HaltedCh() <-chan struct{} { return f.haltCh }

// AppliedIndex returns the index of the last log entry applied.
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

// WaitApplied returns once AppliedIndex() >= index, or with ctx's error.
func (f *FSM) WaitApplied(ctx context.Context, index uint64) error {
	for {
		f.waitMu.Lock()
		ch := f.waitCh
		f.waitMu.Unlock()
		if f.applied.Load() >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Len returns the number of filters.
func (f *FSM) Len() int {
	f.reg.mu.RLock()
	defer f.reg.mu.RUnlock()
	return len(f.reg.byKey)
}

// MemoryBytes returns the memory all filters take.
func (f *FSM) MemoryBytes() uint64 { return f.memory.Load() }
