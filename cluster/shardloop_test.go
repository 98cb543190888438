package cluster

import (
	"reflect"
	"testing"

	"github.com/rookerydb/rookery/fsm"
)

// TestPlanTend: one row per rule of a node's own groups (planTend's comment).
func TestPlanTend(t *testing.T) {
	m := mapOf(3, true, []string{"n1", "n2", "n3"}, []string{"n2", "n3", "n4"}, []string{"n3", "n4", "n5"})
	cases := []struct {
		name string
		v    tendView
		want []tendAction
	}{
		{"opens what the map places here", tendView{Self: "n3", Map: m, Open: map[int]localGroup{1: {}}},
			[]tendAction{{Kind: tendOpen, Group: 2}, {Kind: tendOpen, Group: 3}}},
		{"its creator creates an uncreated shard", tendView{Self: "n1", Map: func() *fsm.Map {
			c := m.Clone()
			c.Groups[0].Created = false
			return c
		}(), Open: map[int]localGroup{}},
			[]tendAction{{Kind: tendCreate, Group: 1}}},
		{"keeps a group moved away until its leader counts this node out", tendView{Self: "n1", Map: m,
			Open: map[int]localGroup{1: {}, 2: {}}, Leaders: map[int]groupReport{2: {Voters: []string{"n1", "n2", "n3", "n4"}}}},
			nil},
		{"retires it once its leader does", tendView{Self: "n1", Map: m,
			Open: map[int]localGroup{1: {}, 2: {}}, Leaders: map[int]groupReport{2: {Voters: []string{"n2", "n3", "n4"}}}},
			[]tendAction{{Kind: tendRetire, Group: 2}}},
		{"a group this node leads is not retired (it hands over first)", tendView{Self: "n1", Map: m,
			Open: map[int]localGroup{1: {}, 2: {Leads: true}}, Leaders: map[int]groupReport{2: {Voters: []string{"n2", "n3", "n4"}}}},
			nil},
		{"files of a moved shard go once its leader counts this node out", tendView{Self: "n1", Map: m,
			Open: map[int]localGroup{1: {}}, OnDisk: []int{2, 3}, Leaders: map[int]groupReport{2: {Voters: []string{"n2", "n3", "n4"}}}},
			[]tendAction{{Kind: tendRemove, Group: 2}}},
		{"a group beyond the map's shards goes", tendView{Self: "n1", Map: m, Open: map[int]localGroup{1: {}, 9: {}}},
			[]tendAction{{Kind: tendRetire, Group: 9}}},
		{"a fenced replica is closed, kept and never opened", tendView{Self: "n2", Map: func() *fsm.Map {
			c := m.Clone()
			c.Groups[0].Replicas = []string{"n1", "n3"}
			c.Groups[0].Fenced = []string{"n2"}
			return c
		}(), Open: map[int]localGroup{1: {}, 2: {}}, Leaders: map[int]groupReport{1: {Voters: []string{"n1"}}}},
			[]tendAction{{Kind: tendClose, Group: 1}}},
		{"a fenced replica's files stay", tendView{Self: "n2", Map: func() *fsm.Map {
			c := m.Clone()
			c.Groups[0].Replicas = []string{"n1", "n3"}
			c.Groups[0].Fenced = []string{"n2"}
			return c
		}(), Open: map[int]localGroup{2: {}}, OnDisk: []int{1}, Leaders: map[int]groupReport{1: {Voters: []string{"n1"}}}},
			nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := planTend(c.v)
			for i := range got {
				got[i].Why = ""
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("planned %+v, want %+v", got, c.want)
			}
		})
	}
}
