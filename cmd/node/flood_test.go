package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
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
