package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestUsername: with Options.Username every connection the client opens,
// to the node it was given, the shard leaders it routes to and the one a
// MOVED names, sends AUTH user password before anything else; a user
// without a password sends an empty one (a nopass user takes it); a wrong
// pair fails New with ErrAuth.
func TestUsername(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		user, pass string
		auth       []string
	}{
		{"checker", "pw", []string{"checker", "pw"}},
		{"open", "", []string{"open", ""}},
		{"", "s3cret", []string{"s3cret"}},
	} {
		t.Run(fmt.Sprintf("%q %q", tc.user, tc.pass), func(t *testing.T) {
			fc := startFakeCluster(t, 3, 3)
			fc.mu.Lock()
			fc.auth = tc.auth
			fc.mu.Unlock()
			c, err := New(ctx, Options{Addrs: fc.addrs()[:1], Username: tc.user, Password: tc.pass,
				RefreshInterval: time.Hour, RetryBackoff: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			for sh := range 3 {
				if _, err := c.BFAdd(ctx, keyOfShard(fc, sh), "x"); err != nil {
					t.Fatal(err)
				}
			}
			// Shard 0 moves to node 1; node 0 says so with MOVED.
			k := keyOfShard(fc, 0)
			fc.setLeader(0, 1)
			fc.mu.Lock()
			fc.members[0].onWrite = func(key string) string {
				return fmt.Sprintf("MOVED %d %s", keySlot(key), fc.members[1].addr)
			}
			fc.mu.Unlock()
			if _, err := c.BFAdd(ctx, k, "y"); err != nil {
				t.Fatal(err)
			}
			if _, err := c.BFExists(WithReadLevel(ctx, ReadStale), keyOfShard(fc, 2), "x"); err != nil {
				t.Fatal(err)
			}
			got := fc.take()
			fc.mu.Lock()
			defer fc.mu.Unlock()
			reached := 0
			for _, g := range got {
				if len(g) > 0 {
					reached++
				}
			}
			if reached != 3 || fc.conns < 3 || fc.authed != fc.conns || fc.noauth != 0 {
				t.Fatalf("%d nodes reached; %d connections, %d sent AUTH %q, %d commands refused NOAUTH",
					reached, fc.conns, fc.authed, tc.auth, fc.noauth)
			}
		})
	}

	fc := startFakeCluster(t, 1, 1)
	fc.mu.Lock()
	fc.auth = []string{"checker", "pw"}
	fc.mu.Unlock()
	_, err := New(ctx, Options{Addrs: fc.addrs(), Username: "checker", Password: "bad", DialTimeout: time.Second})
	if !errors.Is(err, ErrAuth) {
		t.Fatalf("a wrong password: %v, want ErrAuth", err)
	}
}
