package logengine

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// codecVersion is the first byte of every encoded log entry, so that a later
// layout can be told apart from this one.
const codecVersion = 1

// crcSize is the length of the CRC-32C that closes every encoded entry.
const crcSize = 4

// castagnoli is the CRC-32C table; most CPUs compute it in hardware.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeLog encodes a Raft log entry as a stored value. The index is not part
// of the value: it lives in the key. The layout is
//
//	version byte 1 | uvarint term | type byte |
//	uvarint len | data | uvarint len | extensions |
//	varint AppendedAt in Unix nanoseconds (0 for the zero time) |
//	CRC-32C (Castagnoli) of all the bytes before it, 4 bytes big-endian
func EncodeLog(l *raft.Log) []byte {
	return appendLog(nil, l)
}

// appendLog appends the encoding of l to b, so that a writer can reuse one
// buffer for many entries.
func appendLog(b []byte, l *raft.Log) []byte {
	b = slices.Grow(b, 1+4*binary.MaxVarintLen64+1+len(l.Data)+len(l.Extensions)+crcSize)
	start := len(b)
	b = append(b, codecVersion)
	b = binary.AppendUvarint(b, l.Term)
	b = append(b, byte(l.Type))
	b = binary.AppendUvarint(b, uint64(len(l.Data)))
	b = append(b, l.Data...)
	b = binary.AppendUvarint(b, uint64(len(l.Extensions)))
	b = append(b, l.Extensions...)
	var nanos int64
	if !l.AppendedAt.IsZero() {
		nanos = l.AppendedAt.UnixNano()
	}
	b = binary.AppendVarint(b, nanos)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// DecodeLog decodes a value written by EncodeLog into out, setting out.Index
// to index. It never panics: a value that fails its CRC, is cut short, has
// bytes left over or is not in the canonical form EncodeLog writes yields an
// error wrapping ErrDamaged and leaves out unchanged.
// Data and Extensions are copied, so b may be reused afterwards.
func DecodeLog(index uint64, b []byte, out *raft.Log) error {
	damaged := func(what string) error {
		return fmt.Errorf("log entry %d: %s: %w", index, what, ErrDamaged)
	}
	if len(b) < 1+crcSize {
		return damaged(fmt.Sprintf("value of %d bytes is too short", len(b)))
	}
	body, sum := b[:len(b)-crcSize], binary.BigEndian.Uint32(b[len(b)-crcSize:])
	if crc32.Checksum(body, castagnoli) != sum {
		return damaged("crc mismatch")
	}
	if body[0] != codecVersion {
		return damaged(fmt.Sprintf("unknown version %d", body[0]))
	}
	d := decoder{b: body[1:]}
	term := d.uvarint()
	typ := d.byte()
	data := d.bytes()
	ext := d.bytes()
	nanos := d.varint()
	if d.failed {
		return damaged("truncated or malformed value")
	}
	if len(d.b) != 0 {
		return damaged(fmt.Sprintf("%d unexpected trailing bytes", len(d.b)))
	}
	*out = raft.Log{Index: index, Term: term, Type: raft.LogType(typ), Data: data, Extensions: ext}
	if nanos != 0 {
		out.AppendedAt = time.Unix(0, nanos)
	}
	return nil
}

// decoder reads fields off the front of b. After the first failure it sets
// failed and returns zero values, so callers check once at the end.
type decoder struct {
	b      []byte
	failed bool
}

func (d *decoder) byte() byte {
	if d.failed || len(d.b) == 0 {
		d.failed = true
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// uvarint reads a uvarint and rejects non-minimal encodings, so that every
// value that decodes re-encodes to the same bytes.
func (d *decoder) uvarint() uint64 {
	if d.failed {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || n != uvarintLen(v) {
		d.failed = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

// varint is uvarint for zig-zag encoded signed values.
func (d *decoder) varint() int64 {
	if d.failed {
		return 0
	}
	v, n := binary.Varint(d.b)
	zigzag := uint64(v) << 1
	if v < 0 {
		zigzag = ^zigzag
	}
	if n <= 0 || n != uvarintLen(zigzag) {
		d.failed = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bytes reads a length-prefixed byte string and returns a copy of it (nil
// when empty).
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.failed || n > uint64(len(d.b)) {
		d.failed = true
		return nil
	}
	var out []byte
	if n > 0 {
		out = append([]byte(nil), d.b[:n]...)
	}
	d.b = d.b[n:]
	return out
}

// uvarintLen is the number of bytes binary.AppendUvarint writes for v.
func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}
