package transport

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// dialStranger connects and waits until the server has admitted the connection
// (it answers PING, which a stranger may send), so that connections are
// admitted in the order dialled.
func dialStranger(t *testing.T, addr string) *rawConn {
	t.Helper()
	c := dialRaw(t, addr)
	if got := c.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("stranger's PING: %q", got)
	}
	return c
}

// dialAuthed connects and authenticates.
func dialAuthed(t *testing.T, addr string) *rawConn {
	t.Helper()
	c := dialRaw(t, addr)
	if got := c.do("AUTH", "pw"); got != "+OK\r\n" {
		t.Fatalf("AUTH: %q", got)
	}
	return c
}

// TestAdmissionEvictsOldestStranger: with four slots, strangers hold at most
// three; a newcomer closes the oldest stranger when they hold their share, or
// when every slot is taken and a stranger holds one. A client that connects and
// authenticates at once always gets in until every slot is authenticated; only
// then is a newcomer refused.
func TestAdmissionEvictsOldestStranger(t *testing.T) {
	ts := mustStartServer(t, Config{RequirePass: "pw", MaxClients: 4})
	s1, s2, s3 := dialStranger(t, ts.addr), dialStranger(t, ts.addr), dialStranger(t, ts.addr)
	s4 := dialStranger(t, ts.addr) // strangers over their share: s1 goes
	s1.expectClosed()
	for _, c := range []*rawConn{s2, s3, s4} {
		if got := c.do("PING"); got != "+PONG\r\n" {
			t.Fatalf("younger stranger: %q", got)
		}
	}

	a1 := dialAuthed(t, ts.addr) // strangers' share full again: s2 goes
	s2.expectClosed()
	a2 := dialAuthed(t, ts.addr) // a free slot: nobody goes
	if got := s3.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("s3 closed without need: %q", got)
	}
	a3 := dialAuthed(t, ts.addr) // every slot taken: s3 goes
	s3.expectClosed()
	a4 := dialAuthed(t, ts.addr) // and then s4
	s4.expectClosed()

	c := dialRaw(t, ts.addr)
	if got := c.reply(); got != "-ERR max number of clients reached\r\n" {
		t.Fatalf("newcomer with every slot authenticated: %q", got)
	}
	c.expectClosed()
	for _, a := range []*rawConn{a1, a2, a3, a4} {
		if got := a.do("PING"); got != "+PONG\r\n" {
			t.Fatalf("authenticated client: %q", got)
		}
	}
	if ev, rej := testutil.ToFloat64(ts.s.m.evicted), testutil.ToFloat64(ts.s.m.rejected); ev != 4 || rej != 1 {
		t.Errorf("evicted %v rejected %v, want 4 and 1", ev, rej)
	}
	if n := ts.s.clients.Load(); n != 4 {
		t.Errorf("%d slots held, want 4", n)
	}

	a1.nc.Close()
	waitFor(t, "a slot", func() bool { return ts.s.clients.Load() < 4 })
	dialAuthed(t, ts.addr)
}

// TestAdmissionOneSlot: with a single slot, a stranger holds it until anyone
// else connects.
func TestAdmissionOneSlot(t *testing.T) {
	ts := mustStartServer(t, Config{RequirePass: "pw", MaxClients: 1})
	s := dialStranger(t, ts.addr)
	a := dialAuthed(t, ts.addr)
	s.expectClosed()
	c := dialRaw(t, ts.addr)
	if got := c.reply(); got != "-ERR max number of clients reached\r\n" {
		t.Fatalf("second client: %q", got)
	}
	if got := a.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("authenticated client: %q", got)
	}
}

// TestAdmissionSlotsBalance: however connections end, every slot comes back and
// the strangers' list empties.
func TestAdmissionSlotsBalance(t *testing.T) {
	ts := mustStartServer(t, Config{RequirePass: "pw", MaxClients: 8})
	var conns []*rawConn
	for i := 0; i < 20; i++ {
		if i%3 == 0 {
			conns = append(conns, dialAuthed(t, ts.addr))
		} else {
			conns = append(conns, dialStranger(t, ts.addr))
		}
	}
	for _, c := range conns {
		c.nc.Close()
	}
	waitFor(t, "every slot back", func() bool { return ts.s.clients.Load() == 0 })
	ts.s.mu.Lock()
	defer ts.s.mu.Unlock()
	if sl := ts.s.slots; sl.nStranger != 0 || sl.oldest != nil || sl.newest != nil {
		t.Fatalf("strangers left: %+v", sl)
	}
}
