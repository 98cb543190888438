package acl

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func mustNewStore(t testing.TB) *Store {
	t.Helper()
	return NewStore(mustNewRegistry(t), "")
}

// mustSetUser runs ACL SETUSER name rules... and fails the test on an error.
func mustSetUser(t testing.TB, s *Store, name string, rules ...string) {
	t.Helper()
	if err := s.SetUser(name, rules); err != nil {
		t.Fatalf("ACL SETUSER %s %v: %v", name, rules, err)
	}
}

// TestCommandRulesCompaction runs Redis's "ACL GETUSER provides correct
// results" (tests/unit/acl.tcl) on Rookery's commands: the rules are kept
// in order, each command or category once, losslessly.
func TestCommandRulesCompaction(t *testing.T) {
	s := mustNewStore(t)
	mustSetUser(t, s, "adv")
	for _, c := range []struct{ rules, want string }{
		{"+@all -@keyspace -@slow +bf.debug", "+@all -@keyspace -@slow +bf.debug"},
		{"-@keyspace", "+@all -@slow +bf.debug -@keyspace"}, // re-added: moved to the end
		{"+@keyspace", "+@all -@slow +bf.debug +@keyspace"}, // inverted: the old one goes
		{"-@all", "-@all"},                                 // -@all compacts everything
		{"-@write -@slow +@all", "+@all"},                  // and so does +@all
		{"-@all +@READ +@read +@ReAd", "-@all +@read"},     // categories ignore case
		{"-@all +BF.ADD +bf.add +Bf.Add", "-@all +bf.add"}, // commands ignore case
		{"-@all +@bloom +@slow +@read +@read +@slow +@bloom", "-@all +@read +@slow +@bloom"},
		{"-@all +bf.add -bf.exists +bf.exists -bf.add", "-@all +bf.exists -bf.add"},
		{"-@all +client|list +client|list +config|get +config +acl|list -acl", "-@all +client|list +config -acl"},
		{"-@all -@dangerous", "-@all -@dangerous"}, // kept, though it changes nothing
		{"-@all +config +config|get -config|set +config", "-@all +config"},
		{"nocommands +CLIENT|LIST", "-@all +client|list"},
		{"allcommands -Client|Kill", "+@all -client|kill"},
	} {
		mustSetUser(t, s, "adv", strings.Fields(c.rules)...)
		if got := s.User("adv").GetUser().Commands; got != c.want {
			t.Errorf("after %q: commands %q, want %q", c.rules, got, c.want)
		}
	}
	// "ACL GETUSER provides reasonable results": one category each way.
	for _, cat := range CategoryNames() {
		mustSetUser(t, s, "additive", "reset", "+@all", "-@"+cat)
		if got := s.User("additive").GetUser().Commands; got != "+@all -@"+cat {
			t.Errorf("additive %s: %q", cat, got)
		}
		mustSetUser(t, s, "restrictive", "reset", "-@all", "+@"+cat)
		if got := s.User("restrictive").GetUser().Commands; got != "-@all +@"+cat {
			t.Errorf("restrictive %s: %q", cat, got)
		}
	}
}

// TestDescribe checks ACL LIST's line and ACL GETUSER's fields against
// Redis 7's output.
func TestDescribe(t *testing.T) {
	s := mustNewStore(t)
	h := HashPassword("secret")
	for _, c := range []struct {
		rules string
		want  string
	}{
		{"", "user u off sanitize-payload resetchannels -@all"},
		{"on nopass resetchannels &foo +@all", "user u on nopass sanitize-payload resetchannels &foo +@all"},
		{"reset on >secret ~app:* %R~ro:* %W~wo:* &chan +@read -bf.debug",
			"user u on sanitize-payload #" + h + " ~app:* %R~ro:* %W~wo:* resetchannels &chan -@all +@read -bf.debug"},
		{"reset on allkeys allchannels allcommands skip-sanitize-payload", "user u on skip-sanitize-payload ~* &* +@all"},
		{"reset %R~foo %W~foo", "user u off sanitize-payload ~foo resetchannels -@all"},              // one pattern, both accesses
		{"reset %RW~* ~bar", "user u off sanitize-payload ~* ~bar resetchannels -@all"},              // %RW~* is not allkeys
		{"reset ~a ~a %R~a &c &c", "user u off sanitize-payload ~a resetchannels &c -@all"},          // no duplicates
		{"reset on #" + h + " >secret", "user u on sanitize-payload #" + h + " resetchannels -@all"}, // same digest once
		{"reset on >a >b <a", "user u on sanitize-payload #" + HashPassword("b") + " resetchannels -@all"},
		{"reset >a nopass", "user u off nopass sanitize-payload resetchannels -@all"},
		{"reset nopass >a", "user u off sanitize-payload #" + HashPassword("a") + " resetchannels -@all"},
		{"reset >a resetpass", "user u off sanitize-payload resetchannels -@all"},
		{"reset >a !" + HashPassword("a"), "user u off sanitize-payload resetchannels -@all"},
		{"reset ~a resetkeys ~b", "user u off sanitize-payload ~b resetchannels -@all"},
		{"reset ~a allkeys", "user u off sanitize-payload ~* resetchannels -@all"},
		{"reset &a allchannels", "user u off sanitize-payload &* -@all"},
		{"reset &* resetchannels &b", "user u off sanitize-payload resetchannels &b -@all"},
		{"reset on off", "user u off sanitize-payload resetchannels -@all"},
		{"reset clearselectors", "user u off sanitize-payload resetchannels -@all"},
	} {
		mustSetUser(t, s, "u", strings.Fields(c.rules)...)
		if got := s.User("u").Describe(); got != c.want {
			t.Errorf("after %q:\n got %q\nwant %q", c.rules, got, c.want)
		}
	}
	if got := s.User("default").Describe(); got != "user default on nopass sanitize-payload ~* &* +@all" {
		t.Errorf("default: %q", got)
	}
	d := NewStore(mustNewRegistry(t), "sesame").User("default").Describe()
	if want := "user default on sanitize-payload #" + HashPassword("sesame") + " ~* &* +@all"; d != want {
		t.Errorf("default with requirepass: %q, want %q", d, want)
	}
}

func TestGetUser(t *testing.T) {
	s := mustNewStore(t)
	mustSetUser(t, s, "u", "on", ">p", "%R~r:*", "~k", "&a", "&b", "-@all", "+@bloom")
	got := s.User("u").GetUser()
	want := Info{
		Flags:     []string{"on", "sanitize-payload"},
		Passwords: []string{HashPassword("p")},
		Commands:  "-@all +@bloom",
		Keys:      "%R~r:* ~k",
		Channels:  "&a &b",
		Selectors: []Info{},
	}
	if !slices.Equal(got.Flags, want.Flags) || !slices.Equal(got.Passwords, want.Passwords) ||
		got.Commands != want.Commands || got.Keys != want.Keys || got.Channels != want.Channels ||
		got.Selectors == nil || len(got.Selectors) != 0 {
		t.Errorf("GETUSER u = %+v, want %+v", got, want)
	}
	g := s.User("default").GetUser()
	if !slices.Equal(g.Flags, []string{"on", "nopass", "sanitize-payload"}) || len(g.Passwords) != 0 ||
		g.Commands != "+@all" || g.Keys != "~*" || g.Channels != "&*" {
		t.Errorf("GETUSER default = %+v", g)
	}
	if n := NewUser("x").GetUser(); n.Keys != "" || n.Channels != "" || n.Commands != "-@all" {
		t.Errorf("GETUSER of a new user = %+v", n)
	}
	if !slices.Equal(Fields, []string{"flags", "passwords", "commands", "keys", "channels", "selectors"}) {
		t.Errorf("Fields = %v", Fields)
	}
}

// TestSetUserErrors checks Redis's replies for rules it refuses, and that a
// refused SETUSER changes nothing.
func TestSetUserErrors(t *testing.T) {
	const prefix = "ERR Error in ACL SETUSER modifier '"
	for _, c := range []struct {
		rules string
		bad   string // the rule named
		why   string
	}{
		{"+nosuch", "+nosuch", msgUnknown},
		{"on +@nosuch", "+@nosuch", msgUnknown},
		{"-@", "-@", msgUnknown},
		{"+", "+", msgUnknown},
		{"-nosuch", "-nosuch", msgUnknown},
		{"bogus", "bogus", msgSyntax},
		{"allkeys ~foo", "~foo", msgKeysAfterAll},
		{"~* %R~foo", "%R~foo", msgKeysAfterAll},
		{"&* &foo", "&foo", msgChansAfterAll},
		{"<never", "<never", msgNoSuchPass},
		{"!" + HashPassword("never"), "!" + HashPassword("never"), msgNoSuchPass},
		{"#abc", "#abc", msgBadHash},
		{"#" + strings.ToUpper(HashPassword("x")), "#" + strings.ToUpper(HashPassword("x")), msgBadHash},
		{"!zz", "!zz", msgBadHash},
		{"+client|list|x", "+client|list|x", msgSubFirstArg},
		{"+client|", "+client|", msgSyntax},
		{"+client|nosuch", "+client|nosuch", msgUnknown},
		{"+nosuch|x", "+nosuch|x", msgUnknown},
		{"+bf.add|x", "+bf.add|x", msgFirstArg},
		{"-bf.add|x", "-bf.add|x", msgUnknown},
		{"-client|nosuch", "-client|nosuch", msgUnknown},
		{"-client|list|x", "-client|list|x", msgUnknown},
		{"(+bf.add", "(+bf.add", msgSyntax},
		{"(+bf.add)", "(+bf.add)", msgSyntax},
		{"%X~foo", "%X~foo", msgSyntax},
		{"%R", "%R", msgSyntax},
		{"%~foo", "%~foo", msgSyntax}, // CVE-2024-31227: no access, no pattern
		{"%RR~foo", "%RR~foo", msgSyntax},
		{"~a\tb", "~a\tb", msgSyntax},
		{"&a\x00b", "&a\x00b", msgSyntax},
	} {
		s := mustNewStore(t)
		mustSetUser(t, s, "u", "on", "+bf.add")
		before := s.User("u").Describe()
		rules := strings.Split(c.rules, " ")
		err := s.SetUser("u", append([]string{"off", "+@all"}, rules...))
		var se *SetUserError
		if !errors.As(err, &se) {
			t.Errorf("%q: err %v", c.rules, err)
			continue
		}
		if want := prefix + c.bad + "': " + c.why; se.Error() != want {
			t.Errorf("%q:\n got %q\nwant %q", c.rules, se.Error(), want)
		}
		if se.Rule != c.bad || se.Index < 2 {
			t.Errorf("%q: rule %q at %d", c.rules, se.Rule, se.Index)
		}
		if after := s.User("u").Describe(); after != before {
			t.Errorf("%q changed the user: %q", c.rules, after)
		}
		if err := s.SetUser("fresh", rules); err == nil || s.User("fresh") != nil {
			t.Errorf("%q: a refused SETUSER created its user", c.rules)
		}
		if err := s.Validate("u", rules); err == nil || err.Error() != se.Error() {
			t.Errorf("%q: Validate says %v", c.rules, err)
		}
	}
	s := mustNewStore(t)
	for _, name := range []string{"a b", "a\tb", "a\x00b", "a\nb"} {
		if err := s.SetUser(name, nil); err != ErrBadUsername {
			t.Errorf("SETUSER %q: %v", name, err)
		}
	}
	if err := s.SetUser("", []string{"on"}); err != nil {
		t.Errorf("SETUSER of the empty name, which Redis allows: %v", err)
	}
	if err := s.SetUser("u", []string{"", "on", ""}); err != nil || !s.User("u").Enabled() {
		t.Errorf("empty rules are no-ops in Redis: %v", err)
	}
}

func TestSetUserErrorRedacted(t *testing.T) {
	s := mustNewStore(t)
	err := s.SetUser("u", []string{"<hunter2"})
	var se *SetUserError
	if !errors.As(err, &se) || strings.Contains(se.Redacted(), "hunter2") || !strings.Contains(se.Error(), "hunter2") {
		t.Fatalf("%v / %v", err, se)
	}
}

// TestApplyWithoutRegistry is how the state machine applies rules: names
// of any command or category are taken as they are (lower-cased), forms
// still checked; state errors still happen.
func TestApplyWithoutRegistry(t *testing.T) {
	u, err := NewUser("u").Apply([]string{"on", "+Future.Cmd", "+@FUTURE", "+client|Future", "-x|y", "%R~k"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := u.GetUser().Commands; got != "-@all +future.cmd +@future +client|future -x|y" {
		t.Errorf("commands %q", got)
	}
	// Each rule is tried on a user with allkeys (so that a pattern after it
	// is the state's error), in a fixed order.
	u, _ = NewUser("u").Apply([]string{"allkeys"}, nil)
	for _, tc := range []struct{ rule, why string }{
		{"+a|b|c", msgSubFirstArg}, {"+|x", msgUnknown}, {"+a|", msgSyntax}, {"-a|b|c", msgUnknown},
		{"+", msgUnknown}, {"+@", msgUnknown}, {"+@a|b", msgUnknown}, {"-@x@y", msgUnknown}, {"allkeys", ""},
		{"~x", msgKeysAfterAll}, {"<nope", msgNoSuchPass},
	} {
		rule, why := tc.rule, tc.why
		u, err = u.Apply([]string{rule}, nil)
		got := ""
		var se *SetUserError
		if errors.As(err, &se) {
			got = se.Reason
			u = NewUser("u")
			u, _ = u.Apply([]string{"allkeys"}, nil)
		}
		if got != why {
			t.Errorf("%q: %q, want %q", rule, got, why)
		}
	}
	// Compiled against a registry that lacks them, unknown names allow
	// and forbid nothing.
	reg := mustNewRegistry(t)
	c, err := NewUser("u").Apply([]string{"+future.cmd", "+@future", "+client|future", "+bf.add"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c = c.compile(reg)
	for id := range reg.Len() {
		want := reg.Name(id) == "bf.add" || reg.always[id>>6]&(1<<(id&63)) != 0
		if c.Allowed(id) != want {
			t.Errorf("%s allowed %v", reg.Name(id), !want)
		}
	}
}

func TestHashRules(t *testing.T) {
	in := []string{">secret", "<old", "#" + HashPassword("x"), "on", "~>not-a-password", ">"}
	got := HashRules(in)
	want := []string{"#" + HashPassword("secret"), "!" + HashPassword("old"), in[2], "on", in[4], "#" + HashPassword("")}
	if !slices.Equal(got, want) {
		t.Fatalf("HashRules = %v", got)
	}
	// Both forms leave the same user.
	s := mustNewStore(t)
	mustSetUser(t, s, "a", ">p1", ">p2", "<p1", "on")
	if err := s.ApplySetUser("b", HashRules([]string{">p1", ">p2", "<p1", "on"})); err != nil {
		t.Fatal(err)
	}
	if a, b := s.User("a").Rules(), s.User("b").Rules(); a != b {
		t.Errorf("%q != %q", a, b)
	}
	if HashPassword("foobar") != "c3ab8ff13720e8ad9047dd39466b3c8974e592c2fa383d4a3960714caef0c4f2" {
		t.Error("not SHA-256")
	}
}
