package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
)

var errCorrupt = errors.New("corrupt")

func TestReaderFirstFailureSticks(t *testing.T) {
	b := binary.AppendUvarint(nil, 300)
	b = binary.AppendVarint(b, -5)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(0.25))
	b = append(b, 7, 2, 'h', 'i')
	r := NewReader(b, errCorrupt)
	if r.Uvarint() != 300 || r.Varint() != -5 || r.Float64() != 0.25 || r.Byte() != 7 {
		t.Fatal("values read back wrong")
	}
	if n := r.Count(); n != 2 || string(r.Bytes(n)) != "hi" || r.Err() != nil || len(r.B) != 0 {
		t.Fatalf("count and bytes: %v", r.Err())
	}
	// Past the end: the first failure is kept, later reads are zero.
	if r.Byte() != 0 || r.Uvarint() != 0 || !errors.Is(r.Err(), errCorrupt) || !strings.Contains(r.Err().Error(), "short input") {
		t.Fatalf("after the end: %v", r.Err())
	}
	// A count larger than what is left fails at once.
	r = NewReader(binary.AppendUvarint(nil, 10), errCorrupt)
	r.Prefix = "params: "
	if r.Count() != 0 || r.Err() == nil || r.Err().Error() != "corrupt: params: count past the end of the input" {
		t.Fatalf("count: %v", r.Err())
	}
	r = NewReader([]byte{0xff, 0xff}, errCorrupt)
	if r.Uvarint(); r.Err() == nil || r.Bytes(1) != nil {
		t.Fatal("a truncated varint was read")
	}
}

func TestCounters(t *testing.T) {
	cr := &CountReader{R: bufio.NewReader(strings.NewReader("abcd"))}
	if b, _ := cr.ReadByte(); b != 'a' {
		t.Fatal("ReadByte")
	}
	rest, _ := io.ReadAll(cr)
	if string(rest) != "bcd" || cr.N != 4 || !cr.EOF {
		t.Fatalf("read %q, counted %d, eof %v", rest, cr.N, cr.EOF)
	}
	var buf bytes.Buffer
	cw := &CountWriter{W: &buf}
	io.WriteString(cw, "hello")
	if cw.N != 5 || buf.String() != "hello" {
		t.Fatalf("wrote %q, counted %d", buf.String(), cw.N)
	}
}
