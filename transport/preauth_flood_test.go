//go:build linux

package transport

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestPreAuthFlood is the acceptance test for strangers: 10,000 connections that
// never authenticate and three clients announcing 300 MB bulk strings before
// AUTH cost the server under 100 MB, and a client with the password that
// connects then is served within 100 ms. It runs with the default MaxClients,
// where strangers churn through their share of the slots, and with room for
// all of them, which measures what an idle stranger costs.
//
// The 10,000 connections come from a child process (TestPreAuthFloodClients),
// so that each process needs only 10,000 open files and the server's memory is
// measured without the clients'.
func TestPreAuthFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 10,000 connections from a child process")
	}
	const strangers = 10000
	raiseFileLimit(t, strangers+1000)
	for _, tc := range []struct {
		name       string
		maxClients int
	}{{"default slots", 0}, {"all strangers held", 2 * strangers}} {
		t.Run(tc.name, func(t *testing.T) {
			// The node's default request size (512 MB), under which a 300 MB bulk
			// string would be read whole if nothing refused it earlier.
			ts := mustStartServer(t, Config{RequirePass: "pw", MaxClients: tc.maxClients,
				MaxRequestBytes: 512 << 20, AuthTimeout: time.Minute})
			before := measureMemory(t)
			startFloodClients(t, ts.addr, strangers)
			deadline := time.Now().Add(time.Minute)
			for ts.s.nextID.Load() < strangers {
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d connections accepted", ts.s.nextID.Load(), strangers)
				}
				time.Sleep(10 * time.Millisecond)
			}

			var wg sync.WaitGroup
			for i := 0; i < 3; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sendHugeBulk(t, ts.addr)
				}()
			}
			wg.Wait()

			start := time.Now()
			got, err := authAndPing(ts.addr)
			served := time.Since(start)
			if err != nil || got != "+OK\r\n+PONG\r\n" {
				t.Fatalf("authenticated client under the flood: %q, %v", got, err)
			}

			after := measureMemory(t)
			held := ts.s.clients.Load()
			t.Logf("%d connections held; authenticated client served in %v; RSS +%.1f MB (%.1f -> %.1f), heap+stacks +%.1f MB (race detector %v)",
				held, served, mb(after.rss-before.rss), mb(before.rss), mb(after.rss), mb(after.goMem-before.goMem), raceEnabled)
			if served > 100*time.Millisecond {
				t.Errorf("authenticated client served after %v, want under 100 ms", served)
			}
			// RSS alone would flatter buffers allocated and never written (fresh
			// pages are not resident until touched), so the Go heap and stacks in
			// use are bounded too. The race detector's shadow memory inflates RSS
			// (about 200 MB here), not the heap.
			if d := after.goMem - before.goMem; d > 100<<20 {
				t.Errorf("heap+stacks grew by %.1f MB, want under 100 MB", mb(d))
			}
			if d := after.rss - before.rss; !raceEnabled && d > 100<<20 {
				t.Errorf("RSS grew by %.1f MB, want under 100 MB", mb(d))
			}
			if tc.maxClients == 0 && held > int64(DefaultMaxClients) {
				t.Errorf("%d connections held, over MaxClients", held)
			}
			if tc.maxClients != 0 && held < strangers {
				t.Errorf("%d connections held, want all %d strangers", held, strangers)
			}
		})
	}
}

// startFloodClients runs the flood's child process and returns once its n
// connections are open; they close when the test ends.
func startFloodClients(t *testing.T, addr string, n int) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestPreAuthFloodClients$", "-test.v")
	cmd.Env = append(os.Environ(), "ROOKERY_FLOOD_ADDR="+addr, "ROOKERY_FLOOD_CONNS="+strconv.Itoa(n))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close() // the child closes its connections and exits
		cmd.Wait()
	})
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if line == "flood ready" {
			go io.Copy(io.Discard, stdout)
			return
		}
		if strings.HasPrefix(line, "flood failed") || strings.HasPrefix(line, "--- SKIP") {
			t.Fatalf("child: %s", line)
		}
	}
	t.Fatalf("child ended before its connections were open: %v", sc.Err())
}

// TestPreAuthFloodClients is the child process of TestPreAuthFlood: it opens
// the connections, says so, and holds them until its stdin closes.
func TestPreAuthFloodClients(t *testing.T) {
	addr := os.Getenv("ROOKERY_FLOOD_ADDR")
	if addr == "" {
		t.Skip("the child process of TestPreAuthFlood")
	}
	n, _ := strconv.Atoi(os.Getenv("ROOKERY_FLOOD_CONNS"))
	raiseFileLimit(t, uint64(n)+100)
	conns := make([]*net.TCPConn, 0, n)
	defer func() {
		for _, nc := range conns {
			nc.SetLinger(0) // no TIME_WAIT: reruns need the ports
			nc.Close()
		}
	}()
	for i := 0; i < n; i++ {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			fmt.Printf("flood failed: connection %d: %v\n", i, err)
			return
		}
		conns = append(conns, nc.(*net.TCPConn))
	}
	fmt.Println("flood ready")
	io.Copy(io.Discard, os.Stdin)
}

// sendHugeBulk announces a 300 MB bulk string before AUTH, sends a little of it,
// and expects to be refused from the header.
func sendHugeBulk(t *testing.T, addr string) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	// A little of the body, which the server's first read takes whole, so the
	// close is a clean FIN and the reply cannot be lost to a reset.
	io.WriteString(nc, "*1\r\n$314572800\r\n"+strings.Repeat("x", 500))
	got, err := readReply(bufio.NewReader(nc))
	if want := "-ERR Protocol error: unauthenticated bulk length\r\n"; got != want {
		t.Errorf("300 MB bulk before AUTH: %q, %v; want %q", got, err, want)
	}
}

// authAndPing is a client with the password: connect, AUTH and PING pipelined.
func authAndPing(addr string) (string, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(nc, encode("AUTH", "pw")+encode("PING")); err != nil {
		return "", err
	}
	br := bufio.NewReader(nc)
	a, err := readReply(br)
	if err != nil {
		return a, err
	}
	b, err := readReply(br)
	return a + b, err
}

// raiseFileLimit makes room for n open files, or skips the test.
func raiseFileLimit(t *testing.T, n uint64) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Skipf("reading the open files limit: %v", err)
	}
	if old.Cur >= n {
		return
	}
	lim := syscall.Rlimit{Cur: n, Max: max(old.Max, n)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("needs %d open files; the limit is %d (hard %d) and cannot be raised: %v", n, old.Cur, old.Max, err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

type memory struct {
	rss   int64 // VmRSS
	goMem int64 // the Go heap and goroutine stacks in use
}

// measureMemory collects garbage and reads the process's memory.
func measureMemory(t *testing.T) memory {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("reading RSS: %v", err)
	}
	var rss int64
	for _, line := range bytes.Split(status, []byte("\n")) {
		if f := strings.Fields(string(line)); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			rss = kb << 10
		}
	}
	return memory{rss: rss, goMem: int64(ms.HeapInuse + ms.StackInuse)}
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }
