package cluster

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/acl"
)

// usersSection is group 0's users section with the users made by rules
// (name -> ACL SETUSER rules, passwords in clear), as GET /v1/users sends it.
func usersSection(t *testing.T, users map[string][]string) []byte {
	t.Helper()
	reg, err := acl.NewRegistry([]string{"bf.add", "bf.exists", "ping"})
	if err != nil {
		t.Fatal(err)
	}
	f := fsm.New(fsm.Options{Logger: testLogger(), Users: acl.NewStore(reg, "")})
	i := uint64(0)
	for name, rules := range users {
		rules = acl.HashRules(rules)
		items := make([][]byte, len(rules))
		for j, r := range rules {
			items[j] = []byte(r)
		}
		i++
		if r := f.ApplyCommand(i, &fsm.Command{Op: fsm.OpACLSetUser, Key: name, Items: items}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	return f.UsersSection()
}

// writeBundle writes a bundle of the given version of shards with, from
// version 2, users.
func writeBundle(t *testing.T, version uint16, shards [][]byte, users []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	bw, err := newBundleWriter(&out, len(shards), version)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range shards {
		if _, err := bw.Part(bytes.NewReader(s), int64(len(s))); err != nil {
			t.Fatal(err)
		}
	}
	if version >= bundleUsersVersion {
		if _, err := bw.Users(users); err != nil {
			t.Fatal(err)
		}
	}
	if err := bw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// resum gives a bundle changed by hand a checksum that holds.
func resum(b []byte) []byte {
	body := b[:len(b)-sha256.Size]
	sum := sha256.Sum256(body)
	return append(bytes.Clone(body), sum[:]...)
}

// TestBundleCarriesUsers: a version 2 bundle carries group 0's users after
// the shards, which VerifyBundle hands back checked and counted; none is a
// part of length 0; a version 1 bundle (before users) still reads, saying
// it carries none; damage to the users is refused, named.
func TestBundleCarriesUsers(t *testing.T) {
	shards := [][]byte{
		backupBytes(t, testMeta(), stateStream(t, "names", "x")),
		backupBytes(t, testMeta(), stateStream(t, "other", "y", "z")),
	}
	users := usersSection(t, map[string][]string{
		"checker": {"on", ">secret", "~names", "+bf.exists"},
		"writer":  {"on", ">w", "~*", "+bf.add"},
	})

	file := writeBundle(t, bundleVersion, shards, users)
	b, err := VerifyBundle(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if b.Version != 2 || len(b.Parts) != 2 || !b.HasUsers || !bytes.Equal(b.Users, users) || b.UserCount != 2 ||
		b.Size != int64(len(file)) {
		t.Fatalf("described as version %d, %d parts, users %v %d (%d bytes), %d bytes of %d",
			b.Version, len(b.Parts), b.HasUsers, b.UserCount, len(b.Users), b.Size, len(file))
	}
	for i, p := range b.Parts {
		if got := file[p.Offset : p.Offset+p.Info.FileBytes]; !bytes.Equal(got, shards[i]) {
			t.Fatalf("shard %d's part is not where the bundle says", i)
		}
	}
	if bytes.Contains(file, []byte("secret")) {
		t.Fatal("a password in clear in the bundle")
	}

	// A cluster that never set users: a users part of length 0.
	none := writeBundle(t, bundleVersion, shards, nil)
	if b, err := VerifyBundle(bytes.NewReader(none)); err != nil || !b.HasUsers || len(b.Users) != 0 || b.UserCount != 0 {
		t.Fatalf("a bundle without users: %+v %v", b, err)
	}

	// Version 1, as builds before users wrote it: read, with no users.
	v1 := writeBundle(t, 1, shards, nil)
	if b, err := VerifyBundle(bytes.NewReader(v1)); err != nil || b.Version != 1 || b.HasUsers || b.Users != nil || len(b.Parts) != 2 {
		t.Fatalf("a version 1 bundle: %+v %v", b, err)
	}
	if !bytes.Equal(v1[len(bundleMagic)+6:len(none)-sha256.Size-8], none[len(bundleMagic)+6:len(none)-sha256.Size-8]) {
		t.Fatal("version 2's shard parts are not version 1's")
	}

	usersAt := len(file) - sha256.Size - len(users) // the users' first byte
	damaged := map[string]struct {
		file []byte
		msg  string
	}{
		"a users byte flipped": {func() []byte {
			f := bytes.Clone(file)
			f[usersAt+len(users)/2] ^= 0x40
			return f
		}(), ""},
		"damaged users, checksum holding": {func() []byte {
			f := bytes.Clone(file)
			f[usersAt] = 0x80 // unknown flags
			return resum(f)
		}(), "the cluster's users: users section: unknown flags"},
		"users cut short, checksum holding": {func() []byte {
			f := append(bytes.Clone(file[:usersAt-8]), 0, 0, 0, 0, 0, 0, 0, 0)
			binary.LittleEndian.PutUint64(f[usersAt-8:], uint64(len(users)-1))
			f = append(f, users[:len(users)-1]...)
			return resum(append(f, make([]byte, sha256.Size)...))
		}(), "the cluster's users"},
		"users length beyond the bound": {func() []byte {
			f := bytes.Clone(file)
			binary.LittleEndian.PutUint64(f[usersAt-8:], MaxBundleUsers+1)
			return f
		}(), "more than"},
		"truncated in the users":     {file[:usersAt+2], "truncated in the cluster's users"},
		"truncated before the users": {file[:usersAt-8], "truncated before the cluster's users"},
		"version 1 header, users after": {func() []byte {
			f := bytes.Clone(file)
			binary.LittleEndian.PutUint16(f[len(bundleMagic):], 1)
			return resum(f)
		}(), ""},
		"version 3": {func() []byte {
			f := bytes.Clone(file)
			binary.LittleEndian.PutUint16(f[len(bundleMagic):], 3)
			return resum(f)
		}(), "bundle version 3, this build reads 1 to 2"},
		"data after the checksum": {append(bytes.Clone(file), 0), "data after"},
	}
	for name, tc := range damaged {
		_, err := VerifyBundle(bytes.NewReader(tc.file))
		if !errors.Is(err, ErrBadBackup) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestBundleWriterOrder: the users come after every shard, once, checked;
// a version 2 bundle is not closed without them (a missing part would read
// as a cluster without users, and a restore would drop the users).
func TestBundleWriterOrder(t *testing.T) {
	shard := backupBytes(t, testMeta(), stateStream(t, "names", "x"))
	var out bytes.Buffer
	bw, err := NewBundleWriter(&out, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bw.Users(nil); err == nil {
		t.Fatal("users before the shards")
	}
	if _, err := bw.Part(bytes.NewReader(shard), int64(len(shard))); err != nil {
		t.Fatal(err)
	}
	if err := bw.Close(); err == nil || !strings.Contains(err.Error(), "users are not written") {
		t.Fatalf("closed without the users: %v", err)
	}
	if _, err := bw.Users([]byte{0x80, 1, 0}); !errors.Is(err, ErrBadBackup) {
		t.Fatalf("damaged users written: %v", err)
	}
	if n, err := bw.Users(nil); err != nil || n != 0 {
		t.Fatalf("no users: %d %v", n, err)
	}
	if _, err := bw.Users(nil); err == nil {
		t.Fatal("the users written twice")
	}
	if err := bw.Close(); err != nil {
		t.Fatal(err)
	}
	v1, err := newBundleWriter(&bytes.Buffer{}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v1.Part(bytes.NewReader(shard), int64(len(shard))); err != nil {
		t.Fatal(err)
	}
	if _, err := v1.Users(nil); err == nil {
		t.Fatal("users in a version 1 bundle")
	}
}
