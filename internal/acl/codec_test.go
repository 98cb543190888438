package acl

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update-acl", false, "rewrite testdata/golden/users.hex")

// sampleStore holds users with every kind of state.
func sampleStore(t testing.TB) *Store {
	s := NewStore(mustNewRegistry(t), "sesame")
	mustSetUser(t, s, "reader", "on", ">r1", ">r2", "%R~app:*", "~tmp:*", "%W~w:*", "&news", "-@all", "+@read", "-bf.debug")
	mustSetUser(t, s, "ops", "on", "nopass", "allkeys", "allchannels", "+@all", "-@dangerous", "+info", "-client|kill")
	mustSetUser(t, s, "off", "skip-sanitize-payload", "+client", "-client|list", "+config|get")
	mustSetUser(t, s, "")
	if err := s.ApplySetUser("future", []string{"on", "+later.cmd", "+@later"}); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestEncodeRoundTrip(t *testing.T) {
	s := sampleStore(t)
	enc := s.Encode()
	users, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(Encode(users), enc) {
		t.Fatal("decode then encode changes the bytes")
	}
	r := NewStore(s.Registry(), "")
	r.Replace(users)
	if !slices.Equal(r.List(), s.List()) {
		t.Errorf("restored users differ:\n%q\n%q", r.List(), s.List())
	}
	// Compiled or not, in any order, the same users encode the same.
	rev := slices.Clone(users)
	slices.Reverse(rev)
	if !bytes.Equal(Encode(rev), enc) || !bytes.Equal(Encode(r.Users()), enc) {
		t.Error("encoding depends on order or compilation")
	}
	if bytes.Contains(enc, []byte("sesame")) || bytes.Contains(enc, []byte("r1")) {
		t.Error("a clear-text password in the encoding")
	}
	for _, u := range r.Users() {
		if u.name == "reader" && !u.CheckPassword("r2") {
			t.Error("passwords lost")
		}
	}
}

// TestEncodeGolden pins the format: a changed encoding means old snapshots
// and log entries read differently.
func TestEncodeGolden(t *testing.T) {
	got := hex.EncodeToString(sampleStore(t).Encode())
	path := filepath.Join("testdata", "golden", "users.hex")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-acl to create it)", err)
	}
	if got != strings.TrimSpace(string(want)) {
		t.Errorf("encoding changed:\n got %s\nwant %s", got, want)
	}
}

func TestDecodeRefuses(t *testing.T) {
	s := NewStore(mustNewRegistry(t), "")
	mustSetUser(t, s, "a", "on")
	good := s.Encode()
	if _, err := Decode(append([]byte{2}, good[1:]...)); !errors.Is(err, ErrVersion) {
		t.Errorf("version 2: %v", err)
	}
	// Users built by hand into states no SETUSER leaves.
	bad := func(mut func(u *User)) []byte {
		u := NewUser("x")
		mut(u)
		return Encode([]*User{u})
	}
	h := [32]byte{1}
	for name, data := range map[string][]byte{
		"empty":          nil,
		"version 0":      append([]byte{0}, good[1:]...),
		"trailing bytes": append(slices.Clone(good), 0),
		"truncated":      good[:len(good)-1],
		"nopass and a password": bad(func(u *User) {
			u.nopass, u.passwords = true, [][32]byte{h}
		}),
		"a password twice":    bad(func(u *User) { u.passwords = [][32]byte{h, h} }),
		"allkeys and a key":   bad(func(u *User) { u.allKeys, u.keys = true, []keyPattern{{"a", KeyRead}} }),
		"key without access":  bad(func(u *User) { u.keys = []keyPattern{{"a", 0}} }),
		"key with a space":    bad(func(u *User) { u.keys = []keyPattern{{"a b", KeyRead}} }),
		"a key twice":         bad(func(u *User) { u.keys = []keyPattern{{"a", KeyRead}, {"a", KeyWrite}} }),
		"allchannels and one": bad(func(u *User) { u.allChannels, u.channels = true, []string{"c"} }),
		"upper-case rule":     bad(func(u *User) { u.rules = []string{"+BF.ADD"} }),
		"+@all rule":          bad(func(u *User) { u.rules = []string{"+@all"} }),
		"rule without sign":   bad(func(u *User) { u.rules = []string{"bf.add"} }),
		"a rule twice":        bad(func(u *User) { u.rules = []string{"+bf.add", "-bf.add"} }),
		"sub before its cmd":  bad(func(u *User) { u.rules = []string{"+client|list", "-client"} }),
		"name with a space":   bad(func(u *User) { u.name = "a b" }),
	} {
		if _, err := Decode(data); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Encode sorts; users out of order are spliced by hand.
	swapped := append([]byte{EncodingVersion, 2}, Encode([]*User{NewUser("b")})[2:]...)
	swapped = append(swapped, Encode([]*User{NewUser("a")})[2:]...)
	if _, err := Decode(swapped); !errors.Is(err, ErrCorrupt) {
		t.Errorf("users out of order: %v", err)
	}
	// A container's rule then its subcommand's is a state SETUSER leaves.
	ok := bad(func(u *User) { u.rules = []string{"-client", "+client|list"} })
	if _, err := Decode(ok); err != nil {
		t.Errorf("-client +client|list: %v", err)
	}
	bits := bad(func(u *User) {})
	bits[4] |= 0x80 // version, count, name length, "x", then the flags
	if _, err := Decode(bits); !errors.Is(err, ErrCorrupt) {
		t.Errorf("unknown flag: %v", err)
	}
}

// FuzzDecode decodes anything: Decode never panics, fails only with
// ErrCorrupt or ErrVersion, and users it returns re-encode to bytes that
// decode to the same bytes again, and load into a store.
func FuzzDecode(f *testing.F) {
	reg := mustNewRegistry(f)
	seeds := [][]byte{sampleStore(f).Encode(), NewStore(reg, "").Encode(), {EncodingVersion, 0}}
	for _, s := range seeds {
		f.Add(s)
		f.Add(s[:len(s)/2])
		b := slices.Clone(s)
		b[len(b)/3] ^= 0x20
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		users, err := Decode(data)
		if err != nil {
			if users != nil {
				t.Fatal("users and an error")
			}
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error %v is neither ErrCorrupt nor ErrVersion", err)
			}
			return
		}
		enc := Encode(users)
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("a re-encoding does not decode: %v", err)
		}
		if !bytes.Equal(Encode(again), enc) {
			t.Fatal("re-encoding is not stable")
		}
		s := NewStore(reg, "")
		s.Replace(users)
		for _, l := range s.List() {
			if !strings.HasPrefix(l, "user ") {
				t.Fatalf("ACL LIST line %q", l)
			}
		}
	})
}
