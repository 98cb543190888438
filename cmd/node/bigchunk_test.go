package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// TestOversizedChunksStallNoLeader: a LOADCHUNK chunk far larger than the
// filter it claims to fill is refused from its header, naming the size the
// filter takes, before anything is logged or held: ten 300 MB chunks in
// parallel on the leader and a 20 MB one on a follower cost no election, the
// leader's memory barely moves, and the dump then loads as it should.
func TestOversizedChunksStallNoLeader(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader(30 * time.Second)
	var f *nodeproc.Member
	for _, m := range c.followers() {
		f = m
	}
	rc := c.proc(l).client(2)
	if err := rc.Do(bg(), "BF.RESERVE", "mid", "0.01", "1000000").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Do(bg(), "BF.ADD", "mid", "present").Err(); err != nil {
		t.Fatal(err)
	}
	type chunk struct {
		iter int64
		data string
	}
	var dump []chunk
	for iter := int64(0); ; {
		v, err := rc.Do(bg(), "BF.SCANDUMP", "mid", iter).Slice()
		if err != nil {
			t.Fatal(err)
		}
		iter = v[0].(int64)
		if iter == 0 {
			break
		}
		dump = append(dump, chunk{iter, v[1].(string)})
	}
	if err := rc.Do(bg(), "BF.LOADCHUNK", "mid2", dump[0].iter, dump[0].data).Err(); err != nil {
		t.Fatal(err)
	}

	terms := map[string]uint64{}
	for _, m := range c.Nodes {
		st, err := m.Status()
		if err != nil {
			t.Fatal(err)
		}
		terms[m.ID] = st.Term
	}
	rss0 := rssOf(t, l.Pid())

	const big, mid = 300 << 20, 20 << 20
	var wg sync.WaitGroup
	var mu sync.Mutex
	var peak int64
	send := func(addr string, n int) {
		defer wg.Done()
		reply, after, err := sendChunk(addr, "mid2", 2, n)
		if err != nil {
			t.Errorf("a chunk of %d bytes: %v", n, err)
			return
		}
		want := fmt.Sprintf("-ERR received bad data (a chunk of %d bytes, and \"mid2\" takes at most %d bytes per chunk)", n, 1<<20+4)
		if reply != want {
			t.Errorf("a chunk of %d bytes: answered %q, want %q", n, reply, want)
		}
		t.Logf("a chunk of %d bytes answered %v after its last byte was sent", n, after)
		if after > 2*time.Second {
			t.Errorf("a chunk of %d bytes was answered only %v after it was sent", n, after)
		}
		mu.Lock()
		peak = max(peak, rssOf(t, l.Pid()))
		mu.Unlock()
	}
	for range 10 {
		wg.Add(1)
		go send(l.RESP, big)
	}
	wg.Add(1)
	go send(f.RESP, mid)
	wg.Wait()
	// Nothing was held: the bound is 1.5x the smaller chunk. A race-built
	// node also keeps the detector's state for each thread its blocked
	// readers took (about 5 MB each).
	bound := int64(mid * 3 / 2)
	if os.Getenv("ROOKERY_TEST_NORACE") == "" {
		bound += 11 * 6 << 20
	}
	grew := max(peak, rssOf(t, l.Pid())) - rss0
	t.Logf("the leader's memory grew by %d MB from %d MB (bound %d MB)", grew>>20, rss0>>20, bound>>20)
	if grew > bound {
		t.Errorf("the leader's memory grew by %d MB while it refused every chunk (from %d MB)", grew>>20, rss0>>20)
	}
	for _, m := range c.Nodes {
		st, err := m.Status()
		if err != nil {
			t.Fatal(err)
		}
		if st.Term != terms[m.ID] {
			t.Errorf("%s went from term %d to %d: an election happened", m.ID, terms[m.ID], st.Term)
		}
	}
	if now := c.leader(5 * time.Second); now != l {
		t.Errorf("leadership moved from %s to %s", l.ID, now.ID)
	}

	// The refusals changed nothing: the rest of the dump loads.
	for _, ch := range dump[1:] {
		if err := rc.Do(bg(), "BF.LOADCHUNK", "mid2", ch.iter, ch.data).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := rc.Do(bg(), "BF.EXISTS", "mid2", "present").Int(); err != nil || ok != 1 {
		t.Fatalf("the loaded copy: BF.EXISTS %d, %v", ok, err)
	}
}

// sendChunk sends BF.LOADCHUNK key iter with n bytes of zeros over a
// connection of its own and returns the first line of the answer and how
// long after the last byte was written it came. The bytes come from one
// small buffer: a test process that held 300 MB would hand that peak to the
// processes later tests start (Linux carries ru_maxrss across fork and exec).
func sendChunk(addr, key string, iter int64, n int) (string, time.Duration, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return "", 0, err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(2 * time.Minute))
	it := fmt.Sprint(iter)
	head := fmt.Sprintf("*4\r\n$12\r\nBF.LOADCHUNK\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n", len(key), key, len(it), it, n)
	if _, err := io.WriteString(nc, head); err != nil {
		return "", 0, err
	}
	buf := make([]byte, 1<<20)
	for left := n; left > 0; left -= len(buf) {
		if _, err := nc.Write(buf[:min(left, len(buf))]); err != nil {
			return "", 0, err
		}
	}
	if _, err := io.WriteString(nc, "\r\n"); err != nil {
		return "", 0, err
	}
	sent := time.Now()
	line, err := bufio.NewReader(nc).ReadString('\n')
	return strings.TrimRight(line, "\r\n"), time.Since(sent), err
}
