// Package snapshotcmd is `rookery snapshot save|restore|inspect`: it backs
// up a cluster through a node's HTTP API, verifying every checksum before a
// file is written, and restores it after verifying the file here first. A
// sharded cluster's backup is a bundle of each shard's (shards.go).
package snapshotcmd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/cmd/node/internal/command"
	"github.com/rookerydb/rookery/cmd/node/internal/flagerr"
	"github.com/rookerydb/rookery/internal/atomicfile"
	"github.com/rookerydb/rookery/internal/toolclient"
)

const snapshotUsage = `usage:
  rookery snapshot save [flags] FILE
      download a backup of the cluster from its leader, verify every checksum,
      and write it to FILE (atomically, readable by its owner only); a sharded
      cluster's FILE bundles every shard's backup, each from its leader, and
      the cluster's users
  rookery snapshot restore [flags] FILE
      verify FILE, then restore the cluster to it: every node's filters and
      the cluster's users become the backup's (its membership stays)
  rookery snapshot inspect FILE
      verify FILE and describe it: index, term, configuration, filters

flags of save and restore (any node will do: a follower sends the command
on to the leader):
` + toolclient.FlagsUsage + `  --stale            save: back up the given node's own state, even on a
                     follower (cheaper for the leader; may miss recent writes)

save and restore act as one user of the nodes (--user; the default user
without it), which must be allowed every command of @admin (+@admin).
`

// snapshotWait bounds the wait for a node's answer: taking a snapshot of a
// large state, or restoring one and installing it on every follower.
const snapshotWait = 10 * time.Minute

// Command is `rookery snapshot`.
func Command() command.Command {
	return command.Command{Name: "snapshot", Synopsis: "save, restore or inspect a backup of the cluster", Run: snapshotCommand}
}

// snapshotCommand is `rookery snapshot save|restore|inspect`. It returns the
// exit code: 0 done, 1 failed (nothing changed, no file written), 2 usage.
func snapshotCommand(args []string, env func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, snapshotUsage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sub := args[0]
	o, err := parseSnapshotFlags(sub, args[1:], env, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "rookery snapshot %s: %v\n%s", sub, err, snapshotUsage)
		}
		return 2
	}
	switch sub {
	case "save":
		err = snapshotSave(ctx, o, stdout, stderr)
	case "restore":
		err = snapshotRestore(ctx, o, stdout, stderr)
	case "inspect":
		err = snapshotInspect(o.file, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "rookery snapshot %s: %v\n", sub, err)
		return 1
	}
	return 0
}

// snapshotOptions are the flags and the file of one snapshot command.
type snapshotOptions struct {
	conn  toolclient.Config
	stale bool
	file  string
}

func parseSnapshotFlags(sub string, args []string, env func(string) (string, bool), stderr io.Writer) (*snapshotOptions, error) {
	o := &snapshotOptions{}
	fs := flag.NewFlagSet("rookery snapshot "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var conn toolclient.Flags
	switch sub {
	case "save", "restore":
		conn.Register(fs, env)
		if sub == "save" {
			fs.BoolVar(&o.stale, "stale", false, "back up the given node's own state, even on a follower")
		}
	case "inspect":
	default:
		return nil, flagerr.UnknownCommand(sub, []string{"save", "restore", "inspect"})
	}
	// Flags may come after the file too: parse again after each positional.
	watch := flagerr.Watch(fs)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stderr, snapshotUsage)
				return nil, err
			}
			return nil, watch.Explain(args, err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != 1 {
		return nil, errors.New("want exactly one FILE")
	}
	if sub != "inspect" {
		var err error
		if o.conn, err = conn.Config(); err != nil {
			return nil, err
		}
	}
	o.file = pos[0]
	return o, nil
}

// snapshotClient is the connection of save and restore to the nodes.
func snapshotClient(o *snapshotOptions, stderr io.Writer) (*toolclient.Client, error) {
	cfg := o.conn
	cfg.HeaderTimeout, cfg.Notes = snapshotWait, stderr
	return toolclient.New(cfg)
}

// snapshotSave downloads a backup, verifying it as it arrives, and renames it
// into place only once every checksum has held.
func snapshotSave(ctx context.Context, o *snapshotOptions, stdout, stderr io.Writer) error {
	c, err := snapshotClient(o, stderr)
	if err != nil {
		return err
	}
	shards, err := shardCount(ctx, c)
	if err != nil {
		return err
	}
	if shards > 0 {
		return saveBundle(ctx, c, o, shards, stdout)
	}
	path := "/v1/snapshot"
	if o.stale {
		path += "?stale=1"
	}
	resp, err := c.Do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var info *cluster.BackupInfo
	err = atomicfile.WriteFrom(o.file, 0o600, func(f io.Writer) error {
		w := bufio.NewWriterSize(f, 1<<20)
		var err error
		if info, err = cluster.VerifyBackup(io.TeeReader(resp.Body, w)); err != nil {
			return fmt.Errorf("the backup received from %s failed its checks, so %s was not written: %w", resp.Request.URL.Host, o.file, err)
		}
		return w.Flush()
	})
	if err != nil {
		return err
	}
	m := info.Meta
	fmt.Fprintf(stdout, "saved %s: index %d, term %d, %d bytes, %d filters (taken on %s)\n",
		o.file, m.Index, m.Term, info.FileBytes, len(info.State.Filters), m.Node)
	return nil
}

// isBundleFile reports whether f holds a bundle of shard backups, and
// rewinds it.
func isBundleFile(f *os.File) (bool, error) {
	head := make([]byte, 8)
	n, _ := io.ReadFull(f, head)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false, err
	}
	return cluster.IsBundle(head[:n]), nil
}

// snapshotRestore verifies the file here first, so that a damaged one never
// leaves this machine, then uploads it to the leader.
func snapshotRestore(ctx context.Context, o *snapshotOptions, stdout, stderr io.Writer) error {
	f, err := os.Open(o.file)
	if err != nil {
		return err
	}
	defer f.Close()
	if bundle, err := isBundleFile(f); err != nil || bundle {
		if err != nil {
			return err
		}
		c, err := snapshotClient(o, stderr)
		if err != nil {
			return err
		}
		return restoreBundle(ctx, c, o, f, stdout)
	}
	info, err := cluster.VerifyBackup(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return fmt.Errorf("refusing to restore %s, nothing was sent: %w", o.file, err)
	}
	c, err := snapshotClient(o, stderr)
	if err != nil {
		return err
	}
	if shards, err := shardCount(ctx, c); err == nil && shards > 0 {
		return fmt.Errorf("refusing to restore %s, nothing was sent: it is the backup of a cluster of one group, and this cluster has %d shards", o.file, shards)
	}
	resp, err := c.Do(ctx, http.MethodPost, "/v1/snapshot/restore", func() (io.Reader, int64) {
		return io.NewSectionReader(f, 0, info.FileBytes), info.FileBytes
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var res struct {
		Index   uint64 `json:"index"`
		Filters int    `json:"filters"`
		Memory  uint64 `json:"memory_bytes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return fmt.Errorf("%s restored the backup but its answer is unreadable: %v", resp.Request.URL.Host, err)
	}
	fmt.Fprintf(stdout, "restored %s (index %d, term %d, taken on %s) through %s: %d filters, %d bytes of memory; the cluster's state is the backup's from index %d\n",
		o.file, info.Meta.Index, info.Meta.Term, info.Meta.Node, resp.Request.URL.Host, res.Filters, res.Memory, res.Index)
	return nil
}

// snapshotInspect verifies a backup file and describes it.
func snapshotInspect(file string, stdout io.Writer) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	if bundle, err := isBundleFile(f); err != nil || bundle {
		if err != nil {
			return err
		}
		return inspectBundle(file, f, stdout)
	}
	info, err := cluster.VerifyBackup(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	m, st := info.Meta, info.State
	var servers []string
	for _, s := range m.Configuration {
		servers = append(servers, fmt.Sprintf("%s (%s, %s)", s.ID, s.Address, strings.ToLower(s.Suffrage)))
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "file\t%s: %d bytes, every checksum holds\n", file, info.FileBytes)
	fmt.Fprintf(tw, "taken\t%s on %s\n", m.Created.Format(time.RFC3339), m.Node)
	fmt.Fprintf(tw, "index\t%d\n", m.Index)
	fmt.Fprintf(tw, "term\t%d\n", m.Term)
	fmt.Fprintf(tw, "configuration\t%s\n", strings.Join(servers, ", "))
	fmt.Fprintf(tw, "state\t%d bytes, applied index %d, %d client sessions\n", m.StateBytes, st.AppliedIndex, st.Sessions)
	fmt.Fprintf(tw, "filters\t%d (%d with a deadline), %d bytes of memory\n", len(st.Filters), st.Expires, st.MemoryBytes)
	tw.Flush()
	if len(st.Filters) == 0 {
		return nil
	}
	fmt.Fprintln(stdout)
	tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tITEMS\tCAPACITY\tBYTES")
	for _, in := range st.Filters {
		fmt.Fprintf(tw, "%q\t%s\t%d\t%d\t%d\n", in.Key, in.Kind, in.Items, in.Capacity, in.Size)
	}
	return tw.Flush()
}
