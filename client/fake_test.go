package client

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeNode is a RESP server that claims to lead a one-node cluster and answers
// every BF.MADD item with 1, doing no work: it measures what the client itself
// costs.
type fakeNode struct {
	ln net.Listener
	wg sync.WaitGroup
	// legacy: a node of a build before CLUSTER MEMBERS, whose CLUSTER NODES
	// answered members one per line.
	legacy bool
	asked  sync.Map // subcommand of CLUSTER -> true
}

func startFake(tb testing.TB) *fakeNode { return startFakeNode(tb, false) }

func startFakeNode(tb testing.TB, legacy bool) *fakeNode {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	f := &fakeNode{ln: ln, legacy: legacy}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.wg.Add(1)
			go f.serve(c)
		}
	}()
	tb.Cleanup(func() { ln.Close(); f.wg.Wait() })
	return f
}

func (f *fakeNode) serve(c net.Conn) {
	defer f.wg.Done()
	defer c.Close()
	br := bufio.NewReaderSize(c, 64<<10)
	bw := bufio.NewWriterSize(c, 64<<10)
	for {
		req, err := readReply(br)
		if err != nil || req.kind != '*' || len(req.arr) == 0 {
			return
		}
		args := req.arr
		if strings.EqualFold(args[0].str, "IDEM") {
			args = args[3:]
		}
		switch strings.ToUpper(args[0].str) {
		case "CLUSTER":
			sub := strings.ToUpper(args[1].str)
			f.asked.Store(sub, true)
			if f.legacy && sub == "MEMBERS" {
				bw.WriteString("-ERR unknown subcommand 'members'. Try CLUSTER HELP.\r\n")
				break
			}
			line := fmt.Sprintf("n1 %s - - leader voter alive\n", f.ln.Addr())
			fmt.Fprintf(bw, "$%d\r\n%s\r\n", len(line), line)
		case "BF.MADD":
			fmt.Fprintf(bw, "*%d\r\n", len(args)-2)
			for range len(args) - 2 {
				bw.WriteString(":1\r\n")
			}
		default:
			bw.WriteString("+OK\r\n")
		}
		if br.Buffered() == 0 {
			if bw.Flush() != nil {
				return
			}
		}
	}
}

// TestLearnsMembersFromEitherBuild: the client learns the leader from CLUSTER
// MEMBERS, and from CLUSTER NODES of a node of a build before MEMBERS.
func TestLearnsMembersFromEitherBuild(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		f := startFakeNode(t, legacy)
		c, err := New(context.Background(), Options{Addrs: []string{f.ln.Addr().String()}})
		if err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		leader := c.leader
		c.mu.Unlock()
		_, askedNodes := f.asked.Load("NODES")
		if leader != f.ln.Addr().String() || askedNodes != legacy {
			t.Errorf("legacy %v: leader %q, asked CLUSTER NODES %v", legacy, leader, askedNodes)
		}
		c.Close()
	}
}

// BenchmarkBulkClientOnly: the client's own ceiling for bulk loads, against a
// node that does nothing (its CPU counted with the client's); one op is one
// 16-byte item.
func BenchmarkBulkClientOnly(b *testing.B) {
	f := startFake(b)
	c, err := New(context.Background(), Options{Addrs: []string{f.ln.Addr().String()}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	items := make([]string, 5000)
	for i := range items {
		items[i] = fmt.Sprintf("%016d", i)
	}
	bulk := c.NewBulk(context.Background(), KindBloom, "k", BulkOptions{})
	b.ResetTimer()
	start, cpu := time.Now(), processCPU()
	for left := b.N; left > 0; left -= len(items) {
		if err := bulk.Add(items[:min(left, len(items))]...); err != nil {
			b.Fatal(err)
		}
	}
	if err := bulk.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "items/s")
	// The machine is shared: CPU time says more than the wall clock.
	b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/item")
}

// processCPU is the CPU time this process (client and fake node) has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
