// Package wire holds the small pieces the project's binary codecs share: a
// byte-slice reader whose first error sticks (later reads return zero values,
// so a decoder checks once at the end), and readers and writers that count
// the bytes through them.
package wire

import (
	"encoding/binary"
	"io"
	"math"

	"github.com/rookerydb/rookery/internal/errdetail"
)

// Reader reads varints and fixed fields from a byte slice. The first failure
// is kept, wrapping Corrupt with what was wrong, and ends the input.
type Reader struct {
	B       []byte // what is left to read
	Corrupt error  // the sentinel failures wrap
	Prefix  string // put before each failure's words ("params: ")
	err     error
}

// NewReader reads b, failing with errors that wrap corrupt.
func NewReader(b []byte, corrupt error) *Reader { return &Reader{B: b, Corrupt: corrupt} }

// Err is the first failure, or nil.
func (r *Reader) Err() error { return r.err }

// SetErr keeps err as the failure unless one is kept already, and ends the
// input.
func (r *Reader) SetErr(err error) {
	if r.err == nil {
		r.err = err
	}
	r.B = nil
}

// Fail fails with what was wrong.
func (r *Reader) Fail(what string) {
	if r.err == nil {
		r.SetErr(errdetail.New(r.Corrupt, "%s%s", r.Prefix, what))
	}
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if len(r.B) < 1 {
		r.Fail("short input")
		return 0
	}
	v := r.B[0]
	r.B = r.B[1:]
	return v
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	v, n := binary.Uvarint(r.B)
	if n <= 0 {
		r.Fail("bad uvarint")
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Varint reads a signed varint.
func (r *Reader) Varint() int64 {
	v, n := binary.Varint(r.B)
	if n <= 0 {
		r.Fail("bad varint")
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Count reads a length or element count; it can never exceed the bytes
// left, since every element takes at least one byte.
func (r *Reader) Count() int {
	v := r.Uvarint()
	if v > uint64(len(r.B)) {
		r.Fail("count past the end of the input")
		return 0
	}
	return int(v)
}

// Bytes reads n bytes (sharing the input, with no room to append into it).
func (r *Reader) Bytes(n int) []byte {
	if n < 0 || n > len(r.B) {
		r.Fail("short input")
		return nil
	}
	v := r.B[:n:n]
	r.B = r.B[n:]
	return v
}

// Float64 reads a little-endian IEEE 754 double.
func (r *Reader) Float64() float64 {
	if len(r.B) < 8 {
		r.Fail("short float")
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(r.B))
	r.B = r.B[8:]
	return v
}

// CountReader counts the bytes read through it and notes an early end of
// input.
type CountReader struct {
	R   io.Reader
	N   int64
	EOF bool // the underlying reader said io.EOF
}

// Read reads from R, counting.
func (c *CountReader) Read(p []byte) (int, error) {
	n, err := c.R.Read(p)
	c.N += int64(n)
	if err == io.EOF {
		c.EOF = true
	}
	return n, err
}

// ReadByte reads one byte from R, which must be an io.ByteReader.
func (c *CountReader) ReadByte() (byte, error) {
	b, err := c.R.(io.ByteReader).ReadByte()
	if err == nil {
		c.N++
	} else if err == io.EOF {
		c.EOF = true
	}
	return b, err
}

// CountWriter counts the bytes written through it.
type CountWriter struct {
	W io.Writer
	N int64
}

// Write writes to W, counting.
func (c *CountWriter) Write(p []byte) (int, error) {
	n, err := c.W.Write(p)
	c.N += int64(n)
	return n, err
}
