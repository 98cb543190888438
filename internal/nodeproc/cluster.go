package nodeproc

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Member is one node of a Cluster.
type Member struct {
	*Proc
	ID, Dir string
}

// Cluster is a set of rookery processes that found each other by gossip.
type Cluster struct {
	bin   string
	dir   string
	extra []string
	Sec   Security
	Nodes []*Member
}

// StartCluster starts n nodes with their data under dir, all with extra flags,
// that bootstrap together, and waits until every one is ready.
func StartCluster(bin, dir string, n int, extra ...string) (*Cluster, error) {
	return StartSecureCluster(bin, dir, n, Security{}, extra...)
}

// StartSecureCluster is StartCluster with every node secured as sec says; its
// CertDir must hold a certificate for each node id, n1 to nN (MakeCerts).
func StartSecureCluster(bin, dir string, n int, sec Security, extra ...string) (*Cluster, error) {
	return StartSecureClusterEach(bin, dir, n, sec, func(int) []string { return extra })
}

// StartSecureClusterEach is StartSecureCluster with the extra flags of the
// i-th node (from 0) given by extra(i); nodes added later get extra(0).
func StartSecureClusterEach(bin, dir string, n int, sec Security, extra func(i int) []string) (*Cluster, error) {
	c := &Cluster{bin: bin, dir: dir, extra: extra(0), Sec: sec}
	var seed []string
	for i := 0; i < n; i++ {
		m, err := c.startWith(fmt.Sprintf("n%d", i+1), n, seed, extra(i))
		if err != nil {
			c.Close()
			return nil, err
		}
		if seed == nil {
			seed = []string{m.Gossip}
		}
	}
	for _, m := range c.Nodes {
		if err := m.WaitReady(30 * time.Second); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) start(id string, expect int, join []string) (*Member, error) {
	return c.startWith(id, expect, join, c.extra)
}

func (c *Cluster) startWith(id string, expect int, join []string, extra []string) (*Member, error) {
	dir := filepath.Join(c.dir, id)
	var p *Proc
	for attempt := 0; ; attempt++ {
		args, err := NodeArgs(id, dir, expect, join)
		if err != nil {
			return nil, err
		}
		args = append(args, c.Sec.Flags(id)...)
		p, err = Start(c.bin, nil, append(args, extra...)...)
		if err == nil {
			p.Sec = c.Sec
			break
		}
		// Another process may take a port between NodeArgs choosing it and the
		// node binding it; choose again.
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			return nil, err
		}
	}
	m := &Member{Proc: p, ID: id, Dir: dir}
	c.Nodes = append(c.Nodes, m)
	return m, nil
}

// Add starts one more node, joining through the first node's gossip address.
func (c *Cluster) Add(id string) (*Member, error) {
	return c.start(id, 0, []string{c.Nodes[0].Gossip})
}

// Replace starts a node under id in old's place (old must be stopped and
// removed from the cluster's configuration first), joining through the other
// nodes' gossip addresses, and returns it. Its data goes in a new directory;
// old's is left for the caller.
func (c *Cluster) Replace(old *Member, id string) (*Member, error) {
	i := -1
	var join []string
	for j, m := range c.Nodes {
		if m == old {
			i = j
			continue
		}
		join = append(join, m.Gossip)
	}
	if i < 0 {
		return nil, fmt.Errorf("%s is not a node of this cluster", old.ID)
	}
	m, err := c.start(id, 0, join)
	if err != nil {
		return nil, err
	}
	// start appended it; it takes old's slot.
	c.Nodes = c.Nodes[:len(c.Nodes)-1]
	c.Nodes[i] = m
	return m, nil
}

// Leader waits until a running node says it leads, and returns it.
func (c *Cluster) Leader(within time.Duration) (*Member, error) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, m := range c.Nodes {
			if !m.Alive() {
				continue
			}
			if st, err := m.Status(); err == nil && st.Role == "leader" {
				return m, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, fmt.Errorf("no leader within %v", within)
}

// Followers returns the running nodes other than the leader.
func (c *Cluster) Followers(within time.Duration) ([]*Member, error) {
	l, err := c.Leader(within)
	if err != nil {
		return nil, err
	}
	var out []*Member
	for _, m := range c.Nodes {
		if m != l && m.Alive() {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no running followers")
	}
	return out, nil
}

// RESPAddrs lists the RESP addresses of every node.
func (c *Cluster) RESPAddrs() []string {
	var out []string
	for _, m := range c.Nodes {
		out = append(out, m.RESP)
	}
	return out
}

// Close kills every node.
func (c *Cluster) Close() {
	for _, m := range c.Nodes {
		m.Resume()
		m.Kill()
	}
}
