package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/rookerydb/rookery/filters"
)

// A log entry is [Type][CodecVersion][payload], and from version 2 on a CRC-32C
// of all of that (see CodecVersion), checked before anything is decoded. The
// payload of a TypeCommand is one command; of a TypeBatch, a count followed by
// length-prefixed commands.
//
// A command is plain encoding/binary with varints, in this order:
//
//	op, family, flags                       3 bytes
//	key                                     uvarint length, bytes
//	time                                    varint (Unix ns, stamped by the leader)
//	session  (flagSession)                  uvarint client id, uvarint seq
//	spec     (flagSpec)                     kind, uvarint capacity, 8-byte error
//	                                        rate, uvarint expansion, uvarint bucket
//	                                        size, uvarint max iterations,
//	                                        fingerprint bits, counter bits
//	keys                                    uvarint count, each uvarint length, bytes
//	items                                   uvarint count, each uvarint length, bytes
//	iter, data (flagChunk)                  varint, uvarint length, bytes
//
// Decoders check every length against the bytes that remain, so hostile input
// can neither panic nor make them allocate more than the input's size.

// Errors of the codec.
var (
	// ErrCorrupt reports an entry or result that cannot be decoded.
	ErrCorrupt = errors.New("fsm: corrupt encoding")
	// ErrChecksum reports an entry whose checksum does not match its bytes: it
	// was damaged after it was written. It wraps ErrCorrupt.
	ErrChecksum = fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
)

// entryTrailer is the size of a version 2 entry's checksum.
const entryTrailer = 4

const (
	flagNoCreate   = 1 << 0
	flagNX         = 1 << 1
	flagMulti      = 1 << 2
	flagSpec       = 1 << 3
	flagSession    = 1 << 4
	flagChunk      = 1 << 5
	flagNonScaling = 1 << 6

	flagsKnown = 1<<7 - 1
)

// lastOp is the highest Op this build knows.
const lastOp = OpLoadChunk

// EncodeCommand returns c as a TypeCommand log entry of the current version.
func EncodeCommand(c *Command) []byte { return EncodeCommandVersion(c, CodecVersion) }

// EncodeBatch returns cs as one TypeBatch log entry of the current version;
// applying it applies them in order and yields one Result each.
func EncodeBatch(cs []*Command) []byte { return EncodeBatchVersion(cs, CodecVersion) }

// EncodeCommandVersion returns c as a TypeCommand log entry of codec version v
// (CodecV1 or CodecV2).
func EncodeCommandVersion(c *Command, v byte) []byte {
	b := make([]byte, 0, 2+commandSize(c)+entryTrailer)
	b = append(b, byte(TypeCommand), v)
	return sealEntry(appendCommand(b, c))
}

// EncodeBatchVersion returns cs as one TypeBatch log entry of codec version v.
func EncodeBatchVersion(cs []*Command, v byte) []byte {
	size := 2 + binary.MaxVarintLen64 + entryTrailer
	for _, c := range cs {
		size += binary.MaxVarintLen64 + commandSize(c)
	}
	b := make([]byte, 0, size)
	b = append(b, byte(TypeBatch), v)
	b = binary.AppendUvarint(b, uint64(len(cs)))
	for _, c := range cs {
		b = binary.AppendUvarint(b, uint64(commandSize(c)))
		at := len(b)
		b = appendCommand(b, c)
		if len(b)-at != commandSize(c) {
			panic("fsm: command size mismatch")
		}
	}
	return sealEntry(b)
}

// EncodeNoop returns an entry that applies nothing (tests, and proposals that
// must only reach the log).
func EncodeNoop(v byte) []byte { return sealEntry([]byte{byte(TypeNoop), v}) }

// sealEntry appends the checksum a version 2 entry ends with.
func sealEntry(b []byte) []byte {
	if b[1] < CodecV2 {
		return b
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// openEntry checks an entry's checksum and returns its payload. Entries of
// version 1 carry none.
func openEntry(data []byte) ([]byte, error) {
	if data[1] < CodecV2 {
		return data[2:], nil
	}
	if len(data) < 2+entryTrailer {
		return nil, fmt.Errorf("%w: entry of %d bytes", ErrCorrupt, len(data))
	}
	body, sum := data[:len(data)-entryTrailer], data[len(data)-entryTrailer:]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(sum) {
		return nil, ErrChecksum
	}
	return body[2:], nil
}

// DecodeEntry decodes a log entry. A TypeNoop entry, or an unknown type marked
// with IgnoreUnknownFlag, decodes to no commands.
func DecodeEntry(data []byte) (Type, []*Command, error) {
	if len(data) < 2 {
		return 0, nil, fmt.Errorf("%w: entry of %d bytes", ErrCorrupt, len(data))
	}
	t := Type(data[0])
	if data[1] < CodecV1 || data[1] > CodecVersion {
		if t&IgnoreUnknownFlag != 0 {
			return t, nil, nil
		}
		return t, nil, fmt.Errorf("%w: codec version %d", ErrCorrupt, data[1])
	}
	payload, err := openEntry(data)
	if err != nil {
		return t, nil, err
	}
	d := decoder{b: payload}
	var cs []*Command
	switch t {
	case TypeNoop:
		return t, nil, nil
	case TypeCommand:
		c := d.command()
		cs = []*Command{c}
	case TypeBatch:
		n := d.count()
		cs = make([]*Command, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			size := d.count()
			sub := decoder{b: d.bytes(size)}
			if d.err != nil {
				break
			}
			c := sub.command()
			if sub.err == nil && len(sub.b) != 0 {
				sub.fail("trailing bytes in a batched command")
			}
			if sub.err != nil {
				d.err = sub.err
				break
			}
			cs = append(cs, c)
		}
	default:
		if t&IgnoreUnknownFlag != 0 {
			return t, nil, nil
		}
		return t, nil, fmt.Errorf("%w: unknown entry type %d", ErrCorrupt, t)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return t, nil, d.err
	}
	return t, cs, nil
}

func commandSize(c *Command) int {
	n := 3 + uvarintLen(uint64(len(c.Key))) + len(c.Key) + varintLen(c.Time)
	if c.Session != (Session{}) {
		n += uvarintLen(c.Session.ClientID) + uvarintLen(c.Session.Seq)
	}
	if c.Spec != (Spec{}) {
		s := c.Spec
		n += 1 + uvarintLen(s.Capacity) + 8 + uvarintLen(uint64(s.Expansion)) +
			uvarintLen(uint64(s.BucketSize)) + uvarintLen(uint64(s.MaxIterations)) + 2
	}
	n += uvarintLen(uint64(len(c.Keys)))
	for _, k := range c.Keys {
		n += uvarintLen(uint64(len(k))) + len(k)
	}
	n += uvarintLen(uint64(len(c.Items)))
	for _, it := range c.Items {
		n += uvarintLen(uint64(len(it))) + len(it)
	}
	if hasChunk(c) {
		n += varintLen(c.Iter) + uvarintLen(uint64(len(c.Data))) + len(c.Data)
	}
	return n
}

func hasChunk(c *Command) bool { return c.Iter != 0 || len(c.Data) != 0 }

func appendCommand(b []byte, c *Command) []byte {
	var flags byte
	set := func(cond bool, f byte) {
		if cond {
			flags |= f
		}
	}
	set(c.NoCreate, flagNoCreate)
	set(c.NX, flagNX)
	set(c.Multi, flagMulti)
	set(c.Spec != (Spec{}), flagSpec)
	set(c.Session != (Session{}), flagSession)
	set(hasChunk(c), flagChunk)
	set(c.Spec.NonScaling, flagNonScaling)
	b = append(b, byte(c.Op), byte(c.Family), flags)
	b = appendString(b, c.Key)
	b = binary.AppendVarint(b, c.Time)
	if flags&flagSession != 0 {
		b = binary.AppendUvarint(b, c.Session.ClientID)
		b = binary.AppendUvarint(b, c.Session.Seq)
	}
	if flags&flagSpec != 0 {
		s := c.Spec
		b = append(b, byte(s.Kind))
		b = binary.AppendUvarint(b, s.Capacity)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.ErrorRate))
		b = binary.AppendUvarint(b, uint64(s.Expansion))
		b = binary.AppendUvarint(b, uint64(s.BucketSize))
		b = binary.AppendUvarint(b, uint64(s.MaxIterations))
		b = append(b, s.FingerprintBits, s.CounterBits)
	}
	b = binary.AppendUvarint(b, uint64(len(c.Keys)))
	for _, k := range c.Keys {
		b = appendString(b, k)
	}
	b = binary.AppendUvarint(b, uint64(len(c.Items)))
	for _, it := range c.Items {
		b = binary.AppendUvarint(b, uint64(len(it)))
		b = append(b, it...)
	}
	if flags&flagChunk != 0 {
		b = binary.AppendVarint(b, c.Iter)
		b = binary.AppendUvarint(b, uint64(len(c.Data)))
		b = append(b, c.Data...)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decoder reads a payload; the first error sticks and later reads return zero
// values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail("short input")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length or element count; it can never exceed the bytes left,
// since every element takes at least one byte.
func (d *decoder) count() int {
	v := d.uvarint()
	if v > uint64(len(d.b)) {
		d.fail("count past the end of the input")
		return 0
	}
	return int(v)
}

func (d *decoder) bytes(n int) []byte {
	if n > len(d.b) {
		d.fail("short input")
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) uint16() uint16 {
	v := d.uvarint()
	if v > math.MaxUint16 {
		d.fail("value out of range")
	}
	return uint16(v)
}

func (d *decoder) command() *Command {
	c := &Command{}
	c.Op = Op(d.byte())
	c.Family = Family(d.byte())
	flags := d.byte()
	if d.err != nil {
		return nil
	}
	if c.Op == 0 || c.Op > lastOp {
		d.fail(fmt.Sprintf("unknown op %d", c.Op))
		return nil
	}
	if c.Family > FamilyCBF {
		d.fail(fmt.Sprintf("unknown family %d", c.Family))
		return nil
	}
	if flags&^flagsKnown != 0 {
		d.fail("unknown flags")
		return nil
	}
	c.NoCreate = flags&flagNoCreate != 0
	c.NX = flags&flagNX != 0
	c.Multi = flags&flagMulti != 0
	c.Key = string(d.bytes(d.count()))
	c.Time = d.varint()
	if flags&flagSession != 0 {
		c.Session.ClientID = d.uvarint()
		c.Session.Seq = d.uvarint()
	}
	if flags&flagSpec != 0 {
		s := &c.Spec
		s.Kind = filters.Kind(d.byte())
		s.Capacity = d.uvarint()
		rate := d.bytes(8)
		if len(rate) == 8 {
			s.ErrorRate = math.Float64frombits(binary.LittleEndian.Uint64(rate))
		}
		exp := d.uvarint()
		if exp > math.MaxUint32 {
			d.fail("expansion out of range")
		}
		s.Expansion = uint32(exp)
		s.BucketSize = d.uint16()
		s.MaxIterations = d.uint16()
		s.FingerprintBits = d.byte()
		s.CounterBits = d.byte()
		s.NonScaling = flags&flagNonScaling != 0
	} else if flags&flagNonScaling != 0 {
		d.fail("nonscaling flag without a spec")
	}
	if n := d.count(); n > 0 {
		c.Keys = make([]string, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			c.Keys = append(c.Keys, string(d.bytes(d.count())))
		}
	}
	if n := d.count(); n > 0 {
		c.Items = make([][]byte, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			c.Items = append(c.Items, d.bytes(d.count()))
		}
	}
	if flags&flagChunk != 0 {
		c.Iter = d.varint()
		c.Data = d.bytes(d.count())
	}
	if d.err != nil {
		return nil
	}
	return c
}

// Result encoding (a forwarded write's reply): error code, flags, uvarint count,
// zig-zag varints.

// resultErrs numbers the domain outcomes on the wire. Codes are never reused.
var resultErrs = []error{
	nil, ErrNotFound, ErrExists, ErrWrongType, ErrFull, ErrMaxExpansions,
	ErrNonScalingFull, ErrBadPosition, ErrBadData, ErrBadSpec, ErrSessionExpired,
}

const resultStopped = 1 << 0

// EncodeResult encodes r for the wire.
func EncodeResult(r *Result) []byte {
	code := -1
	for i, e := range resultErrs {
		if r.Err == e {
			code = i
			break
		}
	}
	if code < 0 {
		// Only the package's own outcomes are results; anything else is a bug.
		panic(fmt.Sprintf("fsm: result error %v is not a domain outcome", r.Err))
	}
	var flags byte
	if r.Stopped {
		flags |= resultStopped
	}
	b := make([]byte, 0, 3+len(r.Ints)*2)
	b = append(b, byte(code), flags)
	b = binary.AppendUvarint(b, uint64(len(r.Ints)))
	for _, v := range r.Ints {
		b = binary.AppendVarint(b, v)
	}
	return b
}

// DecodeResult decodes what EncodeResult produced.
func DecodeResult(data []byte) (*Result, error) {
	d := decoder{b: data}
	code := d.byte()
	flags := d.byte()
	n := d.count()
	if d.err != nil {
		return nil, d.err
	}
	if int(code) >= len(resultErrs) {
		return nil, fmt.Errorf("%w: unknown result code %d", ErrCorrupt, code)
	}
	if flags&^resultStopped != 0 {
		return nil, fmt.Errorf("%w: unknown result flags", ErrCorrupt)
	}
	r := &Result{Err: resultErrs[code], Stopped: flags&resultStopped != 0}
	if n > 0 {
		r.Ints = make([]int64, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			r.Ints = append(r.Ints, d.varint())
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, d.err
	}
	return r, nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func varintLen(v int64) int {
	u := uint64(v) << 1
	if v < 0 {
		u = ^u
	}
	return uvarintLen(u)
}
