package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// Faults the nemesis knows.
const (
	faultKill  = "kill"  // SIGKILL a node, restart it on its data
	faultPause = "pause" // SIGSTOP a node (a long GC pause, a frozen VM), then SIGCONT
	faultTerm  = "term"  // SIGTERM a node (a clean restart), restart it
	// faultPartition cuts a node's Raft links with every other node, both ways,
	// while it keeps running and serving clients; the nodes must run with
	// --fault-injection.
	faultPartition = "partition"
)

// nemesis injects one fault at a time into the cluster until ctx ends, half of
// them into the leader, and heals each before the next. It logs what it did.
type nemesis struct {
	cluster  *nodeproc.Cluster
	faults   []string
	interval time.Duration // between faults
	hold     time.Duration // how long a fault lasts
	rng      *rand.Rand
	log      func(format string, args ...any)
	now      func() int64 // the history's clock
	logs     *nodeLogs    // keeps a node's log across its restarts
	injected int
	events   []faultEvent
}

// faultEvent is one fault as the summary reports it: times are ns since the
// run began, from just before the fault to its healing.
type faultEvent struct {
	Kind   string `json:"kind"`
	Node   string `json:"node"`
	Leader bool   `json:"leader"` // the node led the cluster just before the fault
	Start  int64  `json:"start_ns"`
	End    int64  `json:"end_ns"`
	Err    string `json:"error,omitempty"`
}

func (n *nemesis) run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(n.interval):
		}
		victim, leader := n.pick()
		fault := n.faults[n.rng.IntN(len(n.faults))]
		ev := faultEvent{Kind: fault, Node: victim.ID, Leader: leader, Start: n.now()}
		err := n.inject(fault, victim)
		ev.End = n.now()
		if err != nil {
			ev.Err = err.Error()
		}
		n.events = append(n.events, ev)
		if err != nil {
			return err
		}
		n.injected++
	}
}

// pick chooses the leader half of the time, else any node, and says whether
// the node it chose leads.
func (n *nemesis) pick() (*nodeproc.Member, bool) {
	if n.rng.IntN(2) == 0 {
		if l, err := n.cluster.Leader(2 * time.Second); err == nil {
			return l, true
		}
	}
	m := n.cluster.Nodes[n.rng.IntN(len(n.cluster.Nodes))]
	l, err := n.cluster.Leader(500 * time.Millisecond)
	return m, err == nil && l == m
}

func (n *nemesis) inject(fault string, m *nodeproc.Member) error {
	n.log("nemesis: %s %s", fault, m.ID)
	switch fault {
	case faultKill:
		m.Kill()
		time.Sleep(n.hold)
		return n.restart(m)
	case faultTerm:
		if err := m.Stop(syscall.SIGTERM, 20*time.Second); err != nil {
			n.log("nemesis: %s after SIGTERM: %v", m.ID, err)
		}
		time.Sleep(n.hold)
		return n.restart(m)
	case faultPartition:
		for _, o := range n.cluster.Nodes {
			if o == m {
				continue
			}
			if err := m.Cut(o.Raft); err != nil {
				return err
			}
			if err := o.Cut(m.Raft); err != nil {
				return err
			}
		}
		time.Sleep(n.hold)
		for _, o := range n.cluster.Nodes {
			if err := o.Heal(); err != nil {
				return err
			}
		}
		n.log("nemesis: healed %s", m.ID)
		return nil
	case faultPause:
		if err := m.Pause(); err != nil {
			return err
		}
		time.Sleep(n.hold)
		if err := m.Resume(); err != nil {
			return err
		}
		n.log("nemesis: resumed %s", m.ID)
		return nil
	}
	return fmt.Errorf("unknown fault %q", fault)
}

func (n *nemesis) restart(m *nodeproc.Member) error {
	if m.Alive() {
		m.Kill()
	}
	n.logs.save(m)
	if err := m.Restart(); err != nil {
		return fmt.Errorf("restart %s: %w", m.ID, err)
	}
	n.log("nemesis: restarted %s", m.ID)
	return nil
}
