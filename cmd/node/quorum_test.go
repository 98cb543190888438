package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// TestLostQuorumRecovery: two of three voters are lost for good (kill -9,
// data directories deleted); the third, stopped, is recovered with `rookery
// recover --peers`, leads alone with every write acknowledged before the
// loss, and a fresh node then joins it and becomes a voter.
func TestLostQuorumRecovery(t *testing.T) {
	c := startOpsCluster(t)
	surv, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Every write the leader acknowledges is in its log: it is the survivor.
	rc := client(t, surv.RESP, 2)
	var acked []string
	for i := 0; i < 60; i++ {
		key, item := fmt.Sprintf("k%d", i%6), fmt.Sprintf("item-%d", i)
		if err := rc.Do(bg(), "BF.ADD", key, item).Err(); err != nil {
			t.Fatalf("BF.ADD %s %s: %v", key, item, err)
		}
		acked = append(acked, key+"/"+item)
	}

	for _, m := range c.Nodes {
		if m != surv {
			m.Kill()
			if err := os.RemoveAll(m.Dir); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := surv.Stop(syscall.SIGTERM, 30*time.Second); surv.Alive() {
		t.Fatalf("the survivor did not stop: %v\n%s", err, surv.Logs())
	}

	out, err := exec.Command(bin(t), "recover", "--data-dir", surv.Dir, "--peers", surv.ID).CombinedOutput()
	t.Logf("rookery recover --data-dir %s --peers %s\n%s", surv.Dir, surv.ID, out)
	if err != nil {
		t.Fatalf("recover: %v", err)
	}
	if !strings.Contains(string(out), fmt.Sprintf("now: %s (%s, voter)", surv.ID, surv.Raft)) {
		t.Errorf("recover does not say the configuration is now %s alone", surv.ID)
	}

	if err := surv.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := surv.WaitReady(30 * time.Second); err != nil {
		t.Fatalf("%v\n%s", err, surv.Logs())
	}
	if st, err := surv.Status(); err != nil || st.Role != "leader" {
		t.Fatalf("recovered survivor: %+v %v", st, err)
	}
	rc = client(t, surv.RESP, 2)
	for _, a := range acked {
		key, item, _ := strings.Cut(a, "/")
		if ok, err := rc.Do(bg(), "BF.EXISTS", key, item).Bool(); err != nil || !ok {
			t.Errorf("acknowledged write %s lost in recovery: %v %v", a, ok, err)
		}
	}
	if err := rc.Do(bg(), "BF.ADD", "after", "x").Err(); err != nil {
		t.Fatalf("write after recovery: %v", err)
	}

	// A fresh node joins the survivor and is promoted once caught up.
	args, err := nodeproc.NodeArgs("n4", filepath.Join(t.TempDir(), "n4"), 0, []string{surv.Gossip})
	if err != nil {
		t.Fatal(err)
	}
	n4 := startProc(t, nil, args...)
	deadline := time.Now().Add(30 * time.Second)
	for {
		voters, err := surv.Voters()
		if err == nil && slices.Equal(voters, []string{surv.ID, "n4"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("n4 not a voter within 30 s: %v %v\n%s", voters, err, n4.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	n4.waitReady(30 * time.Second)
	if ok, err := n4.client(2).Do(bg(), "BF.EXISTS", "k0", "item-0").Bool(); err != nil || !ok {
		t.Errorf("n4 does not see the recovered state: %v %v", ok, err)
	}
	code, lp, _ := runOps(t, "raft", "list-peers", "--addr", n4.HTTP)
	if code != 0 || len(tableRows(lp)) != 2 {
		t.Errorf("list-peers after recovery: exit %d\n%s", code, lp)
	}
}
