package transport

import (
	"testing"

	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
)

// TestTypeNameOfEveryKind: TYPE names every kind by its family, as
// RedisBloom names its two and ours the counting filters; a kind no row
// knows is not called a Bloom filter.
func TestTypeNameOfEveryKind(t *testing.T) {
	want := map[fsm.Family]string{fsm.FamilyBF: typeBloom, fsm.FamilyCF: typeCuckoo, fsm.FamilyCBF: typeCounting}
	seen := 0
	for k := filters.Kind(1); k < 64; k++ {
		fam := fsm.FamilyOf(k)
		if fam == fsm.FamilyNone {
			if got := typeName(k); got != "none" {
				t.Errorf("unknown kind %d is called %q", k, got)
			}
			continue
		}
		seen++
		if got := typeName(k); got != want[fam] {
			t.Errorf("%v: TYPE %q, want %q", k, got, want[fam])
		}
	}
	if seen < 9 {
		t.Fatalf("only %d kinds have a family", seen)
	}
	for k, name := range map[filters.Kind]string{filters.KindScalable: "MBbloom--", filters.KindRBCuckoo: "MBbloomCF",
		filters.KindWindowCuckoo: "MBbloomCF", filters.KindDLeft: "MBbloomCBF"} {
		if got := typeName(k); got != name {
			t.Errorf("%v: %q, want %q", k, got, name)
		}
	}
}
