package acl

import (
	"regexp"
	"slices"
	"sync"
	"testing"
)

func TestStoreUsers(t *testing.T) {
	s := mustNewStore(t)
	if got := s.Names(); !slices.Equal(got, []string{"default"}) {
		t.Fatalf("users of a new store: %v", got)
	}
	if s.AuthRequired() || !s.User("default").NoPass() {
		t.Error("a default nopass user needs AUTH")
	}
	if NewStore(s.Registry(), "pw").AuthRequired() != true {
		t.Error("requirepass needs no AUTH")
	}
	mustSetUser(t, s, "default", "off")
	if !s.AuthRequired() {
		t.Error("a disabled default user needs no AUTH")
	}
	mustSetUser(t, s, "default", "on")
	if a := s.Default(); a == nil || a.Name() != "default" || !a.User().Unrestricted() {
		t.Fatal("default account")
	}
	mustSetUser(t, s, "zed", "on")
	mustSetUser(t, s, "alice", "on", "nopass", "~*", "+@read")
	if got := s.Names(); !slices.Equal(got, []string{"alice", "default", "zed"}) {
		t.Errorf("ACL USERS %v", got)
	}
	want := []string{
		"user alice on nopass sanitize-payload ~* resetchannels -@all +@read",
		"user default on nopass sanitize-payload ~* &* +@all",
		"user zed on sanitize-payload resetchannels -@all",
	}
	if got := s.List(); !slices.Equal(got, want) {
		t.Errorf("ACL LIST\n%q\nwant\n%q", got, want)
	}

	// A connection's account sees changes, then the deletion.
	a := s.Account("alice")
	mustSetUser(t, s, "alice", "+bf.add")
	if !a.User().Allowed(mustID(t, s.Registry(), "bf.add")) {
		t.Error("the account does not see the change")
	}
	if n, err := s.DelUser("alice", "default"); err != ErrDeleteDefault || n != 0 || s.User("alice") == nil {
		t.Errorf("DELUSER alice default: %d, %v", n, err)
	}
	if ErrDeleteDefault.Error() != "ERR The 'default' user cannot be removed" {
		t.Error(ErrDeleteDefault)
	}
	if n, err := s.DelUser("alice", "nosuch", "zed"); err != nil || n != 2 {
		t.Errorf("DELUSER: %d, %v", n, err)
	}
	if a.User() != nil || s.Account("alice") != nil || s.User("zed") != nil {
		t.Error("a deleted user lives on")
	}
	// A user created again under the name is a new account.
	mustSetUser(t, s, "alice", "on")
	if s.Account("alice") == a || a.User() != nil {
		t.Error("a new alice revives the old account")
	}
}

func TestStoreReplace(t *testing.T) {
	s := mustNewStore(t)
	mustSetUser(t, s, "keep", "on", "+@read")
	mustSetUser(t, s, "gone", "on")
	keep, gone, def := s.Account("keep"), s.Account("gone"), s.Default()

	k, _ := NewUser("keep").Apply([]string{"on", "+@write"}, nil)
	n, _ := NewUser("new").Apply([]string{"on"}, nil)
	s.Replace([]*User{k, n})
	if got := s.Names(); !slices.Equal(got, []string{"default", "keep", "new"}) {
		t.Errorf("users %v", got)
	}
	if gone.User() != nil {
		t.Error("a user the set lacks lives on")
	}
	if keep.User() == nil || keep.User().GetUser().Commands != "-@all +@write" {
		t.Error("a kept user's account does not see its new rules")
	}
	if def.User() == nil || def.User().Describe() != "user default on nopass sanitize-payload ~* &* +@all" {
		t.Error("default user not Redis's when the set lacks one")
	}
	if !keep.User().Allowed(mustID(t, s.Registry(), "bf.add")) {
		t.Error("replaced users are not compiled")
	}
}

func TestDryRun(t *testing.T) {
	s := mustNewStore(t)
	mustSetUser(t, s, "u", "on", "+bf.add", "%R~r:*")
	reg := s.Registry()
	for _, c := range []struct {
		cmd  string
		args string
		want string
	}{
		{"bf.add", "bf.add r:1 x", "User u has no permissions to access the 'r:1' key"},
		{"bf.exists", "bf.exists r:1 x", "User u has no permissions to run the 'bf.exists' command"},
		{"client|list", "client list", "User u has no permissions to run the 'client|list' command"},
		{"auth", "auth u p", "OK"},
	} {
		got, err := s.DryRun("u", mustID(t, reg, c.cmd), req(c.args))
		if err != nil || got != c.want {
			t.Errorf("DRYRUN u %s: %q, %v; want %q", c.args, got, err, c.want)
		}
	}
	mustSetUser(t, s, "u", "%W~r:*")
	if got, _ := s.DryRun("u", mustID(t, reg, "bf.add"), req("bf.add r:1 x")); got != "OK" {
		t.Errorf("DRYRUN after %%W~: %q", got)
	}
	if _, err := s.DryRun("nosuch", 0, req("ping")); err == nil || err.Error() != "ERR User 'nosuch' not found" {
		t.Errorf("DRYRUN nosuch: %v", err)
	}
	if CommandNotFound("x").Error() != "ERR Command 'x' not found" || UnknownCategory("NON_EXISTS").Error() != "ERR Unknown category 'NON_EXISTS'" {
		t.Error("DRYRUN / CAT errors")
	}
}

func TestGenPass(t *testing.T) {
	hexRE := regexp.MustCompile(`^[0-9a-f]*$`)
	for bits, chars := range map[int64]int{DefaultGenPassBits: 64, 1: 1, 4: 1, 5: 2, 32: 8, 4096: 1024} {
		p, err := GenPass(bits)
		if err != nil || len(p) != chars || !hexRE.MatchString(p) {
			t.Errorf("GENPASS %d: %q, %v", bits, p, err)
		}
	}
	a, _ := GenPass(256)
	b, _ := GenPass(256)
	if a == b {
		t.Error("GENPASS repeats itself")
	}
	for _, bits := range []int64{0, -1, 4097} {
		if _, err := GenPass(bits); err != ErrGenPassBits {
			t.Errorf("GENPASS %d: %v", bits, err)
		}
	}
	if ErrGenPassBits.Error() != "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096" {
		t.Error(ErrGenPassBits)
	}
}

// TestStoreConcurrency has connections check commands while users change
// under them; run with -race.
func TestStoreConcurrency(t *testing.T) {
	s := mustNewStore(t)
	mustSetUser(t, s, "u", "on", ">p", "~*", "+@read")
	id := mustID(t, s.Registry(), "bf.exists")
	args := req("bf.exists k x")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := s.Authenticate("u", "p")
			if err != nil {
				t.Error(err)
				return
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				if u := a.User(); u != nil {
					s.Registry().Check(u, id, args)
				}
				s.Names()
				s.User("u")
			}
		}()
	}
	for i := range 2000 {
		rule := "+@read"
		if i%2 == 0 {
			rule = "-@read"
		}
		if err := s.ApplySetUser("u", []string{rule}); err != nil {
			t.Fatal(err)
		}
		if i%500 == 0 {
			s.Replace(s.Users())
		}
	}
	close(stop)
	wg.Wait()
}
