package opscmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rookerydb/rookery/cmd/node/internal/command"
	"github.com/rookerydb/rookery/internal/toolclient"
)

// Wait is `rookery wait`.
func Wait() command.Command {
	return command.Command{Name: "wait", Synopsis: "wait until a node is ready", Run: waitCommand}
}

// waitPoll is the pause between two looks at a node's /readyz.
const waitPoll = 200 * time.Millisecond

// waitRefusedNote is how long a refused connection lasts before wait says
// so (a node just started takes a moment to listen).
const waitRefusedNote = 5 * time.Second

// waitCommand is `rookery wait`: it polls /readyz until it answers 200 and
// exits 0, or exits 1 once --timeout has passed. With addresses given it
// waits for each of them; with none, for the first of the local defaults to
// be ready. A setting that cannot work (https spoken in plain http, a CA
// that does not match, a client certificate missing) ends it at once.
func waitCommand(args []string, env func(string) (string, bool), stdout, stderr io.Writer) int {
	c, code := parseOps("wait", args, env, stdout, stderr, 0, 0)
	if c == nil {
		return code
	}
	cl, err := c.client()
	if err != nil {
		return c.fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	w := &waiter{c: c, cl: cl, deadline: time.Now().Add(c.timeout)}
	hosts := cl.Hosts()
	if cl.Defaults() {
		fmt.Fprintf(stderr, "waiting for a node at %s (the local defaults; --addr or ROOKERY_ADDR names others)\n",
			strings.Join(hosts, ", "))
		all := make([]int, len(hosts))
		for i := range all {
			all[i] = i
		}
		return w.until(ctx, all)
	}
	for i := range hosts {
		if code := w.until(ctx, []int{i}); code != 0 {
			return code
		}
	}
	return 0
}

// waiter is one run of `rookery wait`.
type waiter struct {
	c        *opsCmd
	cl       *toolclient.Client
	deadline time.Time
}

// until polls the nodes at indexes idx until one of them is ready.
func (w *waiter) until(ctx context.Context, idx []int) int {
	hosts := w.cl.Hosts()
	last := make([]error, len(hosts))
	refusedSince := time.Time{}
	noted := false
	for {
		for _, i := range idx {
			ready, err := w.look(ctx, i)
			if ready {
				fmt.Fprintf(w.c.stdout, "%s is ready\n", hosts[i])
				return 0
			}
			last[i] = err
			var e *toolclient.Error
			if errors.As(err, &e) && e.Fatal() {
				return w.c.fail(err)
			}
			if errors.As(err, &e) && e.Kind == toolclient.KindRefused {
				if refusedSince.IsZero() {
					refusedSince = time.Now()
				}
				if !noted && time.Since(refusedSince) >= waitRefusedNote {
					noted = true
					fmt.Fprintf(w.c.stderr, "rookery wait: %v; still waiting\n", err)
				}
			}
		}
		if time.Now().After(w.deadline) || ctx.Err() != nil {
			var parts []string
			for _, i := range idx {
				parts = append(parts, fmt.Sprintf("%s (last: %v)", hosts[i], last[i]))
			}
			return w.c.fail(fmt.Errorf("not ready within %v: %s", w.c.timeout, strings.Join(parts, "; ")))
		}
		select {
		case <-time.After(waitPoll):
		case <-ctx.Done():
		}
	}
}

// look asks node i's /readyz once; err says why it is not ready: the node's
// reason (503), or why it did not answer.
func (w *waiter) look(ctx context.Context, i int) (bool, error) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := w.cl.DoAt(rctx, i, http.MethodGet, "/readyz", nil)
	if err != nil {
		var e *toolclient.Error
		if errors.As(err, &e) && e.Answered() && e.Msg != "" {
			// The node's reason, as the first line of /readyz gives it (a
			// sharded node's lines per shard follow it).
			why, _, _ := strings.Cut(e.Msg, "\n")
			return false, errors.New(why)
		}
		return false, err
	}
	resp.Body.Close()
	return true, nil
}
