// Package acl is Redis 6/7's access control lists for what Rookery serves:
// users, the rules of ACL SETUSER, the categories of every command (Redis's
// own, RedisBloom's @bloom and @cuckoo, our @cbf), the checks a server runs
// before each command, ACL LOG, and the users' encoding for the log and
// snapshots. It has no network, no goroutines and no clock of its own.
//
// # Rules are the state; bitmaps are a node's
//
// What the cluster stores for a user is what ACL SETUSER leaves, exactly as
// Redis keeps it: the flags, password digests, key and channel patterns, and
// the command rules as an ordered list that starts from +@all or -@all
// ("+@all -@dangerous +bf.debug"). That is what Encode writes, ACL GETUSER
// and ACL LIST print, and what rebuilds the permissions. A User is compiled
// against a node's Registry (command names to small integer ids, built from
// the server's own command table) into a bitmap of ids and key globs sorted
// by the access they grant, so a check is a bit test and a pattern loop:
//
//	u := account.User()                  // atomic load; nil once deleted
//	if d := reg.Check(u, cmd.aclID, args); d != nil {
//		log.Add(d.Event(acl.ContextTopLevel, clientInfo), now)
//		return d                         // "NOPERM User bob has no permissions to run the 'bf.add' command"
//	}
//
// Ids are never stored or sent: nodes of different builds number commands
// differently, and a rule naming a command this build lacks simply allows or
// forbids nothing here, as a Redis user's rules do for a module's commands
// before it loads.
//
// # Through the log
//
// ACL SETUSER and DELUSER are writes. The node that receives one checks it
// against its own state and commands (Store.Validate: Redis's exact error
// for the first bad rule), replaces clear-text passwords by their digests
// (HashRules: >pass becomes #hash, <pass !hash, so no password reaches the
// log), and proposes the rules. The state machine applies them in log order
// with Store.ApplySetUser, which checks names for their form only: every
// replica reaches the same users whatever commands its build knows. The
// only failures left there are those the state decides (a password removed
// twice, a pattern after allkeys), the same on every replica; the answer
// goes back to the client, its Index pointing at the rule the client sent.
// A snapshot holds Store.Encode; restoring it is Decode then Store.Replace.
// An aclfile (--aclfile, Redis's format) is read with ParseFile at bootstrap
// and written once as a whole set.
//
// # Connections
//
// A connection holds the Account it authenticated as (Store.Authenticate,
// or Store.Default for a new one): the user's rules can change under it, as
// in Redis, and are read with one atomic load per command. A deleted user's
// Account answers nil, and the server then closes its connections, as
// Redis does. AUTH, HELLO and QUIT are allowed to every user (Redis's
// no-auth commands); IDEM is allowed to every user and the command it wraps
// is checked instead, with its own arguments: IDEM only makes a retry safe.
// The check comes after the arity check, as in Redis.
//
// The HTTP API has no commands: a request authenticates with
// Store.Authenticate as AUTH does, its reads need a user that is on, and
// its admin routes a user that holds the whole of @admin
// (User.HasCategory); its refusals go to ACL LOG with ContextHTTP
// (transport/DESIGN.md, "HTTP authentication").
//
// Redis's selectors ("(+get ~key)") and first-argument rules (+select|0)
// are not supported; channel rules are kept and shown (clients send &*),
// with no Pub/Sub here to apply them to. DESIGN.md says where each command
// sits and why.
package acl
