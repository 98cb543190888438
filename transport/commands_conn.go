package transport

import (
	"context"
	"fmt"
	"github.com/rookerydb/rookery/internal/acl"
	"slices"
	"time"
)

func connCommands() []*command {
	c, na := flagsConn, flagsNoAuth
	return []*command{
		{name: "ping", arity: -1, flags: na, parse: parsePing},
		{name: "echo", arity: 2, flags: c, parse: parseEcho},
		{name: "hello", arity: -1, flags: na, parse: parseHello},
		{name: "auth", arity: -2, flags: na, parse: parseAuth},
		{name: "select", arity: 2, flags: c, parse: parseSelect},
		{name: "quit", arity: -1, flags: na, parse: parseQuit},
	}
}

// set changes what other connections may read of c (CLIENT LIST) under its
// lock; c's own goroutine reads those fields without it.
func (c *session) set(f func()) {
	c.mu.Lock()
	f()
	c.mu.Unlock()
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

// errAuthBusyReply answers an AUTH or HELLO AUTH refused unchecked: too many
// attempts from its source wait already (errAuthBusy), or the wait was cut
// short by the connection's authentication deadline or the server closing,
// which close the connection after it. A refusal is not a failure: the
// connection stays (reconnecting would cost the server more than the answer).
var errAuthBusyReply = redisError("ERR too many authentication attempts from this address, try again later")

// checkAuth checks an AUTH's or HELLO AUTH's credentials for c once its
// source's turn comes (AuthGuard): nil, errWrongPass (counted, and c closed
// after its maxAuthFailures-th), or errAuthBusyReply. name is the command as
// the client sent it, which ACL LOG records for a failure, as Redis does.
func (s *Server) checkAuth(c *session, name, user, pass []byte) error {
	remote := ""
	if c.conn != nil {
		remote = c.conn.raddr
	}
	ctx, cancel := s.authWaitCtx(c)
	at, err := s.guard.enter(ctx, faceRESP, remote)
	cancel()
	if err != nil {
		c.quit = err != errAuthBusy
		return errAuthBusyReply
	}
	acct, ok := s.authenticateUser(user, pass)
	failures, wait := at.done(ok)
	if !ok {
		s.authFailed(c, remote, failures, wait)
		tried := acl.DefaultUser
		if user != nil {
			tried = string(user)
		}
		s.aclLog.Add(acl.Event{Reason: acl.ReasonAuth, Context: acl.ContextTopLevel, Object: string(name),
			Username: tried, ClientInfo: s.clientInfo(c)}, time.Now())
		return errWrongPass
	}
	c.set(func() { c.authed, c.account = true, acct })
	return nil
}

// authWaitCtx bounds how long an AUTH of c waits for its source's turn: until
// the server begins to close, and for a stranger until its authentication
// deadline, past which it would be closed anyway.
func (s *Server) authWaitCtx(c *session) (context.Context, context.CancelFunc) {
	if c.conn != nil && !c.authed && !c.conn.authBy.IsZero() {
		return context.WithDeadline(s.closing, c.conn.authBy)
	}
	return context.WithCancel(s.closing)
}

// authFailed counts a failed AUTH or HELLO AUTH of c and, at its
// maxAuthFailures-th, closes c after this reply.
func (s *Server) authFailed(c *session, remote string, failures int, wait time.Duration) {
	s.authFails.note(faceRESP, remote, failures, wait)
	c.authFailures++
	if c.authFailures >= maxAuthFailures {
		c.quit = true
	}
}

// refuseStranger answers NOAUTH to anything a connection sends before it
// authenticates, when a password is set, but the commands flagged noauth
// (AUTH, HELLO, PING, QUIT): known or not, any subcommand, any arity, so a
// stranger learns nothing of which commands exist (Redis checks the command
// and its arity first). It returns a nil error for a request that may go on.
// A refused known command counts as a rejected call of what it names.
func (s *Server) refuseStranger(c *session, args [][]byte) (op, error) {
	if c.authed || !s.authRequired() {
		return op{}, nil
	}
	cmd := s.lookup(args[0])
	if cmd == nil {
		return op{name: "unknown"}, errNoAuth
	}
	if slices.Contains(cmd.flags, "noauth") {
		return op{}, nil
	}
	if len(args) >= 2 && cmd.subs != nil {
		if sc := cmd.sub(args[1]); sc != nil {
			cmd = sc
		}
	}
	return op{name: cmd.name, def: cmd, rejected: true}, errNoAuth
}

// parseAuth: AUTH password / AUTH user password.
func parseAuth(s *Server, args [][]byte) (op, error) {
	if len(args) > 3 {
		return op{}, errSyntax
	}
	if len(args) == 2 && !s.authRequired() {
		return op{}, redisError(acl.ErrAuthNoPassword.Error())
	}
	var user []byte
	pass := args[len(args)-1]
	if len(args) == 3 {
		user = args[1]
	}
	return localOp(func(c *session, w *reply) {
		if err := s.checkAuth(c, args[0], user, pass); err != nil {
			w.fail(err)
			return
		}
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
		if user != nil {
			if err := s.checkAuth(c, args[0], user, pass); err != nil {
				w.fail(err)
				return
			}
		}
		if !c.authed {
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
			c.set(func() { c.name = string(name) })
		}
		if ver != 0 {
			c.set(func() { c.proto = int(ver) })
			w.proto = int(ver)
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
	writeBloomModule(w)
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

// parseQuit: QUIT replies OK and closes the connection once the reply is sent.
func parseQuit(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) { c.quit = true; w.ok() }), nil
}
