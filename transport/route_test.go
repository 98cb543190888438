package transport

import (
	"bytes"
	"slices"
	"testing"
)

// TestRouteFindsTheKeysIDEMWraps: a write the Go client retries safely is
// sent as IDEM client seq COMMAND key ..., and its op names the wrapped
// command; a sharded node must route it by the wrapped command's keys, never
// by the client id or the sequence number, and split IDEM DEL over several
// shards keeping IDEM's arguments in front of each part.
func TestRouteFindsTheKeysIDEMWraps(t *testing.T) {
	s := New(Config{}, newFakeBackend(t))
	for _, c := range []struct {
		req  string
		keys []string
		name string
	}{
		{"BF.ADD k x", []string{"k"}, "bf.add"},
		{"IDEM 5 1 BF.ADD k x", []string{"k"}, "bf.add"},
		{"IDEM 5 2 BF.MADD k x y", []string{"k"}, "bf.madd"},
		{"IDEM 5 3 CF.INSERT k ITEMS x", []string{"k"}, "cf.insert"},
		{"DEL a b", []string{"a", "b"}, "del"},
		{"IDEM 5 4 DEL a", []string{"a"}, "del"},
		{"IDEM 5 5 DEL a b", []string{"a", "b"}, "del"},
		{"idem 5 6 unlink a", []string{"a"}, "unlink"},
	} {
		args := bytes.Fields([]byte(c.req))
		o, err := s.parse(&session{}, args)
		if err != nil {
			t.Fatalf("%s: %v", c.req, err)
		}
		var keys []string
		for _, i := range s.keysOf(o.def, args) {
			keys = append(keys, string(args[i]))
		}
		if !slices.Equal(keys, c.keys) {
			t.Errorf("%s: routed by %q, want %q", c.req, keys, c.keys)
		}
		if got := s.innerName(o.def, args); got != c.name {
			t.Errorf("%s: spread as %q, want %q", c.req, got, c.name)
		}
		if want := bytes.EqualFold(args[0], []byte("IDEM")); wrapped(args) != want {
			t.Errorf("%s: wrapped %v, want %v", c.req, !want, want)
		}
	}
}
