package transport

import (
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBudgetTakeGive(t *testing.T) {
	all := newBudget(100, nil)
	child := newBudget(40, all)
	if !child.take(40) || child.take(1) {
		t.Fatal("child budget of 40")
	}
	if !all.take(60) || all.take(1) {
		t.Fatal("parent should have 60 left after the child's 40")
	}
	all.give(60)
	if got := child.handUp(40); got != all || child.inUse() != 0 || all.inUse() != 40 {
		t.Fatalf("handUp: child %d parent %d", child.inUse(), all.inUse())
	}
	all.give(40)
	if all.inUse() != 0 || !all.take(100) {
		t.Fatalf("parent holds %d", all.inUse())
	}
	all.give(100)
	var nilBudget *budget
	if !nilBudget.take(1 << 40) {
		t.Fatal("no budget refused")
	}
}

// TestBudgetConcurrent: concurrent takers never push a budget over its limit.
func TestBudgetConcurrent(t *testing.T) {
	b := newBudget(1000, nil)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10000; i++ {
				if b.take(300) {
					if n := b.inUse(); n > 1000 {
						t.Errorf("budget at %d", n)
					}
					b.give(300)
				}
			}
		}()
	}
	wg.Wait()
	if b.inUse() != 0 {
		t.Fatalf("%d left", b.inUse())
	}
}

// TestBudgetRefusesNewcomer: when the requests in flight hold the whole request
// buffer budget, the request that needs more is refused and its connection
// closed; the request already admitted completes, and the bytes come back.
func TestBudgetRefusesNewcomer(t *testing.T) {
	ts := mustStartServer(t, Config{MaxRequestBuffer: 600 << 10, MaxItemBytes: 1 << 20})
	a, b, small := dialRaw(t, ts.addr), dialRaw(t, ts.addr), dialRaw(t, ts.addr)

	item := strings.Repeat("a", 250_000)
	req := encode("ECHO", item)
	a.send(req[:200_000]) // a's buffer grows to 256 KB and waits for the rest
	waitFor(t, "a's buffer", func() bool { return ts.s.budget.inUse() >= 200_000 })

	go b.nc.Write([]byte(encode("ECHO", strings.Repeat("b", 400_000)))) // may fail once refused
	if got := b.reply(); got != "-ERR Protocol error: server request buffers are full, try again later\r\n" {
		t.Fatalf("request over the budget: %.60q", got)
	}
	b.expectClosed()
	if got := small.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("small request while the budget is spent: %q", got)
	}

	a.send(req[200_000:])
	if got := a.reply(); got != "$250000\r\n"+item+"\r\n" {
		t.Fatalf("request admitted before: %.60q", got)
	}
	waitFor(t, "the budget back", func() bool { return ts.s.budget.inUse() == 0 })
	c := dialRaw(t, ts.addr)
	item = strings.Repeat("c", 200_000)
	if got := c.do("ECHO", item); got != "$200000\r\n"+item+"\r\n" {
		t.Fatalf("request once the budget is back: %.60q", got)
	}
	if n := testutil.ToFloat64(ts.s.m.bufferFull); n != 1 {
		t.Errorf("refusals counted %v, want 1", n)
	}
}

// TestBudgetStrangersShare: strangers draw on a quarter of the budget, so
// clients that have the password keep the rest.
func TestBudgetStrangersShare(t *testing.T) {
	ts := mustStartServer(t, Config{RequirePass: "pw", MaxRequestBuffer: 512 << 10, MaxItemBytes: 1 << 20})
	stranger := func(items int) string {
		args := []string{"BF.MADD", "k"}
		for j := 0; j < items; j++ {
			args = append(args, strings.Repeat("s", PreAuthMaxBulkBytes))
		}
		return encode(args...)
	}
	// The first stranger's buffer grows to 64 KB and waits for the rest.
	first, firstReq := dialRaw(t, ts.addr), stranger(3)
	first.send(firstReq[:40<<10])
	waitFor(t, "the first stranger's buffer", func() bool {
		return ts.s.strangerBudget.inUse() == 64<<10-readBufIdle
	})
	// The second needs 128 KB, which with the first's 64 KB is over the
	// strangers' quarter (128 KB).
	second := dialRaw(t, ts.addr)
	second.send(stranger(7)[:70<<10])
	if got := second.reply(); got != "-ERR Protocol error: server request buffers are full, try again later\r\n" {
		t.Fatalf("stranger over the strangers' share: %q", got)
	}
	second.expectClosed()

	// A client with the password may take what no stranger could.
	a := dialAuthed(t, ts.addr)
	item := strings.Repeat("x", 150_000)
	if got := a.do("ECHO", item); got != "$150000\r\n"+item+"\r\n" {
		t.Fatalf("authenticated client while strangers hold their share: %.60q", got)
	}
	first.send(firstReq[40<<10:])
	if got := first.reply(); got != "-NOAUTH Authentication required.\r\n" {
		t.Fatalf("first stranger's request: %q", got)
	}
	first.nc.Close()
	waitFor(t, "the budget back", func() bool {
		return ts.s.budget.inUse() == 0 && ts.s.strangerBudget.inUse() == 0
	})
}
