package main

import (
	"context"
	"flag"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// The tests in this package drive the real rookery binary, built once by
// TestMain (with the race detector), as separate processes on 127.0.0.1 with
// data directories from t.TempDir().

var binary string

// bin is the rookery binary for a test that drives it as real processes; with
// -short such a test is skipped (go test -short runs the fast tests alone).
func bin(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test drives the rookery binary as real processes")
	}
	return binary
}

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // no binary: the tests that need one skip
	}
	os.Exit(nodeproc.RunTests(m, os.Getenv("ROOKERY_TEST_NORACE") == "", &binary))
}

// proc is a process the test stops when it ends.
type proc struct {
	*nodeproc.Proc
	t *testing.T
}

// startProc starts the binary with args and env entries added.
func startProc(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p, err := nodeproc.Start(bin(t), env, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return &proc{Proc: p, t: t}
}

func (p *proc) restart() {
	p.t.Helper()
	if err := p.Restart(); err != nil {
		p.t.Fatal(err)
	}
}

func (p *proc) waitReady(within time.Duration) {
	p.t.Helper()
	if err := p.WaitReady(within); err != nil {
		p.t.Fatalf("%v\n%s", err, p.Logs())
	}
}

// stop sends sig and fails the test if the process does not exit in time; it
// returns the exit status.
func (p *proc) stop(sig syscall.Signal, within time.Duration) error {
	p.t.Helper()
	select {
	case <-p.Exited():
		return p.ExitErr()
	default:
	}
	err := p.Stop(sig, within)
	select {
	case <-p.Exited():
	default:
		p.t.Fatalf("%v\n%s", err, p.Logs())
	}
	return err
}

// client returns a go-redis client for addr speaking proto (2 or 3).
func client(t *testing.T, addr string, proto int) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: proto, MaxRetries: -1,
		DialTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

func (p *proc) client(proto int) *redis.Client { return client(p.t, p.RESP, proto) }

// devNode starts a single-node cluster on data dir dir.
func devNode(t *testing.T, dir string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"--id", "n1", "--data-dir", dir, "--bootstrap-expect", "1", "--log-level", "debug"},
		nodeproc.EphemeralAddrs()...)
	p := startProc(t, nil, append(args, extra...)...)
	p.waitReady(10 * time.Second)
	return p
}

func bg() context.Context { return context.Background() }
