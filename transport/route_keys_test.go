package transport

import (
	"slices"
	"strings"
	"testing"
)

// TestKeysOfIdem: a write under IDEM routes by its inner command's keys, not
// by IDEM's session and sequence number (which the Go client puts before
// every write): the op of IDEM carries the inner command's def.
func TestKeysOfIdem(t *testing.T) {
	s := New(Config{}, newFakeBackend(t))
	for _, tc := range []struct {
		cmd  string
		keys []int
		name string
	}{
		{"BF.ADD k item", []int{1}, "bf.add"},
		{"IDEM 1010 1 BF.ADD k item", []int{4}, "bf.add"},
		{"idem 7 2 CF.INSERT k ITEMS a b", []int{4}, "cf.insert"},
		{"IDEM 7 3 DEL a b c", []int{4, 5, 6}, "del"},
		{"DEL a b", []int{1, 2}, "del"},
	} {
		var args [][]byte
		for _, f := range strings.Fields(tc.cmd) {
			args = append(args, []byte(f))
		}
		o, err := s.parse(&session{authed: true}, args)
		if err != nil {
			t.Fatalf("%s: %v", tc.cmd, err)
		}
		if got := s.keysOf(o.def, args); !slices.Equal(got, tc.keys) {
			t.Errorf("%s: keys at %v, want %v", tc.cmd, got, tc.keys)
		}
		if got := s.innerName(o.def, args); got != tc.name {
			t.Errorf("%s: command %q, want %q", tc.cmd, got, tc.name)
		}
	}
}
