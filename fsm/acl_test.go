package fsm

import (
	"bytes"
	"io"
	"slices"
	"testing"

	"github.com/rookerydb/rookery/internal/acl"
	"github.com/rookerydb/rookery/internal/slot"
)

// usersHarness is a state machine holding users, as group 0 does.
func usersHarness(t *testing.T, requirePass string) *harness {
	t.Helper()
	reg, err := acl.NewRegistry([]string{"bf.add", "bf.exists", "flushall", "acl", "acl|setuser", "auth", "ping"})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, f: New(Options{Users: acl.NewStore(reg, requirePass), RequirePass: requirePass}), now: 1e18}
}

func setUser(name string, rules ...string) *Command {
	items := make([][]byte, len(rules))
	for i, r := range rules {
		items[i] = []byte(r)
	}
	return &Command{Op: OpACLSetUser, Key: name, Items: items}
}

// TestUsersThroughTheLog: ACL ops change the users at their index, the same
// on every replica whatever its --requirepass says of users the log set; a
// snapshot carries them; an aclfile load applies only before any was set.
func TestUsersThroughTheLog(t *testing.T) {
	a, b := usersHarness(t, "pw"), usersHarness(t, "pw")
	both := func(c *Command) {
		t.Helper()
		a.ok(c)
		b.ok(c)
	}
	both(setUser("checker", "on", "#"+acl.HashPassword("secret"), "~names", "+bf.exists"))
	if a.f.UsersVersion() == 0 {
		t.Fatal("the users' version did not move")
	}
	for _, h := range []*harness{a, b} {
		u := h.f.users.User("checker")
		if u == nil || !u.CheckPassword("secret") || !u.KeyAllowed([]byte("names"), true, false) {
			t.Fatalf("checker not set: %v", u)
		}
		if d := h.f.users.User(acl.DefaultUser); !d.CheckPassword("pw") {
			t.Fatal("the default user lost --requirepass")
		}
	}
	// A rule the state refuses, at its index: removing a password the user
	// does not have.
	if r := a.apply(setUser("checker", "on", "!"+acl.HashPassword("other"))); r.Err != ErrACLRule || r.Ints[0] != 1 {
		t.Fatalf("removing a password the user lacks: %+v", r)
	}
	// An aclfile after users were set changes nothing.
	file := acl.Encode([]*acl.User{mustUser(t, a, "loaded", "on", "nopass")})
	if r := a.ok(&Command{Op: OpACLLoad, Data: file}); r.Ints[0] != 0 || a.f.users.User("loaded") != nil {
		t.Fatal("an aclfile replaced users the log had set")
	}

	// The snapshot carries checker, and not the default user the log never
	// set: a node with another --requirepass keeps its own.
	c := usersHarness(t, "other")
	if err := c.f.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, a.f)))); err != nil {
		t.Fatal(err)
	}
	if u := c.f.users.User("checker"); u == nil || !u.CheckPassword("secret") {
		t.Fatal("the snapshot lost checker")
	}
	if !c.f.users.User(acl.DefaultUser).CheckPassword("other") {
		t.Fatal("the restored node's default user is not its --requirepass")
	}
	// Once the log sets the default user, it is the log's everywhere.
	both(setUser(acl.DefaultUser, "resetpass", "#"+acl.HashPassword("shared")))
	c2 := usersHarness(t, "other")
	if err := c2.f.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, a.f)))); err != nil {
		t.Fatal(err)
	}
	if d := c2.f.users.User(acl.DefaultUser); !d.CheckPassword("shared") || d.CheckPassword("other") {
		t.Fatal("the log's default user did not travel in the snapshot")
	}

	// DELUSER: counted; the account answers nil.
	acct := a.f.users.Account("checker")
	if r := a.ok(&Command{Op: OpACLDelUser, Keys: []string{"checker", "nobody"}}); r.Ints[0] != 1 {
		t.Fatalf("DELUSER counted %d", r.Ints[0])
	}
	if acct.User() != nil {
		t.Fatal("a deleted user's account still answers")
	}
	if got := a.f.users.Names(); !slices.Equal(got, []string{acl.DefaultUser}) {
		t.Fatalf("users after DELUSER: %v", got)
	}
	// A state with no users section restores to the node's default alone.
	fresh := usersHarness(t, "pw")
	if err := a.f.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, fresh.f)))); err != nil {
		t.Fatal(err)
	}
	if !a.f.users.User(acl.DefaultUser).CheckPassword("pw") {
		t.Fatal("restoring a state without users kept the log's default user")
	}
}

// TestACLLoadSeedsOnce: an aclfile's users apply to a cluster that never set
// users, once.
func TestACLLoadSeedsOnce(t *testing.T) {
	h := usersHarness(t, "")
	file := acl.Encode([]*acl.User{mustUser(t, h, "crawler", "on", "#"+acl.HashPassword("c"), "~crawl:*", "+bf.add")})
	if r := h.ok(&Command{Op: OpACLLoad, Data: file}); r.Ints[0] != 1 {
		t.Fatal("the first aclfile did not load")
	}
	if u := h.f.users.User("crawler"); u == nil || !u.CheckPassword("c") {
		t.Fatal("crawler missing")
	}
	again := acl.Encode([]*acl.User{mustUser(t, h, "other", "on", "nopass")})
	if r := h.ok(&Command{Op: OpACLLoad, Data: again}); r.Ints[0] != 0 || h.f.users.User("other") != nil {
		t.Fatal("a second aclfile applied")
	}
	if r := usersHarness(t, "").apply(&Command{Op: OpACLLoad, Data: []byte{0xff, 1, 2}}); r.Err != ErrBadData {
		t.Fatalf("a damaged aclfile set: %v", r.Err)
	}
	// A group without users refuses ACL ops.
	plain := newHarness(t)
	if r := plain.apply(setUser("x", "on")); r.Err != ErrNoUsers {
		t.Fatalf("ACL op in a group without users: %v", r.Err)
	}
}

func mustUser(t *testing.T, h *harness, name string, rules ...string) *acl.User {
	t.Helper()
	u, err := acl.NewUser(name).Apply(rules, h.f.users.Registry())
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestACLRestoreReplaces: OpACLRestore makes the users a backup's users
// section, whatever the log set before, on a group that holds the cluster
// map too (group 0 of a sharded cluster); damaged data changes nothing; an
// empty section is a backup of a cluster that never set users.
func TestACLRestoreReplaces(t *testing.T) {
	src := usersHarness(t, "src-pw")
	if src.f.UsersSection() != nil {
		t.Fatal("a users section before any user was set")
	}
	src.ok(setUser("checker", "on", "#"+acl.HashPassword("secret"), "~names", "+bf.exists"))
	src.ok(setUser(acl.DefaultUser, "resetpass", "#"+acl.HashPassword("shared")))
	sec := src.f.UsersSection()
	if n, err := CheckUsersSection(sec); err != nil || n != 2 {
		t.Fatalf("CheckUsersSection: %d %v", n, err)
	}

	dst := usersHarness(t, "dst-pw")
	dst.ok(&Command{Op: OpSetMap, Data: EncodeMap(&Map{Version: 1, Replicas: 1,
		Groups: []MapGroup{{First: 0, Last: slot.Count - 1, Replicas: []string{"a"}}}})})
	dst.ok(setUser("other", "on", "nopass", "+@all"))
	acct := dst.f.users.Account("other")
	v := dst.f.UsersVersion()
	if r := dst.ok(&Command{Op: OpACLRestore, Data: sec}); len(r.Ints) != 1 || r.Ints[0] != 2 {
		t.Fatalf("restore answered %v", r.Ints)
	}
	if dst.f.UsersVersion() == v {
		t.Fatal("the users' version did not move")
	}
	if acct.User() != nil || dst.f.users.User("other") != nil {
		t.Fatal("a user the backup lacks survived the restore")
	}
	if u := dst.f.users.User("checker"); u == nil || !u.CheckPassword("secret") {
		t.Fatal("checker did not come back")
	}
	if d := dst.f.users.User(acl.DefaultUser); !d.CheckPassword("shared") || d.CheckPassword("dst-pw") {
		t.Fatal("the backup's default user did not replace --requirepass's")
	}
	if !bytes.Equal(dst.f.UsersSection(), sec) {
		t.Fatal("the restored users' section differs from the backup's")
	}
	// Users are set: an aclfile changes nothing now.
	if r := dst.ok(&Command{Op: OpACLLoad, Data: acl.Encode(nil)}); r.Ints[0] != 0 {
		t.Fatal("an aclfile applied after a restore of users")
	}

	// Damaged data: refused, nothing changes.
	v = dst.f.UsersVersion()
	noDefault := append([]byte{1}, acl.Encode([]*acl.User{mustUser(t, dst, "x", "on")})...)
	for name, data := range map[string][]byte{
		"unknown flags":        append([]byte{0x81}, sec[1:]...),
		"truncated":            sec[:len(sec)-1],
		"trailing bytes":       append(bytes.Clone(sec), 0),
		"default flag, absent": append([]byte{3}, acl.Encode(nil)...),
		"default, no flag":     append([]byte{1}, sec[1:]...),
		"flag, no default":     append([]byte{3}, noDefault[1:]...),
	} {
		if r := dst.apply(&Command{Op: OpACLRestore, Data: data}); r.Err != ErrBadData {
			t.Errorf("%s: %v", name, r.Err)
		}
		if _, err := CheckUsersSection(data); err == nil {
			t.Errorf("%s: CheckUsersSection took it", name)
		}
	}
	if dst.f.UsersVersion() != v || !bytes.Equal(dst.f.UsersSection(), sec) {
		t.Fatal("a refused restore changed the users")
	}

	// A backup whose default user the log never set: this node's
	// --requirepass decides it again.
	src2 := usersHarness(t, "")
	src2.ok(setUser("crawler", "on", "nopass", "~crawl:*", "+bf.add"))
	dst.ok(&Command{Op: OpACLRestore, Data: src2.f.UsersSection()})
	if d := dst.f.users.User(acl.DefaultUser); !d.CheckPassword("dst-pw") || d.CheckPassword("shared") {
		t.Fatal("the default user is not this node's --requirepass after a backup without one")
	}
	if got := dst.f.users.Names(); !slices.Equal(got, []string{"crawler", acl.DefaultUser}) {
		t.Fatalf("users: %v", got)
	}

	// An empty section: the backup's cluster never set users.
	if r := dst.ok(&Command{Op: OpACLRestore}); r.Ints[0] != 0 {
		t.Fatalf("empty restore answered %v", r.Ints)
	}
	if dst.f.UsersSection() != nil || !slices.Equal(dst.f.users.Names(), []string{acl.DefaultUser}) {
		t.Fatal("an empty restore left users")
	}
	if r := dst.ok(&Command{Op: OpACLLoad, Data: acl.Encode(nil)}); r.Ints[0] != 1 {
		t.Fatal("an aclfile no longer seeds users after a restore of none")
	}

	// A group that holds no users.
	plain := newHarness(t)
	if plain.f.UsersSection() != nil {
		t.Fatal("a group without users has a users section")
	}
	if r := plain.apply(&Command{Op: OpACLRestore, Data: sec}); r.Err != ErrNoUsers {
		t.Fatalf("restore in a group without users: %v", r.Err)
	}
}
