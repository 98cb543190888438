// Package importcmd is `rookery import`: it loads keys, one per line, from
// files or standard input into one filter, through the Go client's bulk
// loads: chunks of BF.MADD, CF.INSERT or CBF.MADD to the leader, several in
// flight, each applied exactly once however often it is retried. The lines
// are read by source.go, sent by run.go, shown by progress.go. An
// interruption stops it cleanly and prints the line to resume from.
package importcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	rclient "github.com/rookerydb/rookery/client"
	"github.com/rookerydb/rookery/cmd/node/internal/command"
	"github.com/rookerydb/rookery/cmd/node/internal/flagerr"
	"github.com/rookerydb/rookery/cmd/node/internal/respconn"
	"github.com/rookerydb/rookery/internal/toolclient"
)

// Command is `rookery import`.
func Command() command.Command {
	return command.Command{Name: "import", Synopsis: "load keys, one per line, from files or stdin into a filter, with progress and resume",
		Run: importCommand}
}

const importUsage = `usage: rookery import --key NAME [flags] [FILE...|-]

Loads keys, one per line, into the filter NAME: from the FILEs in turn (a
name ending in .gz is gunzipped), or from standard input (no FILE, or -).
A line ends in \n or \r\n and is the key as it is, spaces included; blank
lines are passed over. Lines are numbered from 1 across all the inputs.

  --addr HOST:PORT[,HOST:PORT...]
                       HTTP addresses of nodes, as for every other tool (default
                       $ROOKERY_ADDR, else 127.0.0.1:6480, :6580, :6680): the
                       first that answers names the cluster's RESP addresses
                       (GET /v1/nodes); writes go to the leader
  --resp HOST:PORT     RESP address of any node (its --resp-addr), or a redis://
                       or rediss:// URL, instead of asking --addr for them
  --key NAME           the filter (required)
  --kind bf|cf|cbf     Bloom (BF.MADD), cuckoo (CF.INSERT) or counting Bloom
                       (CBF.MADD) (default bf)
  --error-rate P       false positive rate of a filter this creates (bf, cbf;
                       default 0.01)
  --capacity N         items of a filter this creates (default: the number of
                       lines, when the input is plain files, estimated from
                       the size of those over 4 MiB, 1.6 times that for a
                       cuckoo filter, which grows once about 70% full; else
                       1000000)
  --nx                 cf: add only keys not there yet (CF.INSERTNX), so that
                       duplicates are counted and stored once
  --skip N             pass over the first N lines (to resume an import)
  --user NAME          the nodes' user to act as (ACL SETUSER), over HTTP (basic
                       auth) and RESP (AUTH user password) (default
                       $ROOKERY_USER, else the default user)
  --password PW        that user's password; the default user's is the nodes'
                       --requirepass (default $ROOKERY_PASSWORD, else
                       $ROOKERY_REQUIREPASS)
  --cacert FILE        CA of the nodes' certificates: speak https to --addr and
                       TLS to RESP (--http-tls, --resp-tls) (default
                       $ROOKERY_CACERT)
  --cert, --cert-key FILE   client certificate and its key (--tls-client-auth)
  --chunk N            keys per command (default 5000)
  --inflight N         commands awaiting their answers at once (default 16)
  --progress MODE      auto (a bar when stderr is a terminal, else a log line
                       every --log-every), bar, log or none (default auto)
  --log-every D        interval of the log lines (default 5s)

A missing filter is created (BF.RESERVE, CF.RESERVE or CBF.RESERVE) with
--error-rate and --capacity; a cuckoo filter with RedisBloom's defaults for the
rest (bucket size 2; reserve it yourself for another shape). An existing
filter of the same kind is loaded as it is: its own error rate and capacity
hold, and the command says so if --error-rate or --capacity differ from them.
A key that holds another kind of filter is refused before anything is sent.

A bar, or log lines, show the lines, bytes and items so far, the rate and the
time left; a summary at the end gives the items, how many were new, the
duplicates (or false positives), the time and the rate.

SIGINT, SIGTERM or SIGHUP stops the import cleanly: the commands in flight
are answered, and it prints the line to resume from and the command that
resumes it, the same one with --skip N. Every line up to N is in the filter;
none after it was sent. Reading standard input, a signal that also ends the
program feeding it (Ctrl-C in a pipeline) still counts as an interruption. A second signal abandons the
commands in flight (those may be applied or not; a Bloom filter does not
mind, a cuckoo filter may then hold some keys twice).

Exit status: 0 every line loaded; 1 an error (unreachable node, another kind
of filter, a full filter, ...: what was loaded is reported, with the line to
resume from); 2 bad flags; 130 interrupted.
`

// importOptions are the flags of `rookery import`.
type importOptions struct {
	conn      toolclient.Flags  // --addr and the credentials, as every tool's
	connCfg   toolclient.Config // conn resolved against the environment
	resp      string            // --resp
	target    respconn.Target   // the RESP side: --resp, or what --addr named
	key       string
	kind      string
	errorRate float64
	capacity  int64
	skip      int64
	nx        bool
	chunk     int
	inflight  int
	progress  string
	logEvery  time.Duration
	files     []string
	set       map[string]bool // flags given explicitly
}

// importExitInterrupted is the exit status of an interrupted import, as a
// shell reports a process ended by SIGINT.
const importExitInterrupted = 130

func importCommand(args []string, env func(string) (string, bool), stdout, stderr io.Writer) int {
	o, code := parseImport(args, env, stderr)
	if o == nil {
		return code
	}
	if _, set := env("GOGC"); !set {
		// The heap is small and churns (a chunk's keys, its command, its
		// answer): collecting at 5x the live heap rather than 2x took the
		// import's own CPU from 0.20 to 0.11 µs a key, for a peak of 90 MB
		// instead of 40 (10M keys, bench/import-bench.sh). On a machine the
		// nodes share, that CPU is theirs.
		debug.SetGCPercent(400)
	}
	im := &importer{o: o, args: args, progName: progName(), stdin: os.Stdin, stdout: stdout, stderr: stderr}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	if !signal.Ignored(syscall.SIGHUP) {
		// A closed terminal stops it cleanly too; under nohup it goes on.
		signal.Notify(sigs, syscall.SIGHUP)
	}
	defer signal.Stop(sigs)
	return im.run(sigs)
}

// parseImport reads the flags, before or after the file names.
func parseImport(args []string, env func(string) (string, bool), stderr io.Writer) (*importOptions, int) {
	o := &importOptions{conn: toolclient.Flags{KeyFlag: "cert-key"}, set: map[string]bool{}}
	fs := flag.NewFlagSet("rookery import", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.conn.Register(fs, env)
	fs.StringVar(&o.resp, "resp", "", "RESP address of any node, or a redis:// or rediss:// URL")
	fs.StringVar(&o.key, "key", "", "the filter to load")
	fs.StringVar(&o.kind, "kind", "bf", "bf, cf or cbf")
	fs.Float64Var(&o.errorRate, "error-rate", 0.01, "error rate of a filter this creates")
	fs.Int64Var(&o.capacity, "capacity", 0, "capacity of a filter this creates")
	fs.Int64Var(&o.skip, "skip", 0, "lines to pass over")
	fs.BoolVar(&o.nx, "nx", false, "cf: CF.INSERTNX")
	fs.IntVar(&o.chunk, "chunk", 5000, "keys per command")
	fs.IntVar(&o.inflight, "inflight", 16, "commands in flight")
	fs.StringVar(&o.progress, "progress", "auto", "auto, bar, log or none")
	fs.DurationVar(&o.logEvery, "log-every", 5*time.Second, "interval of the log lines")
	watch := flagerr.Watch(fs)
	all := args
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stderr, importUsage)
				return nil, 0
			}
			return nil, importUsageError(stderr, watch.Explain(all, err))
		}
		if fs.NArg() == 0 {
			break
		}
		o.files = append(o.files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	var err error
	if o.connCfg, err = o.conn.Config(); err != nil {
		return nil, importUsageError(stderr, err)
	}
	o.target = respconn.Target{Addr: o.resp, User: o.connCfg.User, Password: o.connCfg.Password, CAFile: o.connCfg.CAFile,
		CertFile: o.connCfg.CertFile, KeyFile: o.connCfg.KeyFile, KeyFlag: "cert-key"}
	if err := o.check(); err != nil {
		return nil, importUsageError(stderr, err)
	}
	return o, 0
}

func importUsageError(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "rookery import: %v\nRun 'rookery import -h' for the flags.\n", err)
	return 2
}

// maxImportCapacity is the largest filter a node creates (BF.RESERVE's range).
const maxImportCapacity = 1 << 30

// cuckooHeadroom is, in tenths, the capacity a cuckoo filter is given per
// key when import sizes it. With two slots a bucket and 20 kicks, an insert
// first fails at 70-74% of the capacity (measured from 20,000 to 2.8
// million), and the filter grows: 1.4 times the keys grew a second
// sub-filter from 500,000 keys on, and 1.5 times (a load of 67%) did too,
// now and then, on a busy machine where the line count was estimated; 1.6
// times (63%) leaves room for both (README, Bulk import).
const cuckooHeadroom = 16

// check refuses flags that cannot work, before anything is read or sent.
func (o *importOptions) check() error {
	switch {
	case o.key == "":
		return errors.New("--key NAME is required: the filter to load")
	case o.kind != "bf" && o.kind != "cf" && o.kind != "cbf":
		return fmt.Errorf("--kind %q: want bf, cf or cbf", o.kind)
	case !(o.errorRate > 0 && o.errorRate < 1):
		return fmt.Errorf("--error-rate %v: want a number between 0 and 1, exclusive", o.errorRate)
	case o.capacity < 0 || o.capacity > maxImportCapacity || (o.set["capacity"] && o.capacity == 0):
		return fmt.Errorf("--capacity %d: want 1 to %d", o.capacity, maxImportCapacity)
	case o.skip < 0:
		return fmt.Errorf("--skip %d: want a line count, 0 or more", o.skip)
	case o.nx && o.kind != "cf":
		return errors.New("--nx is for cuckoo filters (--kind cf)")
	case o.chunk < 1 || o.chunk > 100000:
		return fmt.Errorf("--chunk %d: want 1 to 100000 keys", o.chunk)
	case o.inflight < 1 || o.inflight > 256:
		return fmt.Errorf("--inflight %d: want 1 to 256", o.inflight)
	case o.progress != "auto" && o.progress != "bar" && o.progress != "log" && o.progress != "none":
		return fmt.Errorf("--progress %q: want auto, bar, log or none", o.progress)
	case o.logEvery <= 0:
		return fmt.Errorf("--log-every %v: want a positive duration", o.logEvery)
	case o.set["resp"] && o.set["addr"]:
		return errors.New("--addr and --resp both name the cluster: give one (--addr a node's HTTP address, --resp its RESP address)")
	case o.set["resp"] && o.resp == "":
		return errors.New("--resp needs a node's RESP address, HOST:PORT or a redis:// URL")
	}
	if o.resp == "" {
		return checkAddrs(o.connCfg) // the RESP addresses come from --addr, at the start
	}
	_, err := o.clientOptions(nil)
	return err
}

// clientOptions turns the target's flags into the client's options: the
// target's address first, then more (the other nodes --addr named). A URL's
// TLS server name is dropped: the client checks each node against the host
// it advertises.
func (o *importOptions) clientOptions(more []string) (rclient.Options, error) {
	ro, err := o.target.Options()
	if err != nil {
		return rclient.Options{}, fmt.Errorf("--resp %v", err)
	}
	co := rclient.Options{Addrs: append([]string{ro.Addr}, more...), Username: ro.Username, Password: ro.Password,
		TLS: ro.TLSConfig, DialTimeout: 5 * time.Second}
	if co.TLS != nil {
		co.TLS.ServerName = ""
	}
	return co, nil
}

// family is the command family of the kind: BF, CF or CBF.
func (o *importOptions) family() string { return strings.ToUpper(o.kind) }

// clientKind is the kind for the client's bulk loads.
func (o *importOptions) clientKind() rclient.Kind {
	switch o.kind {
	case "cf":
		return rclient.KindCuckoo
	case "cbf":
		return rclient.KindCounting
	}
	return rclient.KindBloom
}

// kindTypes are TYPE's answers for the kinds, and what to call them.
var kindTypes = map[string]struct{ typ, name string }{
	"bf":  {"MBbloom--", "Bloom filter"},
	"cf":  {"MBbloomCF", "cuckoo filter"},
	"cbf": {"MBbloomCBF", "counting Bloom filter"},
}

// kindOfType is the kind whose TYPE answer is typ, "" if none is.
func kindOfType(typ string) string {
	for k, v := range kindTypes {
		if v.typ == typ {
			return k
		}
	}
	return ""
}

// ensureFilter makes sure the key holds a filter of the kind asked for,
// creating it if it is missing, and says what it found on log.
func (im *importer) ensureFilter(ctx context.Context) error {
	o := im.o
	want := kindTypes[o.kind]
	for attempt := 0; ; attempt++ {
		typ, err := im.c.Type(ctx, o.key)
		if err != nil {
			return fmt.Errorf("TYPE %s: %w", o.key, err)
		}
		switch {
		case typ == want.typ:
			return im.describeExisting(ctx)
		case typ != "none":
			what := typ
			if k := kindOfType(typ); k != "" {
				what = fmt.Sprintf("a %s (%s; --kind %s)", kindTypes[k].name, typ, k)
			}
			return fmt.Errorf("key %q holds %s, not a %s: nothing was sent; use --kind to match it, or another --key",
				o.key, what, want.name)
		}
		err = im.create(ctx)
		if errors.Is(err, rclient.ErrExists) && attempt == 0 {
			continue // created meanwhile by someone else: look again
		}
		return err
	}
}

// create reserves the filter with the flags' parameters.
func (im *importer) create(ctx context.Context) error {
	o := im.o
	capacity, how := o.capacity, ""
	if capacity == 0 {
		if n, exact, ok := countLines(im.inputs); ok {
			capacity, how = max(n, 1), " (the input's line count)"
			if !exact {
				how = " (the input's lines, estimated from its size)"
			}
			if o.kind == "cf" {
				// A cuckoo filter grows a sub-filter once it is about 70%
				// full: room for every line takes 1.6 times them.
				capacity = (n*cuckooHeadroom + 9) / 10
				how = " (1.6x the input's line count)"
				if !exact {
					how = " (1.6x the input's lines, estimated from its size)"
				}
			}
		} else {
			capacity, how = 1000000, " (the default: the size of the input is not known)"
		}
		capacity = min(capacity, maxImportCapacity)
	}
	var err error
	switch o.kind {
	case "bf":
		err = im.c.BFReserve(ctx, o.key, o.errorRate, capacity, nil)
	case "cf":
		err = im.c.CFReserve(ctx, o.key, max(capacity, 4), nil)
	case "cbf":
		err = im.c.CBFReserve(ctx, o.key, o.errorRate, capacity, nil)
	}
	if err != nil {
		return fmt.Errorf("creating %s %s: %w", o.family(), o.key, err)
	}
	rate := fmt.Sprintf("error rate %g, ", o.errorRate)
	if o.kind == "cf" {
		rate = ""
	}
	im.logf("created %s %q: %scapacity %d%s\n", kindTypes[o.kind].name, o.key, rate, capacity, how)
	if o.kind == "cf" && o.set["error-rate"] {
		im.logf("note: a cuckoo filter takes no error rate (CF.RESERVE has none): --error-rate was not used\n")
	}
	return nil
}

// describeExisting says that the import goes into an existing filter, and
// where the flags differ from its parameters.
func (im *importer) describeExisting(ctx context.Context) error {
	o := im.o
	in, err := im.c.Info(ctx, o.family(), o.key)
	if err != nil {
		return fmt.Errorf("%s.INFO %s: %w", o.family(), o.key, err)
	}
	capacity := in["Capacity"]
	if o.kind == "cf" {
		b, _ := strconv.ParseInt(in["Number of buckets"], 10, 64)
		s, _ := strconv.ParseInt(in["Bucket size"], 10, 64)
		capacity = strconv.FormatInt(b*s, 10)
	}
	im.logf("loading into the existing %s %q: capacity %s, %s items\n", kindTypes[o.kind].name, o.key,
		capacity, in["Number of items inserted"])
	if o.set["capacity"] && capacity != strconv.FormatInt(o.capacity, 10) {
		im.logf("note: --capacity %d applies only to a filter this creates; %q keeps its capacity %s\n",
			o.capacity, o.key, capacity)
	}
	if !o.set["error-rate"] {
		return nil
	}
	if o.kind == "cf" {
		im.logf("note: a cuckoo filter takes no error rate (CF.RESERVE has none): --error-rate was not used\n")
		return nil
	}
	// Only a rate read from the filter is compared; one that cannot be
	// read draws no note, rather than a guess.
	if v, ok := im.errorRateOf(ctx, in); ok && math.Abs(v-o.errorRate) > 1e-9*o.errorRate {
		im.logf("note: --error-rate %g applies only to a filter this creates; %q keeps its error rate %g\n",
			o.errorRate, o.key, v)
	}
	return nil
}

// errorRateOf is the error rate the filter was created with: CBF.INFO says
// it; of a Bloom filter, BF.DEBUG gives its first sub-filter's, which is
// half the rate asked for when the filter scales (RedisBloom's rule). ok is
// false when it cannot be read.
func (im *importer) errorRateOf(ctx context.Context, in map[string]string) (float64, bool) {
	if r, ok := in["Error rate"]; ok {
		v, err := strconv.ParseFloat(r, 64)
		return v, err == nil
	}
	if im.o.kind != "bf" {
		return 0, false
	}
	ro, err := im.o.target.Options()
	if err != nil {
		return 0, false
	}
	rc := redis.NewClient(ro)
	defer rc.Close()
	lines, err := rc.Do(ctx, "BF.DEBUG", im.o.key).StringSlice()
	if err != nil || len(lines) < 2 {
		return 0, false
	}
	for _, f := range strings.Fields(lines[1]) {
		if r, ok := strings.CutPrefix(f, "ratio:"); ok {
			v, err := strconv.ParseFloat(r, 64)
			if err != nil {
				return 0, false
			}
			if in["Expansion rate"] != "" {
				v *= 2 // a scaling filter: the first sub-filter has half
			}
			return v, true
		}
	}
	return 0, false
}
