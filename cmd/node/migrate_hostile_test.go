package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeRedis serves RESP on a loopback port: answer gets each command (its
// arguments, the name upper-cased) and writes the raw reply, or returns false
// to stop answering that connection (it is held open, silent, until the test
// ends).
func fakeRedis(t *testing.T, answer func(args []string, w *bufio.Writer) bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go serveFake(c, answer)
		}
	}()
	return ln.Addr().String()
}

func serveFake(c net.Conn, answer func(args []string, w *bufio.Writer) bool) {
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		args[0] = strings.ToUpper(args[0])
		ok := answer(args, w)
		if w.Flush() != nil {
			return
		}
		if !ok {
			io.Copy(io.Discard, c) // silent until closed
			return
		}
	}
}

// readCommand reads one RESP request: *N then N bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || line[0] != '*' {
		return nil, fmt.Errorf("bad request %q", line)
	}
	args := make([]string, n)
	for i := range args {
		hdr, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		l, err := strconv.Atoi(strings.TrimSpace(hdr[1:]))
		if err != nil {
			return nil, err
		}
		b := make([]byte, l+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:l])
	}
	return args, nil
}

// fakeTarget is a Rookery that takes everything and has no key.
func fakeTarget(t *testing.T) string {
	return fakeRedis(t, func(args []string, w *bufio.Writer) bool {
		switch args[0] {
		case "PING":
			w.WriteString("+PONG\r\n")
		case "EXISTS":
			w.WriteString(":0\r\n")
		case "HELLO":
			w.WriteString("-ERR unknown command 'HELLO'\r\n")
		default:
			w.WriteString("+OK\r\n")
		}
		return true
	})
}

// TestMigrateHostileSource: a source that announces a billion-element array,
// a 1.9 GB bulk, a chunk that never arrives, a SCAN cursor that never returns
// to 0 (with and without DBSIZE) or a dump that never ends gets the tool an
// error within 30 seconds, and the tool's peak RSS stays under 200 MB.
func TestMigrateHostileSource(t *testing.T) {
	target := fakeTarget(t)
	bloomKey := func(args []string, w *bufio.Writer) bool {
		switch args[0] {
		case "SCAN":
			w.WriteString("*2\r\n$1\r\n0\r\n*1\r\n$2\r\nbf\r\n")
		case "TYPE":
			w.WriteString("+MBbloom--\r\n")
		case "BF.INFO":
			w.WriteString("*4\r\n+Size\r\n:1000\r\n+Number of items inserted\r\n:1\r\n")
		default:
			return false
		}
		return true
	}
	common := func(args []string, w *bufio.Writer) bool {
		switch args[0] {
		case "PING":
			w.WriteString("+PONG\r\n")
		case "DBSIZE":
			w.WriteString(":3\r\n")
		default:
			return false
		}
		return true
	}
	var mu sync.Mutex
	keyN := 0
	why := map[string]string{
		"a billion-element array":    "an array of 1000000000 elements",
		"a 1.9 GB bulk for SCAN":     "a bulk string of 1900000000 bytes",
		"an endless cursor":          "SCAN did not end after",
		"a 1.9 GB chunk":             "a bulk string of 1900000000 bytes",
		"a chunk that never arrives": "i/o timeout",
		"a dump that never ends":     "the dump does not end",
	}
	cases := map[string]func(args []string, w *bufio.Writer) bool{
		"a billion-element array": func(args []string, w *bufio.Writer) bool {
			w.WriteString("*1000000000\r\n")
			return false
		},
		"a 1.9 GB bulk for SCAN": func(args []string, w *bufio.Writer) bool {
			w.WriteString("$1900000000\r\n")
			return false
		},
		"an endless cursor": func(args []string, w *bufio.Writer) bool {
			mu.Lock()
			keyN++
			k := fmt.Sprint("key-", keyN)
			mu.Unlock()
			switch args[0] {
			case "SCAN":
				fmt.Fprintf(w, "*2\r\n$2\r\n17\r\n*1\r\n$%d\r\n%s\r\n", len(k), k)
			case "TYPE":
				w.WriteString("+MBbloomCF\r\n")
			}
			return true
		},
		"a 1.9 GB chunk": func(args []string, w *bufio.Writer) bool {
			if args[0] == "BF.SCANDUMP" {
				w.WriteString("*2\r\n:1\r\n$1900000000\r\n")
				return false
			}
			return bloomKey(args, w)
		},
		"a chunk that never arrives": func(args []string, w *bufio.Writer) bool {
			if args[0] == "BF.SCANDUMP" {
				w.WriteString("*2\r\n:1\r\n$400000000\r\n")
				return false
			}
			return bloomKey(args, w)
		},
		"a dump that never ends": func(args []string, w *bufio.Writer) bool {
			if args[0] == "BF.SCANDUMP" {
				w.WriteString("*2\r\n:5\r\n$4\r\nabcd\r\n")
				return true
			}
			return bloomKey(args, w)
		},
	}
	for name, answer := range cases {
		for _, dbsize := range []bool{true, false} {
			if !dbsize && name != "an endless cursor" {
				continue
			}
			t.Run(fmt.Sprintf("%s/dbsize=%v", name, dbsize), func(t *testing.T) {
				src := fakeRedis(t, func(args []string, w *bufio.Writer) bool {
					if args[0] == "DBSIZE" && !dbsize {
						w.WriteString("-ERR unknown command 'DBSIZE'\r\n")
						return true
					}
					if common(args, w) {
						return true
					}
					return answer(args, w)
				})
				cmd := exec.Command(bin(t), "migrate", "--from", "redis://"+src, "--to", target, "--quiet")
				var out strings.Builder
				cmd.Stdout, cmd.Stderr = &out, &out
				start := time.Now()
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				peak := watchPeakRSS(cmd.Process.Pid)
				timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
				err := cmd.Wait()
				timer.Stop()
				took := time.Since(start)
				rss := peak()
				ee, ok := err.(*exec.ExitError)
				if !ok || ee.ExitCode() != 1 {
					t.Fatalf("exit %v, want status 1, after %v\n%s", err, took, out.String())
				}
				if !strings.Contains(out.String(), why[name]) {
					t.Fatalf("the error does not say %q:\n%s", why[name], out.String())
				}
				if took > 30*time.Second {
					t.Fatalf("took %v to give up\n%s", took, out.String())
				}
				if rss > 200<<20 {
					t.Fatalf("peak RSS %d MB", rss>>20)
				}
				t.Logf("%v, peak RSS %d MB: %s", took.Round(time.Millisecond), rss>>20, strings.TrimSpace(out.String()))
			})
		}
	}
}

// watchPeakRSS follows a running process's peak resident set (VmHWM, this
// program's own since its exec) until it exits; the function it returns
// gives the largest seen. The child's rusage cannot say: Go starts a child
// with CLONE_VM, so its ru_maxrss starts from this test process's own peak
// at exec (a test process holding 200 MB made every migrate "use" 206 MB).
func watchPeakRSS(pid int) func() int64 {
	var peak atomic.Int64
	stop, done := make(chan struct{}), make(chan struct{})
	read := func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return false
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				if kb<<10 > peak.Load() {
					peak.Store(kb << 10)
				}
			}
		}
		return true
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for read() {
			select {
			case <-tick.C:
			case <-stop:
				return
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		return peak.Load()
	}
}
