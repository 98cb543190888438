package cluster

import (
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// TestLiveness: one row per rule of the liveness view (liveness.go).
func TestLiveness(t *testing.T) {
	start := time.Unix(1000, 0)
	now := start.Add(time.Minute)
	gossip := func(id string, st memberlist.NodeStateType, since time.Time) member {
		return member{meta: meta{ID: id}, state: st, since: since}
	}
	report := func(id string, at time.Time, stopping, leaving bool) received {
		return received{r: nodeReport{ID: id, Stopping: stopping, Leaving: leaving}, at: at}
	}
	cases := []struct {
		name string
		in   livenessInput
		id   string
		want liveState
		dead time.Duration
	}{
		{"alive to gossip", livenessInput{Members: []member{gossip("n2", memberlist.StateAlive, start)}}, "n2", liveAlive, 0},
		{"gossip lost it, but its reports arrive: alive", livenessInput{
			Members: []member{gossip("n2", memberlist.StateDead, now.Add(-time.Hour))},
			Reports: map[string]received{"n2": report("n2", now.Add(-time.Second), false, false)}}, "n2", liveAlive, 0},
		{"gossip lost it, but a group reaches it: alive", livenessInput{
			Members: []member{gossip("n2", memberlist.StateDead, now.Add(-time.Hour))},
			Reached: map[string]bool{"n2": true}}, "n2", liveAlive, 0},
		{"both lost it: dead since the later of the two", livenessInput{
			Members: []member{gossip("n2", memberlist.StateDead, now.Add(-30*time.Second))},
			Reports: map[string]received{"n2": report("n2", now.Add(-20*time.Second), false, false)}}, "n2", liveDead, 20 * time.Second},
		{"raft's own last contact counts too", livenessInput{
			Members:   []member{gossip("n2", memberlist.StateDead, now.Add(-30*time.Second))},
			Unreached: map[string]time.Duration{"n2": 5 * time.Second}}, "n2", liveDead, 5 * time.Second},
		{"never heard of since this node started: counted from its start", livenessInput{
			Members: []member{gossip("n2", memberlist.StateDead, time.Time{})}}, "n2", liveDead, time.Minute},
		{"left on purpose: gone at once", livenessInput{
			Members: []member{gossip("n2", memberlist.StateLeft, now)}}, "n2", liveLeft, 0},
		{"said it leaves, and gossip lost it: left", livenessInput{
			Members: []member{gossip("n2", memberlist.StateDead, now)},
			Reports: map[string]received{"n2": report("n2", now.Add(-time.Second), false, true)}}, "n2", liveLeft, 0},
		{"stopping: alive, takes nothing new", livenessInput{
			Members: []member{gossip("n2", memberlist.StateAlive, start)},
			Reports: map[string]received{"n2": report("n2", now.Add(-time.Second), true, false)}}, "n2", liveStopping, 0},
		{"stopped, gossip lost it, within the timeouts: still stopping", livenessInput{
			Members: []member{gossip("n2", memberlist.StateDead, now.Add(-time.Second))},
			Reports: map[string]received{"n2": report("n2", now.Add(-2*time.Second), true, false)}}, "n2", liveStopping, 0},
		{"restarted and reporting again: alive", livenessInput{
			Members: []member{gossip("n2", memberlist.StateAlive, now)},
			Reports: map[string]received{"n2": report("n2", now, false, false)}}, "n2", liveAlive, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.Self, c.in.Now, c.in.Started = "n1", now, start
			l := liveness(c.in)[c.id]
			if l.State != c.want || l.DeadFor() != c.dead {
				t.Fatalf("%s: %+v (dead for %v), want state %d dead for %v", c.id, l, l.DeadFor(), c.want, c.dead)
			}
		})
	}
}
