package transport

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"os"
	"strings"
	"time"
)

func connCommands() []*command {
	c, na := flagsConn, flagsNoAuth
	return []*command{
		{name: "ping", arity: -1, flags: c, parse: parsePing},
		{name: "echo", arity: 2, flags: c, parse: parseEcho},
		{name: "hello", arity: -1, flags: na, parse: parseHello},
		{name: "auth", arity: -2, flags: na, parse: parseAuth},
		{name: "select", arity: 2, flags: c, parse: parseSelect},
		{name: "client", arity: -2, flags: c, parse: parseClient},
		{name: "quit", arity: -1, flags: na, parse: parseQuit},
		{name: "info", arity: -1, flags: flagsAdminish, parse: parseInfo},
		{name: "command", arity: -1, flags: flagsAdminish, parse: parseCommand},
		{name: "config", arity: -2, flags: flagsAdminish, parse: parseConfig},
	}
}

// parseConfig: CONFIG GET pattern... answers the few settings clients and tools
// ask for (redis-benchmark asks for save and appendonly); the configuration is
// the command line's, so CONFIG SET is refused.
func parseConfig(s *Server, args [][]byte) (op, error) {
	if !keyword(args[1], "GET") {
		return op{}, redisError(fmt.Sprintf("ERR CONFIG %s is not supported: settings come from flags", args[1]))
	}
	if len(args) < 3 {
		return op{}, arityError([]byte("config|get"))
	}
	params := []struct{ k, v string }{
		// Every write is fsynced to the Raft log before it is acknowledged.
		{"appendonly", "yes"}, {"appendfsync", "always"}, {"save", ""},
		{"databases", "1"}, {"maxclients", fmt.Sprint(s.cfg.MaxClients)},
	}
	return localOp(func(c *session, w *reply) {
		var out []string
		for _, p := range params {
			for _, pat := range args[2:] {
				if globMatch(bytes.ToLower(pat), []byte(p.k)) {
					out = append(out, p.k, p.v)
					break
				}
			}
		}
		w.mapHeader(len(out) / 2)
		for _, x := range out {
			w.bulkString(x)
		}
	}), nil
}

// parsePing: PING [message].
func parsePing(s *Server, args [][]byte) (op, error) {
	if len(args) > 2 {
		return op{}, arityError(args[0])
	}
	return localOp(func(c *session, w *reply) {
		if len(args) == 2 {
			w.bulk(args[1])
			return
		}
		w.simple("PONG")
	}), nil
}

// parseEcho: ECHO message.
func parseEcho(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) { w.bulk(args[1]) }), nil
}

// authenticate checks credentials for the only user there is, "default". With no
// password configured the default user needs none, as in Redis.
func (s *Server) authenticate(user, pass []byte) bool {
	if user != nil && string(user) != "default" {
		return false
	}
	if s.cfg.RequirePass == "" {
		return true
	}
	return subtle.ConstantTimeCompare(pass, []byte(s.cfg.RequirePass)) == 1
}

// parseAuth: AUTH password / AUTH user password.
func parseAuth(s *Server, args [][]byte) (op, error) {
	if len(args) > 3 {
		return op{}, errSyntax
	}
	if len(args) == 2 && s.cfg.RequirePass == "" {
		return op{}, redisError("ERR AUTH <password> called without any password configured " +
			"for the default user. Are you sure your configuration is correct?")
	}
	var user []byte
	pass := args[len(args)-1]
	if len(args) == 3 {
		user = args[1]
	}
	return localOp(func(c *session, w *reply) {
		if !s.authenticate(user, pass) {
			w.fail(errWrongPass)
			return
		}
		c.authed = true
		w.ok()
	}), nil
}

// parseHello: HELLO [protover [AUTH user pass] [SETNAME name]], checked in
// Redis's order. The reply is already in the new protocol.
func parseHello(s *Server, args [][]byte) (op, error) {
	ver := int64(0)
	if len(args) >= 2 {
		v, ok := parseInt64(args[1])
		if !ok {
			return op{}, redisError("ERR Protocol version is not an integer or out of range")
		}
		if v < 2 || v > 3 {
			return op{}, redisError("NOPROTO unsupported protocol version")
		}
		ver = v
	}
	var user, pass, name []byte
	for i := 2; i < len(args); i++ {
		more := len(args) - 1 - i
		switch {
		case keyword(args[i], "AUTH") && more >= 2:
			user, pass = args[i+1], args[i+2]
			i += 2
		case keyword(args[i], "SETNAME") && more >= 1:
			name = args[i+1]
			i++
		default:
			return op{}, redisError(fmt.Sprintf("ERR Syntax error in HELLO option '%s'", args[i]))
		}
	}
	return localOp(func(c *session, w *reply) {
		if user != nil && !s.authenticate(user, pass) {
			w.fail(errWrongPass)
			return
		}
		if user != nil {
			c.authed = true
		}
		if s.cfg.RequirePass != "" && !c.authed {
			w.fail(redisError("NOAUTH HELLO must be called with the client already authenticated, " +
				"otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate " +
				"the client and select the RESP protocol version at the same time"))
			return
		}
		if name != nil {
			if err := validClientName(name); err != nil {
				w.fail(err)
				return
			}
			c.name = string(name)
		}
		if ver != 0 {
			c.proto, w.proto = int(ver), int(ver)
		}
		s.helloReply(c, w)
	}), nil
}

// helloReply is HELLO's map: the server, its version, the protocol, the client id,
// mode and role, and the modules clients look for (RedisBloom's "bf").
func (s *Server) helloReply(c *session, w *reply) {
	role := "replica"
	if s.be.Status().Role == "leader" {
		role = "master"
	}
	w.mapHeader(7)
	w.bulkString("server")
	w.bulkString("rookery")
	w.bulkString("version")
	w.bulkString(s.cfg.Version)
	w.bulkString("proto")
	w.int(int64(c.proto))
	w.bulkString("id")
	w.uint(c.id)
	w.bulkString("mode")
	w.bulkString("standalone")
	w.bulkString("role")
	w.bulkString(role)
	w.bulkString("modules")
	w.array(1)
	w.mapHeader(4)
	w.bulkString("name")
	w.bulkString("bf")
	w.bulkString("ver")
	w.int(20800)
	w.bulkString("path")
	w.bulkString("")
	w.bulkString("args")
	w.array(0)
}

// validClientName refuses names Redis refuses: anything outside '!'..'~'.
func validClientName(name []byte) error {
	for _, ch := range name {
		if ch < '!' || ch > '~' {
			return redisError("ERR Client names cannot contain spaces, newlines or special characters.")
		}
	}
	return nil
}

// parseSelect: SELECT 0; there is one database.
func parseSelect(s *Server, args [][]byte) (op, error) {
	n, ok := parseInt64(args[1])
	if !ok {
		return op{}, errNotInteger
	}
	if n != 0 {
		return op{}, redisError("ERR DB index is out of range")
	}
	return localOp(func(c *session, w *reply) { w.ok() }), nil
}

// parseClient: CLIENT SETNAME name | GETNAME | SETINFO attr value | ID.
func parseClient(s *Server, args [][]byte) (op, error) {
	sub := strings.ToLower(string(args[1]))
	want := map[string]int{"setname": 3, "getname": 2, "id": 2, "setinfo": 4}
	n, known := want[sub]
	if !known {
		return op{}, redisError(fmt.Sprintf("ERR unknown subcommand '%s'. Try CLIENT HELP.", args[1]))
	}
	if len(args) != n {
		return op{}, redisError(fmt.Sprintf("ERR wrong number of arguments for 'client|%s' command", sub))
	}
	switch sub {
	case "setname":
		if err := validClientName(args[2]); err != nil {
			return op{}, err
		}
		return localOp(func(c *session, w *reply) { c.name = string(args[2]); w.ok() }), nil
	case "getname":
		return localOp(func(c *session, w *reply) {
			if c.name == "" {
				w.null()
				return
			}
			w.bulkString(c.name)
		}), nil
	case "id":
		return localOp(func(c *session, w *reply) { w.uint(c.id) }), nil
	}
	return parseClientSetInfo(args)
}

// parseClientSetInfo: CLIENT SETINFO LIB-NAME|LIB-VER value.
func parseClientSetInfo(args [][]byte) (op, error) {
	attr := strings.ToLower(string(args[2]))
	if attr != "lib-name" && attr != "lib-ver" {
		return op{}, redisError(fmt.Sprintf("ERR Unrecognized option '%s'", args[2]))
	}
	if err := validClientName(args[3]); err != nil {
		return op{}, redisError(fmt.Sprintf("ERR %s cannot contain spaces, newlines or special characters.", attr))
	}
	return localOp(func(c *session, w *reply) {
		if attr == "lib-name" {
			c.libName = string(args[3])
		} else {
			c.libVer = string(args[3])
		}
		w.ok()
	}), nil
}

// parseQuit: QUIT replies OK and closes the connection once the reply is sent.
func parseQuit(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) { c.quit = true; w.ok() }), nil
}

// parseInfo: INFO [section...]; "all", "everything" and "default" mean every
// section, an unknown section adds nothing.
func parseInfo(s *Server, args [][]byte) (op, error) {
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	all := len(want) == 0 || want["all"] || want["everything"] || want["default"]
	return localOp(func(c *session, w *reply) {
		var b strings.Builder
		for _, sec := range s.infoSections() {
			if !all && !want[strings.ToLower(sec.name)] {
				continue
			}
			if b.Len() > 0 {
				b.WriteString("\r\n")
			}
			fmt.Fprintf(&b, "# %s\r\n", sec.name)
			for _, kv := range sec.fields {
				fmt.Fprintf(&b, "%s:%v\r\n", kv.k, kv.v)
			}
		}
		w.verbatim(b.String())
	}), nil
}

type infoField struct {
	k string
	v any
}

type infoSection struct {
	name   string
	fields []infoField
}

// infoSections is INFO's content. Field names follow Redis where one exists
// (tools read redis_version, connected_clients, role, cluster_enabled, db0).
func (s *Server) infoSections() []infoSection {
	st := s.be.Status()
	role := "slave"
	if st.Role == "leader" {
		role = "master"
	}
	return []infoSection{
		{"Server", []infoField{{"redis_version", "7.2.0"}, {"rookery_version", s.cfg.Version},
			{"redis_mode", "standalone"}, {"process_id", os.Getpid()},
			{"uptime_in_seconds", int64(time.Since(s.started).Seconds())}}},
		{"Clients", []infoField{{"connected_clients", s.clients.Load()},
			{"maxclients", s.cfg.MaxClients}}},
		{"Memory", []infoField{{"used_memory", st.MemoryBytes}, {"filter_memory_bytes", st.MemoryBytes}}},
		{"Replication", []infoField{{"role", role}}},
		{"Cluster", []infoField{{"cluster_enabled", 0}, {"node_id", st.ID}, {"raft_role", st.Role},
			{"leader_id", st.LeaderID}, {"leader_resp_addr", st.LeaderRESP}, {"term", st.Term},
			{"commit_index", st.CommitIndex}, {"applied_index", st.AppliedIndex}, {"ready", b2i(st.Ready)}}},
		{"Keyspace", []infoField{{"db0", fmt.Sprintf("keys=%d,expires=0,avg_ttl=0", st.Filters)}}},
	}
}

// parseCommand: COMMAND, COMMAND COUNT, COMMAND INFO name..., COMMAND DOCS (an
// empty answer, enough for redis-cli).
func parseCommand(s *Server, args [][]byte) (op, error) {
	if len(args) == 1 {
		return localOp(func(c *session, w *reply) {
			cmds := s.sortedCommands()
			w.array(len(cmds))
			for _, cmd := range cmds {
				commandInfo(w, cmd)
			}
		}), nil
	}
	switch sub := strings.ToLower(string(args[1])); {
	case sub == "count" && len(args) == 2:
		return localOp(func(c *session, w *reply) { w.int(int64(len(s.cmds))) }), nil
	case sub == "docs":
		return localOp(func(c *session, w *reply) { w.mapHeader(0) }), nil
	case sub == "info":
		return localOp(func(c *session, w *reply) {
			w.array(len(args) - 2)
			for _, name := range args[2:] {
				if cmd, ok := s.cmds[strings.ToLower(string(name))]; ok {
					commandInfo(w, cmd)
				} else {
					w.null()
				}
			}
		}), nil
	case sub == "count":
		return op{}, redisError("ERR wrong number of arguments for 'command|count' command")
	}
	return op{}, redisError(fmt.Sprintf("ERR unknown subcommand '%s'. Try COMMAND HELP.", args[1]))
}

// commandInfo renders one command as Redis 7's ten-element COMMAND entry.
func commandInfo(w *reply, cmd *command) {
	w.array(10)
	w.bulkString(cmd.name)
	w.int(int64(cmd.arity))
	w.array(len(cmd.flags))
	for _, f := range cmd.flags {
		w.simple(f)
	}
	w.int(int64(cmd.firstKey))
	w.int(int64(cmd.lastKey))
	w.int(int64(cmd.step))
	w.array(0) // ACL categories
	w.array(0) // tips
	w.array(0) // key specs
	w.array(0) // subcommands
}
