package importcmd

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// splitLines is the reference: the items of text after skip lines, the line
// count and the blank count, as `rookery import` documents them.
func splitLines(text string, skip int64) (items []string, lines, blank int64) {
	if text == "" {
		return nil, 0, 0
	}
	parts := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for _, p := range parts {
		lines++
		p = strings.TrimSuffix(p, "\r")
		switch {
		case lines <= skip:
		case p == "":
			blank++
		default:
			items = append(items, p)
		}
	}
	return items, lines, blank
}

// collect runs a lineSource over stdin, cut into batches of size, and
// returns the items, checking that each batch's line is that of its last
// item.
func collect(t *testing.T, s *lineSource, size int) []string {
	t.Helper()
	out := make(chan batch, 1)
	go s.run(size, out, make(chan struct{}))
	var items []string
	for b := range out {
		if b.err != nil {
			t.Fatal(b.err)
		}
		if len(b.items) > size || len(b.items) == 0 {
			t.Fatalf("a batch of %d items, size %d", len(b.items), size)
		}
		items = append(items, b.items...)
	}
	return items
}

func checkSplit(t *testing.T, text string, skip int64, size int, wrap func([]byte) *bytes.Reader) {
	t.Helper()
	want, lines, blank := splitLines(text, skip)
	for _, r := range []interface {
		Read([]byte) (int, error)
	}{wrap([]byte(text)), iotest.OneByteReader(wrap([]byte(text))), iotest.HalfReader(wrap([]byte(text)))} {
		s := &lineSource{inputs: []input{{name: "-", size: -1}}, stdin: r, skip: skip}
		got := collect(t, s, size)
		if !reflect.DeepEqual(got, want) || s.line != lines || s.blank != blank {
			t.Fatalf("%q skip %d: got %q, %d lines, %d blank; want %q, %d, %d", text, skip, got, s.line, s.blank, want, lines, blank)
		}
	}
}

// TestLineSource: lines end in \n or \r\n, the last may end in neither,
// blank lines are counted and passed over, --skip counts every line, and
// reads of any size give the same items.
func TestLineSource(t *testing.T) {
	for _, tc := range []struct {
		text string
		skip int64
	}{
		{"", 0}, {"a", 0}, {"a\n", 0}, {"a\nb", 0}, {"a\r\nb\r\n", 0}, {"\n\n", 0}, {"a\n\nb\n\n", 1},
		{"a\nb\nc\n", 2}, {"a\nb\nc", 5}, {"a b\t\n\r\n", 0}, {"\r", 0}, {"x\r\r\n", 0},
	} {
		checkSplit(t, tc.text, tc.skip, 2, bytes.NewReader)
	}
	// Lines across the reader's blocks.
	long := strings.Repeat("0123456789abcde\n", readBlock/8) + strings.Repeat("y", readBlock+3)
	checkSplit(t, long, 7, 5000, bytes.NewReader)
}

// TestLineSourceFiles: files and gzip files in turn, one stream of lines
// numbered across them; a damaged gzip file is an error naming it.
func TestLineSourceFiles(t *testing.T) {
	dir := t.TempDir()
	plain, gz, bad := filepath.Join(dir, "a"), filepath.Join(dir, "b.gz"), filepath.Join(dir, "c.gz")
	if err := os.WriteFile(plain, []byte("a1\na2"), 0o600); err != nil {
		t.Fatal(err)
	}
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write([]byte("b1\n\nb2\n"))
	zw.Close()
	if err := os.WriteFile(gz, zb.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, zb.Bytes()[:zb.Len()-6], 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := openInputs([]string{plain, gz})
	if err != nil {
		t.Fatal(err)
	}
	s := &lineSource{inputs: in, skip: 1}
	if got := collect(t, s, 10); !reflect.DeepEqual(got, []string{"a2", "b1", "b2"}) || s.line != 5 || s.blank != 1 {
		t.Errorf("got %q, %d lines, %d blank", got, s.line, s.blank)
	}
	if n, _, ok := countLines(in); ok {
		t.Errorf("countLines counted %d lines of a gzip file", n)
	}
	if n, exact, ok := countLines(in[:1]); !ok || !exact || n != 2 {
		t.Errorf("countLines = %d, %v, %v; want 2, exact", n, exact, ok)
	}
	// A large file of keys of one length: estimated from its size, within a
	// line of the truth.
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("0123456789abcdef\n"), 1000000), 0o600); err != nil {
		t.Fatal(err)
	}
	in, _ = openInputs([]string{big, plain})
	if n, exact, ok := countLines(in); !ok || exact || n < 1000001 || n > 1000003 {
		t.Errorf("countLines of 1000000 + 2 lines = %d, %v, %v", n, exact, ok)
	}
	in, _ = openInputs([]string{plain, bad})
	out := make(chan batch, 4)
	go (&lineSource{inputs: in}).run(10, out, make(chan struct{}))
	var last batch
	for b := range out {
		last = b
	}
	if last.err == nil || !strings.Contains(last.err.Error(), "c.gz") {
		t.Errorf("a damaged gzip file: %v", last.err)
	}
	if _, err := openInputs([]string{"-", "-"}); err == nil {
		t.Error("standard input twice was accepted")
	}
	if _, err := openInputs([]string{dir}); err == nil {
		t.Error("a directory was accepted")
	}
}

// FuzzLineSource: any input, read in any pieces, splits as the reference
// does.
func FuzzLineSource(f *testing.F) {
	for _, s := range []string{"", "a\nb", "a\r\n\r\nb\r", "\n\n\n", "x\ry\r\n"} {
		f.Add(s, int64(1), 3)
	}
	f.Fuzz(func(t *testing.T, text string, skip int64, size int) {
		if skip < 0 || size < 1 || size > 100 {
			return
		}
		checkSplit(t, text, skip, size, bytes.NewReader)
	})
}
