package transport

import (
	"fmt"
	"slices"
	"testing"

	"github.com/rookerydb/rookery/internal/acl"
)

// TestACLKeyPositionsMatchTheCommandTable: the users' registry declares
// each command's key positions again (internal/acl/table.go), for the key
// patterns; they must name the same arguments as the command table that
// routes the command (keysOf), or a pattern would be checked against the
// wrong argument, or none.
func TestACLKeyPositionsMatchTheCommandTable(t *testing.T) {
	ts := mustStartServer(t, Config{})
	s := ts.s
	var defs []*command
	for _, c := range s.cmds {
		defs = append(defs, c)
		defs = append(defs, c.subs...)
	}
	for _, def := range defs {
		if def.name == "idem" {
			continue // judged by the command it wraps (checkACL)
		}
		spec, ok := acl.Lookup(def.name)
		if !ok {
			t.Errorf("%s: not in the users' registry", def.name)
			continue
		}
		for n := 1; n <= 7; n++ {
			args := make([][]byte, n)
			for i := range args {
				args[i] = fmt.Appendf(nil, "a%d", i)
			}
			routed := s.keysOf(def, args)
			var checked []int
			for _, k := range spec.Keys {
				last := k.Last
				if last < 0 {
					last += n
				}
				for i := k.First; i <= last && i < n; i += max(k.Step, 1) {
					checked = append(checked, i)
				}
			}
			slices.Sort(checked)
			checked = slices.Compact(checked)
			if !slices.Equal(routed, checked) {
				t.Errorf("%s with %d arguments: keys %v in the command table, %v in the users' registry", def.name, n, routed, checked)
				break
			}
		}
	}
}
