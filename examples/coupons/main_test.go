package main

import (
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/rookerydb/rookery/client"
	"github.com/rookerydb/rookery/internal/nodeproc"
)

// TestConnectWaitsForTheNode is issue 29's coupons block: the service
// started beside a node that is not listening yet (go run ./cmd/node --dev &
// go run ./examples/coupons &) waits for it, up to -wait, instead of
// exiting with "cluster unavailable ... connection refused"; with nothing
// there for longer than -wait it gives up with that error.
func TestConnectWaitsForTheNode(t *testing.T) {
	bin := rookery(t)
	args, err := nodeproc.NodeArgs("n1", filepath.Join(t.TempDir(), "n1"), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	var resp string
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--resp-addr" {
			resp = args[i+1]
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	o := client.Options{Addrs: []string{resp}, RetryBackoff: 10 * time.Millisecond}

	began := time.Now()
	if _, err := connect(bg, o, testFilter, 1000, time.Second, log); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("no node for longer than -wait: %v", err)
	}
	if el := time.Since(began); el < time.Second || el > 20*time.Second {
		t.Errorf("no node: gave up after %v, with -wait 1s", el)
	}

	done := make(chan error, 1)
	go func() {
		c, err := connect(bg, o, testFilter, 1000, 2*time.Minute, log)
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	time.Sleep(time.Second) // the service is up first, as in the README's block
	p, err := nodeproc.Start(bin, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a node started after the service: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the service did not reach a node started after it")
	}
	c := newClient(t, o)
	if typ, err := c.Type(bg, testFilter); err != nil || typ != "MBbloomCF" {
		t.Errorf("the filter after the wait: TYPE %q, %v", typ, err)
	}
}
