package acl

import (
	"strings"
	"testing"
)

// req splits a request the way a client sends it.
func req(s string) [][]byte {
	var out [][]byte
	for _, f := range strings.Fields(s) {
		out = append(out, []byte(f))
	}
	return out
}

// check runs the server's check for the request line as user name.
// A container's subcommand is resolved as the server resolves it.
func check(t *testing.T, s *Store, user, line string) *Denial {
	t.Helper()
	args := req(line)
	u := s.User(user)
	if u == nil {
		t.Fatalf("no user %s", user)
	}
	cmd := strings.ToLower(string(args[0]))
	if len(args) > 1 {
		if _, ok := s.Registry().ID(cmd + "|" + strings.ToLower(string(args[1]))); ok {
			cmd += "|" + strings.ToLower(string(args[1]))
		}
	}
	return s.Registry().Check(u, mustID(t, s.Registry(), cmd), args)
}

// TestRedisBloomACL replays RedisBloom's tests/flow/test_acl.py
// (test_acl_non_default_user) against the store: a user with no commands,
// then +@read, then +@write, and another with +@bloom only.
func TestRedisBloomACL(t *testing.T) {
	s := mustNewStore(t)
	mustSetUser(t, s, "testusr", "on", ">123", "~*", "&*")
	if _, err := s.Authenticate("testusr", "123"); err != nil {
		t.Fatal(err)
	}
	d := check(t, s, "testusr", "bf.exists a a")
	if d == nil || d.Error() != "NOPERM User testusr has no permissions to run the 'bf.exists' command" {
		t.Fatalf("bf.exists without commands: %v", d)
	}
	if _, err := s.Authenticate("default", ""); err != nil {
		t.Fatalf("AUTH default '': %v", err)
	}
	mustSetUser(t, s, "testusr", "+@read")
	for _, c := range []string{"bf.exists k i", "bf.mexists k i", "bf.info k", "bf.card k", "bf.debug k", "bf.scandump k 0"} {
		if d := check(t, s, "testusr", c); d != nil {
			t.Errorf("+@read: %s: %v", c, d)
		}
	}
	d = check(t, s, "testusr", "bf.reserve bf 0.01 1000")
	if d == nil || d.Error() != "NOPERM User testusr has no permissions to run the 'bf.reserve' command" {
		t.Errorf("+@read: bf.reserve: %v", d)
	}
	mustSetUser(t, s, "testusr", "+@write")
	for _, c := range []string{"bf.reserve k 0.01 10", "bf.add k i", "bf.madd k i", "bf.insert k ITEMS i", "bf.loadchunk k 1 x"} {
		if d := check(t, s, "testusr", c); d != nil {
			t.Errorf("+@write: %s: %v", c, d)
		}
	}
	mustSetUser(t, s, "testusr2", "on", ">123", "~*", "&*")
	mustSetUser(t, s, "testusr2", "+@bloom")
	for _, c := range []string{"bf.add test foo", "bf.exists test foo", "bf.reserve k 0.1 10", "bf.scandump k 0"} {
		if d := check(t, s, "testusr2", c); d != nil {
			t.Errorf("+@bloom: %s: %v", c, d)
		}
	}
	d = check(t, s, "testusr2", "cf.reserve cf 1000")
	if d == nil || d.Error() != "NOPERM User testusr2 has no permissions to run the 'cf.reserve' command" {
		t.Errorf("+@bloom: cf.reserve: %v", d)
	}
	if d := check(t, s, "testusr2", "cbf.add k i"); d == nil {
		t.Error("+@bloom allows CBF.ADD")
	}
}

// TestKeyAccess checks key patterns by access: %R~ for commands reading a
// key, %W~ for writing it, both for RENAME's source, any pattern for EXISTS.
func TestKeyAccess(t *testing.T) {
	s := mustNewStore(t)
	mustSetUser(t, s, "u", "on", "+@all", "%R~r:*", "%W~w:*", "~rw:*")
	for _, c := range []struct {
		line string
		bad  string // the key refused, or ""
	}{
		{"bf.exists r:1 x", ""},
		{"bf.add r:1 x", "r:1"},
		{"bf.add w:1 x", ""},
		{"bf.exists w:1 x", "w:1"},
		{"bf.add rw:1 x", ""},
		{"cf.count rw:1 x", ""},
		{"exists r:1 w:1", ""}, // EXISTS reads no value: any pattern will do
		{"exists r:1 other", "other"},
		{"type w:1", ""},
		{"watch r:1 w:1", ""},
		{"rename rw:a w:b", ""},
		{"rename r:a w:b", "r:a"}, // the source is read and deleted
		{"rename rw:a r:b", "r:b"},
		{"del w:1 rw:2 r:3", "r:3"},
		{"ttl r:1", ""},
		{"expire r:1 10", "r:1"},
		{"memory usage r:1", ""},
		{"memory usage x", "x"},
		{"scan 0", ""},
		{"cf.compact w:1", ""},
		{"cf.compact r:1", "r:1"},
	} {
		d := check(t, s, "u", c.line)
		switch {
		case c.bad == "" && d != nil:
			t.Errorf("%s: %v", c.line, d)
		case c.bad != "" && (d == nil || d.Reason != ReasonKey || d.Object != c.bad):
			t.Errorf("%s: %+v, want key %s refused", c.line, d, c.bad)
		case d != nil && d.Error() != "NOPERM No permissions to access a key":
			t.Errorf("%s: %q", c.line, d.Error())
		}
	}
	u := s.User("u")
	for _, c := range []struct {
		key         string
		read, write bool
		want        bool
	}{
		{"r:x", true, false, true}, {"r:x", false, true, false}, {"r:x", true, true, false}, {"r:x", false, false, true},
		{"rw:x", true, true, true}, {"w:", false, true, true}, {"x", false, false, false},
	} {
		if got := u.KeyAllowed([]byte(c.key), c.read, c.write); got != c.want {
			t.Errorf("KeyAllowed(%q, %v, %v) = %v", c.key, c.read, c.write, got)
		}
	}
	mustSetUser(t, s, "none", "on", "+@all")
	if d := check(t, s, "none", "bf.exists k i"); d == nil || d.Reason != ReasonKey {
		t.Errorf("no patterns: %v", d)
	}
	if d := check(t, s, "none", "dbsize"); d != nil {
		t.Errorf("a command without keys: %v", d)
	}
	mustSetUser(t, s, "star", "on", "+@all", "%R~*")
	if d := check(t, s, "star", "bf.exists k i"); d != nil {
		t.Errorf("%%R~*: %v", d)
	}
	if s.User("star").KeyAllowed(nil, true, false) {
		t.Error("Redis's * does not match the empty key; only allkeys allows it")
	}
	if !s.User("default").KeyAllowed(nil, true, true) {
		t.Error("allkeys refuses the empty key")
	}
}

// TestCommandBits checks how containers, categories and the commands every
// user may run end up in the bitmap, as Redis sets its bits.
func TestCommandBits(t *testing.T) {
	s := mustNewStore(t)
	reg := s.Registry()
	allowed := func(user, cmd string) bool { return s.User(user).Allowed(mustID(t, reg, cmd)) }
	for _, c := range []struct {
		rules string
		yes   []string
		no    []string
	}{
		// client is @slow only; its subcommands are @connection.
		{"-@all +@connection", []string{"client|id", "client|list", "command", "command|docs", "ping"},
			[]string{"client", "bf.add", "cluster|info"}},
		// command is @connection: its subcommands come with it.
		{"-@all +@connection -command", []string{"client|id"}, []string{"command", "command|count"}},
		{"-@all +client", []string{"client", "client|kill", "client|setname"}, []string{"ping"}},
		{"-@all +client -client|kill", []string{"client|list"}, []string{"client|kill"}},
		{"+@all -client", []string{"ping", "bf.add"}, []string{"client", "client|list"}},
		{"-@all +@slow", []string{"client", "client|list", "cluster|nodes", "del"}, []string{"ping", "bf.exists"}},
		{"+@all -@admin", []string{"client|id", "bf.add"}, []string{"client|list", "config|set", "acl|setuser", "role"}},
		{"+@all -@dangerous +keys", []string{"keys", "bf.add"}, []string{"flushall", "info", "acl|log"}},
		// Redis's no-auth commands and IDEM, whatever the rules.
		{"-@all", []string{"auth", "hello", "quit", "idem"}, []string{"ping", "select", "multi"}},
		{"+@all -auth -idem", []string{"auth", "idem"}, nil},
	} {
		mustSetUser(t, s, "u", append([]string{"reset"}, strings.Fields(c.rules)...)...)
		for _, cmd := range c.yes {
			if !allowed("u", cmd) {
				t.Errorf("%s: %s refused", c.rules, cmd)
			}
		}
		for _, cmd := range c.no {
			if allowed("u", cmd) {
				t.Errorf("%s: %s allowed", c.rules, cmd)
			}
		}
	}
	mustSetUser(t, s, "u", "reset", "+@all", "-client|list")
	if d := check(t, s, "u", "client list"); d == nil ||
		d.Error() != "NOPERM User u has no permissions to run the 'client|list' command" {
		t.Errorf("CLIENT LIST: %v", d)
	}
	if s.User("default").Unrestricted() != true || s.User("u").Unrestricted() {
		t.Error("Unrestricted")
	}
	if s.User("u").Allowed(-1) || s.User("u").Allowed(1<<20) {
		t.Error("ids out of range are allowed")
	}
}

// TestFutureCommands: a user built from +@all gets commands a later build
// adds; one built from -@all only those its rules name, as in Redis.
func TestFutureCommands(t *testing.T) {
	small, err := NewRegistry([]string{"ping", "bf.add"})
	if err != nil {
		t.Fatal(err)
	}
	big := mustNewRegistry(t)
	plus, err := NewUser("p").Apply([]string{"+@all", "-bf.add"}, small)
	if err != nil {
		t.Fatal(err)
	}
	minus, err := NewUser("m").Apply([]string{"-@all", "+@read"}, small)
	if err != nil {
		t.Fatal(err)
	}
	p, m := plus.compile(big), minus.compile(big)
	if !p.Allowed(mustID(t, big, "cf.add")) || p.Allowed(mustID(t, big, "bf.add")) {
		t.Error("+@all -bf.add")
	}
	if m.Allowed(mustID(t, big, "cf.add")) || !m.Allowed(mustID(t, big, "cf.exists")) {
		t.Error("-@all +@read")
	}
}

func TestPasswords(t *testing.T) {
	s := mustNewStore(t)
	mustSetUser(t, s, "u", "on", ">p1", ">p2")
	u := s.User("u")
	for pass, want := range map[string]bool{"p1": true, "p2": true, "p3": false, "": false} {
		if u.CheckPassword(pass) != want {
			t.Errorf("CheckPassword(%q) != %v", pass, want)
		}
	}
	if !s.User("default").CheckPassword("anything") {
		t.Error("nopass refuses a password")
	}
	mustSetUser(t, s, "off", "off", ">p")
	for _, c := range []struct{ user, pass string }{{"u", "p3"}, {"nosuch", "p1"}, {"off", "p"}} {
		if a, err := s.Authenticate(c.user, c.pass); err != ErrWrongPass || a != nil {
			t.Errorf("AUTH %s %s: %v, %v", c.user, c.pass, a, err)
		}
	}
	if ErrWrongPass.Error() != "WRONGPASS invalid username-password pair or user is disabled." {
		t.Error(ErrWrongPass)
	}
	a, err := s.Authenticate("u", "p2")
	if err != nil || a.Name() != "u" || a.User() != s.User("u") {
		t.Fatalf("AUTH u p2: %v %v", a, err)
	}
	locked := NewStore(s.Registry(), "sesame")
	if _, err := locked.Authenticate("default", "nope"); err != ErrWrongPass {
		t.Error("requirepass: a wrong password works")
	}
	if _, err := locked.Authenticate("default", "sesame"); err != nil {
		t.Errorf("requirepass: %v", err)
	}
}

// TestHasCategory: a user holds a category when every command and
// subcommand in it is allowed, however the rules allow them; one of them
// forbidden, or an empty category, and it does not.
func TestHasCategory(t *testing.T) {
	s := mustNewStore(t)
	mustSetUser(t, s, "op", "on", "+@admin")
	mustSetUser(t, s, "all", "on", "+@all")
	mustSetUser(t, s, "most", "on", "+@admin", "-config|set")
	mustSetUser(t, s, "reader", "on", "+@read", "~*")
	mustSetUser(t, s, "none", "on")
	mustSetUser(t, s, "byname", "on", "-@all")
	var rules []string
	for _, n := range s.Registry().InCategory(CatAdmin) {
		rules = append(rules, "+"+n)
	}
	mustSetUser(t, s, "byname", rules...)
	reg := s.Registry()
	for name, want := range map[string]bool{
		"default": true, "op": true, "all": true, "byname": true,
		"most": false, "reader": false, "none": false,
	} {
		if got := s.User(name).HasCategory(reg, CatAdmin); got != want {
			t.Errorf("%s (%s): HasCategory(@admin) = %v, want %v", name, s.User(name).Rules(), got, want)
		}
	}
	if s.User("all").HasCategory(reg, CatHash) {
		t.Error("an empty category (@hash) is held")
	}
}
