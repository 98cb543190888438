package transport

import (
	"bufio"
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// dialFrom connects to addr from the loopback address local (127.0.0.2 is a
// second source on the same host).
func dialFrom(ctx context.Context, local, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 2 * time.Second}
	return d.DialContext(ctx, "tcp", addr)
}

// TestGuessingFromOneAddressIsSlowed is the check: 32 connections from
// one address guessing AUTH for 6 s make at most 60 guesses in all, reconnect
// as they like; a client from another address authenticates at once meanwhile.
func TestGuessingFromOneAddressIsSlowed(t *testing.T) {
	if testing.Short() {
		t.Skip("guesses for 6 s")
	}
	const (
		conns    = 32
		guessFor = 6 * time.Second
		guesser  = "127.0.0.2"
	)
	if ln, err := net.Listen("tcp", guesser+":0"); err != nil {
		t.Skipf("%s is not a local address here: %v", guesser, err)
	} else {
		ln.Close()
	}
	ts := mustStartServer(t, Config{RequirePass: "s3cret"})

	var guesses, busy, dials atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), guessFor)
	defer cancel()
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			for ctx.Err() == nil {
				nc, err := dialFrom(ctx, guesser, ts.addr)
				if err != nil {
					continue
				}
				dials.Add(1)
				stop := context.AfterFunc(ctx, func() { nc.Close() })
				br := bufio.NewReader(nc)
				for ctx.Err() == nil {
					if _, err := nc.Write([]byte(encode("AUTH", "guess"))); err != nil {
						break
					}
					reply, err := readReply(br)
					if err != nil {
						break // closed: the connection's third failure, or a refusal
					}
					switch {
					case strings.HasPrefix(reply, "-WRONGPASS"):
						guesses.Add(1)
					case reply == "-"+string(errAuthBusyReply)+"\r\n":
						busy.Add(1)
					default:
						t.Errorf("a guess answered %q", reply)
					}
				}
				stop()
				nc.Close()
			}
		})
	}

	// Meanwhile a client from 127.0.0.1 connects and authenticates now and then.
	var took []time.Duration
	for ctx.Err() == nil {
		start := time.Now()
		c := dialRaw(t, ts.addr)
		if got := c.do("AUTH", "s3cret"); got != "+OK\r\n" {
			t.Fatalf("AUTH from another address: %q", got)
		}
		took = append(took, time.Since(start))
		c.nc.Close()
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
	wg.Wait()

	slices.Sort(took)
	worst := took[len(took)-1]
	// Every password checked and wrong is a failure the server counted; a
	// guesser may have hung up before reading the last few answers.
	checked := int64(testutil.ToFloat64(ts.s.authFails.counter.WithLabelValues(faceRESP)))
	t.Logf("%d connections from %s made %d guesses in %v (%d answers read; %d connections dialled; %d attempts refused unchecked); "+
		"%d logins from 127.0.0.1: median %v, worst %v",
		conns, guesser, checked, guessFor, guesses.Load(), dials.Load(), busy.Load(), len(took), took[len(took)/2], worst)
	if checked > 60 || guesses.Load() > checked {
		t.Fatalf("%d guesses checked (%d answers read) in %v, want at most 60", checked, guesses.Load(), guessFor)
	}
	if worst > 500*time.Millisecond {
		t.Fatalf("another address waited %v to authenticate (all: %v)", worst, took)
	}
	if n := testutil.ToFloat64(ts.s.guard.delayed.WithLabelValues(faceRESP)); n == 0 {
		t.Fatal("rookery_auth_delayed_total{face=resp} counted nothing")
	}
	if n := ts.s.guard.penalised(); n != 1 {
		t.Fatalf("%d sources penalised, want 1", n)
	}
}
