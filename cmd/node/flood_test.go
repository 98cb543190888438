package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// TestStrangersCannotStarveTheNode is the pre-AUTH attack against the real
// binary: 10,000 connections that never authenticate and three clients
// announcing 300 MB bulk strings before AUTH. The node's memory grows by less
// than 100 MB and a client with the password is still served within 100 ms.
// The binary is built without the race detector, whose shadow memory would
// swamp the figure.
func TestStrangersCannotStarveTheNode(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: ten thousand connections to a real node")
	}
	const strangers = 10000
	raiseOpenFiles(t, strangers+2000)
	dir := t.TempDir()
	bin, err := nodeproc.Build(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--id", "n1", "--data-dir", dir + "/data", "--bootstrap-expect", "1", "--requirepass", "pw",
		"--auth-timeout", "60"}, nodeproc.EphemeralAddrs()...)
	p, err := nodeproc.Start(bin, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	if err := p.WaitReady(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got, err := authPing(p.RESP); err != nil || got != "+OK\r\n+PONG\r\n" {
		t.Fatalf("before the flood: %q %v", got, err)
	}
	before := rssOf(t, p.Pid())

	conns := make([]net.Conn, 0, strangers)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for len(conns) < strangers {
		c, err := net.Dial("tcp", p.RESP)
		if err != nil {
			t.Fatalf("stranger %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", p.RESP)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			// The header, then as much of the 300 MB as the node will take.
			go func() {
				io.WriteString(c, "*1\r\n$314572800\r\n")
				chunk := strings.Repeat("x", 1<<20)
				for i := 0; i < 300; i++ {
					if _, err := io.WriteString(c, chunk); err != nil {
						return
					}
				}
			}()
			line, err := bufio.NewReader(c).ReadString('\n')
			if want := "-ERR Protocol error: unauthenticated bulk length\r\n"; line != want {
				t.Errorf("300 MB bulk before AUTH: %q %v, want %q", line, err, want)
			}
		}()
	}
	wg.Wait()

	// A client with the password, five times over: the median is the figure
	// (one run on a shared machine can be descheduled for longer).
	var lat []time.Duration
	for i := 0; i < 5; i++ {
		start := time.Now()
		got, err := authPing(p.RESP)
		lat = append(lat, time.Since(start))
		if err != nil || got != "+OK\r\n+PONG\r\n" {
			t.Fatalf("authenticated client under the flood: %q %v", got, err)
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	after := rssOf(t, p.Pid())
	t.Logf("authenticated AUTH+PING from dial: %v (sorted); node RSS %d MB -> %d MB", lat, before>>20, after>>20)
	if lat[2] > 100*time.Millisecond {
		t.Errorf("authenticated client served in %v (median), want under 100 ms", lat[2])
	}
	if after-before > 100<<20 {
		t.Errorf("node RSS grew by %d MB under the flood, want under 100 MB", (after-before)>>20)
	}
}

// authPing connects, authenticates and pings, pipelined.
func authPing(addr string) (string, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*1\r\n$4\r\nPING\r\n"); err != nil {
		return "", err
	}
	br := bufio.NewReader(c)
	a, err := br.ReadString('\n')
	if err != nil {
		return a, err
	}
	b, err := br.ReadString('\n')
	return a + b, err
}

// rssOf reads a process's resident set size in bytes.
func rssOf(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading the node's memory: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

// raiseOpenFiles lets this process, and the node it starts, open n files.
func raiseOpenFiles(t *testing.T, n uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	old := lim
	lim.Cur = n
	if lim.Max < n {
		lim.Max = n // needs privilege; without it the test cannot make its point
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("needs %d open files; the limit is %d (hard %d): %v", n, old.Cur, old.Max, err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// TestRaftPortFloodDuringRestart is the lock-out the Raft port's pools of
// pending slots prevent (cluster/DESIGN.md, "Half-open connections"): half-open
// connections from eight loopback addresses (127.0.0.2 … 127.0.0.9, sixteen
// each, as many as the one shared pool of 128 once held), each dialled again
// as soon as the node closes it, on one node's Raft port while that node
// restarts. Its peers, at 127.0.0.1, are members it knows from its members
// file: the node is ready, answers a linearizable read and takes a write
// within 5 s of its start.
//
// The flood lasts 25 s. This one starts half a second before the node
// stops and lasts until the node has served (at most 5 s after its start),
// which spans the restart and the bound, and keeps the test short.
func TestRaftPortFloodDuringRestart(t *testing.T) {
	dir := t.TempDir()
	certDir := filepath.Join(dir, "certs")
	if err := nodeproc.MakeCerts(bin(t), certDir, "n1", "n2", "n3"); err != nil {
		t.Fatal(err)
	}
	sec := nodeproc.Security{CertDir: certDir, GossipKey: base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))}
	c, err := nodeproc.StartSecureCluster(bin(t), filepath.Join(dir, "data"), 3, sec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	lc := &localCluster{Cluster: c, t: t}
	target := lc.followers()[0]
	if err := client(t, target.RESP, 2).Do(bg(), "BF.ADD", "users", "before").Err(); err != nil {
		t.Fatalf("BF.ADD before the flood: %v", err)
	}

	fl := startRaftFlood(t, target.Raft, 16)
	time.Sleep(500 * time.Millisecond) // the flood holds every stranger's slot
	if err := target.Stop(syscall.SIGTERM, 20*time.Second); err != nil && target.Alive() {
		t.Fatalf("%s did not stop: %v", target.ID, err)
	}
	start := time.Now()
	if err := target.Restart(); err != nil {
		t.Fatal(err)
	}
	const within = 5 * time.Second
	if err := target.WaitReady(within - time.Since(start)); err != nil {
		t.Fatalf("restarted under a flood of the raft port: %v\n%s", err, target.Logs())
	}
	ready := time.Since(start)
	rc := client(t, target.RESP, 2)
	ctx, cancel := context.WithDeadline(bg(), start.Add(within))
	defer cancel()
	if ok, err := rc.Do(ctx, "BF.EXISTS", "users", "before").Bool(); err != nil || !ok {
		t.Fatalf("linearizable read %v after the start: %v %v", time.Since(start), ok, err)
	}
	if err := rc.Do(ctx, "BF.ADD", "users", "after").Err(); err != nil {
		t.Fatalf("write %v after the start: %v", time.Since(start), err)
	}
	served := time.Since(start)
	dials, closed := fl.stop()
	t.Logf("under the flood (%d half-open connections dialled, %d closed by the node): ready %v, read and write served %v after the start",
		dials, closed, ready.Round(time.Millisecond), served.Round(time.Millisecond))
	if closed == 0 {
		t.Fatal("the node closed none of the flood's connections: no flood reached it")
	}
	if v := strangersRefused(t, target); v == 0 {
		t.Fatal("the node counted no stranger refused for want of a slot")
	}
}

// raftFlood keeps half-open connections open to a Raft port from 127.0.0.2
// … 127.0.0.9.
type raftFlood struct {
	cancel        context.CancelFunc
	wg            sync.WaitGroup
	dials, closed atomic.Int64
}

// startRaftFlood opens perAddr connections from each of eight loopback
// addresses to addr that send nothing; each is dialled again 20 ms after the
// node closes it (or while the node is down, refuses it).
func startRaftFlood(t *testing.T, addr string, perAddr int) *raftFlood {
	ctx, cancel := context.WithCancel(bg())
	f := &raftFlood{cancel: cancel}
	t.Cleanup(func() { f.stop() })
	for i := 2; i <= 9; i++ {
		d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(i))}}
		if c, err := d.Dial("tcp", addr); err != nil {
			f.stop()
			t.Skipf("cannot dial from 127.0.0.%d here: %v", i, err)
		} else {
			c.Close()
		}
		for range perAddr {
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				for ctx.Err() == nil {
					c, err := d.DialContext(ctx, "tcp", addr)
					if err == nil {
						f.dials.Add(1)
						if waitClosed(ctx, c) {
							f.closed.Add(1)
						}
						c.Close()
					}
					select {
					case <-time.After(20 * time.Millisecond):
					case <-ctx.Done():
					}
				}
			}()
		}
	}
	return f
}

// waitClosed waits, sending nothing, until the node closes c (true) or ctx
// ends (false).
func waitClosed(ctx context.Context, c net.Conn) bool {
	b := make([]byte, 1)
	for ctx.Err() == nil {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := c.Read(b); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return true
		}
	}
	return false
}

// stop ends the flood and returns how many connections it dialled and how
// many of them the node closed.
func (f *raftFlood) stop() (dials, closed int64) {
	f.cancel()
	f.wg.Wait()
	return f.dials.Load(), f.closed.Load()
}

var strangersRefusedRE = regexp.MustCompile(`(?m)^rookery_peer_connections_pending_refused_total\{from="stranger"\} (\d+)$`)

// strangersRefused is how many connections from strangers' addresses node m
// closed for want of a pending slot since it started.
func strangersRefused(t *testing.T, m *nodeproc.Member) int {
	t.Helper()
	b := metricsOf(t, m)
	g := strangersRefusedRE.FindSubmatch(b)
	if g == nil {
		t.Fatalf("no strangers' refusals in /metrics:\n%s", b)
	}
	v, _ := strconv.Atoi(string(g[1]))
	return v
}
