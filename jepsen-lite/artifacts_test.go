package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

type testLog struct{ t *testing.T }

func (w testLog) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// runCommand runs jepsen-lite as a user would, with its temporary directories
// in a fresh TMPDIR that must hold nothing afterwards but the directory of a
// failed run's artifacts; it returns the summary it wrote and its exit code.
func runCommand(t *testing.T, args ...string) (summary, int) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var stdout strings.Builder
	code := run(args, &stdout, testLog{t})
	t.Log("\n" + stdout.String())
	m := regexp.MustCompile(`(?m)^artifacts: (.*)$`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("exit code %d and no artifacts directory printed", code)
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		if p := filepath.Join(tmp, e.Name()); p != m[1] {
			t.Errorf("%s left behind", p)
		}
	}
	b, err := os.ReadFile(filepath.Join(m[1], "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("summary.json: %v", err)
	}
	if s.ExitCode != code {
		t.Errorf("summary says exit code %d, the command returned %d", s.ExitCode, code)
	}
	return s, code
}

// checkArtifacts reads the history back and checks that the summary agrees
// with it, and that each filter's history was drawn.
func checkArtifacts(t *testing.T, dir string, s summary) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	counted := map[kind]map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l histLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("history line %q: %v", sc.Text(), err)
		}
		answered := l.Result != nil || l.Count != nil
		if l.Key == "" || (l.Item == "") != l.Kind.perKey() || l.Return < l.Call || (l.Outcome == "ok") != answered {
			t.Fatalf("history line %q is inconsistent", sc.Text())
		}
		if counted[l.Kind] == nil {
			counted[l.Kind] = map[string]int{}
		}
		counted[l.Kind][l.Outcome]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []kind{bfAdd, bfMAdd, bfExists, cfAdd, cfInsert, cfDel, cfExists, cfCount, cbfAdd, cbfDel,
		cbfExists, cbfCount, keyReserve, keyDel, keyExists, keyLoad, roExists} {
		if counted[k]["ok"] == 0 {
			t.Errorf("history holds no %s that succeeded: %v", k, counted)
		}
	}
	for k, by := range counted {
		for o, n := range by {
			if s.Ops[k][o] != n {
				t.Errorf("%s %s: the history holds %d, the summary says %d", k, o, n, s.Ops[k][o])
			}
		}
		if by["ok"] > 0 && s.Latency[k].Max <= 0 {
			t.Errorf("%s: no latency in the summary", k)
		}
	}
	if len(s.Ops) != len(counted) {
		t.Errorf("summary counts kinds %v, the history %v", s.Ops, counted)
	}
	for _, g := range groups {
		key := g.name
		if s.Linearizable[key] == "" {
			t.Errorf("%s: no linearizability result", key)
		}
		b, err := os.ReadFile(filepath.Join(dir, key+".html"))
		if err != nil || s.Visualized[key] != key+".html" || !strings.Contains(string(b), "<html") {
			t.Errorf("%s: no visualization (%v)", key, err)
		}
	}
	if (s.Verdict == "OK") != (len(s.FailedChecks) == 0) {
		t.Errorf("verdict %s with failed checks %v", s.Verdict, s.FailedChecks)
	}
	var faults int
	for _, n := range s.FaultsByKind {
		faults += n
	}
	if faults != len(s.Faults) {
		t.Errorf("faults by kind %v, %d faults listed", s.FaultsByKind, len(s.Faults))
	}
	for _, f := range s.Faults {
		if f.End < f.Start || f.Node == "" {
			t.Errorf("fault %+v", f)
		}
	}
}

// TestFailedRunKeepsNodes: a cluster whose followers answer reads from their
// own state fails the linearizability check; without -out the run keeps its
// artifacts, the nodes' data and logs with them, in a temporary directory and
// exits with the code of that check.
func TestFailedRunKeepsNodes(t *testing.T) {
	skipShort(t)
	bin, err := nodeproc.Build(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	s, code := runCommand(t, "-bin", bin, "-duration", "4s", "-faults", "none",
		"-node-flags", "--read-consistency stale")
	if code != exitNotLinear || s.Verdict != "FAILED" || s.FailedChecks[0] != checkLinearizable {
		t.Fatalf("exit code %d, verdict %s, failed checks %v: want %d for %s", code, s.Verdict, s.FailedChecks,
			exitNotLinear, checkLinearizable)
	}
	dir := os.Getenv("TMPDIR") // runCommand's, which holds nothing else
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("%s holds %d entries, want the artifacts directory only", dir, len(entries))
	}
	out := filepath.Join(dir, entries[0].Name())
	checkArtifacts(t, out, s)
	for _, id := range []string{"n1", "n2", "n3"} {
		b, err := os.ReadFile(filepath.Join(out, "nodes", id, "node.log"))
		if err != nil || !strings.Contains(string(b), "listening") {
			t.Errorf("%s: no log kept (%v)", id, err)
		}
		if m, _ := filepath.Glob(filepath.Join(out, "nodes", id, "data", "raftlog", "MANIFEST-*")); len(m) == 0 {
			t.Errorf("%s: no data kept: no log engine in %s", id, filepath.Join(out, "nodes", id, "data"))
		}
	}
}
