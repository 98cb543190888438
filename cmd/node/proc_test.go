package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The tests in this package drive the real rookery binary, built once by
// TestMain, as separate processes on 127.0.0.1 with every port chosen by the
// kernel and every data directory from t.TempDir().

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rookery-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "rookery")
	build := exec.Command("go", "build", "-race", "-o", binary, ".")
	if os.Getenv("ROOKERY_TEST_NORACE") != "" {
		build = exec.Command("go", "build", "-o", binary, ".")
	}
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build rookery:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one running rookery process.
type proc struct {
	t       *testing.T
	cmd     *exec.Cmd
	args    []string
	env     []string
	resp    string // bound RESP address
	http    string
	raft    string
	gossip  string
	mu      sync.Mutex
	log     strings.Builder
	exited  chan struct{}
	exitErr error
}

var listening = regexp.MustCompile(`msg=listening .*resp=(\S+) http=(\S+) raft=(\S+) gossip=(\S+)`)

// freeAddrs are the flags that make a node bind kernel-chosen ports.
func freeAddrs() []string {
	return []string{"--resp-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0"}
}

// startProc starts the binary with args and waits until it reports its
// addresses. env entries are added to the environment.
func startProc(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, args: args, env: env}
	p.start()
	t.Cleanup(p.kill)
	return p
}

func (p *proc) start() {
	p.t.Helper()
	p.cmd = exec.Command(binary, p.args...)
	p.cmd.Env = append(os.Environ(), p.env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	p.exited = make(chan struct{})
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			p.mu.Unlock()
			if m := listening.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1:]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		p.exitErr = p.cmd.Wait()
		close(p.exited)
	}()
	select {
	case m := <-found:
		p.resp, p.http, p.raft, p.gossip = m[0], m[1], m[2], m[3]
	case <-p.exited:
		p.t.Fatalf("rookery exited before listening: %v\n%s", p.exitErr, p.logs())
	case <-time.After(30 * time.Second):
		p.t.Fatalf("rookery did not report its addresses\n%s", p.logs())
	}
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// restart starts the process again with the same arguments and environment
// (its ports are chosen afresh).
func (p *proc) restart() {
	p.t.Helper()
	p.mu.Lock()
	p.log.Reset()
	p.mu.Unlock()
	p.start()
}

// kill stops the process with SIGKILL, as a crash would, and waits for it.
func (p *proc) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// stop sends sig and waits for the process to exit; it returns the exit error.
func (p *proc) stop(sig syscall.Signal, within time.Duration) error {
	p.t.Helper()
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
		return p.exitErr
	case <-time.After(within):
		p.t.Fatalf("rookery did not exit within %v of %v\n%s", within, sig, p.logs())
		return nil
	}
}

// waitReady polls /readyz until it answers 200.
func (p *proc) waitReady(within time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get("http://" + p.http + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("not ready within %v (last: %v)\n%s", within, err, p.logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// client returns a go-redis client for the node speaking proto (2 or 3).
func (p *proc) client(proto int) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: p.resp, Protocol: proto, MaxRetries: -1,
		DialTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second})
	p.t.Cleanup(func() { c.Close() })
	return c
}

// devNode starts a single-node cluster on data dir dir.
func devNode(t *testing.T, dir string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"--id", "n1", "--data-dir", dir, "--bootstrap-expect", "1", "--log-level", "debug"}, freeAddrs()...)
	p := startProc(t, nil, append(args, extra...)...)
	p.waitReady(10 * time.Second)
	return p
}

func bg() context.Context { return context.Background() }
