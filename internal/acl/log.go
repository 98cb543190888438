package acl

import (
	"sync"
	"time"
)

// DefaultLogMax is how many entries ACL LOG keeps unless told otherwise
// (Redis's acllog-max-len).
const DefaultLogMax = 128

// logGroupWindow is how close in time a refusal must be to an entry like it
// to be counted in it rather than logged anew (Redis's
// ACL_LOG_GROUPING_MAX_TIME_DELTA).
const logGroupWindow = 60 * time.Second

// logGroupScan is how many of the newest entries a refusal is compared
// with.
const logGroupScan = 10

// Context is where a refused command was run, as ACL LOG names it.
type Context uint8

// Contexts. Rookery runs no Lua and loads no modules; the two are named for
// ACL LOG's sake. ContextHTTP is ours: a refusal on the HTTP API (a wrong
// password, or a route the user may not use), logged beside RESP's.
const (
	ContextTopLevel Context = iota
	ContextMulti
	ContextLua
	ContextModule
	ContextHTTP
)

// String is ACL LOG's name of c.
func (c Context) String() string {
	switch c {
	case ContextTopLevel:
		return "toplevel"
	case ContextMulti:
		return "multi"
	case ContextLua:
		return "lua"
	case ContextModule:
		return "module"
	case ContextHTTP:
		return "http"
	}
	return "unknown"
}

// Event is one refusal to log. It never holds a password: for a failed AUTH
// the object is the command's name ("AUTH", "HELLO") and the user the name
// tried; ClientInfo is the CLIENT LIST line of the connection, which holds
// no arguments.
type Event struct {
	Reason     Reason
	Context    Context
	Object     string // the command's full name, the key, or AUTH's command name
	Username   string
	ClientInfo string
}

// Event is the log's record of d in context ctx.
func (d *Denial) Event(ctx Context, clientInfo string) Event {
	return Event{Reason: d.Reason, Context: ctx, Object: d.Object, Username: d.User, ClientInfo: clientInfo}
}

// LogEntry is one entry as ACL LOG shows it, its fields named by LogFields.
type LogEntry struct {
	Count       int64
	Reason      Reason
	Context     Context
	Object      string
	Username    string
	AgeSeconds  float64
	ClientInfo  string // of the last refusal counted in it
	EntryID     int64
	Created     int64 // Unix milliseconds
	LastUpdated int64 // Unix milliseconds
}

// LogFields names LogEntry's fields in the order ACL LOG sends them.
var LogFields = []string{
	"count", "reason", "context", "object", "username", "age-seconds",
	"client-info", "entry-id", "timestamp-created", "timestamp-last-updated",
}

// Log is a node's ACL LOG: the newest refusals, like ones grouped, bounded.
// It is this node's, as Redis's is its server's: not cluster state. Safe for
// concurrent use.
type Log struct {
	mu      sync.Mutex
	max     int
	entries []LogEntry // oldest first; AgeSeconds unset
	nextID  int64
	denied  [ReasonAuth + 1]int64
}

// NewLog keeps at most max entries (DefaultLogMax as Redis; 0 keeps none
// but still counts).
func NewLog(max int) *Log { return &Log{max: max} }

func (l *Log) trim() {
	if over := len(l.entries) - max(l.max, 0); over > 0 {
		l.entries = append(l.entries[:0], l.entries[over:]...)
	}
}

// Add records a refusal at now. As Redis does, a refusal like one of the
// ten newest entries (same reason, context, object and user, within a
// minute of its last update) counts in that entry, which becomes the
// newest and takes the new client info; another starts a new entry with
// the next id, and the oldest entries over the bound go.
func (l *Log) Add(e Event, now time.Time) {
	ms := now.UnixMilli()
	l.mu.Lock()
	defer l.mu.Unlock()
	if int(e.Reason) < len(l.denied) {
		l.denied[e.Reason]++
	}
	if l.max <= 0 {
		l.entries = l.entries[:0]
		return
	}
	for i, scanned := len(l.entries)-1, 0; i >= 0 && scanned < logGroupScan; i, scanned = i-1, scanned+1 {
		old := &l.entries[i]
		d := ms - old.LastUpdated
		if old.Reason != e.Reason || old.Context != e.Context || old.Object != e.Object ||
			old.Username != e.Username || d > logGroupWindow.Milliseconds() || d < -logGroupWindow.Milliseconds() {
			continue
		}
		m := *old
		m.Count++
		m.ClientInfo, m.LastUpdated = e.ClientInfo, ms
		l.entries = append(append(l.entries[:i], l.entries[i+1:]...), m)
		return
	}
	l.entries = append(l.entries, LogEntry{
		Count: 1, Reason: e.Reason, Context: e.Context, Object: e.Object, Username: e.Username,
		ClientInfo: e.ClientInfo, EntryID: l.nextID, Created: ms, LastUpdated: ms,
	})
	l.nextID++
	l.trim()
}

// Entries is ACL LOG [count]: the newest count entries, newest first, aged
// at now. A negative count is 0, as in Redis.
func (l *Log) Entries(count int, now time.Time) []LogEntry {
	ms := now.UnixMilli()
	l.mu.Lock()
	defer l.mu.Unlock()
	count = min(max(count, 0), len(l.entries))
	out := make([]LogEntry, 0, count)
	for i := len(l.entries) - 1; len(out) < count; i-- {
		e := l.entries[i]
		e.AgeSeconds = float64(ms-e.LastUpdated) / 1000
		out = append(out, e)
	}
	return out
}

// Reset is ACL LOG RESET: the entries go; ids go on from where they were,
// so a reader that keeps (entry-id, timestamp-created) sees new entries as
// new.
func (l *Log) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = nil
}

// Denied counts the refusals of each reason since start, kept in the log or
// not (what Redis shows as INFO's acl_access_denied_*; not shown here yet).
func (l *Log) Denied(r Reason) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if int(r) >= len(l.denied) {
		return 0
	}
	return l.denied[r]
}
