package transport

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Tests in this file drive users (Redis ACLs) through the RESP server with
// a fake backend holding a real state machine: ACL SETUSER's rules as AUTH
// and the commands see them, the other ACL subcommands, AUTH and HELLO
// AUTH, key patterns on every key of a command, MULTI, IDEM, and a deleted
// user's connection. Replies are compared as their exact RESP text, with
// Redis 7.2's words.

// aclServer starts a server with cfg and returns it with a connection of
// the default user, which may do anything.
func aclServer(t *testing.T, cfg Config) (*testServer, *rawConn) {
	t.Helper()
	ts := mustStartServer(t, cfg)
	admin := dialRaw(t, ts.addr)
	if cfg.RequirePass != "" {
		wantReply(t, admin, "+OK\r\n", "AUTH", cfg.RequirePass)
	}
	return ts, admin
}

// wantReply sends args on c and fails the test unless the reply is want.
func wantReply(t *testing.T, c *rawConn, want string, args ...string) {
	t.Helper()
	if got := c.do(args...); got != want {
		t.Errorf("%v:\n got %q\nwant %q", args, got, want)
	}
}

// authAs dials a new connection and sends AUTH user pass on it: each
// attempt on its own connection, as the server closes one at its third
// failure. It returns the connection and the reply.
func authAs(t *testing.T, ts *testServer, user, pass string) (*rawConn, string) {
	t.Helper()
	c := dialRaw(t, ts.addr)
	return c, c.do("AUTH", user, pass)
}

// dialAs is a new connection authenticated as user.
func dialAs(t *testing.T, ts *testServer, user, pass string) *rawConn {
	t.Helper()
	c, got := authAs(t, ts, user, pass)
	if got != "+OK\r\n" {
		t.Fatalf("AUTH %s: %q", user, got)
	}
	return c
}

// respBulk, respArr and respErr render RESP2 replies.
func respBulk(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }

func respArr(items ...string) string {
	return fmt.Sprintf("*%d\r\n", len(items)) + strings.Join(items, "")
}

func respErr(s string) string { return "-" + s + "\r\n" }

// respBulks is an array of bulk strings.
func respBulks(ss ...string) string {
	items := make([]string, len(ss))
	for i, s := range ss {
		items[i] = respBulk(s)
	}
	return respArr(items...)
}

// pwDigest is a password's digest as Redis stores and shows it.
func pwDigest(pass string) string {
	h := sha256.Sum256([]byte(pass))
	return hex.EncodeToString(h[:])
}

const wrongPassReply = "-WRONGPASS invalid username-password pair or user is disabled.\r\n"

// permReply and keyReply are the NOPERM replies.
func permReply(user, cmd string) string { return respErr(noPerm(user, cmd)) }

const keyReply = "-" + errNoKeyPerm + "\r\n"

// TestACLSetUserRules: each of ACL SETUSER's rules, as AUTH and the
// commands of a connection of the user see it. A connection runs under its
// user's rules as they are at each command: a change applies to it at once.
func TestACLSetUserRules(t *testing.T) {
	t.Run("on and off", func(t *testing.T) {
		ts, admin := aclServer(t, Config{})
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "on", ">pw", "~*", "+@all")
		x := dialAs(t, ts, "u", "pw")
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "off")
		if _, got := authAs(t, ts, "u", "pw"); got != wrongPassReply {
			t.Errorf("AUTH of a user turned off: %q", got)
		}
		// As in Redis, off stops new authentications, not the connections
		// that already run as the user.
		wantReply(t, x, ":1\r\n", "BF.ADD", "k", "a")
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "on")
		dialAs(t, ts, "u", "pw")
		// A new user starts off, with no password and no rights.
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "fresh")
		wantReply(t, admin, respBulks("user default on nopass sanitize-payload ~* &* +@all",
			"user fresh off sanitize-payload resetchannels -@all",
			"user u on sanitize-payload #"+pwDigest("pw")+" ~* resetchannels +@all"), "ACL", "LIST")
	})

	t.Run("passwords", func(t *testing.T) {
		ts, admin := aclServer(t, Config{})
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "on", ">p1", ">p2", "+@all")
		dialAs(t, ts, "u", "p1")
		dialAs(t, ts, "u", "p2")
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "<p1")
		if _, got := authAs(t, ts, "u", "p1"); got != wrongPassReply {
			t.Errorf("AUTH with a removed password: %q", got)
		}
		dialAs(t, ts, "u", "p2")
		wantReply(t, admin, respErr("ERR Error in ACL SETUSER modifier '<p1': The password you are trying to remove from the user does not exist"),
			"ACL", "SETUSER", "u", "<p1")
		// #hash adds a password by its digest, !hash removes it.
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "#"+pwDigest("p3"))
		dialAs(t, ts, "u", "p3")
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "!"+pwDigest("p3"))
		wantReply(t, admin, respArr(respBulk("flags"), respBulks("on", "sanitize-payload"), respBulk("passwords"), respBulks(pwDigest("p2")),
			respBulk("commands"), respBulk("+@all"), respBulk("keys"), respBulk(""), respBulk("channels"), respBulk(""), respBulk("selectors"), "*0\r\n"),
			"ACL", "GETUSER", "u")
		wantReply(t, admin, respErr("ERR Error in ACL SETUSER modifier '#abc': The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"),
			"ACL", "SETUSER", "u", "#abc")
		wantReply(t, admin, respErr("ERR Error in ACL SETUSER modifier '#"+strings.ToUpper(pwDigest("x"))+"': The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"),
			"ACL", "SETUSER", "u", "#"+strings.ToUpper(pwDigest("x")))
		// nopass: any password will do, and the passwords go.
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "nopass")
		dialAs(t, ts, "u", "anything")
		wantReply(t, admin, respArr(respBulk("flags"), respBulks("on", "nopass", "sanitize-payload"), respBulk("passwords"), "*0\r\n",
			respBulk("commands"), respBulk("+@all"), respBulk("keys"), respBulk(""), respBulk("channels"), respBulk(""), respBulk("selectors"), "*0\r\n"),
			"ACL", "GETUSER", "u")
		// resetpass: no password at all, and not nopass: nothing will do.
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", ">p4", "resetpass")
		for _, p := range []string{"anything", "p4"} {
			if _, got := authAs(t, ts, "u", p); got != wrongPassReply {
				t.Errorf("AUTH %s after resetpass: %q", p, got)
			}
		}
	})

	t.Run("keys", func(t *testing.T) {
		ts, admin := aclServer(t, Config{})
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "on", ">pw", "+@all", "~a*", "%R~r*", "%W~w*")
		wantReply(t, admin, ":1\r\n", "BF.ADD", "r1", "x")
		x := dialAs(t, ts, "u", "pw")
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"BF.ADD", "a1", "x"}, ":1\r\n"},
			{[]string{"BF.ADD", "b1", "x"}, keyReply},
			{[]string{"BF.EXISTS", "r1", "x"}, ":1\r\n"},
			{[]string{"BF.ADD", "r1", "y"}, keyReply},
			{[]string{"BF.ADD", "w1", "x"}, ":1\r\n"},
			{[]string{"BF.EXISTS", "w1", "x"}, keyReply},
		} {
			wantReply(t, x, tc.want, tc.args...)
		}
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "allkeys")
		wantReply(t, x, ":1\r\n", "BF.ADD", "b1", "x")
		wantReply(t, x, ":1\r\n", "BF.EXISTS", "w1", "x")
		wantReply(t, admin, respErr("ERR Error in ACL SETUSER modifier '~c*': Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"),
			"ACL", "SETUSER", "u", "~c*")
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "resetkeys")
		wantReply(t, x, keyReply, "BF.EXISTS", "a1", "x")
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "resetkeys", "~c*")
		wantReply(t, x, ":1\r\n", "BF.ADD", "c1", "x")
		wantReply(t, x, keyReply, "BF.ADD", "a1", "y")
	})

	t.Run("commands", func(t *testing.T) {
		ts, admin := aclServer(t, Config{})
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "on", ">pw", "~*", "+bf.exists")
		x := dialAs(t, ts, "u", "pw")
		wantReply(t, x, ":0\r\n", "BF.EXISTS", "k", "x")
		wantReply(t, x, permReply("u", "bf.add"), "BF.ADD", "k", "x")
		// Nothing but what was granted: not PING, not ACL WHOAMI.
		wantReply(t, x, permReply("u", "ping"), "PING")
		wantReply(t, x, permReply("u", "acl|whoami"), "ACL", "WHOAMI")
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "+@bloom", "-bf.add")
		wantReply(t, x, "*1\r\n:1\r\n", "BF.INSERT", "k", "ITEMS", "x")
		wantReply(t, x, permReply("u", "bf.add"), "BF.ADD", "k", "y")
		wantReply(t, x, permReply("u", "cf.add"), "CF.ADD", "c", "y")
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "-@bloom", "+acl|whoami")
		wantReply(t, x, permReply("u", "bf.exists"), "BF.EXISTS", "k", "x")
		wantReply(t, x, respBulk("u"), "ACL", "WHOAMI")
		// Redis keeps the rules in order, a rule replacing an earlier one on
		// the same name.
		if got := admin.do("ACL", "GETUSER", "u"); !strings.Contains(got, respBulk("commands")+respBulk("-@all +bf.exists -bf.add -@bloom +acl|whoami")) {
			t.Errorf("ACL GETUSER u: %q", got)
		}
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "allcommands")
		wantReply(t, x, "+PONG\r\n", "PING")
		wantReply(t, x, ":1\r\n", "BF.ADD", "k", "z")
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "-@write")
		wantReply(t, x, permReply("u", "bf.add"), "BF.ADD", "k", "w")
		wantReply(t, x, permReply("u", "flushall"), "FLUSHALL")
		wantReply(t, x, ":1\r\n", "BF.EXISTS", "k", "z")
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "nocommands")
		wantReply(t, x, permReply("u", "bf.exists"), "BF.EXISTS", "k", "z")
		// AUTH, HELLO and QUIT are every user's, as in Redis.
		wantReply(t, x, "+OK\r\n", "AUTH", "u", "pw")
		if got := x.do("HELLO", "2"); !strings.HasPrefix(got, "*14\r\n") {
			t.Errorf("HELLO of a user with no commands: %q", got)
		}
		wantReply(t, x, "+OK\r\n", "QUIT")
	})

	t.Run("reset", func(t *testing.T) {
		ts, admin := aclServer(t, Config{})
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "on", ">pw", "~*", "&*", "+@all")
		x := dialAs(t, ts, "u", "pw")
		wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "reset")
		wantReply(t, admin, respArr(respBulk("flags"), respBulks("off", "sanitize-payload"), respBulk("passwords"), "*0\r\n",
			respBulk("commands"), respBulk("-@all"), respBulk("keys"), respBulk(""), respBulk("channels"), respBulk(""), respBulk("selectors"), "*0\r\n"),
			"ACL", "GETUSER", "u")
		wantReply(t, x, permReply("u", "bf.add"), "BF.ADD", "k", "x")
		if _, got := authAs(t, ts, "u", "pw"); got != wrongPassReply {
			t.Errorf("AUTH after reset: %q", got)
		}
	})
}

// TestACLSetUserErrors: ACL SETUSER refuses a bad rule in Redis's words and
// changes nothing: all the rules apply, or none.
func TestACLSetUserErrors(t *testing.T) {
	_, admin := aclServer(t, Config{})
	const pre = "ERR Error in ACL SETUSER modifier "
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, pre + "'bogus': Syntax error"},
		{[]string{"on", ">pw", "+nosuch"}, pre + "'+nosuch': Unknown command or category name in ACL"},
		{[]string{"+@nosuch"}, pre + "'+@nosuch': Unknown command or category name in ACL"},
		{[]string{"-nosuch"}, pre + "'-nosuch': Unknown command or category name in ACL"},
		{[]string{"allkeys", "~x"}, pre + "'~x': Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"},
		{[]string{"(+get ~k)"}, pre + "'(+get ~k)': Syntax error"},
		{[]string{"+acl|whoami|x"}, pre + "'+acl|whoami|x': Allowing first-arg of a subcommand is not supported"},
	} {
		wantReply(t, admin, respErr(tc.want), append([]string{"ACL", "SETUSER", "v"}, tc.args...)...)
	}
	wantReply(t, admin, "$-1\r\n", "ACL", "GETUSER", "v")
	wantReply(t, admin, respErr("ERR Usernames can't contain spaces or null characters"), "ACL", "SETUSER", "a b", "on")
	wantReply(t, admin, respErr("ERR wrong number of arguments for 'acl|setuser' command"), "ACL", "SETUSER")
	wantReply(t, admin, respErr("ERR unknown subcommand 'NOPE'. Try ACL HELP."), "ACL", "NOPE")
	wantReply(t, admin, respBulks("default"), "ACL", "USERS")
}

// TestACLUsersAndWhoAmI: ACL GETUSER, LIST, USERS, WHOAMI and DELUSER.
func TestACLUsersAndWhoAmI(t *testing.T) {
	ts, admin := aclServer(t, Config{})
	wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "bob", "on", ">pw", "~a*", "%R~r*", "&ch", "-@all", "+bf.exists", "+@cuckoo", "-cf.del")
	wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "alice", "on", "nopass", "allkeys", "allchannels", "+@all", "-@dangerous")
	wantReply(t, admin, respArr(respBulk("flags"), respBulks("on", "sanitize-payload"), respBulk("passwords"), respBulks(pwDigest("pw")),
		respBulk("commands"), respBulk("-@all +bf.exists +@cuckoo -cf.del"), respBulk("keys"), respBulk("~a* %R~r*"),
		respBulk("channels"), respBulk("&ch"), respBulk("selectors"), "*0\r\n"), "ACL", "GETUSER", "bob")
	wantReply(t, admin, "$-1\r\n", "ACL", "GETUSER", "nosuch")
	wantReply(t, admin, respBulks(
		"user alice on nopass sanitize-payload ~* &* +@all -@dangerous",
		"user bob on sanitize-payload #"+pwDigest("pw")+" ~a* %R~r* resetchannels &ch -@all +bf.exists +@cuckoo -cf.del",
		"user default on nopass sanitize-payload ~* &* +@all"), "ACL", "LIST")
	wantReply(t, admin, respBulks("alice", "bob", "default"), "ACL", "USERS")

	wantReply(t, admin, respBulk("default"), "ACL", "WHOAMI")
	a := dialAs(t, ts, "alice", "whatever")
	wantReply(t, a, respBulk("alice"), "ACL", "WHOAMI")
	wantReply(t, a, "+OK\r\n", "AUTH", "default", "")
	wantReply(t, a, respBulk("default"), "ACL", "WHOAMI")

	wantReply(t, admin, respErr("ERR The 'default' user cannot be removed"), "ACL", "DELUSER", "default")
	wantReply(t, admin, respErr("ERR The 'default' user cannot be removed"), "ACL", "DELUSER", "alice", "default")
	wantReply(t, admin, respBulks("alice", "bob", "default"), "ACL", "USERS")
	wantReply(t, admin, ":2\r\n", "ACL", "DELUSER", "alice", "bob", "nosuch")
	wantReply(t, admin, ":0\r\n", "ACL", "DELUSER", "alice")
	wantReply(t, admin, respBulks("default"), "ACL", "USERS")
	if _, got := authAs(t, ts, "alice", "x"); got != wrongPassReply {
		t.Errorf("AUTH as a deleted user: %q", got)
	}
}

// TestACLCatAndGenPass: ACL CAT lists Redis's categories, RedisBloom's and
// ours; ACL GENPASS makes random hex passwords of the bits asked.
func TestACLCatAndGenPass(t *testing.T) {
	_, admin := aclServer(t, Config{})
	cats := admin.do("ACL", "CAT")
	for _, c := range []string{"keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
		"bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking",
		"dangerous", "connection", "transaction", "scripting", "bloom", "cuckoo", "cms", "topk", "tdigest", "cbf"} {
		if !strings.Contains(cats, respBulk(c)) {
			t.Errorf("ACL CAT lacks %s: %q", c, cats)
		}
	}
	wantReply(t, admin, respErr("ERR Unknown category 'nosuch'"), "ACL", "CAT", "nosuch")
	tx := admin.do("ACL", "CAT", "transaction")
	if !strings.HasPrefix(tx, "*5\r\n") {
		t.Errorf("ACL CAT transaction: %q", tx)
	}
	for _, c := range []string{"multi", "exec", "discard", "watch", "unwatch"} {
		if !strings.Contains(tx, respBulk(c)) {
			t.Errorf("ACL CAT transaction lacks %s: %q", c, tx)
		}
	}

	hexOf := func(n int) *regexp.Regexp { return regexp.MustCompile(fmt.Sprintf(`^\$%d\r\n[0-9a-f]{%d}\r\n$`, n, n)) }
	p1, p2 := admin.do("ACL", "GENPASS"), admin.do("ACL", "GENPASS")
	if !hexOf(64).MatchString(p1) || p1 == p2 {
		t.Errorf("ACL GENPASS: %q then %q", p1, p2)
	}
	for bits, chars := range map[string]int{"32": 8, "5": 2, "1000": 250} {
		if got := admin.do("ACL", "GENPASS", bits); !hexOf(chars).MatchString(got) {
			t.Errorf("ACL GENPASS %s: %q", bits, got)
		}
	}
	if got := admin.do("ACL", "GENPASS", "4096"); !strings.HasPrefix(got, "$1024\r\n") || len(got) != len("$1024\r\n")+1024+2 {
		t.Errorf("ACL GENPASS 4096: %q", got)
	}
	for _, bits := range []string{"0", "-1", "4097"} {
		wantReply(t, admin, respErr("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096"),
			"ACL", "GENPASS", bits)
	}
	wantReply(t, admin, respErr("ERR value is not an integer or out of range"), "ACL", "GENPASS", "x")
}

// TestACLDryRun: ACL DRYRUN says what the user's command would meet, naming
// the key it may not touch, and logs nothing.
func TestACLDryRun(t *testing.T) {
	_, admin := aclServer(t, Config{})
	wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "on", ">pw", "~a*", "+bf.add")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"u", "BF.ADD", "a1", "x"}, "+OK\r\n"},
		{[]string{"u", "bf.add", "b1", "x"}, respBulk("User u has no permissions to access the 'b1' key")},
		{[]string{"u", "BF.EXISTS", "a1", "x"}, respBulk("User u has no permissions to run the 'bf.exists' command")},
		{[]string{"u", "DEL", "a1", "b1"}, respBulk("User u has no permissions to run the 'del' command")},
		{[]string{"u", "IDEM", "7", "1", "BF.ADD", "b2", "x"}, respBulk("User u has no permissions to access the 'b2' key")},
		{[]string{"nosuch", "PING"}, respErr("ERR User 'nosuch' not found")},
		{[]string{"u", "NOSUCH"}, respErr("ERR Command 'NOSUCH' not found")},
		// Worded as the command alone would be answered: its name as sent.
		{[]string{"u", "BF.ADD", "a1"}, respErr("ERR wrong number of arguments for 'BF.ADD' command")},
	} {
		wantReply(t, admin, tc.want, append([]string{"ACL", "DRYRUN"}, tc.args...)...)
	}
	wantReply(t, admin, "*0\r\n", "ACL", "LOG")
	wantReply(t, admin, ":0\r\n", "EXISTS", "a1")
}

// TestACLLog: every refusal is an ACL LOG entry with its reason (command,
// key or auth), context, object and user; a refusal like a recent one
// counts in it; LOG count and LOG RESET; and no password, in clear or
// digested, ever appears in the log.
func TestACLLog(t *testing.T) {
	const pass, guess1, guess2 = "Sup3r-Secret-Pw", "Wrong-Guess-One", "Wrong-Guess-Two"
	ts, admin := aclServer(t, Config{})
	wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "on", ">"+pass, "~a*", "+bf.add", "+bf.exists", "+multi", "+discard")
	x := dialAs(t, ts, "u", pass)
	wantReply(t, x, permReply("u", "bf.madd"), "BF.MADD", "a1", "i")
	wantReply(t, x, keyReply, "BF.ADD", "b1", "i")
	if _, got := authAs(t, ts, "u", guess1); got != wrongPassReply {
		t.Fatalf("AUTH with a wrong password: %q", got)
	}
	h := dialRaw(t, ts.addr)
	wantReply(t, h, wrongPassReply, "HELLO", "3", "AUTH", "nosuch", guess2)
	wantReply(t, x, "+OK\r\n", "MULTI")
	wantReply(t, x, permReply("u", "bf.madd"), "BF.MADD", "a1", "i")
	wantReply(t, x, "+OK\r\n", "DISCARD")
	wantReply(t, x, permReply("u", "bf.madd"), "BF.MADD", "a2", "i") // counts in the first entry

	raw := admin.do("ACL", "LOG")
	for _, secret := range []string{pass, guess1, guess2, pwDigest(pass), pwDigest(guess1), pwDigest(guess2)} {
		if strings.Contains(raw, secret) {
			t.Errorf("ACL LOG holds %q: %q", secret, raw)
		}
	}

	// go-redis reads the entries, client-info included.
	ctx := context.Background()
	c := newGoRedis(t, ts.addr, 3, "")
	entries := res(c.ACLLog(ctx, 10).Result()).must(t)
	type row struct{ reason, context, object, user string }
	want := []row{ // newest first
		{"command", "toplevel", "bf.madd", "u"},
		{"command", "multi", "bf.madd", "u"},
		{"auth", "toplevel", "HELLO", "nosuch"},
		{"auth", "toplevel", "AUTH", "u"},
		{"key", "toplevel", "b1", "u"},
	}
	if len(entries) != len(want) {
		t.Fatalf("ACL LOG: %d entries, want %d: %q", len(entries), len(want), raw)
	}
	ids := map[int64]bool{}
	for i, e := range entries {
		if got := (row{e.Reason, e.Context, e.Object, e.Username}); got != want[i] {
			t.Errorf("entry %d: %+v, want %+v", i, got, want[i])
		}
		if e.ClientInfo == nil || e.AgeSeconds < 0 || e.TimestampCreated == 0 || e.TimestampLastUpdated < e.TimestampCreated {
			t.Errorf("entry %d: %+v", i, e)
		}
		ids[e.EntryID] = true
	}
	if entries[0].Count != 2 || entries[1].Count != 1 || len(ids) != len(entries) {
		t.Errorf("counts %d and %d, ids %v", entries[0].Count, entries[1].Count, ids)
	}
	if entries[0].ClientInfo.User != "u" {
		t.Errorf("client-info of the refused connection: %+v", entries[0].ClientInfo)
	}
	if got := res(c.ACLLog(ctx, 1).Result()).must(t); len(got) != 1 || got[0].EntryID != entries[0].EntryID {
		t.Errorf("ACL LOG 1: %+v", got)
	}
	res(c.ACLLogReset(ctx).Result()).must(t)
	wantReply(t, admin, "*0\r\n", "ACL", "LOG")
	// Ids go on after a reset.
	wantReply(t, x, keyReply, "BF.EXISTS", "c1", "i")
	after := res(c.ACLLog(ctx, 10).Result()).must(t)
	if len(after) != 1 || ids[after[0].EntryID] || after[0].EntryID < int64(len(ids)) {
		t.Errorf("after RESET: %+v (ids before %v)", after, ids)
	}
	wantReply(t, admin, respErr("ERR wrong number of arguments for 'acl|log' command"), "ACL", "LOG", "1", "2")
}

// TestACLAuthForms: AUTH user pass and HELLO 3 AUTH user pass, go-redis's
// Username under RESP2 and RESP3, the default user's password
// (--requirepass) beside other users', and a default user turned off.
func TestACLAuthForms(t *testing.T) {
	ts, admin := aclServer(t, Config{RequirePass: "s3cret"})
	wantReply(t, admin, respBulk("default"), "ACL", "WHOAMI")
	wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "on", ">pw", "~*", "+@all")

	a := dialRaw(t, ts.addr)
	wantReply(t, a, "-NOAUTH Authentication required.\r\n", "BF.ADD", "k", "x")
	wantReply(t, a, "+OK\r\n", "AUTH", "u", "pw")
	wantReply(t, a, respBulk("u"), "ACL", "WHOAMI")
	wantReply(t, a, "+OK\r\n", "AUTH", "s3cret")
	wantReply(t, a, respBulk("default"), "ACL", "WHOAMI")
	wantReply(t, a, "+OK\r\n", "AUTH", "default", "s3cret")

	h := dialRaw(t, ts.addr)
	if got := h.do("HELLO", "3", "AUTH", "u", "pw"); !strings.HasPrefix(got, "%7\r\n") {
		t.Fatalf("HELLO 3 AUTH u pw: %q", got)
	}
	wantReply(t, h, respBulk("u"), "ACL", "WHOAMI")
	wantReply(t, h, wrongPassReply, "HELLO", "3", "AUTH", "u", "nope")
	wantReply(t, h, respBulk("u"), "ACL", "WHOAMI") // a failed AUTH leaves the user as it was

	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		c := newGoRedisUser(t, ts.addr, proto, "u", "pw")
		if got := res(c.Do(ctx, "ACL", "WHOAMI").Text()).must(t); got != "u" {
			t.Errorf("RESP%d: go-redis with Username runs as %s", proto, got)
		}
		res(c.BFAdd(ctx, "k", "x").Result()).must(t)
		bad := newGoRedisUser(t, ts.addr, proto, "u", "nope")
		wantErr(t, bad.Ping(ctx).Err(), "WRONGPASS invalid username-password pair or user is disabled.")
	}
	// go-redis tries HELLO 3 AUTH, then AUTH, each in lower case: ACL LOG
	// records each failure under the command's name as sent, as Redis does.
	c := newGoRedis(t, ts.addr, 2, "s3cret")
	var objs []string
	for _, e := range res(c.ACLLog(ctx, 10).Result()).must(t) {
		objs = append(objs, e.Reason+":"+e.Object+":"+e.Username)
	}
	if want := "[auth:auth:u auth:hello:u auth:HELLO:u]"; fmt.Sprint(objs) != want {
		t.Errorf("ACL LOG after failed authentications: %v, want %s", objs, want)
	}

	// A default user turned off lets no one in without AUTH.
	ts2, admin2 := aclServer(t, Config{})
	wantReply(t, admin2, "+OK\r\n", "ACL", "SETUSER", "u", "on", ">pw", "~*", "+@all")
	wantReply(t, admin2, respErr("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"),
		"AUTH", "pw")
	wantReply(t, admin2, "+OK\r\n", "ACL", "SETUSER", "default", "off")
	d := dialRaw(t, ts2.addr)
	wantReply(t, d, "-NOAUTH Authentication required.\r\n", "BF.ADD", "k", "x")
	wantReply(t, d, "+OK\r\n", "AUTH", "u", "pw")
	wantReply(t, d, ":1\r\n", "BF.ADD", "k", "x")
}

// TestACLKeysOfEveryKind: a user's patterns apply to every key a command
// names, a command over many keys (DEL, EXISTS, UNLINK) included: one key
// out of the patterns refuses the whole command and nothing is done.
// SCAN, KEYS and DBSIZE are not filtered by the patterns, as in Redis: a
// user who may run them sees every key's name.
func TestACLKeysOfEveryKind(t *testing.T) {
	ts, admin := aclServer(t, Config{})
	for _, k := range []string{"a1", "a2", "b1"} {
		wantReply(t, admin, ":1\r\n", "BF.ADD", k, "x")
	}
	wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "on", ">pw", "~a*", "+@all")
	x := dialAs(t, ts, "u", "pw")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"DEL", "a1", "b1"}, keyReply},
		{[]string{"UNLINK", "b1", "a1"}, keyReply},
		{[]string{"EXISTS", "a1", "b1"}, keyReply},
		{[]string{"TYPE", "b1"}, keyReply},
		{[]string{"RENAME", "a1", "b2"}, keyReply},
		{[]string{"RENAME", "b1", "a3"}, keyReply},
		{[]string{"EXPIRE", "b1", "100"}, keyReply},
		{[]string{"MEMORY", "USAGE", "b1"}, keyReply},
		{[]string{"WATCH", "a1", "b1"}, keyReply},
		{[]string{"EXISTS", "a1", "a2"}, ":2\r\n"},
	} {
		wantReply(t, x, tc.want, tc.args...)
	}
	wantReply(t, admin, ":3\r\n", "EXISTS", "a1", "a2", "b1")
	log := admin.do("ACL", "LOG", "1")
	if !strings.Contains(log, respBulk("object")+respBulk("b1")) || !strings.Contains(log, respBulk("reason")+respBulk("key")) {
		t.Errorf("ACL LOG 1 after WATCH a1 b1: %q", log)
	}
	wantReply(t, x, ":2\r\n", "DEL", "a1", "a2")

	wantReply(t, x, respBulks("b1"), "KEYS", "*")
	wantReply(t, x, respArr(respBulk("0"), respBulks("b1")), "SCAN", "0")
	wantReply(t, x, ":1\r\n", "DBSIZE")
}

// TestACLMulti: a command refused while queued fails the transaction:
// EXEC answers EXECABORT and nothing of it runs. The refusal is logged in
// the multi context. EXEC checks each queued command again, as Redis's
// does: one its user may no longer run when EXEC comes is answered with
// Redis's refusal in its place and not run, and the others run.
func TestACLMulti(t *testing.T) {
	ts, admin := aclServer(t, Config{})
	wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "on", ">pw", "~a*", "+@bloom", "+multi", "+exec")
	wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "v", "on", ">pw", "~*", "+@bloom")
	x := dialAs(t, ts, "u", "pw")
	wantReply(t, x, "+OK\r\n", "MULTI")
	wantReply(t, x, "+QUEUED\r\n", "BF.ADD", "a1", "x")
	wantReply(t, x, keyReply, "BF.ADD", "b1", "x")
	wantReply(t, x, permReply("u", "cf.add"), "CF.ADD", "a2", "x")
	wantReply(t, x, "-EXECABORT Transaction discarded because of previous errors.\r\n", "EXEC")
	wantReply(t, admin, ":0\r\n", "EXISTS", "a1")
	log := admin.do("ACL", "LOG")
	if n := strings.Count(log, respBulk("context")+respBulk("multi")); n != 2 {
		t.Errorf("ACL LOG: %d refusals in multi, want 2: %q", n, log)
	}
	// Unrefused, the same transaction runs.
	wantReply(t, x, "+OK\r\n", "MULTI")
	wantReply(t, x, "+QUEUED\r\n", "BF.ADD", "a1", "x")
	wantReply(t, x, respArr(":1\r\n"), "EXEC")
	// MULTI itself is a command a user may lack.
	y := dialAs(t, ts, "v", "pw")
	wantReply(t, y, permReply("v", "multi"), "MULTI")

	// Rules changed between queuing and EXEC (one slot: {t}).
	wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "~c*")
	wantReply(t, admin, ":1\r\n", "BF.ADD", "c{t}1", "x")
	wantReply(t, x, "+OK\r\n", "MULTI")
	wantReply(t, x, "+QUEUED\r\n", "BF.ADD", "a{t}2", "x")
	wantReply(t, x, "+QUEUED\r\n", "BF.EXISTS", "a{t}2", "x")
	wantReply(t, x, "+QUEUED\r\n", "BF.EXISTS", "c{t}1", "x")
	wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "-bf.add", "resetkeys", "~a*")
	wantReply(t, admin, "+OK\r\n", "ACL", "LOG", "RESET")
	const changed = "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. " +
		"This command is no longer allowed for the following reason: "
	wantReply(t, x, respArr(respErr(changed+"no permission to execute the command or subcommand"), ":0\r\n",
		respErr(changed+"no permission to touch the specified keys")), "EXEC")
	wantReply(t, admin, ":0\r\n", "EXISTS", "a{t}2")
	log = admin.do("ACL", "LOG")
	if n := strings.Count(log, respBulk("context")+respBulk("multi")); n != 2 ||
		!strings.Contains(log, respBulk("object")+respBulk("c{t}1")) || !strings.Contains(log, respBulk("object")+respBulk("bf.add")) {
		t.Errorf("ACL LOG after EXEC: %q", log)
	}
}

// TestACLIdem: IDEM, which every user may send, is judged by the command it
// wraps, with that command's own arguments; the log names the inner
// command.
func TestACLIdem(t *testing.T) {
	ts, admin := aclServer(t, Config{})
	wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "on", ">pw", "~a*", "+bf.exists")
	x := dialAs(t, ts, "u", "pw")
	wantReply(t, x, permReply("u", "bf.add"), "IDEM", "7", "1", "BF.ADD", "a1", "x")
	wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "+bf.add")
	wantReply(t, x, keyReply, "IDEM", "7", "2", "BF.ADD", "b1", "x")
	wantReply(t, x, ":1\r\n", "IDEM", "7", "3", "BF.ADD", "a1", "x")
	wantReply(t, x, permReply("u", "cf.add"), "IDEM", "7", "4", "CF.ADD", "a2", "x")
	wantReply(t, admin, ":0\r\n", "EXISTS", "b1")
	log := admin.do("ACL", "LOG")
	for _, obj := range []string{"bf.add", "b1", "cf.add"} {
		if !strings.Contains(log, respBulk("object")+respBulk(obj)) {
			t.Errorf("ACL LOG lacks object %s: %q", obj, log)
		}
	}
	if strings.Contains(log, respBulk("idem")) {
		t.Errorf("ACL LOG names IDEM: %q", log)
	}
}

// TestACLDeletedUserConnection: a connection whose user is deleted is
// refused its next command and closed, as Redis closes a deleted user's
// connections; another user's connection goes on.
func TestACLDeletedUserConnection(t *testing.T) {
	ts, admin := aclServer(t, Config{})
	wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "u", "on", ">pw", "~*", "+@all")
	wantReply(t, admin, "+OK\r\n", "ACL", "SETUSER", "v", "on", ">pw", "~*", "+@all")
	x, y := dialAs(t, ts, "u", "pw"), dialAs(t, ts, "v", "pw")
	wantReply(t, x, "+PONG\r\n", "PING")
	wantReply(t, admin, ":1\r\n", "ACL", "DELUSER", "u")
	// The server may close x before it reads the PING, or answer it first.
	x.send(encode("BF.ADD", "k", "x"))
	if got, err := readReply(x.br); err == nil && got != "-NOAUTH the user this connection authenticated as was deleted\r\n" {
		t.Fatalf("the next command of a deleted user's connection: %q", got)
	}
	x.expectClosed()
	wantReply(t, admin, ":0\r\n", "EXISTS", "k")
	wantReply(t, y, "+PONG\r\n", "PING")
}

// TestACLGoRedisClient: go-redis's ACL helpers read the server's replies.
func TestACLGoRedisClient(t *testing.T) {
	bothProtocols(t, func(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
		res(c.Do(ctx, "ACL", "SETUSER", "u", "on", ">pw", "~a*", "+bf.add").Result()).must(t)
		if got := res(c.ACLDryRun(ctx, "u", "BF.ADD", "a", "x").Result()).must(t); got != "OK" {
			t.Errorf("ACL DRYRUN allowed: %q", got)
		}
		if got := res(c.ACLDryRun(ctx, "u", "BF.ADD", "b", "x").Result()).must(t); got != "User u has no permissions to access the 'b' key" {
			t.Errorf("ACL DRYRUN refused: %q", got)
		}
		u := newGoRedisUser(t, c.Options().Addr, proto, "u", "pw")
		wantErr(t, u.BFAdd(ctx, "b", "x").Err(), errNoKeyPerm)
		wantErr(t, u.BFExists(ctx, "a", "x").Err(), noPerm("u", "bf.exists"))
		if !res(u.BFAdd(ctx, "a", "x").Result()).must(t) {
			t.Error("BF.ADD a x answered false")
		}
		// go-redis sends CLIENT SETINFO twice as it connects, which u may
		// not run either: Redis refuses and logs those too.
		var got []string
		for _, e := range res(c.ACLLog(ctx, 10).Result()).must(t) {
			got = append(got, fmt.Sprintf("%s:%s:%d", e.Reason, e.Object, e.Count))
		}
		if want := "[command:bf.exists:1 key:b:1 command:client|setinfo:2]"; fmt.Sprint(got) != want {
			t.Errorf("ACL LOG: %v, want %s", got, want)
		}
	})
}
