package transport

import (
	"crypto/tls"
	"fmt"
	"github.com/rookerydb/rookery/internal/acl"
	"net"
	"sort"
	"strings"
	"syscall"
	"time"
)

// CLIENT and its subcommands, as Redis 7.2 answers them.
func clientCommands() []*command {
	c := flagsConn
	return []*command{{name: "client", arity: -2, flags: []string{"loading", "stale"}, subs: []*command{
		{name: "setname", arity: 3, flags: c, parse: parseClientSetName},
		{name: "getname", arity: 2, flags: c, parse: parseClientGetName},
		{name: "id", arity: 2, flags: c, parse: parseClientID},
		{name: "setinfo", arity: 4, flags: c, parse: parseClientSetInfo},
		{name: "info", arity: 2, flags: c, parse: parseClientInfo},
		{name: "list", arity: -2, flags: flagsAdminish, parse: parseClientList},
		{name: "kill", arity: -3, flags: flagsAdminish, parse: parseClientKill},
		{name: "help", arity: 2, flags: c, parse: helpParser(clientHelp)},
	}}}
}

var clientHelp = []string{
	"GETNAME",
	"    Return the name of the current connection.",
	"ID",
	"    Return the ID of the current connection.",
	"INFO",
	"    Return information about the current client connection.",
	"KILL <ip:port>",
	"    Kill connection made from <ip:port>.",
	"KILL <option> <value> [<option> <value> [...]]",
	"    Kill connections. Options are:",
	"    * ADDR (<ip:port>|<unixsocket>:0)",
	"      Kill connections made from the specified address",
	"    * LADDR (<ip:port>|<unixsocket>:0)",
	"      Kill connections made to specified local address",
	"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
	"      Kill connections by type.",
	"    * USER <username>",
	"      Kill connections authenticated by <username>.",
	"    * SKIPME (YES|NO)",
	"      Skip killing current connection (default: yes).",
	"    * ID <client-id>",
	"      Kill connections by client id.",
	"    * MAXAGE <maxage>",
	"      Kill connections older than the specified age.",
	"LIST [options ...]",
	"    Return information about client connections. Options:",
	"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
	"      Return clients of specified type.",
	"    * ID <client-id> [<client-id> ...]",
	"      Return clients with the given ids.",
	"SETNAME <name>",
	"    Assign the name <name> to the current connection.",
	"SETINFO <option> <value>",
	"    Set client meta attr. Options are:",
	"    * LIB-NAME: the client lib name.",
	"    * LIB-VER: the client lib version.",
}

// parseClientSetName: CLIENT SETNAME name ("" clears it).
func parseClientSetName(s *Server, args [][]byte) (op, error) {
	if err := validClientName(args[2]); err != nil {
		return op{}, err
	}
	name := string(args[2])
	return localOp(func(c *session, w *reply) { c.set(func() { c.name = name }); w.ok() }), nil
}

// parseClientGetName: CLIENT GETNAME, nil when unnamed.
func parseClientGetName(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) {
		if c.name == "" {
			w.null()
			return
		}
		w.bulkString(c.name)
	}), nil
}

// parseClientID: CLIENT ID.
func parseClientID(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) { w.uint(c.id) }), nil
}

// parseClientSetInfo: CLIENT SETINFO LIB-NAME|LIB-VER value.
func parseClientSetInfo(s *Server, args [][]byte) (op, error) {
	attr := strings.ToLower(string(args[2]))
	if attr != "lib-name" && attr != "lib-ver" {
		return op{}, redisError(fmt.Sprintf("ERR Unrecognized option '%s'", args[2]))
	}
	if err := validClientName(args[3]); err != nil {
		return op{}, redisError(fmt.Sprintf("ERR %s cannot contain spaces, newlines or special characters.", attr))
	}
	v := string(args[3])
	return localOp(func(c *session, w *reply) {
		c.set(func() {
			if attr == "lib-name" {
				c.libName = v
			} else {
				c.libVer = v
			}
		})
		w.ok()
	}), nil
}

// parseClientInfo: CLIENT INFO, this connection's CLIENT LIST line (with its
// newline), as verbatim text.
func parseClientInfo(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) {
		if c.conn == nil {
			w.verbatim("")
			return
		}
		w.verbatim(string(c.conn.appendInfo(nil, c, time.Now())) + "\n")
	}), nil
}

// parseClientList: CLIENT LIST [TYPE normal|master|replica|slave|pubsub] or
// CLIENT LIST ID id... (each id's line in the order asked, unknown ids left
// out, as Redis does). Every client is a normal one: TYPE normal lists them
// all, the other types none.
func parseClientList(s *Server, args [][]byte) (op, error) {
	var ids []uint64
	none := false
	switch {
	case len(args) == 2:
	case len(args) == 4 && keyword(args[2], "TYPE"):
		normal, ok := clientType(args[3])
		if !ok {
			return op{}, redisError(fmt.Sprintf("ERR Unknown client type '%s'", args[3]))
		}
		none = !normal
	case len(args) > 3 && keyword(args[2], "ID"):
		for _, a := range args[3:] {
			id, ok := parseInt64(a)
			if !ok {
				return op{}, redisError("ERR Invalid client ID")
			}
			ids = append(ids, uint64(id))
		}
	default:
		return op{}, errSyntax
	}
	return localOp(func(c *session, w *reply) {
		var b []byte
		now := time.Now()
		conns := s.connList()
		switch {
		case none:
		case ids != nil: // in the order asked, as often as asked
			for _, id := range ids {
				i := sort.Search(len(conns), func(i int) bool { return conns[i].sess.id >= id })
				if i < len(conns) && conns[i].sess.id == id {
					b = append(conns[i].appendInfo(b, c, now), '\n')
				}
			}
		default:
			for _, cn := range conns {
				b = append(cn.appendInfo(b, c, now), '\n')
			}
		}
		w.verbatim(string(b))
	}), nil
}

// clientType reports whether name is a client type Redis knows, and whether
// it is the normal one (the only kind of client there is here).
func clientType(name []byte) (normal, ok bool) {
	switch strings.ToLower(string(name)) {
	case "normal":
		return true, true
	case "master", "replica", "slave", "pubsub":
		return false, true
	}
	return false, false
}

// connList lists the open connections by id.
func (s *Server) connList() []*conn {
	s.mu.Lock()
	out := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].sess.id < out[j].sess.id })
	return out
}

// killFilter is what CLIENT KILL matches; every set field must match.
type killFilter struct {
	addr, laddr *string
	id          uint64
	maxAge      int64
	noneType    bool // TYPE other than normal: matches nobody
	skipMe      bool
}

func (f *killFilter) match(cn *conn, self uint64, now time.Time) bool {
	switch {
	case f.noneType,
		f.addr != nil && cn.raddr != *f.addr,
		f.laddr != nil && cn.laddr != *f.laddr,
		f.id != 0 && cn.sess.id != f.id,
		f.skipMe && cn.sess.id == self,
		f.maxAge != 0 && int64(now.Sub(cn.created)/time.Second) < f.maxAge:
		return false
	}
	return true
}

// parseClientKill: CLIENT KILL ip:port (OK, or "ERR No such client"; it may
// close the caller) and CLIENT KILL option value... (the number closed; the
// caller is skipped unless SKIPME no). A connection closed is closed at once;
// the caller's own, after its reply.
func parseClientKill(s *Server, args [][]byte) (op, error) {
	f, err := parseKillFilter(args)
	if err != nil {
		return op{}, err
	}
	old := len(args) == 3
	return localOp(func(c *session, w *reply) {
		n := 0
		now := time.Now()
		for _, cn := range s.connList() {
			if !f.match(cn, c.id, now) {
				continue
			}
			n++
			if cn.sess.id == c.id {
				c.quit = true // after this reply
			} else {
				cn.nc.Close() // its goroutine ends on the failed read
			}
		}
		switch {
		case !old:
			w.int(int64(n))
		case n == 0:
			w.fail(redisError("ERR No such client"))
		default:
			w.ok()
		}
	}), nil
}

// parseKillFilter reads CLIENT KILL's arguments with Redis's errors.
func parseKillFilter(args [][]byte) (*killFilter, error) {
	if len(args) == 3 {
		addr := string(args[2])
		return &killFilter{addr: &addr}, nil
	}
	f := &killFilter{skipMe: true}
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return nil, errSyntax
		}
		v := args[i+1]
		switch {
		case keyword(args[i], "ID"):
			id, ok := parseInt64(v)
			if !ok || id < 1 {
				return nil, redisError("ERR client-id should be greater than 0")
			}
			f.id = uint64(id)
		case keyword(args[i], "MAXAGE"):
			age, ok := parseInt64(v)
			if !ok {
				return nil, redisError("ERR maxage is not an integer or out of range")
			}
			if age <= 0 {
				return nil, redisError("ERR maxage should be greater than 0")
			}
			f.maxAge = age
		case keyword(args[i], "TYPE"):
			normal, ok := clientType(v)
			if !ok {
				return nil, redisError(fmt.Sprintf("ERR Unknown client type '%s'", v))
			}
			f.noneType = f.noneType || !normal
		case keyword(args[i], "ADDR"):
			a := string(v)
			f.addr = &a
		case keyword(args[i], "LADDR"):
			a := string(v)
			f.laddr = &a
		case keyword(args[i], "USER"):
			if string(v) != "default" {
				return nil, redisError(fmt.Sprintf("ERR No such user '%s'", v))
			}
		case keyword(args[i], "SKIPME"):
			switch {
			case keyword(v, "YES"):
				f.skipMe = true
			case keyword(v, "NO"):
				f.skipMe = false
			default:
				return nil, errSyntax
			}
		default:
			return nil, errSyntax
		}
	}
	return f, nil
}

// appendInfo appends cn's CLIENT LIST line, fields in Redis 7.2's order. self
// is the session asking: its own line is read from its live state, another
// connection's under that connection's lock. What a connection here does not
// have is shown as Redis shows it for a client without it: no subscriptions,
// no MULTI (-1), no tracking (redir=-1). Buffers are the request reader's,
// sampled after its last batch; replies are written out by the end of each
// batch, so between batches no reply is pending (obl, oll and omem are 0).
func (cn *conn) appendInfo(b []byte, self *session, now time.Time) []byte {
	var name, libName, libVer string
	var proto int
	var readonly bool
	cmd := "NULL"
	if d := cn.lastCmd.Load(); d != nil {
		cmd = d.name
	}
	var acct *acl.Account
	if cn.sess.id == self.id {
		name, libName, libVer, proto, readonly = self.name, self.libName, self.libVer, self.proto, self.level != 0
		acct = self.account
	} else {
		cn.sess.mu.Lock()
		name, libName, libVer, proto, readonly = cn.sess.name, cn.sess.libName, cn.sess.libVer, cn.sess.proto,
			cn.sess.level != 0
		acct = cn.sess.account
		cn.sess.mu.Unlock()
	}
	user := acl.DefaultUser
	if acct != nil {
		user = acct.Name()
	}
	flags := "N"
	if readonly {
		flags = "r" // READONLY, as a Redis Cluster replica connection shows it
	}
	age := int64(now.Sub(cn.created) / time.Second)
	idle := int64(now.Sub(time.Unix(0, cn.active.Load())) / time.Second)
	rbs, qbuf := cn.rbs.Load(), cn.qbuf.Load()
	free := max(rbs-qbuf, 0)
	b = fmt.Appendf(b, "id=%d addr=%s laddr=%s fd=%d name=%s age=%d idle=%d flags=%s db=0 sub=0 psub=0 ssub=0 multi=-1",
		cn.sess.id, cn.raddr, cn.laddr, cn.fd, name, age, max(idle, 0), flags)
	b = fmt.Appendf(b, " qbuf=%d qbuf-free=%d argv-mem=0 multi-mem=0 rbs=%d rbp=%d obl=0 oll=0 omem=0 tot-mem=%d",
		qbuf, free, rbs, cn.rbp.Load(), rbs)
	b = fmt.Appendf(b, " events=r cmd=%s user=%s redir=-1 resp=%d lib-name=%s lib-ver=%s",
		cmd, user, proto, libName, libVer)
	return b
}

// socketFD is the connection's file descriptor, -1 if it has none.
func socketFD(nc net.Conn) int {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	if raw.Control(func(v uintptr) { fd = int(v) }) != nil {
		return -1
	}
	return fd
}

// helpParser answers a container's HELP: Redis's header, the lines, and HELP
// itself, each a simple string.
func helpParser(lines []string) func(s *Server, args [][]byte) (op, error) {
	return func(s *Server, args [][]byte) (op, error) {
		head := strings.ToUpper(string(args[0])) + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
		return localOp(func(c *session, w *reply) {
			w.array(len(lines) + 3)
			w.simple(head)
			for _, l := range lines {
				w.simple(l)
			}
			w.simple("HELP")
			w.simple("    Print this help.")
		}), nil
	}
}
