package snapshotcmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"text/tabwriter"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/internal/atomicfile"
	"github.com/rookerydb/rookery/internal/toolclient"
)

// A sharded cluster is backed up shard by shard: save asks each shard's
// leader for its backup, and any node for the cluster's users (group 0's,
// which no shard's backup holds), and writes them as one bundle
// (cluster/bundle.go); restore sends each part back to the same shard of a
// cluster with as many shards, then the users.

// shardCount asks the cluster how many shards it has: 0 for a cluster of one
// group (GET /v1/shards answers 409 there), or a node of a build before
// shards (404 or 501).
func shardCount(ctx context.Context, c *toolclient.Client) (int, error) {
	resp, err := c.Do(ctx, http.MethodGet, "/v1/shards", nil)
	var te *toolclient.Error
	if errors.As(err, &te) && (te.Status == http.StatusConflict || te.Status == http.StatusNotFound || te.Status == http.StatusNotImplemented) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var shards []cluster.ShardReport
	if err := json.NewDecoder(resp.Body).Decode(&shards); err != nil {
		return 0, fmt.Errorf("%s: unreadable list of shards: %v", resp.Request.URL.Host, err)
	}
	return len(shards), nil
}

// saveBundle writes every shard's backup, verified as it arrives, and the
// cluster's users into one bundle at o.file (renamed into place once whole).
func saveBundle(ctx context.Context, c *toolclient.Client, o *snapshotOptions, shards int, stdout io.Writer) error {
	// The users first: a refusal (a user without @admin, a node without
	// group 0) ends the command before gigabytes of shards move.
	users, from, err := fetchUsers(ctx, c)
	if err != nil {
		return fmt.Errorf("the cluster's users, so %s was not written: %w", o.file, err)
	}
	filters, total, nUsers := 0, int64(0), 0
	err = atomicfile.WriteFrom(o.file, 0o600, func(f io.Writer) error {
		w := bufio.NewWriterSize(f, 1<<20)
		bw, err := cluster.NewBundleWriter(w, shards)
		if err != nil {
			return err
		}
		for s := range shards {
			path := fmt.Sprintf("/v1/snapshot?shard=%d", s)
			if o.stale {
				path += "&stale=1"
			}
			resp, err := c.Do(ctx, http.MethodGet, path, nil)
			if err != nil {
				return fmt.Errorf("shard %d: %w", s, err)
			}
			info, err := bw.Part(resp.Body, resp.ContentLength)
			resp.Body.Close()
			if err != nil {
				return fmt.Errorf("the backup of shard %d from %s failed its checks, so %s was not written: %w",
					s, resp.Request.URL.Host, o.file, err)
			}
			filters += len(info.State.Filters)
			total += info.FileBytes
		}
		if nUsers, err = bw.Users(users); err != nil {
			return fmt.Errorf("the users from %s failed their checks, so %s was not written: %w", from, o.file, err)
		}
		if err := bw.Close(); err != nil {
			return err
		}
		return w.Flush()
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "saved %s: %d shards, %d filters, %d bytes of shard backups\n", o.file, shards, filters, total)
	fmt.Fprintf(stdout, "saved the cluster's users (from %s): %s\n", from, describeUsers(len(users), nUsers))
	return nil
}

// fetchUsers asks a node for the cluster's users section (GET /v1/users:
// group 0's, after a linearizable read, so any node will do), and says which
// node answered.
func fetchUsers(ctx context.Context, c *toolclient.Client) ([]byte, string, error) {
	resp, err := c.Do(ctx, http.MethodGet, "/v1/users", nil)
	var te *toolclient.Error
	if errors.As(err, &te) && te.Status == http.StatusNotFound {
		// A build before users: the cluster has none but each node's
		// --requirepass default, which is what none restores.
		return nil, te.Addr + ", a build without users", nil
	}
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	from := resp.Request.URL.Host
	sec, err := io.ReadAll(io.LimitReader(resp.Body, cluster.MaxBundleUsers+1))
	switch {
	case err != nil:
		return nil, from, fmt.Errorf("%s: reading the users: %v", from, err)
	case len(sec) > cluster.MaxBundleUsers:
		return nil, from, fmt.Errorf("%s: the users take more than %d bytes", from, cluster.MaxBundleUsers)
	case resp.ContentLength >= 0 && int64(len(sec)) != resp.ContentLength:
		return nil, from, fmt.Errorf("%s: the users arrived short: %d of %d bytes", from, len(sec), resp.ContentLength)
	}
	return sec, from, nil
}

// describeUsers words a users section of size bytes holding n users.
func describeUsers(size, n int) string {
	if size == 0 {
		return "none set (each node's default user is its --requirepass)"
	}
	if n == 1 {
		return "1 user"
	}
	return fmt.Sprintf("%d users", n)
}

// restoreBundle verifies the bundle in f, then restores each part to the
// same shard of the cluster, then the cluster's users.
func restoreBundle(ctx context.Context, c *toolclient.Client, o *snapshotOptions, f *os.File, stdout io.Writer) error {
	b, err := cluster.VerifyBundle(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return fmt.Errorf("refusing to restore %s, nothing was sent: %w", o.file, err)
	}
	shards, err := shardCount(ctx, c)
	if err != nil {
		return err
	}
	if shards != len(b.Parts) {
		return fmt.Errorf("refusing to restore %s, nothing was sent: it holds %d shards and the cluster has %d "+
			"(a backup restores into a cluster started with the same --shards)", o.file, len(b.Parts), max(shards, 1))
	}
	for s, p := range b.Parts {
		size := p.Info.FileBytes
		resp, err := c.Do(ctx, http.MethodPost, fmt.Sprintf("/v1/snapshot/restore?shard=%d", s), func() (io.Reader, int64) {
			return io.NewSectionReader(f, p.Offset, size), size
		})
		if err != nil {
			return fmt.Errorf("shard %d (shards before it are restored, the others not, nor the users): %w", s, err)
		}
		resp.Body.Close()
		fmt.Fprintf(stdout, "restored shard %d through %s: %d filters\n", s, resp.Request.URL.Host, len(p.Info.State.Filters))
	}
	if !b.HasUsers {
		fmt.Fprintf(stdout, "restored %s: every shard's state is the backup's; the bundle predates users in backups "+
			"(version %d), so the cluster's users are left as they are\n", o.file, b.Version)
		return nil
	}
	// After the shards: the users this command authenticates as may be
	// among those the backup replaces.
	resp, err := c.Do(ctx, http.MethodPost, "/v1/users/restore", func() (io.Reader, int64) {
		return bytes.NewReader(b.Users), int64(len(b.Users))
	})
	if err != nil {
		return fmt.Errorf("every shard is restored, but not the cluster's users (run the restore again to retry): %w", err)
	}
	defer resp.Body.Close()
	fmt.Fprintf(stdout, "restored the cluster's users through %s: %s\n", resp.Request.URL.Host, describeUsers(len(b.Users), b.UserCount))
	fmt.Fprintf(stdout, "restored %s: every shard's state and the cluster's users are the backup's\n", o.file)
	return nil
}

// inspectBundle describes a bundle, a line per shard, and its users.
func inspectBundle(file string, f *os.File, stdout io.Writer) error {
	b, err := cluster.VerifyBundle(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	fmt.Fprintf(stdout, "%s: a bundle of %d shard backups, %d bytes, every checksum holds\n", file, len(b.Parts), b.Size)
	if b.HasUsers {
		fmt.Fprintf(stdout, "users: %s\n", describeUsers(len(b.Users), b.UserCount))
	} else {
		fmt.Fprintf(stdout, "users: not in the bundle (version %d, before users were backed up); a restore leaves the cluster's as they are\n", b.Version)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "Shard\tIndex\tTerm\tTaken On\tFilters\tMemory")
	for s, p := range b.Parts {
		m := p.Info.Meta
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%d\t%d\n", s, m.Index, m.Term, m.Node, len(p.Info.State.Filters), p.Info.State.MemoryBytes)
	}
	return tw.Flush()
}
