// Package nodeproc builds the rookery binary and runs it as real processes on
// 127.0.0.1: single nodes and clusters, killed, stopped and restarted at will.
// The integration tests, the client's tests and jepsen-lite drive the server
// through it, never through its packages.
package nodeproc

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Build compiles the rookery binary into dir (with the race detector if race)
// and returns its path.
func Build(dir string, race bool) (string, error) { return BuildTags(dir, race) }

// BuildTags is Build with the build tags given (internal/mutant's
// rookery_mutants, for one).
func BuildTags(dir string, race bool, tags ...string) (string, error) {
	bin := filepath.Join(dir, "rookery")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command("go", append(args, "github.com/rookerydb/rookery/cmd/node")...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build rookery: %v\n%s", err, out)
	}
	return bin, nil
}

// Proc is one running rookery process.
type Proc struct {
	bin  string
	args []string
	env  []string

	// Bound addresses, as the process reported them.
	RESP, HTTP, Raft, Gossip string
	// Sec is how the node is secured; HTTP calls use its password and TLS.
	Sec Security

	cmd     *exec.Cmd
	mu      sync.Mutex
	log     strings.Builder
	exited  chan struct{}
	exitErr error
}

var listening = regexp.MustCompile(`msg=listening .*resp=(\S+) http=(\S+) raft=(\S+) gossip=(\S+)`)

// Start runs bin with args (env entries added to the environment) and waits
// until it reports the addresses it listens on, which it logs at level info: a
// --log-level above info hides them.
func Start(bin string, env []string, args ...string) (*Proc, error) {
	p := &Proc{bin: bin, args: args, env: env}
	return p, p.start()
}

func (p *Proc) start() error {
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.Env = append(os.Environ(), p.env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return err
	}
	p.exited = make(chan struct{})
	if err := p.cmd.Start(); err != nil {
		return err
	}
	found := make(chan []string, 1)
	exited := p.exited
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
		err := p.cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(exited)
	}()
	select {
	case m := <-found:
		// Written only when they change: a node restarted on its own ports
		// keeps them, and other goroutines read them meanwhile (a restart on
		// new ports, from ports the kernel chose, has no such readers).
		for i, f := range []*string{&p.RESP, &p.HTTP, &p.Raft, &p.Gossip} {
			if *f != m[i] {
				*f = m[i]
			}
		}
		return nil
	case <-exited:
		return fmt.Errorf("rookery exited before listening: %v\n%s", p.ExitErr(), p.Logs())
	case <-time.After(30 * time.Second):
		p.Kill()
		return fmt.Errorf("rookery did not report its addresses\n%s", p.Logs())
	}
}

// Logs returns what the process has written to stderr since it last started.
func (p *Proc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// ExitErr is the process's exit status once it has exited.
func (p *Proc) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

// Exited is closed when the process exits.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Alive reports whether the process is running.
func (p *Proc) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return p.cmd != nil
	}
}

// Restart starts the process again with the same arguments and environment.
func (p *Proc) Restart() error {
	p.mu.Lock()
	p.log.Reset()
	p.mu.Unlock()
	return p.start()
}

// Kill stops the process with SIGKILL, as a crash would, and waits for it.
func (p *Proc) Kill() {
	if !p.Alive() {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Stop sends sig and waits up to within for the process to exit; it returns
// the exit status.
func (p *Proc) Stop(sig syscall.Signal, within time.Duration) error {
	if !p.Alive() {
		return p.ExitErr()
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
		return p.ExitErr()
	case <-time.After(within):
		return fmt.Errorf("rookery did not exit within %v of %v", within, sig)
	}
}

// Pid is the process id of the running process.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Pause stops the process with SIGSTOP (a long GC pause, a frozen VM); Resume
// continues it.
// Pause freezes the node (SIGSTOP) and returns once every thread of it has
// stopped: the signal is delivered asynchronously, and a request sent in
// between would still be served.
func (p *Proc) Pause() error {
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	if runtime.GOOS != "linux" {
		return nil // no /proc/<pid>/task to watch
	}
	deadline := time.Now().Add(5 * time.Second)
	for !p.stopped() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not stopped 5 s after SIGSTOP", p.RESP)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// stopped reports whether every thread of the process is in the stopped
// state ('T' in /proc/<pid>/task/<tid>/stat).
func (p *Proc) stopped() bool {
	dir := fmt.Sprintf("/proc/%d/task", p.cmd.Process.Pid)
	tasks, err := os.ReadDir(dir)
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "stat"))
		if err != nil {
			continue // a thread that ended
		}
		// The state follows the command name, which is in parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}

func (p *Proc) Resume() error { return p.cmd.Process.Signal(syscall.SIGCONT) }

// WaitReady polls /readyz until it answers 200.
func (p *Proc) WaitReady(within time.Duration) error {
	deadline := time.Now().Add(within)
	var last error
	for {
		resp, err := p.HTTPDo("GET", "/readyz")
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
		}
		last = err
		if time.Now().After(deadline) || !p.Alive() {
			return fmt.Errorf("%s not ready within %v (last: %v)", p.RESP, within, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// HTTPDo sends a request to the node's HTTP face with its credentials.
func (p *Proc) HTTPDo(method, path string) (*http.Response, error) {
	c, req, err := p.Sec.Request(method, p.HTTP, path)
	if err != nil {
		return nil, err
	}
	return c.Do(req)
}

// Status is a node's /v1/status.
type Status struct {
	ID         string `json:"id"`
	Role       string `json:"role"`
	LeaderID   string `json:"leader_id"`
	LeaderRESP string `json:"leader_resp_addr"`
	Term       uint64 `json:"term"`
	Commit     uint64 `json:"commit_index"`
	Applied    uint64 `json:"applied_index"`
	Filters    int    `json:"filters"`
	Memory     uint64 `json:"memory_bytes"`
	// Shards are the node's replicas of the shards of a sharded cluster.
	Shards []struct {
		Shard   int    `json:"shard"`
		Role    string `json:"role"`
		Leader  string `json:"leader_id"`
		Filters int    `json:"filters"`
		Memory  uint64 `json:"memory_bytes"`
		Problem string `json:"problem"`
	} `json:"shards"`
}

// Status reads the node's /v1/status.
func (p *Proc) Status() (Status, error) {
	var st Status
	err := p.getJSON("/v1/status", &st)
	return st, err
}

// Voters lists the voter ids of the configuration as the node sees it.
func (p *Proc) Voters() ([]string, error) {
	var nodes []struct {
		ID    string `json:"id"`
		Voter bool   `json:"voter"`
	}
	if err := p.getJSON("/v1/nodes", &nodes); err != nil {
		return nil, err
	}
	var out []string
	for _, n := range nodes {
		if n.Voter {
			out = append(out, n.ID)
		}
	}
	return out, nil
}

func (p *Proc) getJSON(path string, v any) error {
	resp, err := p.HTTPDo("GET", path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// Ports handed out by FreePort come from below Linux's ephemeral range
// (32768 to 60999 by default), from which the kernel picks the source port
// of every outgoing connection: a port the kernel handed FreePort from that
// range could be some connection's source port by the time a node binds it
// ("address already in use", seen under a full test run's load).
const (
	portsFrom = 10000
	portsTo   = 32000
)

var (
	portMu sync.Mutex
	handed = map[int]bool{} // ports FreePort has handed out in this process
)

// FreePort returns a port of 127.0.0.1 on which nothing listens now, over
// TCP or UDP (gossip binds both), and that this process has not handed out
// before.
func FreePort() (int, error) {
	portMu.Lock()
	defer portMu.Unlock()
	for range 1000 {
		p := portsFrom + rand.IntN(portsTo-portsFrom)
		if handed[p] || !free(p) {
			continue
		}
		handed[p] = true
		return p, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// free reports whether port p of 127.0.0.1 can be bound over TCP and UDP.
func free(p int) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	ln.Close()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	pc.Close()
	return true
}

// EphemeralAddrs are the flags that make a node bind ports the kernel picks;
// such a node comes back at other ports when restarted.
func EphemeralAddrs() []string {
	return []string{"--resp-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0"}
}

// NodeArgs are the flags of a cluster node id with its data in dir, on ports
// chosen now and kept across restarts; expect > 0 adds --bootstrap-expect,
// join adds --join.
func NodeArgs(id, dir string, expect int, join []string) ([]string, error) {
	args := []string{"--id", id, "--data-dir", dir}
	// From below the kernel's ephemeral range (FreePort), which never hands
	// a port out twice: a client dialling a node that is not up yet would
	// otherwise be given that node's port as its own source port now and
	// then, and the node would fail to bind it.
	for _, f := range []string{"--resp-addr", "--http-addr", "--raft-addr", "--gossip-addr"} {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		args = append(args, f, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	}
	if expect > 0 {
		args = append(args, "--bootstrap-expect", fmt.Sprint(expect))
	}
	if len(join) > 0 {
		args = append(args, "--join", strings.Join(join, ","))
	}
	return args, nil
}

// Cut breaks this node's Raft links with the node whose Raft address is peer;
// the node must run with --fault-injection. Cut both ends for a partition.
func (p *Proc) Cut(peer string) error {
	return p.post("/debug/faults/cut?peer=" + peer)
}

// Heal restores every Raft link of this node.
func (p *Proc) Heal() error { return p.post("/debug/faults/heal") }

func (p *Proc) post(path string) error {
	resp, err := p.HTTPDo("POST", path)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s", path, resp.Status)
	}
	return nil
}

// RunTests is a TestMain body: it builds the binary into a temporary directory
// (with the race detector if race), sets *bin, runs the tests and removes the
// directory. It returns the exit code for os.Exit.
func RunTests(m interface{ Run() int }, race bool, bin *string) int {
	dir, err := os.MkdirTemp("", "rookery-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *bin, err = Build(dir, race); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
