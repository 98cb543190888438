package recovercmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecoveryPeersFlags: --peers and --peers-file (Consul's peers.json
// format) give the same configuration; mistakes are refused before anything
// is touched.
func TestRecoveryPeersFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "peers.json")
	os.WriteFile(file, []byte(`[{"id": "n1", "address": "10.0.0.1:6481"}, {"id": "n2", "address": "10.0.0.2:6481", "non_voter": true}]`), 0o600)
	ps, err := recoveryPeers("", file)
	if err != nil || len(ps) != 2 || ps[0].Raft != "10.0.0.1:6481" || !ps[1].NonVoter || ps[0].NonVoter {
		t.Errorf("peers file: %+v %v", ps, err)
	}
	ps, err = recoveryPeers("n1, n2=10.0.0.2:6481", "")
	if err != nil || len(ps) != 2 || ps[0].ID != "n1" || ps[0].Raft != "" || ps[1].Raft != "10.0.0.2:6481" {
		t.Errorf("--peers: %+v %v", ps, err)
	}
	for _, bad := range [][2]string{{"n1", file}, {"n1=nowhere", ""}, {",", ""}, {"=10.0.0.1:1", ""}} {
		if ps, err := recoveryPeers(bad[0], bad[1]); err == nil {
			t.Errorf("--peers %q --peers-file %q taken: %+v", bad[0], bad[1], ps)
		}
	}
	var out, errb strings.Builder
	if code := recoverCommand([]string{"--data-dir", t.TempDir(), "--peers", "n1", "--check"}, &out, &errb); code != 2 {
		t.Errorf("--peers with --check: exit %d %s", code, errb.String())
	}
}
