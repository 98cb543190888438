package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rookerydb/rookery/cmd/node/internal/datadir"
	"github.com/rookerydb/rookery/internal/nodeproc"
)

// runQuick runs the binary to its end and returns its exit code, its stderr
// and how long it ran; it fails the test if the binary runs past 30 s.
func runQuick(t *testing.T, env []string, args ...string) (int, string, time.Duration) {
	t.Helper()
	cmd := exec.Command(bin(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	took := time.Since(start)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String(), took
}

// TestDataDirOwnedAndLocked: a second process on a data directory in use, and
// a node started with another id on a directory, exit at once with an error
// that says what to do, before binding a port.
func TestDataDirOwnedAndLocked(t *testing.T) {
	dir := t.TempDir()
	p := devNode(t, dir)

	// The second process asks for the same ports: had it bound them first it
	// would fail on them, not on the lock.
	again := []string{"--id", "n1", "--data-dir", dir, "--resp-addr", p.RESP, "--http-addr", p.HTTP}
	code, out, took := runQuick(t, nil, again...)
	want := fmt.Sprintf("data dir in use by pid %d", p.Pid())
	if code == 0 || !strings.Contains(out, want) || took > time.Second {
		t.Fatalf("second process on %s: exit %d after %v, want non-zero within 1s with %q:\n%s", dir, code, took, want, out)
	}
	// Nor may an offline tool work under a running node.
	if code, out, _ := runQuick(t, nil, "recover", "--data-dir", dir, "--check"); code == 0 || !strings.Contains(out, want) {
		t.Fatalf("rookery recover on a running node's data dir: exit %d, want non-zero with %q:\n%s", code, want, out)
	}

	// The node records its id; the build it runs is a metric.
	resp, err := http.Get("http://" + p.HTTP + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metric := fmt.Sprintf(`rookery_build_info{commit="%s",go_version="%s",version="%s"} 1`, buildCommit(t), runtime.Version(), version)
	if !strings.Contains(string(body), metric) {
		t.Errorf("/metrics lacks %s", metric)
	}
	if err := p.stop(syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatalf("stop: %v\n%s", err, p.Logs())
	}

	wrongID := append([]string{"--id", "n2", "--data-dir", dir, "--bootstrap-expect", "1"}, nodeproc.EphemeralAddrs()...)
	check := func(when string) {
		t.Helper()
		code, out, took := runQuick(t, nil, wrongID...)
		if code == 0 || !strings.Contains(out, "data dir belongs to node n1") || !strings.Contains(out, "--id n1") || took > time.Second {
			t.Fatalf("%s: --id n2 on n1's data dir: exit %d after %v:\n%s", when, code, took, out)
		}
	}
	check("after a first start")

	// A data directory from before the id was recorded takes the id it is
	// started with, then keeps it.
	if err := os.Remove(filepath.Join(dir, datadir.IdentityFile)); err != nil {
		t.Fatal(err)
	}
	p.restart()
	p.waitReady(15 * time.Second)
	if err := p.stop(syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatalf("stop: %v\n%s", err, p.Logs())
	}
	check("after adopting an old data dir")
}

// buildCommit is the commit the binary reports: what `rookery version` says.
func buildCommit(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(bin(t), "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if c, ok := strings.CutPrefix(line, "commit"); ok {
			return strings.TrimSpace(c)
		}
	}
	t.Fatalf("no commit in %q", out)
	return ""
}

// lockedBuffer is a bytes.Buffer a process writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSignalWhileStarting: SIGTERM ends a node that has not finished
// starting, both while it waits for the members it expects and while it is
// still inside its start (here: asking peers that never answer to let it
// rejoin after a recovery).
func TestSignalWhileStarting(t *testing.T) {
	alone := append([]string{"--id", "n1", "--data-dir", t.TempDir(), "--bootstrap-expect", "3"}, nodeproc.EphemeralAddrs()...)
	p := startProc(t, nil, alone...)
	start := time.Now()
	_ = p.stop(syscall.SIGTERM, 5*time.Second)
	t.Logf("waiting for members: exited %v after SIGTERM", time.Since(start))

	dir := t.TempDir()
	port, err := nodeproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	rj, _ := json.Marshal(map[string]any{"reason": "test", "peers": []map[string]string{{"id": "n2", "raft": fmt.Sprintf("127.0.0.1:%d", port)}}})
	if err := os.WriteFile(filepath.Join(dir, "rejoin.json"), rj, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin(t), append([]string{"--id", "n1", "--data-dir", dir}, nodeproc.EphemeralAddrs()...)...)
	var logs lockedBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(logs.String(), "rejoining after recovery"); {
		if time.Now().After(deadline) {
			t.Fatalf("no rejoin attempt:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err == nil || !strings.Contains(logs.String(), "stopped while starting") {
			t.Fatalf("exit %v, want non-zero and the reason logged:\n%s", err, logs.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("still running 5s after SIGTERM while starting:\n%s", logs.String())
	}
}

// TestFlagMistakesFailFast: sizes out of bounds, meaningless zeros, unknown
// flags and misspelt environment variables stop the binary with one clear
// error each.
func TestFlagMistakesFailFast(t *testing.T) {
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--max-memory", "10"}, "--max-memory 10: want a size from 1mb to 64tb, 0 (no cap) or auto"},
		{nil, []string{"--max-memory", "999tb"}, "--max-memory 999tb: want a size from 1mb to 64tb"},
		{nil, []string{"--max-item-size", "0"}, "--max-item-size 0: want a size from 1kb to 1gb"},
		{nil, []string{"--max-request-size", "3gb"}, "--max-request-size 3gb: want a size from 1kb to 2gb"},
		{nil, []string{"--max-request-buffer", "2mb"}, "--max-request-buffer 2mb: must be at least --max-request-size"},
		{nil, []string{"--max-clients", "-1"}, "--max-clients -1: must be at least 1"},
		{nil, []string{"--heartbeat-timeout", "0s"}, "--heartbeat-timeout 0s: must be at least 5ms"},
		{[]string{"ROOKERY_MAX_MEMORY=10"}, nil, "--max-memory 10: want a size"},
		{[]string{"ROOKERY_MAX_MEMROY=1gb"}, nil,
			"rookery: unknown environment variable ROOKERY_MAX_MEMROY; did you mean ROOKERY_MAX_MEMORY (--max-memory)?\n"},
		{nil, []string{"--aclfile", badACLFile(t)}, ":2: Error in applying operation '+nosuchcmd': Unknown command or category name in ACL"},
		{nil, []string{"--aclfile", "/nonexistent/users.acl"}, "--aclfile: open /nonexistent/users.acl: no such file or directory"},
	} {
		code, out, _ := runQuick(t, c.env, append([]string{"--dev"}, c.args...)...)
		if code == 0 || !strings.Contains(out, c.want) || strings.Count(out, "\n") != 1 {
			t.Errorf("%v %v: exit %d, want one line with %q, got:\n%s", c.env, c.args, code, c.want, out)
		}
	}
	code, out, _ := runQuick(t, nil, "--foo")
	if want := "rookery: unknown flag --foo\nRun 'rookery -h' for the flags.\n"; code == 0 || out != want {
		t.Errorf("unknown flag: exit %d, output %q, want %q", code, out, want)
	}
	// The project's own variables are not flags, and are not refused.
	env := []string{"ROOKERY_TARGET=image", "ROOKERY_TEST_NORACE=1", "ROOKERY_MAX_MEMORY=1gb", "ROOKERY_MAX_ITEM_SIZE=1mb"}
	args := append([]string{"--id", "n1", "--data-dir", t.TempDir(), "--bootstrap-expect", "1"}, nodeproc.EphemeralAddrs()...)
	startProc(t, env, args...).waitReady(15 * time.Second)
}

// TestVersionAndHelp: --version and `rookery version` print the build; -h
// lists the commands and the flags by group with their environment names.
func TestVersionAndHelp(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, err := exec.Command(bin(t), args...).Output()
		lines := strings.Split(string(out), "\n")
		if err != nil || len(lines) != 4 || lines[0] != "rookery "+version || !strings.HasPrefix(lines[1], "commit  ") ||
			len(lines[1]) <= len("commit  ") || lines[2] != "go      "+runtime.Version() {
			t.Errorf("rookery %v: %v %q", args, err, out)
		}
	}
	out, err := exec.Command(bin(t), "-h").Output()
	help := string(out)
	if err != nil {
		t.Fatalf("-h: %v", err)
	}
	at := 0
	for _, want := range []string{"Commands:", "  members", "  version", "--version",
		"\nNode:\n", "--id string", "[ROOKERY_ID]", "\nAddresses:\n", "--resp-addr string", "[ROOKERY_RESP_ADDR, default 127.0.0.1:6479]",
		"\nCluster:\n", "\nLimits:\n", "--max-memory size", "[ROOKERY_MAX_MEMORY, default auto]",
		"\nSecurity:\n", "\nTuning:\n", "\nDebugging:\n", "--pprof"} {
		i := strings.Index(help[at:], want)
		if i < 0 {
			t.Fatalf("-h lacks %q after offset %d:\n%s", want, at, help)
		}
		at += i
	}
	if strings.Contains(help, "fault-injection") {
		t.Errorf("-h shows the hidden --fault-injection")
	}
	// -h among other flags prints the same help, and exits 0.
	code, out2, _ := runQuick(t, nil, "--dev", "-h")
	if code != 0 || out2 != help {
		t.Errorf("--dev -h: exit %d, output differs from -h:\n%s", code, out2)
	}
}

// badACLFile is an aclfile whose second line names no command.
func badACLFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(p, []byte("user ok on >pw ~* +@all\nuser bad on +nosuchcmd\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
