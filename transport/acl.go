package transport

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/acl"
)

// Users (Redis ACLs, internal/acl). Every connection runs as a user: the
// default user until AUTH or HELLO AUTH names another. Before each command,
// after its arity, the server asks the user's rules (a bit test and the key
// patterns) and refuses with Redis's NOPERM words, recording the refusal in
// ACL LOG. Users are cluster state: ACL SETUSER and DELUSER are checked here,
// their clear-text passwords replaced by digests, and proposed to the group
// that holds the users (the map group; the only group of an unsharded
// cluster). A node that has not yet applied a change another node made is
// caught up before it refuses: a failed AUTH and a NOPERM are answered only
// after a linearizable read of that group, so a user or a grant is
// honoured on every node the moment ACL SETUSER returns. A revoked rule or a
// deleted user takes effect on another node once it applies the entry
// (milliseconds behind the leader); a deleted user's connections are closed
// then, as Redis closes them.

// ACLRegistry numbers the commands a server of this build serves, for the
// node's acl.Store (cmd/node builds the store before the cluster, whose
// group 0 holds the users).
func ACLRegistry() (*acl.Registry, error) {
	return acl.NewRegistry(commandNames(commandTable()))
}

// commandNames lists every command and subcommand ("client|list") of t.
func commandNames(t map[string]*command) []string {
	var names []string
	for _, c := range t {
		names = append(names, c.name)
		for _, sc := range c.subs {
			names = append(names, sc.name)
		}
	}
	return names
}

// users is the node's users: c.Users, or, without them, a store of the
// default user alone with RequirePass as its password (a server on its own,
// in tests).
func (c Config) users() *acl.Store {
	if c.Users != nil {
		return c.Users
	}
	reg, err := ACLRegistry()
	if err != nil {
		panic(err) // the ACL table misses a command: a build error the tests catch
	}
	return acl.NewStore(reg, c.RequirePass)
}

// aclLog is the node's ACL LOG: c.ACLLog, or a new one of the server's own.
func (c Config) aclLog() *acl.Log {
	if c.ACLLog != nil {
		return c.ACLLog
	}
	return acl.NewLog(acl.DefaultLogMax)
}

// initACL gives every command its id in the registry of the server's users.
func (s *Server) initACL() {
	users := s.cfg.users()
	s.users, s.aclReg, s.aclLog = users, users.Registry(), s.cfg.aclLog()
	s.usersChanged = make(chan struct{}, 1)
	users.OnChange(func() {
		select {
		case s.usersChanged <- struct{}{}:
		default:
		}
	})
	for _, c := range s.cmds {
		c.aclID = s.aclID(c.name)
		for _, sc := range c.subs {
			sc.aclID = s.aclID(sc.name)
		}
	}
}

func (s *Server) aclID(name string) int {
	id, ok := s.aclReg.ID(name)
	if !ok {
		panic(fmt.Sprintf("transport: command %q is not in the users' registry", name))
	}
	return id
}

// authRequired reports whether a new connection must authenticate first:
// the default user has a password (--requirepass), or is off.
func (s *Server) authRequired() bool { return s.users.AuthRequired() }

// errUserGone answers a connection whose user was deleted; it is closed
// after it, as Redis closes a deleted user's connections.
var errUserGone = redisError("NOAUTH the user this connection authenticated as was deleted")

// checkACL decides whether c's user may run cmd with args (cmd resolved and
// its arity checked): nil, or the refusal, recorded in ACL LOG. IDEM is
// judged by the command it wraps. A connection forwarded from another node
// (no account) was checked there.
func (s *Server) checkACL(c *session, cmd *command, args [][]byte) error {
	ctx := acl.ContextTopLevel
	if c.conn != nil && c.conn.tx.active {
		ctx = acl.ContextMulti
	}
	d, err := s.aclDenial(c, cmd, args, ctx)
	if d != nil {
		return redisError(d.Error())
	}
	return err
}

// errRulesChanged words EXEC's refusal of a queued command that c's user may
// no longer run, as Redis's EXEC does.
func errRulesChanged(d *acl.Denial) error {
	reason := "no permission to execute the command or subcommand"
	if d.Reason == acl.ReasonKey {
		reason = "no permission to touch the specified keys"
	}
	return redisError("NOPERM ACLs rules changed between the moment the transaction was accumulated " +
		"and the EXEC call. This command is no longer allowed for the following reason: " + reason)
}

// aclDenial is checkACL's decision: the refusal, logged in context ctx, or
// errUserGone (c then closes), or neither.
func (s *Server) aclDenial(c *session, cmd *command, args [][]byte, ctx acl.Context) (*acl.Denial, error) {
	acct := c.account
	if acct == nil {
		if c.conn == nil || c.conn.scope != nil {
			return nil, nil
		}
		// A client's connection that needed no AUTH when it opened, or
		// since the default user dropped its password: the default user.
		acct = s.users.Default()
	}
	u := acct.User()
	if u == nil {
		c.quit = true
		return nil, errUserGone
	}
	if u.Unrestricted() {
		return nil, nil
	}
	if cmd.name == "idem" && len(args) > idemPrefix {
		inner, err := s.resolve(args[idemPrefix:])
		if inner == nil || err != nil {
			return nil, nil // IDEM's own parse answers it
		}
		cmd, args = inner, args[idemPrefix:]
	}
	d := s.aclReg.Check(u, cmd.aclID, args)
	if d == nil {
		return nil, nil
	}
	// A grant made on another node may not have applied here yet.
	if s.usersCaughtUp() {
		if u = acct.User(); u == nil {
			c.quit = true
			return nil, errUserGone
		}
		if d = s.aclReg.Check(u, cmd.aclID, args); d == nil {
			return nil, nil
		}
	}
	s.aclLog.Add(d.Event(ctx, s.clientInfo(c)), time.Now())
	return d, nil
}

// clientInfo is the CLIENT INFO line of c, for ACL LOG.
func (s *Server) clientInfo(c *session) string {
	if c.conn == nil {
		return ""
	}
	return string(c.conn.appendInfo(nil, c, time.Now()))
}

// usersTimeout bounds the read that catches this node's users up.
const usersTimeout = 2 * time.Second

// usersCaughtUp makes this node's users reflect every change acknowledged
// before the call (a linearizable read of the group that holds them), and
// reports whether it could.
func (s *Server) usersCaughtUp() bool {
	if s.ctx == nil {
		return false // a server that parses only (tests)
	}
	return usersCaughtUp(s.ctx, s.be)
}

// usersCaughtUp is Server.usersCaughtUp for any face: a linearizable read of
// be's group that holds the users, within usersTimeout and ctx.
func usersCaughtUp(ctx context.Context, be Backend) bool {
	if be == nil {
		return false
	}
	rep, err := be.UsersReplica()
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, usersTimeout)
	defer cancel()
	return rep.ReadBarrier(ctx, cluster.ReadLinearizable) == nil
}

// authenticateUser checks AUTH's credentials (user nil: the default user)
// and returns the account to run as; a failure is caught up with the
// cluster's users and checked once more before it counts.
func (s *Server) authenticateUser(user, pass []byte) (*acl.Account, bool) {
	name := acl.DefaultUser
	if user != nil {
		name = string(user)
	}
	return authenticate(s.users, name, string(pass), s.usersCaughtUp)
}

// authenticate checks a user's name and password against users, as AUTH and
// the HTTP API do, and returns the account to run as. A failure may be a user
// or password made on another node and not applied here yet: once caughtUp
// has caught this node's users up with the cluster, they are checked once
// more before the failure counts.
func authenticate(users *acl.Store, name, pass string, caughtUp func() bool) (*acl.Account, bool) {
	if a, err := users.Authenticate(name, pass); err == nil {
		return a, true
	}
	if !caughtUp() {
		return nil, false
	}
	a, err := users.Authenticate(name, pass)
	return a, err == nil
}

// aclCommands: ACL and its subcommands.
func aclCommands() []*command {
	return []*command{{name: "acl", arity: -2, flags: []string{"sentinel"}, parse: parseContainerHelpOnly,
		subs: []*command{
			{name: "cat", arity: -2, flags: []string{"noscript", "loading", "stale", "sentinel"}, parse: parseACLCat},
			{name: "deluser", arity: -3, flags: []string{"admin", "noscript", "loading", "stale", "sentinel"}, parse: parseACLDelUser},
			{name: "dryrun", arity: -4, flags: []string{"admin", "noscript", "loading", "stale", "sentinel"}, parse: parseACLDryRun},
			{name: "genpass", arity: -2, flags: []string{"noscript", "loading", "stale", "sentinel"}, parse: parseACLGenPass},
			{name: "getuser", arity: 3, flags: []string{"admin", "noscript", "loading", "stale", "sentinel"}, parse: parseACLGetUser},
			{name: "help", arity: 2, flags: []string{"loading", "stale", "sentinel"}, parse: parseACLHelp},
			{name: "list", arity: 2, flags: []string{"admin", "noscript", "loading", "stale", "sentinel"}, parse: parseACLList},
			{name: "log", arity: -2, flags: []string{"admin", "noscript", "loading", "stale", "sentinel"}, parse: parseACLLog},
			{name: "setuser", arity: -3, flags: []string{"admin", "noscript", "loading", "stale", "sentinel"}, parse: parseACLSetUser},
			{name: "users", arity: 2, flags: []string{"admin", "noscript", "loading", "stale", "sentinel"}, parse: parseACLUsers},
			{name: "whoami", arity: 2, flags: []string{"noscript", "loading", "stale", "sentinel"}, parse: parseACLWhoAmI},
		}}}
}

// parseContainerHelpOnly answers a container called without a subcommand.
func parseContainerHelpOnly(s *Server, args [][]byte) (op, error) {
	return op{}, arityError(args[0])
}

// parseACLCat: ACL CAT [category].
func parseACLCat(s *Server, args [][]byte) (op, error) {
	if len(args) > 3 {
		return op{}, redisError("ERR wrong number of arguments for 'acl|cat' command")
	}
	if len(args) == 2 {
		names := acl.CategoryNames()
		return localOp(func(c *session, w *reply) {
			w.bulkStrings(names)
		}), nil
	}
	cat, ok := acl.CategoryByName(string(args[2]))
	if !ok {
		return op{}, redisError(acl.UnknownCategory(string(args[2])).Error())
	}
	cmds := s.aclReg.InCategory(cat)
	return localOp(func(c *session, w *reply) {
		w.bulkStrings(cmds)
	}), nil
}

// parseACLSetUser: ACL SETUSER name [rule ...], checked here and applied
// through the log.
func parseACLSetUser(s *Server, args [][]byte) (op, error) {
	name := string(args[2])
	rules := make([]string, len(args)-3)
	for i, r := range args[3:] {
		rules[i] = string(r)
	}
	if err := s.users.Validate(name, rules); err != nil {
		return op{}, redisError(err.Error())
	}
	hashed := acl.HashRules(rules)
	items := make([][]byte, len(hashed))
	for i, r := range hashed {
		items[i] = []byte(r)
	}
	return s.usersWrite(&fsm.Command{Op: fsm.OpACLSetUser, Key: name, Items: items}, func(w *reply, r *fsm.Result) {
		if r.Err == nil {
			s.usersApplied()
		}
		if errors.Is(r.Err, fsm.ErrACLRule) {
			// The state changed since the check: word it from the state now.
			if err := s.users.Validate(name, rules); err != nil {
				w.fail(redisError(err.Error()))
				return
			}
			w.fail(redisError(fsm.DescribeACLError(rules, r)))
			return
		}
		renderOK(w, r)
	}), nil
}

// parseACLDelUser: ACL DELUSER name [name ...].
func parseACLDelUser(s *Server, args [][]byte) (op, error) {
	names := make([]string, len(args)-2)
	for i, n := range args[2:] {
		names[i] = string(n)
		if names[i] == acl.DefaultUser {
			return op{}, redisError(acl.ErrDeleteDefault.Error())
		}
	}
	return s.usersWrite(&fsm.Command{Op: fsm.OpACLDelUser, Keys: names}, func(w *reply, r *fsm.Result) {
		if r.Err == nil {
			s.usersApplied()
		}
		if r.Err == nil && len(r.Ints) == 1 {
			w.int(r.Ints[0])
			return
		}
		renderOK(w, r)
	}), nil
}

// usersAppliedWait bounds how long an answered change to the users waits for
// the other nodes to apply it.
const usersAppliedWait = 500 * time.Millisecond

// usersApplied waits until the other nodes have applied the change to the
// users just answered (Backend.UsersApplied), so that a right taken away or a
// user deleted is in force everywhere when the client hears OK.
func (s *Server) usersApplied() {
	if s.be != nil && s.ctx != nil {
		s.be.UsersApplied(s.ctx, usersAppliedWait)
	}
}

// usersWrite is a write to the group that holds the users (conn.submit
// sends every ACL op there).
func (s *Server) usersWrite(cmd *fsm.Command, render func(*reply, *fsm.Result)) op {
	return writeOp(cmd, render)
}

// isUsersOp reports whether cmd changes users: it goes to the group that
// holds them, whatever its key.
func isUsersOp(cmd *fsm.Command) bool {
	return cmd.Op == fsm.OpACLSetUser || cmd.Op == fsm.OpACLDelUser || cmd.Op == fsm.OpACLLoad ||
		cmd.Op == fsm.OpACLRestore
}

// parseACLGetUser: ACL GETUSER name (nil for no such user).
func parseACLGetUser(s *Server, args [][]byte) (op, error) {
	name := string(args[2])
	return localOp(func(c *session, w *reply) {
		u := s.users.User(name)
		if u == nil {
			w.null()
			return
		}
		info := u.GetUser()
		w.mapHeader(len(acl.Fields))
		w.bulkString("flags")
		w.bulkStrings(info.Flags)
		w.bulkString("passwords")
		w.bulkStrings(info.Passwords)
		w.bulkString("commands")
		w.bulkString(info.Commands)
		w.bulkString("keys")
		w.bulkString(info.Keys)
		w.bulkString("channels")
		w.bulkString(info.Channels)
		w.bulkString("selectors")
		w.array(0)
	}), nil
}

// parseACLList: ACL LIST.
func parseACLList(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) {
		lines := s.users.List()
		w.bulkStrings(lines)
	}), nil
}

// parseACLUsers: ACL USERS.
func parseACLUsers(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) {
		names := s.users.Names()
		w.bulkStrings(names)
	}), nil
}

// parseACLWhoAmI: ACL WHOAMI.
func parseACLWhoAmI(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) {
		name := acl.DefaultUser
		if c.account != nil {
			name = c.account.Name()
		}
		w.bulkString(name)
	}), nil
}

// parseACLGenPass: ACL GENPASS [bits].
func parseACLGenPass(s *Server, args [][]byte) (op, error) {
	if len(args) > 3 {
		return op{}, redisError("ERR wrong number of arguments for 'acl|genpass' command")
	}
	bits := int64(acl.DefaultGenPassBits)
	if len(args) == 3 {
		v, ok := parseInt64(args[2])
		if !ok {
			return op{}, redisError("ERR value is not an integer or out of range")
		}
		bits = v
	}
	pass, err := acl.GenPass(bits)
	if err != nil {
		return op{}, redisError(err.Error())
	}
	return localOp(func(c *session, w *reply) { w.bulkString(pass) }), nil
}

// parseACLDryRun: ACL DRYRUN user command [arg ...].
func parseACLDryRun(s *Server, args [][]byte) (op, error) {
	user := string(args[2])
	cargs := args[3:]
	cmd, err := s.resolve(cargs)
	if cmd == nil {
		return op{}, redisError(acl.CommandNotFound(string(cargs[0])).Error())
	}
	if err != nil {
		return op{}, err
	}
	if cmd.name == "idem" && len(cargs) > idemPrefix {
		if inner, err := s.resolve(cargs[idemPrefix:]); inner != nil && err == nil {
			cmd, cargs = inner, cargs[idemPrefix:]
		}
	}
	verdict, err := s.users.DryRun(user, cmd.aclID, cargs)
	if err != nil {
		return op{}, redisError(err.Error())
	}
	return localOp(func(c *session, w *reply) {
		if verdict == "OK" {
			w.ok()
			return
		}
		w.bulkString(verdict)
	}), nil
}

// parseACLLog: ACL LOG [count | RESET].
func parseACLLog(s *Server, args [][]byte) (op, error) {
	if len(args) > 3 {
		return op{}, redisError("ERR wrong number of arguments for 'acl|log' command")
	}
	count := 10
	if len(args) == 3 {
		if keyword(args[2], "RESET") {
			return localOp(func(c *session, w *reply) { s.aclLog.Reset(); w.ok() }), nil
		}
		n, err := strconv.Atoi(string(args[2]))
		if err != nil || n < 0 {
			return op{}, redisError("ERR value is out of range, must be positive")
		}
		count = n
	}
	return localOp(func(c *session, w *reply) {
		entries := s.aclLog.Entries(count, time.Now())
		w.array(len(entries))
		for _, e := range entries {
			w.mapHeader(len(acl.LogFields))
			w.bulkString("count")
			w.int(e.Count)
			w.bulkString("reason")
			w.bulkString(e.Reason.String())
			w.bulkString("context")
			w.bulkString(e.Context.String())
			w.bulkString("object")
			w.bulkString(e.Object)
			w.bulkString("username")
			w.bulkString(e.Username)
			w.bulkString("age-seconds")
			w.double(e.AgeSeconds)
			w.bulkString("client-info")
			w.bulkString(e.ClientInfo)
			w.bulkString("entry-id")
			w.int(e.EntryID)
			w.bulkString("timestamp-created")
			w.int(e.Created)
			w.bulkString("timestamp-last-updated")
			w.int(e.LastUpdated)
		}
	}), nil
}

// parseACLHelp: ACL HELP.
func parseACLHelp(s *Server, args [][]byte) (op, error) {
	lines := []string{
		"ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"CAT [<category>]",
		"    List all commands that belong to <category>, or all command categories",
		"    when no category is specified.",
		"DELUSER <username> [<username> ...]",
		"    Delete a list of users.",
		"DRYRUN <username> <command> [<arg> ...]",
		"    Returns whether the user can execute the given command without executing the command.",
		"GETUSER <username>",
		"    Get the user's details.",
		"GENPASS [<bit-length>]",
		"    Generate a secure 256-bit user password. The optional `bit-length` argument can",
		"    be used to specify a different size.",
		"LIST",
		"    Show users details in config file format.",
		"LOG [<count> | RESET]",
		"    Show the ACL log entries.",
		"SETUSER <username> <attribute> [<attribute> ...]",
		"    Create or modify a user with the specified attributes.",
		"USERS",
		"    List all the registered usernames.",
		"WHOAMI",
		"    Return the current connection username.",
		"HELP",
		"    Print this help.",
	}
	return localOp(func(c *session, w *reply) {
		w.array(len(lines))
		for _, l := range lines {
			w.simple(l)
		}
	}), nil
}

// closeGoneUsers closes, whenever the users change, the connections of users
// that no longer exist, as Redis closes a deleted user's connections.
func (s *Server) closeGoneUsers() {
	defer s.bg.Done()
	for {
		select {
		case <-s.usersChanged:
		case <-s.ctx.Done():
			return
		}
		s.mu.Lock()
		gone := map[*conn]string{}
		for c := range s.conns {
			c.sess.mu.Lock()
			a := c.sess.account
			c.sess.mu.Unlock()
			if a != nil && a.User() == nil {
				gone[c] = a.Name()
			}
		}
		s.mu.Unlock()
		for c, user := range gone {
			s.log.Info("closing a connection of a deleted user", "remote", c.raddr, "user", user)
			c.nc.Close()
		}
	}
}

// bulkStrings writes ss as an array of bulk strings.
func (w *reply) bulkStrings(ss []string) {
	w.array(len(ss))
	for _, x := range ss {
		w.bulkString(x)
	}
}
