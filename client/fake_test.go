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
}

func startFake(tb testing.TB) *fakeNode {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	f := &fakeNode{ln: ln}
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
