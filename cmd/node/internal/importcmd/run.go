package importcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"

	rclient "github.com/rookerydb/rookery/client"
	"github.com/rookerydb/rookery/internal/toolclient"
)

// importer is one run of `rookery import`.
type importer struct {
	o              *importOptions
	args           []string // the command line after "import", for the resume command
	progName       string   // the binary as it was run
	stdin          io.Reader
	stdout, stderr io.Writer

	c      *rclient.Client
	inputs []input
	src    *lineSource
	start  time.Time
	prog   *progress

	outMu sync.Mutex // stderr, shared by the progress and the messages

	// sent counts the keys handed to the bulk load; marks pairs each chunk's
	// end (in keys) with the line of its last key, so that the client's
	// acknowledged prefix (Bulk.Acked, always a chunk's end) turns into the
	// line to resume from.
	sent  int64
	marks []mark

	added, dups atomic.Int64 // answered keys: new, or there already
	maybe       atomic.Bool  // a chunk may have been applied without an answer
}

type mark struct{ keys, line int64 }

// importSetupTimeout bounds reaching the cluster and creating the filter.
const importSetupTimeout = 30 * time.Second

// run imports, reading signals from sigs, and returns the exit status.
func (im *importer) run(sigs <-chan os.Signal) int {
	o := im.o
	inputs, err := openInputs(o.files)
	if err != nil {
		return im.fail(err)
	}
	im.inputs = inputs
	if f, ok := im.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) && slices.ContainsFunc(inputs, isStdin) {
		im.logf("reading keys from standard input, one per line; Ctrl-D ends them\n")
		if im.o.progress == "auto" {
			im.o.progress = "none" // it would write over what is typed
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The first signal stops reading (and ends the set-up, if it is not
	// over); a second abandons the commands in flight.
	stop := make(chan struct{})
	var loading atomic.Bool
	go func() {
		if _, ok := <-sigs; !ok {
			return
		}
		close(stop)
		if !loading.Load() {
			cancel()
		}
		if _, ok := <-sigs; ok {
			cancel()
		}
	}()
	if code := im.setup(ctx); code != 0 {
		select {
		case <-stop:
			// Interrupted before a line was sent: say so, and how to
			// run it again, rather than the set-up's "context canceled".
			im.logf("interrupted before any line was sent; to resume, run the same command%s:\n  %s\n",
				im.skipNote(o.skip), im.resumeCommand(o.skip))
			return importExitInterrupted
		default:
		}
		return code
	}
	defer im.c.Close()
	loading.Store(true)
	return im.load(ctx, stop)
}

// setup reaches the cluster and makes sure the filter is there.
func (im *importer) setup(ctx context.Context) int {
	sctx, cancel := context.WithTimeout(ctx, importSetupTimeout)
	defer cancel()
	var more []string
	if im.o.resp == "" {
		addrs, err := im.findRESP(sctx)
		if err != nil {
			return im.fail(err)
		}
		im.o.target.Addr, more = addrs[0], addrs[1:]
	}
	co, err := im.o.clientOptions(more)
	if err != nil {
		return im.fail(err)
	}
	c, err := rclient.New(sctx, co)
	if err != nil {
		if im.o.resp != "" && toolclient.SpeaksHTTP(sctx, co.Addrs[0]) {
			return im.fail(fmt.Errorf("--resp %s: this port speaks HTTP (a node's --http-addr), not RESP: "+
				"give it with --addr, or the node's RESP address (its --resp-addr) with --resp", im.o.resp))
		}
		return im.fail(fmt.Errorf("cannot reach the cluster at %s: %w", strings.Join(co.Addrs, ","), err))
	}
	im.c = c
	if err := im.ensureFilter(sctx); err != nil {
		c.Close()
		return im.fail(err)
	}
	return 0
}

func (im *importer) fail(err error) int {
	im.logf("rookery import: %v\n", err)
	return 1
}

// logf writes a message to stderr, clearing the progress bar first.
func (im *importer) logf(format string, args ...any) {
	im.outMu.Lock()
	defer im.outMu.Unlock()
	if im.prog != nil {
		im.prog.clear()
	}
	fmt.Fprintf(im.stderr, format, args...)
}

// load streams the inputs into the filter until they end, an error stops
// the load, or stop is closed; then it waits for the commands in flight and
// reports.
func (im *importer) load(ctx context.Context, stop <-chan struct{}) int {
	o := im.o
	im.src = &lineSource{inputs: im.inputs, stdin: im.stdin, skip: o.skip}
	batches := make(chan batch, 2)
	readerStop := make(chan struct{})
	defer close(readerStop)
	go im.src.run(o.chunk, batches, readerStop)

	bulk := im.c.NewBulk(ctx, o.clientKind(), o.key, rclient.BulkOptions{Chunk: o.chunk, InFlight: o.inflight,
		NoCreate: o.kind != "cbf", NX: o.nx, OnChunk: im.onChunk})
	im.start = time.Now()
	im.startProgress()
	interrupted, readErr, ended := im.feed(bulk, batches, stop)
	if interrupted {
		im.logf("interrupted: waiting for the commands in flight (a second signal abandons them)\n")
	}
	loadErr := bulk.Close()
	im.stopProgress()
	if ended && !interrupted && slices.ContainsFunc(im.inputs, isStdin) {
		// Ctrl-C in a pipeline signals the program feeding standard input
		// too: its end is then the signal's doing, not the input's.
		select {
		case <-stop:
			interrupted = true
		default:
		}
	}
	// The reader's counts are its own until it has ended.
	lines := fmt.Sprintf("up to line %d", im.resumeLine(im.sent))
	if ended {
		lines = fmt.Sprintf("%d lines read, %d blank", im.src.line-min(o.skip, im.src.line), im.src.blank)
	}
	return im.report(interrupted, readErr, loadErr, bulk.Acked(), lines)
}

// feed hands the batches to the bulk load until they end (ended), one fails,
// or stop is closed (interrupted).
func (im *importer) feed(bulk *rclient.Bulk, batches <-chan batch, stop <-chan struct{}) (interrupted bool, readErr error, ended bool) {
	for {
		select {
		case <-stop:
			return true, nil, false
		default:
		}
		select {
		case <-stop:
			return true, nil, false
		case b, ok := <-batches:
			if !ok {
				return false, nil, true
			}
			if len(b.items) > 0 {
				im.sent += int64(len(b.items))
				im.marks = append(im.marks, mark{keys: im.sent, line: b.line})
				if bulk.Add(b.items...) != nil {
					return false, nil, false // Close returns the error
				}
			}
			if b.err != nil {
				return false, b.err, true
			}
		}
	}
}

// onChunk counts a chunk's answers.
func (im *importer) onChunk(r rclient.ChunkResult) {
	var n int64
	for _, added := range r.Added {
		if added {
			n++
		}
	}
	im.added.Add(n)
	im.dups.Add(int64(len(r.Added)) - n)
	if errors.Is(r.Err, rclient.ErrIndeterminate) {
		im.maybe.Store(true)
	}
}

// resumeLine is the line after which nothing acknowledged is missing: the
// line of the last key of the acknowledged prefix.
func (im *importer) resumeLine(acked int64) int64 {
	if acked == 0 {
		return im.o.skip
	}
	i := sort.Search(len(im.marks), func(i int) bool { return im.marks[i].keys >= acked })
	if i < len(im.marks) && im.marks[i].keys == acked {
		return im.marks[i].line
	}
	// The client acknowledges whole chunks, which end at marks; were it
	// otherwise, the mark before is safe (some keys are sent again).
	if i == 0 {
		return im.o.skip
	}
	return im.marks[i-1].line
}

// report prints the summary on stdout and, when the load did not finish, the
// line to resume from; it returns the exit status.
func (im *importer) report(interrupted bool, readErr, loadErr error, acked int64, lines string) int {
	o := im.o
	elapsed := time.Since(im.start)
	added, dups := im.added.Load(), im.dups.Load()
	keys := added + dups
	rate := float64(keys) / max(elapsed.Seconds(), 1e-3)
	detail := fmt.Sprintf("%d new, %d duplicates (or false positives)", added, dups)
	switch {
	case o.kind == "cf" && !o.nx:
		detail = fmt.Sprintf("%d added (a cuckoo filter keeps every copy: duplicates are not looked for without --nx)", added)
	case o.kind == "cf":
		detail = fmt.Sprintf("%d new, %d there already (or false positives)", added, dups)
	case o.kind == "cbf":
		detail = fmt.Sprintf("%d new, %d seen before (or false positives)", added, dups)
	}
	fmt.Fprintf(im.stdout, "imported %d keys into %q in %s (%.0f keys/s): %s; %s\n",
		keys, o.key, elapsed.Round(time.Millisecond), rate, detail, lines)
	failed := readErr != nil || loadErr != nil
	if !interrupted && !failed {
		return 0
	}
	line := im.resumeLine(acked)
	var why string
	switch {
	case interrupted && loadErr != nil:
		why = "interrupted twice, the commands in flight abandoned: " + loadErr.Error()
	case interrupted:
		why = "interrupted"
	case loadErr != nil:
		why = "stopped by an error: " + loadErr.Error()
	default:
		why = "stopped by an error reading the input: " + readErr.Error()
	}
	after := "nothing after it was added"
	switch {
	case loadErr == nil && acked == im.sent:
		after = "nothing after it was sent"
	case keys > acked || im.maybe.Load():
		after = "some keys after it were (or may have been) added too: resuming adds them again, " +
			"which a Bloom filter absorbs and a cuckoo filter stores as second copies"
	}
	// Once, on stderr with the why; the summary on stdout says "up to line N".
	im.logf("%s\nevery line up to line %d is in the filter, %s; to resume, run the same command with --skip %d:\n  %s\n",
		why, line, after, line, im.resumeCommand(line))
	if interrupted {
		return importExitInterrupted
	}
	return 1
}

func isStdin(in input) bool { return in.name == "-" }
