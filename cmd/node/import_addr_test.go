package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestImportFromROOKERY_ADDR is issue 29's point 6 as done means it:
// `ROOKERY_ADDR=<a node's HTTP address> rookery import --key k FILE` loads
// that cluster, the RESP address found through the node's HTTP API, and
// never the local default 127.0.0.1:6479; --addr takes the same HTTP
// address, and a dead ROOKERY_ADDR fails naming it rather than falling back.
func TestImportFromROOKERY_ADDR(t *testing.T) {
	p := devNode(t, t.TempDir())
	c := p.client(2)
	file := filepath.Join(t.TempDir(), "keys")
	writeKeys(t, file, 0, 1000, 0, false)

	code, out, errOut := runToolEnv(t, []string{"ROOKERY_ADDR=" + p.HTTP}, "import", "--key", "k", file)
	if code != 0 || !strings.Contains(out, "imported 1000 keys into \"k\"") {
		t.Fatalf("ROOKERY_ADDR=%s import: exit %d\n%s%s", p.HTTP, code, out, errOut)
	}
	mustExist(t, c, "BF", "k", 0, 1000)

	code, out, errOut = runToolEnv(t, nil, "import", "--addr", p.HTTP, "--key", "k2", "--kind", "cf", file)
	if code != 0 || !strings.Contains(out, "imported 1000 keys into \"k2\"") {
		t.Fatalf("import --addr %s: exit %d\n%s%s", p.HTTP, code, out, errOut)
	}
	mustExist(t, c, "CF", "k2", 0, 1000)

	dead := deadAddr(t)
	code, _, errOut = runToolEnv(t, []string{"ROOKERY_ADDR=" + dead}, "import", "--key", "k3", file)
	if code != 1 || !strings.Contains(errOut, "cannot reach the cluster at "+dead) || strings.Contains(errOut, "6479") {
		t.Errorf("ROOKERY_ADDR=%s (nothing there): exit %d\n%s", dead, code, errOut)
	}
}

// TestImportAddressKinds: a RESP address given to --addr (the issue's
// `protocol error: unknown reply type 'H'`, the other way round) and an HTTP
// address given to --resp each fail at once with a message that names the
// flag to use; --resp with a RESP address loads the filter.
func TestImportAddressKinds(t *testing.T) {
	p := devNode(t, t.TempDir())
	file := filepath.Join(t.TempDir(), "keys")
	writeKeys(t, file, 0, 10, 0, false)

	code, _, errOut := runToolEnv(t, nil, "import", "--addr", p.RESP, "--key", "k", file)
	if code != 1 || !strings.Contains(errOut, "this port speaks RESP (a node's --resp-addr), not HTTP") ||
		!strings.Contains(errOut, "--http-addr") || !strings.Contains(errOut, "--resp") {
		t.Errorf("--addr with a RESP address: exit %d\n%s", code, errOut)
	}
	code, _, errOut = runToolEnv(t, nil, "import", "--resp", p.HTTP, "--key", "k", file)
	if code != 1 || !strings.Contains(errOut, "--resp "+p.HTTP+": this port speaks HTTP (a node's --http-addr), not RESP") ||
		!strings.Contains(errOut, "--addr") || strings.Contains(errOut, "unknown reply type") {
		t.Errorf("--resp with an HTTP address: exit %d\n%s", code, errOut)
	}
	code, out, errOut := runToolEnv(t, nil, "import", "--resp", p.RESP, "--key", "k", file)
	if code != 0 || !strings.Contains(out, "imported 10 keys") {
		t.Errorf("--resp %s: exit %d\n%s%s", p.RESP, code, out, errOut)
	}
	// The other tools say the same of a RESP port.
	code, _, errOut = runToolEnv(t, nil, "members", "--addr", p.RESP)
	if code != 1 || !strings.Contains(errOut, "this port speaks RESP") || strings.Contains(errOut, "malformed HTTP") {
		t.Errorf("members --addr with a RESP address: exit %d\n%s", code, errOut)
	}
}

// TestImportCtrlCInAPipeline is issue 29's "a killed importer prints no
// resume line": Ctrl-C in `cat FILE | rookery import ... -` signals the
// whole pipeline, so standard input may end before the importer sees the
// signal. It still says it was interrupted (exit 130), gives the line
// reached and the command to resume with, and that command, fed the same
// input, loads the rest: every line once.
func TestImportCtrlCInAPipeline(t *testing.T) {
	p := devNode(t, t.TempDir())
	c := p.client(2)
	const keys = 2000000
	file := filepath.Join(t.TempDir(), "keys.txt")
	writeKeys(t, file, 0, keys, 0, false)
	if err := c.Do(bg(), "CBF.RESERVE", "piped", "0.0001", keys, "COUNTERBITS", "8").Err(); err != nil {
		t.Fatal(err)
	}
	// A shell with job control puts the pipeline in a process group of its
	// own, as an interactive shell does; Ctrl-C is SIGINT to that group.
	script := `set -m
cat "$1" | "$2" import --addr "$3" --key piped --kind cbf --progress log --log-every 50ms - >"$4.out" 2>"$4.err" &
until grep -q '^import: [1-9]' "$4.err"; do sleep 0.05; done
kill -INT -- -$!
wait $! || echo "exit $?" >>"$4.out"
`
	logs := filepath.Join(t.TempDir(), "import")
	if out, err := exec.Command("bash", "-c", script, "bash", file, bin(t), p.HTTP, logs).CombinedOutput(); err != nil {
		t.Fatalf("the pipeline: %v\n%s", err, out)
	}
	stdout, _ := os.ReadFile(logs + ".out")
	stderr, _ := os.ReadFile(logs + ".err")
	m := regexp.MustCompile(`every line up to line (\d+) is in the filter, nothing after it was sent; ` +
		`to resume, run the same command with --skip (\d+):\n  (.*)\n`).FindSubmatch(stderr)
	if !strings.Contains(string(stdout), "exit 130") || m == nil || string(m[1]) != string(m[2]) {
		t.Fatalf("Ctrl-C in a pipeline: no resume line, or not exit 130\n%s%s", stdout, stderr)
	}
	skip, _ := strconv.Atoi(string(m[1]))
	if skip == 0 || skip >= keys {
		t.Fatalf("interrupted at line %d of %d: not part way\n%s", skip, keys, stderr)
	}
	if n := infoInt64(t, c, "CBF", "piped", "Number of items inserted"); n != int64(skip) {
		t.Errorf("after Ctrl-C at line %d: %d items", skip, n)
	}
	resume := string(m[3])
	if want := "--key piped --kind cbf --progress log --log-every 50ms - --skip " + string(m[1]); !strings.HasSuffix(resume, want) {
		t.Errorf("the command to resume: %q, want it to end in %q", resume, want)
	}
	cmd := exec.Command("bash", "-c", resume)
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdin = f
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("resumed with %q: %v\n%s", resume, err, out)
	}
	if n := infoInt64(t, c, "CBF", "piped", "Number of items inserted"); n != keys {
		t.Errorf("resumed: %d items for %d keys", n, keys)
	}
	for _, i := range []int{0, skip - 1, skip, keys - 1} {
		if n, err := c.Do(bg(), "CBF.COUNT", "piped", importKey(i)).Int64(); err != nil || n != 1 {
			t.Errorf("CBF.COUNT %s = %d, %v", importKey(i), n, err)
		}
	}
}
