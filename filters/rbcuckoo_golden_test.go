package filters

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var updateRBCuckoo = flag.Bool("update-rbcuckoo", false, "rewrite testdata/redisbloom/cuckoo-*.txt")

// Golden transcripts of RedisBloom cuckoo filters (testdata/redisbloom/cuckoo-*.txt).
//
// Each file is the transcript of a session with one filter, one command per
// line and its reply after " = ":
//
//	reserve CAP BUCKETSIZE MAXITERATIONS EXPANSION   CF.RESERVE
//	add|addnx|del|exists|count FMT FROM TO = R...    one CF.ADD (...) per item
//	                                                 fmt.Sprintf(FMT, i), FROM <= i < TO
//	insert|insertnx FMT FROM TO = R...               one CF.INSERT(NX) of all those items
//	compact = OK                                     CF.COMPACT
//	info = [...] / debug = ...                       CF.INFO, CF.DEBUG
//	scandump POS = NEXT                              CF.SCANDUMP, the chunk in hex on the
//	  <hex>                                          indented lines after it (or NEXT nil)
//	load                                             a new filter from the dump above, by
//	                                                 CF.LOADCHUNK: every line since the last
//	                                                 write runs again on it; then the
//	                                                 session goes on with it
//
// Replies are run-length coded: "1*598 full*2" is 598 replies of 1, then two
// "Filter is full" (maxexp: "Maximum expansions reached"; nomem: "ERR
// Insufficient memory"). Each state lists the answers for the items added and
// for 3000 never added, so false positives are pinned too.
//
// The files are written (-update-rbcuckoo) by this package's implementation of
// RedisBloom's algorithm; TestRBCuckooRedisBloom checks that implementation
// against RedisBloom itself. The test replays every file and checks every
// reply: the state after the commands, the same state loaded from the dump
// (re-dumped to the same bytes), and the continuation on the loaded filter.

type rbcScenario struct {
	name, about string
	lines       []string // commands without replies; "state FMT FROM TO" expands
}

func rbcScenarios() []rbcScenario {
	return []rbcScenario{
		{"default-1000", "CF.RESERVE 1000: the defaults (bucket size 2, 20 iterations, expansion 1)", []string{
			"reserve 1000 2 20 1", "add d-%d 0 700", "state d-%d 0 700", "load",
			"add d-%d 700 800", "del d-%d 0 40", "state d-%d 0 800"}},
		{"bucket1", "bucket size 1", []string{
			"reserve 1000 1 20 1", "add b-%d 0 800", "state b-%d 0 800", "load",
			"add b-%d 800 900", "del b-%d 0 30", "state b-%d 0 900"}},
		{"bucket2", "bucket size 2, expansion 2, grown to three sub-filters", []string{
			"reserve 512 2 20 2", "add b-%d 0 1500", "state b-%d 0 1500", "load",
			"add b-%d 1500 1600", "del b-%d 0 30", "state b-%d 0 1600"}},
		{"bucket4", "bucket size 4", []string{
			"reserve 1000 4 20 1", "add b-%d 0 900", "state b-%d 0 900", "load",
			"add b-%d 900 1000", "del b-%d 0 30", "state b-%d 0 1000"}},
		{"bucket8", "bucket size 8, 100 iterations", []string{
			"reserve 1000 8 100 1", "add b-%d 0 980", "state b-%d 0 980", "load",
			"add b-%d 980 1100", "del b-%d 0 30", "state b-%d 0 1100"}},
		{"expansion0-full", "expansion 0: a filter that fills up and refuses", []string{
			"reserve 256 2 20 0", "add f-%d 0 400", "insert f-%d 400 420", "state f-%d 0 420", "load",
			"del f-%d 0 60", "add f-%d 420 500", "state f-%d 0 500"}},
		{"expansion1-grown", "expansion 1, grown to many equal sub-filters", []string{
			"reserve 64 2 20 1", "add e-%d 0 500", "state e-%d 0 500", "load",
			"insert e-%d 500 600", "del e-%d 0 20", "state e-%d 0 600"}},
		{"expansion4-grown", "expansion 4, bucket size 4, grown to four sub-filters", []string{
			"reserve 64 4 20 4", "add e-%d 0 3000", "state e-%d 0 3000", "load",
			"add e-%d 3000 3200", "del e-%d 0 20", "state e-%d 0 3200"}},
		{"autocompact", "deletes past a tenth of the items compact the filter and drop sub-filters", []string{
			"reserve 64 2 20 2", "add a-%d 0 700", "state a-%d 0 700", "load",
			"del a-%d 0 600", "state a-%d 0 700"}},
		{"compact", "CF.COMPACT after deletes too few to compact: it drops the newest sub-filter", []string{
			"reserve 64 2 20 1", "add c-%d 0 300", "del c-%d 0 10", "del c-%d 290 300", "debug", "compact",
			"state c-%d 0 300", "load", "add c-%d 300 350", "del c-%d 10 40", "compact", "state c-%d 0 350"}},
		{"counts", "items added several times: counts above 1", []string{
			"reserve 1000 4 20 1", "add n-%d 0 100", "add n-%d 0 100", "add n-%d 50 100", "addnx n-%d 0 150",
			"insertnx n-%d 100 200", "state n-%d 0 200", "load",
			"del n-%d 0 75", "add n-%d 190 210", "state n-%d 0 210"}},
		{"max-expansions", "32 sub-filters: CF.ADD refused, one CF.INSERT taking the filter past 32", []string{
			"reserve 4 2 2 1", "add x-%d 0 100", "insert x-%d 100 160", "add x-%d 160 162", "state x-%d 0 162",
			"load", "del x-%d 0 10", "add x-%d 162 170", "state x-%d 0 170"}},
	}
}

// rbcRLE run-length codes replies.
func rbcRLE(rs []string) string {
	var out []string
	for i := 0; i < len(rs); {
		j := i
		for j < len(rs) && rs[j] == rs[i] {
			j++
		}
		if j-i == 1 {
			out = append(out, rs[i])
		} else {
			out = append(out, fmt.Sprintf("%s*%d", rs[i], j-i))
		}
		i = j
	}
	return strings.Join(out, " ")
}

// rbcToken shortens a reply for a transcript.
func rbcToken(r string) string {
	switch r {
	case "ERR:Filter is full":
		return "full"
	case "ERR:Maximum expansions reached":
		return "maxexp"
	case "ERR:ERR Insufficient memory":
		return "nomem"
	}
	return r
}

// rbcSession plays a transcript's commands on one filter: an RBCuckoo here,
// or a key of a real RedisBloom (rbcRemoteSession).
type rbcSession struct {
	// exec runs one CF command on the filter and renders its reply as
	// rbcExec does.
	exec func(args []string) string
	// reserve replaces the filter by a new one (CF.RESERVE).
	reserve func(args []string) error
	// load replaces the filter by one loaded from a dump (CF.LOADCHUNK).
	load func(chunks []rbcChunk) error
}

// rbcLocalSession plays a transcript on an RBCuckoo.
func rbcLocalSession() *rbcSession {
	var c *RBCuckoo
	return &rbcSession{
		exec: func(args []string) string { return rbcExec(c, args) },
		reserve: func(args []string) error {
			var v [4]uint64
			for i := range v {
				v[i], _ = strconv.ParseUint(args[2+2*i], 10, 64)
			}
			var err error
			c, err = NewRBCuckoo(v[0], uint16(v[1]), uint16(v[2]), uint16(v[3]))
			return err
		},
		load: func(chunks []rbcChunk) error {
			var err error
			c, err = rbcLoad(chunks)
			return err
		},
	}
}

// run executes one command line (without its reply) and returns the reply as
// the transcript writes it; a scandump's chunk comes back after a newline.
func (s *rbcSession) run(line string) (string, error) {
	f := strings.Fields(line)
	switch f[0] {
	case "reserve":
		return "", s.reserve([]string{"CF.RESERVE", "k", f[1], "BUCKETSIZE", f[2], "MAXITERATIONS", f[3], "EXPANSION", f[4]})
	case "compact":
		return s.exec([]string{"CF.COMPACT", "k"}), nil
	case "info":
		return s.exec([]string{"CF.INFO", "k"}), nil
	case "debug":
		var text []byte
		r := s.exec([]string{"CF.DEBUG", "k"})
		if _, err := fmt.Sscanf(r, "x%x", &text); err != nil {
			return "", fmt.Errorf("CF.DEBUG: %s", r)
		}
		return string(text), nil
	case "scandump":
		r := s.exec([]string{"CF.SCANDUMP", "k", f[1]})
		var next int64
		var data string
		if _, err := fmt.Sscanf(r, "[%d %s", &next, &data); err != nil {
			return "", fmt.Errorf("CF.SCANDUMP: %.80s", r)
		}
		var chunk []byte
		if _, err := fmt.Sscanf(data, "x%x", &chunk); err != nil {
			return fmt.Sprintf("%d nil", next), nil
		}
		return fmt.Sprintf("%d\n%s", next, rbcWrapHex(chunk)), nil
	}
	from, _ := strconv.Atoi(f[2])
	to, _ := strconv.Atoi(f[3])
	var items []string
	for i := from; i < to; i++ {
		items = append(items, fmt.Sprintf(f[1], i))
	}
	var replies []string
	switch f[0] {
	case "add", "addnx", "del", "exists", "count":
		for _, it := range items {
			replies = append(replies, rbcToken(s.exec([]string{"CF." + strings.ToUpper(f[0]), "k", it})))
		}
	case "insert", "insertnx":
		r := s.exec(append([]string{"CF." + strings.ToUpper(f[0]), "k", "ITEMS"}, items...))
		if strings.HasPrefix(r, "[") {
			return "[" + rbcRLE(strings.Fields(strings.Trim(r, "[]"))) + "]", nil
		}
		return rbcToken(r), nil
	default:
		return "", fmt.Errorf("unknown command %q", line)
	}
	return rbcRLE(replies), nil
}

func rbcWrapHex(b []byte) string {
	h := hex.EncodeToString(b)
	var lines []string
	for len(h) > 128 {
		lines = append(lines, "  "+h[:128])
		h = h[128:]
	}
	return strings.Join(append(lines, "  "+h), "\n")
}

// rbcReadOnly reports whether a command line leaves the filter as it is.
func rbcReadOnly(line string) bool {
	switch strings.Fields(line)[0] {
	case "info", "debug", "scandump", "exists", "count":
		return true
	}
	return false
}

// write runs a scenario and returns its transcript.
func (sc rbcScenario) write() (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n# Written by TestRBCuckooGolden -update-rbcuckoo; see rbcuckoo_golden_test.go.\n", sc.about)
	s := rbcLocalSession()
	var block []string
	for _, line := range sc.lines {
		f := strings.Fields(line)
		var cmds []string
		switch f[0] {
		case "state":
			cmds = append(cmds, "info", "debug")
			for pos := int64(0); ; {
				cmd := fmt.Sprintf("scandump %d", pos)
				cmds = append(cmds, cmd)
				r, err := s.run(cmd)
				if err != nil || strings.HasSuffix(r, "nil") {
					break
				}
				fmt.Sscanf(r, "%d", &pos)
			}
			cmds = append(cmds, "exists "+strings.Join(f[1:], " "), "count "+strings.Join(f[1:], " "),
				"exists absent-%d 0 3000", "count absent-%d 0 3000")
		case "load":
			chunks, err := rbcTranscriptDump(block)
			if err != nil {
				return "", err
			}
			if err := s.load(chunks); err != nil {
				return "", err
			}
			b.WriteString("load\n")
			continue
		default:
			cmds = []string{line}
		}
		for _, cmd := range cmds {
			r, err := s.run(cmd)
			if err != nil {
				return "", fmt.Errorf("%s: %v", cmd, err)
			}
			full := cmd
			if r != "" {
				full += " = " + r
			}
			if !rbcReadOnly(cmd) {
				block = nil
			} else {
				block = append(block, full)
			}
			b.WriteString(full + "\n")
		}
	}
	return b.String(), nil
}

// rbcTranscriptDump returns the dump that the scandump lines (with replies)
// among lines hold.
func rbcTranscriptDump(lines []string) ([]rbcChunk, error) {
	var chunks []rbcChunk
	for _, l := range lines {
		if !strings.HasPrefix(l, "scandump ") {
			continue
		}
		parts := strings.SplitN(l, "\n", 2)
		var pos, next int64
		if _, err := fmt.Sscanf(parts[0], "scandump %d = %d", &pos, &next); err != nil {
			return nil, fmt.Errorf("%q: %v", parts[0], err)
		}
		if len(parts) < 2 {
			continue // the nil at the end
		}
		data, err := hex.DecodeString(strings.Join(strings.Fields(parts[1]), ""))
		if err != nil {
			return nil, err
		}
		chunks = append(chunks, rbcChunk{next, data})
	}
	if len(chunks) == 0 {
		return nil, fmt.Errorf("no dump to load")
	}
	return chunks, nil
}

// rbcParseTranscript splits a transcript into its entries: a command line with
// its reply, the hex lines of a chunk joined to it.
func rbcParseTranscript(data []byte) []string {
	var entries []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "  ") && len(entries) > 0:
			entries[len(entries)-1] += "\n" + l
		default:
			entries = append(entries, l)
		}
	}
	return entries
}

// TestRBCuckooGolden replays every transcript and checks every reply.
func TestRBCuckooGolden(t *testing.T) {
	dir := filepath.Join("testdata", "redisbloom")
	if *updateRBCuckoo {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, sc := range rbcScenarios() {
			out, err := sc.write()
			if err != nil {
				t.Fatalf("%s: %v", sc.name, err)
			}
			if err := os.WriteFile(filepath.Join(dir, "cuckoo-"+sc.name+".txt"), []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "cuckoo-*.txt"))
	if len(files) != len(rbcScenarios()) {
		t.Fatalf("%d transcripts in %s, want %d", len(files), dir, len(rbcScenarios()))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			rbcReplay(t, rbcLocalSession(), rbcParseTranscript(data))
		})
	}
}

// rbcReplay plays a transcript and checks each reply; at a load it checks the
// loaded filter against the entries since the last write, then goes on with it.
func rbcReplay(t *testing.T, s *rbcSession, entries []string) {
	var block []string
	check := func(e string) {
		cmd, want, _ := strings.Cut(e, " = ")
		got, err := s.run(cmd)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		if strings.Join(strings.Fields(got), "") != strings.Join(strings.Fields(want), "") {
			t.Fatalf("%s: got %.300s, want %.300s", cmd, got, want)
		}
	}
	loads := 0
	for _, e := range entries {
		if e == "load" {
			chunks, err := rbcTranscriptDump(block)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.load(chunks); err != nil {
				t.Fatalf("load: %v", err)
			}
			for _, b := range block {
				check(b)
			}
			loads++
			continue
		}
		check(e)
		if !rbcReadOnly(e) {
			block = nil
		} else {
			block = append(block, e)
		}
	}
	if loads != 1 || !slices.ContainsFunc(entries, func(e string) bool { return strings.HasPrefix(e, "count absent") }) {
		t.Fatalf("a transcript with %d loads and no absent probes", loads)
	}
}
