package importcmd

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync/atomic"
)

// The input of `rookery import`: files (gunzipped when their name ends in
// .gz) or standard input, read one after the other as one stream of lines.
// Lines are numbered from 1 across all the inputs; --skip N passes over the
// first N lines of that stream, blank ones included, so the number printed on
// an interruption means the same thing on the next run.

// maxLine bounds one line, so that a file without newlines cannot take the
// memory: a node refuses items far shorter (--max-item-size).
const maxLine = 64 << 20

// readBlock is how much one read asks for. One block becomes one string, and
// the items are slices of it: one allocation per block, not one per line.
const readBlock = 1 << 20

// input is one source of lines.
type input struct {
	name string // the file name as given, "-" for standard input
	size int64  // bytes on disk (compressed for .gz), -1 when unknown
}

// batch is a chunk's worth of items, with the number of the line that held
// the last of them.
type batch struct {
	items []string
	line  int64
	err   error
}

// lineSource cuts the inputs into batches of items.
type lineSource struct {
	inputs []input
	stdin  io.Reader
	skip   int64

	line     int64        // lines read so far, across the inputs
	blank    int64        // of which empty (not items)
	read     atomic.Int64 // bytes read from the inputs, for progress
	progLine atomic.Int64 // line, for progress
}

// lineCount is the number of lines read so far, for progress.
func (s *lineSource) lineCount() int64 { return s.progLine.Load() }

// openInputs checks that every named file can be read and returns the inputs
// with their sizes; no names means standard input.
func openInputs(names []string) ([]input, error) {
	if len(names) == 0 {
		names = []string{"-"}
	}
	var out []input
	stdin := false
	for _, n := range names {
		if n == "-" {
			if stdin {
				return nil, errors.New("standard input (-) named twice")
			}
			stdin = true
			out = append(out, input{name: n, size: -1})
			continue
		}
		f, err := os.Open(n)
		if err != nil {
			return nil, err
		}
		st, err := f.Stat()
		f.Close()
		if err != nil {
			return nil, err
		}
		if st.IsDir() {
			return nil, fmt.Errorf("%s is a directory", n)
		}
		size := st.Size()
		if !st.Mode().IsRegular() {
			size = -1
		}
		out = append(out, input{name: n, size: size})
	}
	return out, nil
}

// totalSize is the inputs' bytes, -1 if one of them has no known size.
func totalSize(inputs []input) int64 {
	var n int64
	for _, in := range inputs {
		if in.size < 0 {
			return -1
		}
		n += in.size
	}
	return n
}

// countLines counts the lines of the inputs when they are all plain files
// (ok false otherwise: standard input, or gzip, which would have to be
// decompressed twice). A file larger than countSample is not read through:
// its lines are estimated from its size and the line length of its first
// countSample bytes (exact false), which for keys of one length, as a list
// of phone numbers or hashes, is within a line or two.
func countLines(inputs []input) (n int64, exact, ok bool) {
	buf := make([]byte, countSample)
	exact = true
	for _, in := range inputs {
		if in.size < 0 || isGzip(in.name) {
			return 0, false, false
		}
		f, err := os.Open(in.name)
		if err != nil {
			return 0, false, false
		}
		m, err := io.ReadFull(f, buf)
		f.Close()
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return 0, false, false
		}
		lines := int64(bytes.Count(buf[:m], []byte{'\n'}))
		switch {
		case int64(m) < in.size: // a sample: its whole lines, scaled up
			exact = false
			whole := int64(bytes.LastIndexByte(buf[:m], '\n') + 1)
			if whole == 0 {
				whole, lines = int64(m), 1 // one long line so far
			}
			n += int64(math.Ceil(float64(in.size) * float64(lines) / float64(whole)))
		case m > 0 && buf[m-1] != '\n':
			n += lines + 1 // a last line without its newline
		default:
			n += lines
		}
	}
	return n, exact, true
}

// countSample is how much of a file countLines reads.
const countSample = 4 << 20

func isGzip(name string) bool { return strings.HasSuffix(name, ".gz") }

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// maxBatchBytes cuts a batch of long items short of what a node takes in one
// log entry (16 MiB).
const maxBatchBytes = 8 << 20

// run sends batches of up to size items (and about maxBatchBytes) on out until the inputs end or stop
// is closed, then closes out. A read error is sent as the last batch.
func (s *lineSource) run(size int, out chan<- batch, stop <-chan struct{}) {
	defer close(out)
	cur := make([]string, 0, size)
	held := 0 // bytes of the items in cur
	emit := func(b batch) bool {
		select {
		case out <- b:
			return true
		case <-stop:
			return false
		}
	}
	for _, in := range s.inputs {
		err := s.readInput(in, func(item string) bool {
			cur = append(cur, item)
			if held += len(item); len(cur) < size && held < maxBatchBytes {
				return true
			}
			ok := emit(batch{items: cur, line: s.line})
			cur, held = make([]string, 0, size), 0
			return ok
		})
		if errors.Is(err, errStopped) {
			return
		}
		if err != nil {
			emit(batch{items: cur, line: s.line, err: err})
			return
		}
	}
	if len(cur) > 0 {
		emit(batch{items: cur, line: s.line})
	}
}

var errStopped = errors.New("stopped")

// readInput reads one input, calling item for every line after the first
// s.skip of the stream that is not blank; item returns false to stop.
func (s *lineSource) readInput(in input, item func(string) bool) error {
	var r io.Reader = s.stdin
	if in.name != "-" {
		f, err := os.Open(in.name)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	r = countingReader{r: r, n: &s.read}
	if isGzip(in.name) {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return fmt.Errorf("%s: %w", in.name, err)
		}
		defer zr.Close()
		r = zr
	}
	err := s.lines(r, item)
	if err != nil && !errors.Is(err, errStopped) {
		return fmt.Errorf("%s, line %d: %w", in.name, s.line+1, err)
	}
	return err
}

// lines splits r into lines ("\n" or "\r\n" ends one; the last may have no
// end) and passes on the items among them.
func (s *lineSource) lines(r io.Reader, item func(string) bool) error {
	buf := make([]byte, 0, readBlock)
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= maxLine {
				return fmt.Errorf("a line longer than %d bytes", maxLine)
			}
			buf = append(buf, 0)[:len(buf)]
		}
		m, err := r.Read(buf[len(buf):cap(buf)])
		old := len(buf)
		buf = buf[:old+m]
		// Only the new bytes can hold a newline: the older ones had none.
		end := 0
		if i := bytes.LastIndexByte(buf[old:], '\n'); i >= 0 {
			end = old + i + 1
		}
		if err == io.EOF && end < len(buf) {
			buf = append(buf, '\n') // the last line, without its newline
			end = len(buf)
		}
		if end > 0 {
			if !s.block(string(buf[:end]), item) {
				return errStopped
			}
			rest := copy(buf, buf[end:])
			buf = buf[:rest]
			if cap(buf) > 2*readBlock && rest < readBlock {
				buf = append(make([]byte, 0, readBlock), buf...)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// block passes on the items of whole lines, each ending in "\n".
func (s *lineSource) block(text string, item func(string) bool) bool {
	for len(text) > 0 {
		i := strings.IndexByte(text, '\n')
		line := text[:i]
		text = text[i+1:]
		s.line++
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		switch {
		case s.line <= s.skip:
		case line == "":
			s.blank++
		case !item(line):
			s.progLine.Store(s.line)
			return false
		}
	}
	s.progLine.Store(s.line)
	return true
}
