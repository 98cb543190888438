package snapshotcmd

import (
	"bufio"
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
// leader for its backup and writes them as one bundle (cluster/bundle.go);
// restore sends each part back to the same shard of a cluster with as many
// shards.

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

// saveBundle writes every shard's backup, verified as it arrives, into one
// bundle at o.file (renamed into place once whole).
func saveBundle(ctx context.Context, c *toolclient.Client, o *snapshotOptions, shards int, stdout io.Writer) error {
	filters, bytes := 0, int64(0)
	err := atomicfile.WriteFrom(o.file, 0o600, func(f io.Writer) error {
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
			bytes += info.FileBytes
		}
		if err := bw.Close(); err != nil {
			return err
		}
		return w.Flush()
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "saved %s: %d shards, %d filters, %d bytes of shard backups\n", o.file, shards, filters, bytes)
	return nil
}

// restoreBundle verifies the bundle in f, then restores each part to the
// same shard of the cluster.
func restoreBundle(ctx context.Context, c *toolclient.Client, o *snapshotOptions, f *os.File, stdout io.Writer) error {
	parts, _, err := cluster.VerifyBundle(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return fmt.Errorf("refusing to restore %s, nothing was sent: %w", o.file, err)
	}
	shards, err := shardCount(ctx, c)
	if err != nil {
		return err
	}
	if shards != len(parts) {
		return fmt.Errorf("refusing to restore %s, nothing was sent: it holds %d shards and the cluster has %d "+
			"(a backup restores into a cluster started with the same --shards)", o.file, len(parts), max(shards, 1))
	}
	for s, p := range parts {
		size := p.Info.FileBytes
		resp, err := c.Do(ctx, http.MethodPost, fmt.Sprintf("/v1/snapshot/restore?shard=%d", s), func() (io.Reader, int64) {
			return io.NewSectionReader(f, p.Offset, size), size
		})
		if err != nil {
			return fmt.Errorf("shard %d (shards before it are restored, the others not): %w", s, err)
		}
		resp.Body.Close()
		fmt.Fprintf(stdout, "restored shard %d through %s: %d filters\n", s, resp.Request.URL.Host, len(p.Info.State.Filters))
	}
	fmt.Fprintf(stdout, "restored %s: every shard's state is the backup's\n", o.file)
	return nil
}

// inspectBundle describes a bundle, a line per shard.
func inspectBundle(file string, f *os.File, stdout io.Writer) error {
	parts, size, err := cluster.VerifyBundle(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	fmt.Fprintf(stdout, "%s: a bundle of %d shard backups, %d bytes, every checksum holds\n", file, len(parts), size)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "Shard\tIndex\tTerm\tTaken On\tFilters\tMemory")
	for s, p := range parts {
		m := p.Info.Meta
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%d\t%d\n", s, m.Index, m.Term, m.Node, len(p.Info.State.Filters), p.Info.State.MemoryBytes)
	}
	return tw.Flush()
}
