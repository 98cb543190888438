package transport

import (
	"fmt"
	"github.com/rookerydb/rookery/internal/acl"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rookerydb/rookery/cluster"
)

// Defaults for Config fields left zero.
const (
	DefaultMaxItemBytes       = 64 << 10
	DefaultMaxItemsPerCommand = 1000000
	DefaultMaxCapacity        = 1 << 30 // RedisBloom's own ceiling
	DefaultMaxClients         = 10000
	DefaultMaxRequestBytes    = 64 << 20
	DefaultRequestTimeout     = 10 * time.Second
	DefaultAuthTimeout        = 10 * time.Second
	DefaultMaxRequestBuffer   = 1 << 30
)

// Limits on a connection that has not authenticated yet, as Redis has enforced
// them since CVE-2021-32675: a stranger may announce at most this many
// arguments of at most this many bytes each, and is refused from the header.
const (
	PreAuthMaxArgs      = 10
	PreAuthMaxBulkBytes = 16 << 10
)

// Config configures the RESP and HTTP servers. Zero fields take the defaults above.
type Config struct {
	// MaxItemBytes bounds one item (and one key name).
	MaxItemBytes int
	// MaxItemsPerCommand bounds the items (or keys) of one command.
	MaxItemsPerCommand int
	// MaxCapacity bounds the capacity a filter may be created with.
	MaxCapacity uint64
	// MaxClients bounds open RESP connections; one more is told
	// "ERR max number of clients reached" and closed.
	MaxClients int
	// MaxRequestBytes bounds one request as it arrives on the wire; a bigger one is
	// a protocol error and closes the connection.
	MaxRequestBytes int
	// MaxRequestBuffer bounds the bytes all connections together may hold for
	// requests being read and executed; a request that would take more is
	// refused and its connection closed.
	MaxRequestBuffer int64
	// RequirePass, when set, is the default user's password until the
	// cluster's log sets users (Users): every connection AUTHs (or HELLO ...
	// AUTH) first, and every HTTP endpoint but /healthz and /readyz asks for
	// a user's credentials (http_auth.go).
	RequirePass string
	// Users are the node's users (ACL), shared with the group whose log
	// holds them; nil: the default user alone, its password RequirePass.
	// Give the RESP and HTTP servers of a node the same store.
	Users *acl.Store
	// ACLLog is the node's ACL LOG. Give the RESP and HTTP servers of a
	// node the same one, so that ACL LOG shows the HTTP API's refusals too;
	// nil: each server keeps its own.
	ACLLog *acl.Log
	// AuthTimeout closes a connection that has not authenticated this long after
	// it was accepted (only when RequirePass is set). Negative: never.
	AuthTimeout time.Duration
	// ClientCerts says the listeners require client certificates signed by the
	// cluster CA (--tls-client-auth): over HTTP a verified client certificate is
	// a credential for the default user, like its password.
	ClientCerts bool
	// AuthGuard makes password guessing cost time per source address. Give the
	// RESP and HTTP servers of a node the same one, so that an address's
	// failures on one face count on the other; nil: each server makes its own.
	AuthGuard *AuthGuard
	// MetricsPublic serves /metrics without credentials.
	MetricsPublic bool
	// RequestTimeout bounds how long a command waits for its write to be
	// applied. Read barriers are bounded by the Backend.
	RequestTimeout time.Duration
	// IdleTimeout closes a connection that sent nothing for this long (0: never).
	IdleTimeout time.Duration
	// FilterLayout is the layout BF.* and CF.* create filters in: LayoutRookery
	// (ours, the default when empty) or LayoutRedisBloom. A LOADCHUNK makes the
	// layout of the dump it loads, whatever this says.
	FilterLayout string
	// Version is reported by HELLO and INFO.
	Version string
	// MaxMemory is the node's --max-memory in bytes (0: none), which INFO and
	// CONFIG GET report as maxmemory.
	MaxMemory uint64
	// SystemMemory is the memory the machine (or its container) has, for
	// INFO's total_system_memory; 0 leaves the field out.
	SystemMemory uint64
	// Registry receives the transport's metrics; the cluster may register its own
	// collectors on the same registry. Nil disables metrics.
	Registry *prometheus.Registry
	// DefaultReadLevel is the read consistency a new connection starts with;
	// READONLY and READWRITE change it per connection.
	DefaultReadLevel cluster.ReadLevel
	// Routes are further HTTP routes ("POST /debug/x" patterns of net/http's
	// ServeMux) that the binary wires in, such as fault injection for tests.
	Routes map[string]http.Handler
	// Pprof serves Go's profiles under /debug/pprof/ on the HTTP server.
	Pprof bool
	// Logger is the base logger; records carry component=transport.
	Logger *slog.Logger
}

// withDefaults returns c with zero fields defaulted and a component logger.
func (c Config) withDefaults() Config {
	if c.MaxItemBytes <= 0 {
		c.MaxItemBytes = DefaultMaxItemBytes
	}
	if c.MaxItemsPerCommand <= 0 {
		c.MaxItemsPerCommand = DefaultMaxItemsPerCommand
	}
	if c.MaxCapacity == 0 {
		c.MaxCapacity = DefaultMaxCapacity
	}
	if c.MaxClients <= 0 {
		c.MaxClients = DefaultMaxClients
	}
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.AuthTimeout == 0 {
		c.AuthTimeout = DefaultAuthTimeout
	}
	if c.MaxRequestBuffer <= 0 {
		c.MaxRequestBuffer = DefaultMaxRequestBuffer
	}
	if c.Version == "" {
		c.Version = "0.1.0"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Logger = c.Logger.With("component", "transport")
	return c
}

// maxArgs is the most arguments a request may announce: enough for a full
// multi-item command with its options, and never less than Redis's old 1M cap,
// so that a slightly oversized command gets the friendly "too many items" error
// instead of a protocol error.
func (c Config) maxArgs() int {
	return max(c.MaxItemsPerCommand+16, 1<<20)
}

// checkItems enforces the per-command limits on a list of items or keys.
func (c Config) checkItems(items [][]byte) error {
	if len(items) > c.MaxItemsPerCommand {
		return redisError(fmt.Sprintf("ERR too many items in one command: %d (max %d)",
			len(items), c.MaxItemsPerCommand))
	}
	for _, it := range items {
		if len(it) > c.MaxItemBytes {
			return redisError(fmt.Sprintf("ERR item too large: %d bytes (max %d)",
				len(it), c.MaxItemBytes))
		}
	}
	return nil
}

// checkKey enforces the size limit on a key name.
func (c Config) checkKey(key []byte) error {
	if len(key) > c.MaxItemBytes {
		return redisError(fmt.Sprintf("ERR key name too long: %d bytes (max %d)",
			len(key), c.MaxItemBytes))
	}
	return nil
}
