// Command coupons is a coupon-redemption service built on a Rookery cluster,
// small enough to read in one sitting and meant to be copied.
//
// Coupons live in a store of record (a bbolt file) and, while they are
// issued and not yet used, in a cuckoo filter on the cluster. A redeem asks
// the filter first: "no" means the code was never issued or is used, and
// the store is not asked at all; "yes" is checked by the store, which marks
// the coupon used in one transaction, and then the code is deleted from the
// filter. Guessed and forged codes, nearly all of them, cost one filter
// lookup and no store lookup.
//
//	go run ./cmd/node --dev &
//	go run ./examples/coupons -addr 127.0.0.1:6479 -listen 127.0.0.1:8080 -db coupons.db &
//
//	curl -s -X POST '127.0.0.1:8080/campaigns/spring/issue?n=3'  # {"campaign":"spring","codes":[...]}
//	curl -s -X POST 127.0.0.1:8080/redeem/7KQM-X3PF-92HD          # 200 redeemed
//	curl -s -X POST 127.0.0.1:8080/redeem/7KQM-X3PF-92HD          # 404 unknown, or 409 already redeemed
//	curl -s 127.0.0.1:8080/coupons/7KQM-X3PF-92HD                 # the store's record, the filter's answer
//	curl -s 127.0.0.1:8080/stats                                  # store lookups avoided, outbox
//
// Answers of POST /redeem/{code}: 200 "redeemed" (this request used it);
// 404 "unknown" (the filter says no, or the store has no such code: a false
// positive of the filter, counted); 409 "already redeemed" (the filter still
// held the code because its delete had not landed yet); 503 when the cluster
// could not be asked (nothing changed: try again).
//
// What makes it correct:
//
//   - The store decides. Two concurrent redeems of one code both get past the
//     filter, and the store's transaction lets exactly one of them win.
//   - Only codes the store confirms it issued are deleted from the filter. A
//     cuckoo filter deletes by fingerprint: deleting a forged code whose
//     fingerprint matches a real coupon's would make that coupon unredeemable.
//   - Codes go in with CF.INSERT (one copy each), not CF.ADDNX: two codes
//     may share a fingerprint, and ADDNX would add the second as "already
//     there", so redeeming either would take the other out of the filter.
//     Each add is sent under a key, so retrying it never adds a second copy.
//   - Every filter write is recorded in the store, with its client.Key,
//     before it is sent (an outbox). A write whose outcome is unknown
//     (client.ErrIndeterminate: the reply was lost, the leader died) is sent
//     again under the same key by a background loop until the cluster
//     answers: the cluster applies it once in all, even across a leader
//     failover or a restart of this service. outbox.go has the policy,
//     including what happens when a key outlives client.KeyLifetime.
//
// One process owns the bbolt file. To run several, put the store of record
// in a shared database: the transactions stay the same, and the claims that
// keep two senders off one outbox entry (outbox.go) become row locks.
//
// Flags: -addr (RESP addresses of some nodes, comma-separated), -listen,
// -db, -user and -password (the nodes' user to act as, made with ACL
// SETUSER, and its password; without -user, -password is the default
// user's, the nodes' --requirepass), -cacert (the cluster CA, for nodes
// serving RESP over TLS), -filter and -capacity (the cuckoo filter's name
// and size, created at start if absent), -outbox-every, -wait (how long to
// wait at start for a cluster that is not up yet; 30s).
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rookerydb/rookery/client"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6479", "RESP addresses of cluster nodes, comma-separated")
	listen := flag.String("listen", "127.0.0.1:8080", "HTTP address to serve on")
	dbPath := flag.String("db", "coupons.db", "the store of record (a bbolt file)")
	user := flag.String("user", "", "the nodes' user to act as (ACL SETUSER), else the default user")
	password := flag.String("password", "", "the user's password; the default user's is the nodes' --requirepass")
	caCert := flag.String("cacert", "", "the cluster CA (ca.pem), for nodes started with --resp-tls")
	filter := flag.String("filter", "coupons", "name of the cuckoo filter")
	capacity := flag.Int64("capacity", 1_000_000, "slots of the cuckoo filter if it is created; about twice the coupons outstanding keeps false positives near 1%")
	every := flag.Duration("outbox-every", time.Second, "how often unsettled filter writes are sent again")
	wait := flag.Duration("wait", 30*time.Second, "how long to wait at start for the cluster to answer (a node started alongside, still electing)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*addr, *listen, *dbPath, *user, *password, *caCert, *filter, *capacity, *every, *wait, log); err != nil {
		log.Error("coupons", "err", err)
		os.Exit(1)
	}
}

func run(addrs, listen, dbPath, user, password, caCert, filter string, capacity int64, every, wait time.Duration, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := connect(ctx, client.Options{Addrs: strings.Split(addrs, ","), Username: user, Password: password, CAFile: caCert},
		filter, capacity, wait, log)
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := OpenStore(dbPath)
	if err != nil {
		return err
	}
	defer st.Close()
	s := NewService(c, st, filter, log)

	done := make(chan struct{})
	go func() { defer close(done); s.RunOutbox(ctx, every) }()
	srv := &http.Server{Addr: listen, Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	log.Info("serving", "listen", listen, "cluster", addrs, "filter", filter, "db", dbPath)
	err = srv.ListenAndServe()
	stop()
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// connect reaches the cluster and makes sure the filter is there, trying
// again for up to wait while the cluster is unavailable: started with its
// node (go run ./cmd/node --dev & go run ./examples/coupons &), the service
// may be up before the node listens or has elected itself. Any other error,
// and one that outlasts wait, ends the start.
func connect(ctx context.Context, o client.Options, filter string, capacity int64, wait time.Duration, log *slog.Logger) (*client.Client, error) {
	deadline := time.Now().Add(wait)
	for said := false; ; {
		c, err := client.New(ctx, o)
		if err == nil {
			if err = ensureFilter(ctx, c, filter, capacity); err == nil {
				return c, nil
			}
			c.Close()
		}
		if !(errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrIndeterminate)) || time.Now().After(deadline) {
			return nil, err
		}
		if !said {
			log.Info("waiting for the cluster", "addr", strings.Join(o.Addrs, ","), "for", wait, "err", err)
			said = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// NewService returns a service over c and st with the defaults: up to 10,000
// codes per issue request, 1,000 per CF.INSERT, 30 s for a filter write.
func NewService(c *client.Client, st *Store, filter string, log *slog.Logger) *Service {
	return &Service{c: c, st: st, filter: filter, log: log,
		maxIssue: 10_000, chunk: 1_000, opTimeout: 30 * time.Second}
}

// ensureFilter creates the cuckoo filter unless it exists. Two slots per
// bucket, as RedisBloom's default: at half load, a code never issued passes
// the filter with a chance of about 2*2*0.5/255, 0.8%. It grows (expansion 2)
// rather than refuse coupons when full.
func ensureFilter(ctx context.Context, c *client.Client, name string, capacity int64) error {
	err := c.CFReserve(ctx, name, capacity, &client.CFReserveOptions{BucketSize: 2, Expansion: 2})
	if errors.Is(err, client.ErrExists) {
		return nil
	}
	return err
}
