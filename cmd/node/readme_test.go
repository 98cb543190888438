package main

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README's shell blocks, run as a user pastes them: extracted from
// README.md, run by bash in a copy of the repository (so that ./data, the
// logs and bin/ are the copy's), on the ports they name, which must be free.

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../.."

// readme is README.md's text.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fencedAfter is the body of the first fenced block of kind lang ("sh", or
// "" for a bare fence) that follows the text marker in text.
func fencedAfter(t *testing.T, text, marker, lang string) string {
	t.Helper()
	i := strings.Index(text, marker)
	if i < 0 {
		t.Fatalf("README.md has no %q", marker)
	}
	open := "\n```" + lang + "\n"
	j := strings.Index(text[i:], open)
	if j < 0 {
		t.Fatalf("README.md has no ```%s block after %q", lang, marker)
	}
	body := text[i+j+len(open):]
	k := strings.Index(body, "\n```")
	if k < 0 {
		t.Fatalf("the block after %q is not closed", marker)
	}
	return body[:k+1]
}

// copyRepo copies the repository's working tree, less .git and what the
// README's blocks make (bin, data, secure, logs, .env, certs), to a new
// directory and returns it.
func copyRepo(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	skip := map[string]bool{".git": true, "bin": true, "data": true, "secure": true, "certs": true, ".env": true}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		if rel == "." {
			return nil
		}
		if top := strings.Split(rel, string(filepath.Separator))[0]; skip[top] || strings.HasSuffix(top, ".log") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// readmePorts are the ports the README's three-process blocks listen on.
var readmePorts = []int{6479, 6480, 6481, 6482, 6579, 6580, 6581, 6582, 6679, 6680, 6681, 6682}

// mustHavePortsFree fails the test, saying why, unless every README port is
// free on 127.0.0.1 (TCP, and UDP for gossip): the blocks are run exactly as
// written, so they cannot move to other ports.
func mustHavePortsFree(t *testing.T) {
	t.Helper()
	for _, p := range readmePorts {
		addr := fmt.Sprintf("127.0.0.1:%d", p)
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			ln.Close()
			var pc net.PacketConn
			if pc, err = net.ListenPacket("udp", addr); err == nil {
				pc.Close()
			}
		}
		if err != nil {
			t.Fatalf("port %d is in use (%v): the README's three-process blocks are run as written, on ports %v; "+
				"stop what listens there (a node started by hand, another test) and run this test again", p, err, readmePorts)
		}
	}
}

// mustHaveTools fails the test unless the commands the blocks call are on PATH.
func mustHaveTools(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Fatalf("%s is not installed: the README's blocks call it (redis-cli comes with Debian's redis-tools, which .ci/run installs)", n)
		}
	}
}

// runBash runs script with bash -e in dir, as a user would paste it (but
// stopping at the first command that fails), with no ROOKERY_ variables of
// this process; every process it leaves behind is killed when the test ends.
func runBash(t *testing.T, dir, script string, within time.Duration) (string, error) {
	if testing.Short() {
		t.Skip("-short: this test runs the README's blocks as real processes")
	}
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-s")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(script)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ROOKERY_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Start()
	if err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	err = cmd.Wait()
	return out.String(), err
}

// TestReadmePlainCluster runs "Run a cluster"'s block and its stop block as
// written: the build, three nodes, `rookery wait` for each, a write on one
// node read on another, the tables; then the clean stop and clean-up. The
// nodes' logs are appended to (issue 19, point 10): a log left by an earlier
// run is still there.
func TestReadmePlainCluster(t *testing.T) {
	text := readme(t)
	start := fencedAfter(t, text, "## Run a cluster", "sh")
	stop := fencedAfter(t, text, "and stop it, then forget it:", "sh")
	mustHaveTools(t, "bash", "make", "go", "redis-cli")
	mustHavePortsFree(t)
	dir := copyRepo(t)
	if err := os.WriteFile(filepath.Join(dir, "n1.log"), []byte("a log of an earlier run\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := start + "echo \"n1.log starts: $(head -n 1 n1.log)\"\n" + stop
	out, err := runBash(t, dir, script, 10*time.Minute)
	if err != nil {
		t.Fatalf("the README's cluster blocks failed: %v\n%s", err, out)
	}
	for _, want := range []string{"127.0.0.1:6480 is ready", "127.0.0.1:6580 is ready", "127.0.0.1:6680 is ready",
		"n1.log starts: a log of an earlier run", "Node  Raft Address    Status  Role"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	if lines := countLines1(out); lines < 2 {
		t.Errorf("BF.ADD and BF.EXISTS should each answer 1:\n%s", out)
	}
	if alive := strings.Count(out, "  alive  "); alive != 3 {
		t.Errorf("members should list 3 alive nodes, lists %d:\n%s", alive, out)
	}
	for _, gone := range []string{"data", "n1.log", "n2.log", "n3.log"} {
		if _, err := os.Stat(filepath.Join(dir, gone)); !os.IsNotExist(err) {
			t.Errorf("the clean-up left %s", gone)
		}
	}
}

// TestReadmeSecureCluster runs the Security section's three-process block
// and its stop block as written (issue 19, point 1): certificates, three
// nodes over TLS with a password, `rookery wait`, a write and a read through
// redis-cli, the node list over https, the members table; then the stop and
// the clean-up of its own directory.
func TestReadmeSecureCluster(t *testing.T) {
	text := readme(t)
	sec := text[strings.Index(text, "## Security"):]
	start := fencedAfter(t, sec, "A secure three-process cluster", "sh")
	stop := fencedAfter(t, sec, "and stop it, then forget it", "sh")
	mustHaveTools(t, "bash", "go", "redis-cli", "curl")
	mustHavePortsFree(t)
	dir := copyRepo(t)
	out, err := runBash(t, dir, start+stop, 10*time.Minute)
	if err != nil {
		t.Fatalf("the README's secure cluster blocks failed: %v\n%s", err, out)
	}
	for _, want := range []string{"127.0.0.1:6480 is ready", "127.0.0.1:6580 is ready", "127.0.0.1:6680 is ready",
		`"id": "n1"`, `"id": "n2"`, `"id": "n3"`, "Node  Raft Address    Status  Role"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	if lines := countLines1(out); lines < 2 {
		t.Errorf("BF.ADD and BF.EXISTS should each answer 1:\n%s", out)
	}
	if alive := strings.Count(out, "  alive  "); alive != 3 {
		t.Errorf("members should list 3 alive nodes, lists %d:\n%s", alive, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "secure")); !os.IsNotExist(err) {
		t.Errorf("the clean-up left ./secure")
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Errorf("the secure cluster wrote into ./data, the plain cluster's directory")
	}
}

// countLines1 counts the lines of out that are "1" (redis-cli's answer of
// BF.ADD and BF.EXISTS).
func countLines1(out string) int {
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if l == "1" {
			n++
		}
	}
	return n
}

// TestReadmeHelpExcerpt: the README's excerpt of `rookery -h` is the start of
// what the binary prints, import and all (issue 19, point 10).
func TestReadmeHelpExcerpt(t *testing.T) {
	excerpt := fencedAfter(t, readme(t), "The start of `bin/rookery -h`", "")
	out, err := exec.Command(bin(t), "-h").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), excerpt) {
		t.Errorf("README.md's -h excerpt is not the start of rookery -h:\n%s\nrookery -h:\n%s", excerpt, out)
	}
	if !strings.Contains(excerpt, "\n  import ") {
		t.Errorf("the excerpt lacks import:\n%s", excerpt)
	}
}

// TestReadmeGoClient: the client section leads with what works before the
// module is published, and it works: the replacement and the zero
// pseudo-version, then a program that imports the client builds, with no
// network (issue 19, point 10). Its one placeholder, /path/to/rookery, is
// this checkout; the clone is left out.
func TestReadmeGoClient(t *testing.T) {
	text := readme(t)
	sec := text[strings.Index(text, "## The Go client"):]
	sec = sec[:strings.Index(sec[1:], "\n## ")+1]
	block := fencedAfter(t, sec, "## The Go client", "sh")
	if !strings.Contains(block, "go mod edit -replace") || strings.Contains(block, "go get github.com/rookerydb/rookery/client") {
		t.Errorf("the client section's first block should be the replacement, not `go get .../client`:\n%s", block)
	}
	if !strings.Contains(sec, "Once the module is published, `go get github.com/rookerydb/rookery/client`") {
		t.Errorf("the client section does not say when `go get .../client` works:\n%s", sec)
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	var script []string
	for _, l := range strings.Split(block, "\n") {
		if !strings.HasPrefix(l, "git clone ") {
			script = append(script, strings.ReplaceAll(l, "/path/to/rookery", root))
		}
	}
	dir := t.TempDir()
	main := "package main\n\nimport (\n\t\"fmt\"\n\n\t\"github.com/rookerydb/rookery/client\"\n)\n\nfunc main() { fmt.Println(client.ReadStale) }\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	all := "export GOPROXY=off GOFLAGS=-mod=mod\ngo mod init example.com/app\n" + strings.Join(script, "\n") + "\ngo build -o app .\n"
	if out, err := runBash(t, dir, all, 5*time.Minute); err != nil {
		t.Fatalf("the client section's commands: %v\n%s", err, out)
	}
}

// TestComposeRestartsAndToolsEnv is issue 19's point 8 and the compose half
// of point 3: every node of docker-compose.yml restarts always, the README
// says what a `docker kill` leaves and how to bring the node back, and the
// .env that scripts/compose-env.sh writes hands the tools their settings
// (the password, the CA, the addresses) once sourced with set -a.
func TestComposeRestartsAndToolsEnv(t *testing.T) {
	y, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	compose := string(y)
	node := compose[strings.Index(compose, "x-node: &node"):]
	node = node[:strings.Index(node, "\n\n")]
	if !strings.Contains(node, "\n  restart: always\n") {
		t.Errorf("x-node does not restart always:\n%s", node)
	}
	for _, svc := range []string{"rookery1", "rookery2", "rookery3"} {
		i := strings.Index(compose, "\n  "+svc+":\n")
		if i < 0 || !strings.HasPrefix(compose[i+len("\n  "+svc+":\n"):], "    <<: *node\n") {
			t.Errorf("service %s does not take x-node's settings", svc)
		}
	}
	if text := readme(t); !strings.Contains(text, "`restart: always`") || !strings.Contains(text, "`docker kill`") ||
		!strings.Contains(text, "`docker compose start\nrookery2`") {
		t.Errorf("README.md does not say what docker kill leaves and how to bring the node back")
	}

	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	sh, err := os.ReadFile(filepath.Join(repoRoot, "scripts", "compose-env.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "scripts", "compose-env.sh"), sh, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "scripts/compose-env.sh >/dev/null\nset -a; . ./.env; set +a\n" +
		"test \"$ROOKERY_PASSWORD\" = \"$ROOKERY_REQUIREPASS\" && test -n \"$ROOKERY_PASSWORD\"\n" +
		"echo \"cacert=$ROOKERY_CACERT addr=$ROOKERY_ADDR\"\n" +
		bin(t) + " status 2>&1 || true\n"
	out, err := runBash(t, dir, script, time.Minute)
	if err != nil {
		t.Fatalf("compose-env.sh and .env: %v\n%s", err, out)
	}
	if !strings.Contains(out, "cacert=certs/ca.pem addr=127.0.0.1:6480,127.0.0.1:6580,127.0.0.1:6680") {
		t.Errorf(".env lacks the tools' settings:\n%s", out)
	}
	// The tool took the CA from ROOKERY_CACERT (there is no certs/ here).
	if !strings.Contains(out, "ROOKERY_CACERT certs/ca.pem") {
		t.Errorf("rookery status did not read ROOKERY_CACERT from .env:\n%s", out)
	}
}

// shardPorts are the ports of the README's six-process sharded block.
var shardPorts = func() (ps []int) {
	for i := 1; i <= 6; i++ {
		for _, p := range []int{79, 80, 81, 82} {
			ps = append(ps, 7000+100*i+p)
		}
	}
	return ps
}()

// TestReadmeShardedCluster runs "Grow by adding machines"'s block and its
// stop block as written: six nodes, six shards of three replicas, a write
// through redis-cli -c on one node read through another, the key's slot, and
// the shards table; then the stop and the clean-up.
func TestReadmeShardedCluster(t *testing.T) {
	text := readme(t)
	sec := text[strings.Index(text, "## Grow by adding machines"):]
	start := fencedAfter(t, sec, "Six processes, six shards", "sh")
	stop := fencedAfter(t, sec, "and stop it, then forget it:", "sh")
	mustHaveTools(t, "bash", "make", "go", "redis-cli")
	for _, p := range shardPorts {
		if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err != nil {
			t.Fatalf("port %d is in use (%v): the README's sharded block is run as written, on ports %v", p, err, shardPorts)
		} else {
			ln.Close()
		}
	}
	dir := copyRepo(t)
	out, err := runBash(t, dir, start+stop, 10*time.Minute)
	if err != nil {
		t.Fatalf("the README's sharded blocks failed: %v\n%s", err, out)
	}
	for _, want := range []string{"127.0.0.1:7180 is ready", "127.0.0.1:7680 is ready", "\n1\n1\n", "Shard  Slots"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "(leader)"); n != 6 {
		t.Errorf("the shards table shows %d leaders, want 6:\n%s", n, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "shards")); !os.IsNotExist(err) {
		t.Error("the clean-up left ./shards")
	}
}
