// Package migratecmd is `rookery migrate`: it copies every Bloom and cuckoo
// filter of a Redis with RedisBloom (or of another Rookery cluster) into
// Rookery, key by key, with SCANDUMP on the source and LOADCHUNK on the
// target: the dump RedisBloom hands out is loaded as a filter of RedisBloom's
// own layout, which answers exactly as the source did (docs/MIGRATION.md).
// The source is read with a RESP client of its own (source.go), which bounds
// whatever the source sends before it is allocated.
package migratecmd

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/cmd/node/internal/command"
	"github.com/rookerydb/rookery/cmd/node/internal/humanize"
	"github.com/rookerydb/rookery/cmd/node/internal/respconn"
)

// Command is `rookery migrate`.
func Command() command.Command {
	return command.Command{Name: "migrate", Synopsis: "copy every filter of a Redis with RedisBloom (or another cluster) into this one",
		Run: migrateCommand}
}

const migrateUsage = `usage: rookery migrate --from URL [--to HOST:PORT] [flags]

Copies every Bloom (MBbloom--) and cuckoo (MBbloomCF) filter of the source
into the Rookery cluster at --to, with SCANDUMP and LOADCHUNK. The source is a
Redis with RedisBloom or another Rookery node. Stop writes to the source first:
a filter written to while it is dumped arrives as a mixture of before and after.

  --from URL           the source: redis://[[user]:password@]host:port[/db], rediss:// for TLS
  --from-user NAME     the source's user, if not in the URL
  --from-password PW   the source's password, if not in the URL
  --from-cacert FILE   CA of the source's certificate (TLS)
  --from-cert, --from-key FILE   client certificate for the source
  --to HOST:PORT       RESP address of any Rookery node, or a URL (default 127.0.0.1:6479)
  --user NAME          the target's user to act as (ACL SETUSER), with
                       --password (default $ROOKERY_USER, else the default
                       user)
  --password PW        that user's password; the default user's is the
                       target's --requirepass (default $ROOKERY_PASSWORD, else
                       $ROOKERY_REQUIREPASS)
  --cacert FILE        CA of the target's certificates (--resp-tls)
  --cert, --key FILE   client certificate for the target
  --match PATTERN      only keys matching PATTERN (SCAN MATCH; default *)
  --replace            replace filters the target already has (default: skip them)
  --chunk-size BYTES   largest chunk sent in one LOADCHUNK (default 1048576)
  --dry-run            list what would be copied, copy nothing
  --quiet              print only the summary

Exit status: 0 every filter copied (or skipped as asked), 1 a filter failed or
the source or target could not be used, 2 bad flags.
`

// migration is one run of `rookery migrate`.
type migration struct {
	from       *source // bounded (source.go)
	fromOpts   *redis.Options
	to         *redis.Client
	match      string
	replace    bool
	chunkSize  int
	dryRun     bool
	quiet      bool
	out, log   io.Writer
	noExpire   bool // the target refused PEXPIRE once: say so once, then skip TTLs
	start      time.Time
	keys, done int
	skipped    int
	failed     int
	bytes      int64
}

// Source key types: what RedisBloom's TYPE answers for its filters.
const (
	typeBloom  = "MBbloom--"
	typeCuckoo = "MBbloomCF"
)

func migrateCommand(args []string, env func(string) (string, bool), stdout, stderr io.Writer) int {
	var src, dst respconn.Target
	m := &migration{out: stdout, log: stderr}
	fs := flag.NewFlagSet("rookery migrate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	src.Flags(fs, "from-", "the source", "", env)
	dst.Flags(fs, "", "the target", "127.0.0.1:6479", env)
	// --to is the target's address; --addr is accepted too, as the other tools take it.
	fs.StringVar(&dst.Addr, "to", dst.Addr, "the target's RESP address")
	fs.StringVar(&m.match, "match", "*", "only keys matching this pattern")
	fs.BoolVar(&m.replace, "replace", false, "replace filters the target has")
	fs.IntVar(&m.chunkSize, "chunk-size", 1<<20, "largest LOADCHUNK in bytes")
	fs.BoolVar(&m.dryRun, "dry-run", false, "list, copy nothing")
	fs.BoolVar(&m.quiet, "quiet", false, "only the summary")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, migrateUsage)
			return 0
		}
		fmt.Fprintf(stderr, "rookery migrate: %v\nRun 'rookery migrate -h' for the flags.\n", err)
		return 2
	}
	var err error
	switch {
	case fs.NArg() > 0:
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case src.Addr == "":
		err = errors.New("--from is required")
	case m.chunkSize < 64 || m.chunkSize > 16<<20:
		err = fmt.Errorf("--chunk-size %d: want 64 to 16777216 bytes", m.chunkSize)
	}
	if err != nil {
		fmt.Fprintf(stderr, "rookery migrate: %v\nRun 'rookery migrate -h' for the flags.\n", err)
		return 2
	}
	so, err := src.Options()
	if err != nil {
		fmt.Fprintf(stderr, "rookery migrate: --from %v\n", err)
		return 2
	}
	do, err := dst.Options()
	if err != nil {
		fmt.Fprintf(stderr, "rookery migrate: --to %v\n", err)
		return 2
	}
	m.fromOpts, m.to = so, redis.NewClient(do)
	defer m.to.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := m.run(ctx); err != nil {
		fmt.Fprintf(stderr, "rookery migrate: %v\n", err)
		return 1
	}
	if m.failed > 0 {
		return 1
	}
	return 0
}

// run lists the source's filters, then copies them one by one.
func (m *migration) run(ctx context.Context) error {
	m.start = time.Now()
	src, err := dialSource(ctx, m.fromOpts)
	if err == nil {
		m.from = src
		defer src.close()
		// An interrupt ends a read that waits for the source.
		defer context.AfterFunc(ctx, func() { src.close() })()
		_, err = m.from.do(limitsSmall, "PING")
	}
	if err != nil {
		return fmt.Errorf("source %s: %w", m.fromOpts.Addr, err)
	}
	if err := m.to.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("target %s: %w", m.to.Options().Addr, err)
	}
	// PING answers before AUTH; a command that needs a user says whether
	// the target wants a password this run has not given (a NOPERM is a
	// user that authenticated).
	if err := m.to.Do(ctx, "EXISTS", "rookery:migrate:probe").Err(); err != nil && strings.HasPrefix(err.Error(), "NOAUTH") {
		return fmt.Errorf("target %s: %w (give --password, or ROOKERY_PASSWORD)", m.to.Options().Addr, err)
	}
	keys, types, other, err := m.list(ctx)
	if err != nil {
		return fmt.Errorf("listing the source's keys: %w", err)
	}
	m.keys = len(keys)
	if !m.quiet {
		fmt.Fprintf(m.log, "source %s: %d filters to copy (%d keys of other types left alone)\n",
			m.from.addr, len(keys), other)
	}
	for i, key := range keys {
		if err := ctx.Err(); err != nil {
			fmt.Fprintf(m.log, "interrupted after %d of %d filters\n", i, len(keys))
			break
		}
		m.copyKey(ctx, i, key, types[i])
	}
	elapsed := time.Since(m.start)
	fmt.Fprintf(m.out, "copied %d filters (%s) in %s (%s/s); %d skipped, %d failed\n",
		m.done, humanize.Bytes(m.bytes), elapsed.Round(time.Millisecond),
		humanize.Bytes(int64(float64(m.bytes)/max(elapsed.Seconds(), 1e-3))), m.skipped, m.failed)
	return nil
}

// list returns the source's filter keys matching the pattern, sorted as SCAN
// gave them, with their types, and how many other keys it saw. SCAN must end:
// it may take at most scanMargin times the pages the source's DBSIZE calls
// for (maxScanPages without a DBSIZE), it must bring a key not seen before at
// least every sourceReadTimeout, and the names listed may take at most
// maxListedBytes.
func (m *migration) list(ctx context.Context) (keys, types []string, other int, err error) {
	seen := map[string]bool{}
	maxPages := int64(maxScanPages)
	if n, err := integer(m.from.do(limitsSmall, "DBSIZE")); err == nil && n >= 0 {
		maxPages = min(maxPages, scanMargin*(n/scanCount+1)+100)
	}
	cursor, pages, listed, lastNew := "0", int64(0), 0, time.Now()
	for {
		if err := ctx.Err(); err != nil {
			return nil, nil, 0, err
		}
		page, err := array(m.from.do(limitsScan, "SCAN", cursor, "MATCH", m.match, "COUNT", scanCount))
		if err != nil {
			return nil, nil, 0, fmt.Errorf("SCAN %s: %w", cursor, err)
		}
		next, batch, err := scanPage(page)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("SCAN %s: %w", cursor, err)
		}
		typs, err := m.from.types(batch)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("TYPE: %w", err)
		}
		for i, k := range batch {
			t := typs[i]
			switch {
			case seen[k]: // SCAN may return a key twice
				continue
			case t == typeBloom || t == typeCuckoo:
				keys, types = append(keys, k), append(types, t)
			default:
				other++
			}
			seen[k] = true
			lastNew = time.Now()
			if listed += len(k) + 64; listed > maxListedBytes {
				return nil, nil, 0, fmt.Errorf("the source lists more than %s of key names: copy part of it at a time with --match",
					humanize.Bytes(maxListedBytes))
			}
		}
		if cursor = next; cursor == "0" {
			return keys, types, other, nil
		}
		pages++
		switch {
		case pages > maxPages:
			return nil, nil, 0, fmt.Errorf("SCAN did not end after %d pages, more than the source's keys call for: "+
				"its cursor never returns to 0", pages)
		case time.Since(lastNew) > sourceReadTimeout:
			return nil, nil, 0, fmt.Errorf("SCAN brought no new key for %s after %d pages: the source's cursor never returns to 0",
				sourceReadTimeout, pages)
		}
	}
}

// scanPage reads a SCAN reply: [cursor, [key...]].
func scanPage(page []any) (string, []string, error) {
	if len(page) != 2 {
		return "", nil, fmt.Errorf("a reply of %d elements, want 2", len(page))
	}
	cursor, err := str(page[0], nil)
	if err != nil {
		return "", nil, err
	}
	if _, err := strconv.ParseUint(cursor, 10, 64); err != nil {
		return "", nil, fmt.Errorf("a cursor %q", cursor)
	}
	ks, err := array(page[1], nil)
	if err != nil {
		return "", nil, err
	}
	out := make([]string, len(ks))
	for i, k := range ks {
		if out[i], err = str(k, nil); err != nil {
			return "", nil, err
		}
	}
	return cursor, out, nil
}

// copyKey copies one filter and reports it.
func (m *migration) copyKey(ctx context.Context, i int, key, typ string) {
	began := time.Now()
	n, note, err := m.copyFilter(ctx, key, typ)
	switch {
	case err != nil:
		m.failed++
		fmt.Fprintf(m.log, "[%d/%d] %s (%s): FAILED: %v\n", i+1, m.keys, key, typ, err)
	case note != "":
		m.skipped++
		if !m.quiet {
			fmt.Fprintf(m.log, "[%d/%d] %s (%s): skipped: %s\n", i+1, m.keys, key, typ, note)
		}
	default:
		m.done++
		m.bytes += n
		if !m.quiet {
			verb := "copied"
			if m.dryRun {
				verb = "would copy"
			}
			fmt.Fprintf(m.log, "[%d/%d] %s (%s): %s %s in %s\n", i+1, m.keys, key, typ, verb,
				humanize.Bytes(n), time.Since(began).Round(time.Millisecond))
		}
	}
}

// copyFilter copies key: SCANDUMP from the source, LOADCHUNK into the target,
// then the items counts compared and the key's time to live carried over. It
// returns the bytes copied, or why it skipped the key.
func (m *migration) copyFilter(ctx context.Context, key, typ string) (int64, string, error) {
	fam := "BF"
	if typ == typeCuckoo {
		fam = "CF"
	}
	exists, err := m.to.Exists(ctx, key).Result()
	if err != nil {
		return 0, "", fmt.Errorf("target: %w", err)
	}
	if exists > 0 && !m.replace {
		return 0, "the target has this key (--replace to replace it)", nil
	}
	srcInfo, err := array(m.from.do(limitsSmall, fam+".INFO", key))
	if err != nil {
		return 0, "", fmt.Errorf("source %s.INFO: %w", fam, err)
	}
	if m.dryRun {
		return infoInt(srcInfo, "Size"), "", nil
	}
	if exists > 0 {
		if err := m.to.Del(ctx, key).Err(); err != nil {
			return 0, "", fmt.Errorf("target DEL: %w", err)
		}
	}
	n, err := m.copyChunks(ctx, fam, key, srcInfo)
	if err != nil {
		return n, "", err
	}
	if err := m.compare(ctx, fam, key, srcInfo); err != nil {
		return n, "", err
	}
	return n, "", m.copyTTL(ctx, key)
}

// copyChunks streams the source's dump of key into the target. RedisBloom
// dumps no cuckoo filter without items: such a filter is created empty with
// the source's parameters instead.
func (m *migration) copyChunks(ctx context.Context, fam, key string, srcInfo []any) (int64, error) {
	var total int64
	var iter int64
	own := false // the dump is Rookery's own: checksummed chunks, sent whole
	// A dump is about the size INFO gave: a source whose chunks run on past
	// twice that, or come in more pieces than any layout has, is not believed.
	size := infoInt(srcInfo, "Size")
	maxBytes, maxChunks := 2*size+maxChunkBytes, size/1024+4096
	for chunks := int64(0); ; chunks++ {
		if total > maxBytes || chunks > maxChunks {
			return total, fmt.Errorf("source %s.SCANDUMP: %d chunks, %s, of a filter of %s: the dump does not end",
				fam, chunks, humanize.Bytes(total), humanize.Bytes(size))
		}
		reply, err := array(m.from.do(limitsDump, fam+".SCANDUMP", key, iter))
		if err != nil {
			return total, fmt.Errorf("source %s.SCANDUMP %d: %w", fam, iter, err)
		}
		next, data, err := dumpPair(reply)
		if err != nil {
			return total, fmt.Errorf("source %s.SCANDUMP %d: %w", fam, iter, err)
		}
		if next == 0 {
			if iter == 0 {
				return total, m.reserveEmpty(ctx, fam, key, srcInfo)
			}
			return total, nil
		}
		if iter == 0 {
			own = bytes.HasPrefix(data, []byte("RKYF"))
			if err := m.load(ctx, fam, key, 1, data); err != nil {
				return total, err
			}
		} else if err := m.loadPieces(ctx, fam, key, next, data, own); err != nil {
			return total, err
		}
		total += int64(len(data))
		iter = next
	}
}

// loadPieces loads the chunk that ends at iterator next. A RedisBloom chunk
// (up to 16 MiB) is sent in pieces of at most --chunk-size bytes: its
// iterator is the position just past its bytes, so a piece ending at byte b of
// the chunk loads with iterator next - len(data) + b. Rookery's own chunks are
// checksummed as a whole and go as they are.
func (m *migration) loadPieces(ctx context.Context, fam, key string, next int64, data []byte, own bool) error {
	if own {
		return m.load(ctx, fam, key, next, data)
	}
	for a := 0; a < len(data); a += m.chunkSize {
		b := min(a+m.chunkSize, len(data))
		if err := m.load(ctx, fam, key, next-int64(len(data))+int64(b), data[a:b]); err != nil {
			return err
		}
	}
	return nil
}

func (m *migration) load(ctx context.Context, fam, key string, iter int64, data []byte) error {
	if err := m.to.Do(ctx, fam+".LOADCHUNK", key, iter, data).Err(); err != nil {
		return fmt.Errorf("target %s.LOADCHUNK %d (%d bytes): %w", fam, iter, len(data), err)
	}
	return nil
}

// reserveEmpty creates, for a cuckoo filter without items (which RedisBloom
// does not dump), an empty filter of the source's shape.
func (m *migration) reserveEmpty(ctx context.Context, fam, key string, info []any) error {
	if fam != "CF" {
		return errors.New("the source dumped nothing")
	}
	capacity := infoInt(info, "Number of buckets") * infoInt(info, "Bucket size")
	err := m.to.Do(ctx, "CF.RESERVE", key, capacity,
		"BUCKETSIZE", infoInt(info, "Bucket size"),
		"MAXITERATIONS", infoInt(info, "Max iterations"),
		"EXPANSION", infoInt(info, "Expansion rate")).Err()
	if err != nil {
		return fmt.Errorf("target CF.RESERVE of the empty filter: %w", err)
	}
	return nil
}

// compare checks that the target holds what the source said it held.
func (m *migration) compare(ctx context.Context, fam, key string, srcInfo []any) error {
	dstInfo, err := m.to.Do(ctx, fam+".INFO", key).Slice()
	if err != nil {
		return fmt.Errorf("target %s.INFO: %w", fam, err)
	}
	fields := []string{"Number of items inserted", "Number of filters"}
	if fam == "BF" {
		fields = append(fields, "Capacity")
	}
	for _, f := range fields {
		if s, d := infoInt(srcInfo, f), infoInt(dstInfo, f); s != d {
			return fmt.Errorf("%s: source %d, target %d (was the source written to while it was copied?)", f, s, d)
		}
	}
	return nil
}

// copyTTL gives the target key the source key's remaining time to live.
func (m *migration) copyTTL(ctx context.Context, key string) error {
	ttl, err := integer(m.from.do(limitsSmall, "PTTL", key))
	if err != nil || ttl <= 0 || m.noExpire {
		return nil // no expiry, or a source that cannot say
	}
	if err := m.to.PExpire(ctx, key, time.Duration(ttl)*time.Millisecond).Err(); err != nil {
		if strings.Contains(err.Error(), "unknown command") {
			m.noExpire = true
			fmt.Fprintf(m.log, "the target does not expire keys: times to live are not copied\n")
			return nil
		}
		return fmt.Errorf("target PEXPIRE: %w", err)
	}
	return nil
}

// dumpPair reads a SCANDUMP reply: [iterator, data], the data nil or "" at
// the end.
func dumpPair(reply []any) (int64, []byte, error) {
	if len(reply) != 2 {
		return 0, nil, fmt.Errorf("a reply of %d elements, want 2", len(reply))
	}
	next, ok := reply[0].(int64)
	if !ok {
		return 0, nil, fmt.Errorf("an iterator of type %T", reply[0])
	}
	switch d := reply[1].(type) {
	case nil:
		return next, nil, nil
	case string:
		return next, []byte(d), nil
	case []byte:
		return next, d, nil
	}
	return 0, nil, fmt.Errorf("data of type %T", reply[1])
}

// infoInt returns field's integer in a RESP2 INFO reply (name, value, ...), 0
// if it is absent or not an integer.
func infoInt(info []any, field string) int64 {
	for i := 0; i+1 < len(info); i += 2 {
		if name, _ := str(info[i], nil); name == field {
			switch v := info[i+1].(type) {
			case int64:
				return v
			case string, []byte:
				s, _ := str(v, nil)
				n, _ := strconv.ParseInt(s, 10, 64)
				return n
			}
		}
	}
	return 0
}
