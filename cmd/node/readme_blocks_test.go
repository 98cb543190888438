package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// consoleCommands are the commands of a ```console block: its lines that
// start with "$ ", without the prompt.
func consoleCommands(block string) []string {
	var out []string
	for _, l := range strings.Split(block, "\n") {
		if c, ok := strings.CutPrefix(l, "$ "); ok {
			out = append(out, c)
		}
	}
	return out
}

// freePorts are n TCP ports of 127.0.0.1 free (UDP too) when asked.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ps []int
	var lns []net.Listener
	for len(ps) < n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		p := ln.Addr().(*net.TCPAddr).Port
		if pc, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			pc.Close()
			ps = append(ps, p)
		}
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ps
}

// runBashLeaving is runBash for a script that leaves processes running in
// the background, as the README's coupons block does: once bash has exited,
// its output is taken as it stands after a grace period, and the processes
// are killed when the test ends.
func runBashLeaving(t *testing.T, dir, script string, within time.Duration) (string, error) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test runs the README's blocks as real processes")
	}
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
	cmd.WaitDelay = 10 * time.Second // the background processes hold the output open
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	err := cmd.Wait()
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // bash exited 0; what it left running is killed at cleanup
	}
	return out.String(), err
}

// TestReadmeCouponsWindowedShards is issue 29's last "done means": the
// README's coupons block (a --dev node and the coupons service, then the
// first commands of its console block), the windowed-filter section's three
// console blocks against the same node, and the sharded cluster's start and
// stop blocks, pasted in that order into one shell, run without an error:
// the service is up when it is asked, the windowed `CF.RESERVE` meets no
// `coupons` of the first section, and the shards' stop block stops its own
// nodes with other jobs in the shell. The blocks run as written but on
// other ports (the --dev node's, the service's and the sharded cluster's),
// so that this test shares no port with the other README tests.
func TestReadmeCouponsWindowedShards(t *testing.T) {
	text := readme(t)
	coupons := text[strings.Index(text, "## Coupon redemption"):]
	start := fencedAfter(t, coupons, "## Coupon redemption", "sh")
	var calls []string
	for _, c := range consoleCommands(fencedAfter(t, coupons, "Against a cluster:", "console")) {
		if strings.HasPrefix(c, "C=") {
			break // the race needs jq, and its `wait` waits for the node too
		}
		calls = append(calls, c)
	}
	windowed := text[strings.Index(text, "## Windowed filters"):]
	for _, marker := range []string{"A crawler that remembers", "to watch an item go", "Coupons valid for 30 days"} {
		calls = append(calls, consoleCommands(fencedAfter(t, windowed, marker, "console"))...)
	}
	shards := text[strings.Index(text, "## Grow by adding machines"):]
	shardsStart := fencedAfter(t, shards, "Six processes, six shards", "sh")
	shardsStop := fencedAfter(t, shards, "and stop it, then forget it:", "sh")
	mustHaveTools(t, "bash", "make", "go", "redis-cli", "curl")
	if len(calls) < 20 || !strings.Contains(start, "go run ./cmd/node --dev &") {
		t.Fatalf("the blocks are not as this test knows them:\n%s\n%s", start, strings.Join(calls, "\n"))
	}

	// Other ports: the --dev node's four, the service's; the shards' 7NXX
	// become 3NXX.
	ps := freePorts(t, 5)
	devPorts := strings.NewReplacer("6479", strconv.Itoa(ps[0]), "6480", strconv.Itoa(ps[1]), "8080", strconv.Itoa(ps[2]),
		"--dev", fmt.Sprintf("--dev --resp-addr 127.0.0.1:%d --http-addr 127.0.0.1:%d --raft-addr 127.0.0.1:%d --gossip-addr 127.0.0.1:%d",
			ps[0], ps[1], ps[3], ps[4]))
	shardPorts := strings.NewReplacer("127.0.0.1:7", "127.0.0.1:3", "-p 7", "-p 3")
	for i := 1; i <= 6; i++ {
		for _, p := range []int{79, 80, 81, 82} {
			port := 3000 + 100*i + p
			if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
				t.Fatalf("port %d is in use (%v): this test runs the README's sharded block on 3179-3682", port, err)
			} else {
				ln.Close()
			}
		}
	}
	script := devPorts.Replace(start) + devPorts.Replace(strings.Join(calls, "\n")) + "\n" +
		shardPorts.Replace(shardsStart) + shardPorts.Replace(shardsStop) + "echo the blocks ran\n"
	dir := copyRepo(t)
	out, err := runBashLeaving(t, dir, script, 12*time.Minute)
	if !strings.Contains(out, fmt.Sprintf("msg=listening id=dev resp=127.0.0.1:%d http=127.0.0.1:%d", ps[0], ps[1])) {
		t.Errorf("the --dev node did not move to the test's ports:\n%s", out)
	}
	if err != nil || !strings.Contains(out, "the blocks ran") {
		t.Fatalf("the README's coupons, windowed and shards blocks failed: %v\n%s", err, out)
	}
	for _, bad := range []*regexp.Regexp{regexp.MustCompile(`(?m)^(\(error\) )?ERR `), regexp.MustCompile(`(?m)^WRONGTYPE`),
		regexp.MustCompile(`cluster unavailable`), regexp.MustCompile(`msg=coupons err=`), regexp.MustCompile(`(?m)^curl: `)} {
		if m := bad.FindString(out); m != "" {
			t.Errorf("the output has %q:\n%s", m, out)
		}
	}
	for _, want := range []string{fmt.Sprintf("127.0.0.1:%d is ready", ps[1]), `"campaign":"spring","codes":[`,
		`"redeem_requests":3`, "127.0.0.1:3180 is ready", "Shard  Slots"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	// BF.RESERVE crawler:seen, BF.RESERVE demo and CF.RESERVE coupons:30d.
	if n := len(regexp.MustCompile(`(?m)^OK$`).FindAllString(out, -1)); n != 3 {
		t.Errorf("%d OKs, want one for each windowed RESERVE:\n%s", n, out)
	}
	if n := strings.Count(out, "(leader)"); n != 6 {
		t.Errorf("the shards table shows %d leaders, want 6:\n%s", n, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "shards")); !os.IsNotExist(err) {
		t.Error("the clean-up left ./shards")
	}
}

// TestIgnoreFilesCoverTheREADMEsData is issue 29's point 6: every directory
// and file the README's blocks create in the checkout (data directories,
// logs, certificates, the coupons store) is in .gitignore and kept out of
// the docker build context (.dockerignore): a sharded cluster's ./shards
// made a 1.08 GB context.
func TestIgnoreFilesCoverTheREADMEsData(t *testing.T) {
	text := readme(t)
	made := map[string]bool{}
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`--data-dir \.?/?([a-z]+)/`), regexp.MustCompile(`mkdir -p ([a-z]+)`),
		regexp.MustCompile(`--out ([a-z]+)/?`), regexp.MustCompile(` -db ([a-z.]+)`),
		regexp.MustCompile(`2>>\.?/?([a-z0-9]+)[/.]`),
	} {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			made[m[1]] = true
		}
	}
	for _, want := range []string{"data", "shards", "secure", "coupons.db", "n1"} {
		if !made[want] {
			t.Fatalf("the README's blocks no longer make %s as this test reads them: %v", want, made)
		}
	}
	read := func(name string) []string {
		b, err := os.ReadFile(filepath.Join(repoRoot, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(string(b), "\n")
	}
	covers := func(patterns []string, name string) bool {
		for _, p := range patterns {
			p = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(p), "/"), "/")
			if p == "" || strings.HasPrefix(p, "#") {
				continue
			}
			if ok, _ := filepath.Match(p, name); ok {
				return true
			}
		}
		return false
	}
	for name := range made {
		if name == "n1" || name == "n2" || name == "n3" {
			name += ".log" // 2>>n1.log
		}
		if !covers(read(".gitignore"), name) {
			t.Errorf(".gitignore misses %s, which the README's blocks create", name)
		}
		if !covers(read(".dockerignore"), name) {
			t.Errorf(".dockerignore misses %s, which the README's blocks create (the docker build context)", name)
		}
	}
}
