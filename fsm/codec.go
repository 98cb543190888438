package fsm

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/internal/wire"
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
//	fields (version 3 on)                   uvarint count, each uvarint key,
//	                                        uvarint length, bytes
//
// Known fields (each must be understood, and only the op named carries it):
//
//	1  max filters (format 5, a CF OpAdd)   uvarint MaxFilters, 1 to 65535
//	2  window (format 6, a command with a   uvarint Spec.Window (its int64 bits),
//	   spec of a windowed filter)           uvarint Spec.Last; not both zero
//	16 expire (format 5, OpExpire)          conditions byte (ExpireCond in bits
//	                                        0-3, bit 4 set when ExpireAt),
//	                                        varint Expire
//	17 memory limit (format 6, any op)      uvarint MemLimit, above 0
//	18 watch (format 10, OpExec)            uvarint count (as many as keys),
//	                                        uvarint Watch index each
//
// An OpExec's commands travel as its items, each one command encoded as
// above (without a session, never an OpExec itself); OpTest and OpCount
// appear only there.
//
// Fields are how a command grows without a new layout: a field's key is its tag
// shifted left by one, the low bit set when a node must understand the field to
// apply the command (fieldMust). Tags are strictly ascending. A node skips a
// field it does not know unless that bit is set; then, as for an op, family or
// flag it does not know in an entry whose checksum matches, it refuses the
// entry with a *FormatError (it needs a newer build), never with ErrCorrupt.
// A build that adds a field older nodes may not ignore, or an op, raises
// CodecVersion, and the leader writes it only once every member reads it.
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
	// ErrNewerFormat reports an intact entry that a newer build wrote and this
	// node cannot apply: every *FormatError is one. It is not ErrCorrupt.
	ErrNewerFormat = errors.New("fsm: log entry needs a newer build")
)

// FormatError is an intact entry this node cannot apply: of a log format above
// the highest it reads, or holding an op, family, flag or must-understand
// field it does not know. Upgrading the node is the cure; nothing is damaged.
type FormatError struct {
	Format byte   // the entry's log format (codec version)
	Max    byte   // the highest log format this node reads
	What   string // what it does not know, "" when it is the format itself
}

func (e *FormatError) Error() string { return "log entry needs a newer rookery (" + e.Detail() + ")" }

// Detail says what was not understood: "log format 3; this node reads up to 2".
func (e *FormatError) Detail() string {
	what := ""
	if e.What != "" {
		what = ", " + e.What
	}
	return fmt.Sprintf("log format %d%s; this node reads up to %d", e.Format, what, e.Max)
}

// Is makes every FormatError match ErrNewerFormat.
func (e *FormatError) Is(target error) bool { return target == ErrNewerFormat }

// fieldMust is the bit of a field's key that says it may not be ignored.
const fieldMust = 1

// field is one tagged value of a command (version 3 on); knownField says
// which tags a node understands.
type field struct {
	tag  uint64
	must bool
	val  []byte
}

// Field tags this build knows.
const (
	tagMaxFilters = 1  // Command.MaxFilters (log format 5)
	tagWindow     = 2  // Spec.Window and Spec.Last (log format 6)
	tagExpire     = 16 // OpExpire's deadline and conditions (log format 5)
	tagMemLimit   = 17 // Command.MemLimit (log format 7)
	tagWatch      = 18 // OpExec's Watch (log format 10)

	expireAbsolute = 1 << 4 // the expire field's bit for ExpireAt
)

// knownField reports whether a node that reads log formats up to max
// understands field tag: a field is known from the format that introduced it.
func knownField(tag uint64, max byte) bool {
	switch tag {
	case tagExpire, tagMaxFilters:
		return max >= CodecV5
	case tagWindow:
		return max >= CodecV6
	case tagMemLimit:
		return max >= CodecV7
	case tagWatch:
		return max >= CodecV10
	}
	return false
}

// ownFields is room for a command's own fields and their values, so that
// encoding the usual command allocates nothing for them.
type ownFields struct {
	fs  [4]field
	buf [4 * (2*binary.MaxVarintLen64 + 1)]byte
}

// commandFields returns the fields c's own values travel in merged with
// extra (tests write fields this build does not know with it), tags
// ascending, held in own unless extra needs more room.
func commandFields(c *Command, extra []field, own *ownFields) []field {
	window := c.Spec.Window != 0 || c.Spec.Last != 0
	if c.Op != OpExpire && c.Op != OpExec && c.MaxFilters == 0 && c.MemLimit == 0 && !window {
		return extra
	}
	fs, buf := own.fs[:0], own.buf[:0]
	put := func(tag uint64, val []byte) {
		fs = append(fs, field{tag: tag, must: true, val: val})
	}
	if c.MaxFilters != 0 {
		at := len(buf)
		buf = binary.AppendUvarint(buf, uint64(c.MaxFilters))
		put(tagMaxFilters, buf[at:len(buf):len(buf)])
	}
	if window {
		at := len(buf)
		buf = binary.AppendUvarint(buf, uint64(c.Spec.Window))
		buf = binary.AppendUvarint(buf, c.Spec.Last)
		put(tagWindow, buf[at:len(buf):len(buf)])
	}
	if c.Op == OpExpire {
		cond := byte(c.ExpireIf)
		if c.ExpireAt {
			cond |= expireAbsolute
		}
		at := len(buf)
		buf = binary.AppendVarint(append(buf, cond), c.Expire)
		put(tagExpire, buf[at:len(buf):len(buf)])
	}
	if c.MemLimit != 0 {
		at := len(buf)
		buf = binary.AppendUvarint(buf, c.MemLimit)
		put(tagMemLimit, buf[at:len(buf):len(buf)])
	}
	if c.Op == OpExec {
		w := binary.AppendUvarint(nil, uint64(len(c.Watch)))
		for _, i := range c.Watch {
			w = binary.AppendUvarint(w, i)
		}
		put(tagWatch, w)
	}
	if len(extra) == 0 {
		return fs // already in tag order
	}
	n := len(fs)
	for _, f := range extra {
		if slices.ContainsFunc(fs[:n], func(o field) bool { return o.tag == f.tag }) {
			continue // the command's own value wins
		}
		fs = append(fs, f)
	}
	slices.SortStableFunc(fs, func(a, b field) int { return cmp.Compare(a.tag, b.tag) })
	return fs
}

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
const lastOp = OpACLRestore

// EncodeCommand returns c as a TypeCommand log entry of the current version.
func EncodeCommand(c *Command) []byte { return EncodeCommandVersion(c, CodecVersion) }

// EncodeBatch returns cs as one TypeBatch log entry of the current version;
// applying it applies them in order and yields one Result each.
func EncodeBatch(cs []*Command) []byte { return EncodeBatchVersion(cs, CodecVersion) }

// EncodeCommandVersion returns c as a TypeCommand log entry of codec version v
// (CodecV1 to CodecVersion).
func EncodeCommandVersion(c *Command, v byte) []byte { return encodeCommandFields(c, v, nil) }

// encodeCommandFields encodes c with fields (version 3 on; tests use it to
// write fields this build does not know).
func encodeCommandFields(c *Command, v byte, extra []field) []byte {
	c = wireForm(c, v)
	var own ownFields
	fields := commandFields(c, extra, &own)
	b := make([]byte, 0, 2+commandSize(c, v, fields)+entryTrailer)
	b = append(b, byte(TypeCommand), v)
	return sealEntry(appendCommand(b, c, v, fields))
}

// EncodeBatchVersion returns cs as one TypeBatch log entry of codec version v.
func EncodeBatchVersion(cs []*Command, v byte) []byte {
	size := 2 + binary.MaxVarintLen64 + entryTrailer
	var own ownFields
	if slices.ContainsFunc(cs, func(c *Command) bool { return c.Op == OpExec }) {
		wired := make([]*Command, len(cs))
		for i, c := range cs {
			wired[i] = wireForm(c, v)
		}
		cs = wired
	}
	for _, c := range cs {
		size += binary.MaxVarintLen64 + commandSize(c, v, commandFields(c, nil, &own))
	}
	b := make([]byte, 0, size)
	b = append(b, byte(TypeBatch), v)
	b = binary.AppendUvarint(b, uint64(len(cs)))
	for _, c := range cs {
		fields := commandFields(c, nil, &own)
		n := commandSize(c, v, fields)
		b = binary.AppendUvarint(b, uint64(n))
		at := len(b)
		b = appendCommand(b, c, v, fields)
		if len(b)-at != n {
			panic("fsm: command size mismatch")
		}
	}
	return sealEntry(b)
}

// wireForm is c as the codec writes it: an OpExec's commands become its
// items, each encoded on its own.
func wireForm(c *Command, v byte) *Command {
	if c.Op != OpExec {
		return c
	}
	w := *c
	w.Items = make([][]byte, len(c.Subs))
	var own ownFields
	for i, sub := range c.Subs {
		w.Items[i] = appendCommand(nil, sub, v, commandFields(sub, nil, &own))
	}
	w.Subs = nil
	return &w
}

// InExec reports whether op may be one of an OpExec's commands.
func InExec(op Op) bool {
	switch op {
	case OpReserve, OpAdd, OpDelete, OpDelKeys, OpRename, OpCompact, OpExpire, OpPersist, OpTest, OpCount:
		return true
	}
	return false
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

// DecodeEntry decodes a log entry of any log format this build reads. A
// TypeNoop entry, or an unknown type marked with IgnoreUnknownFlag, decodes to
// no commands. An intact entry a newer build wrote is a *FormatError
// (ErrNewerFormat); damage is ErrCorrupt.
func DecodeEntry(data []byte) (Type, []*Command, error) { return decodeEntry(data, CodecVersion) }

// decodeEntry is DecodeEntry on a node that reads log formats up to max, as a
// build of that format would.
func decodeEntry(data []byte, max byte) (Type, []*Command, error) {
	if len(data) < 2 {
		return 0, nil, fmt.Errorf("%w: entry of %d bytes", ErrCorrupt, len(data))
	}
	t := Type(data[0])
	if data[1] < CodecV1 || data[1] > max {
		if t&IgnoreUnknownFlag != 0 {
			return t, nil, nil
		}
		if data[1] > max {
			// Every format from 2 on ends with the checksum (later ones must
			// keep it), so damage still reads as damage here.
			if _, err := openEntry(data); err != nil {
				return t, nil, err
			}
			return t, nil, &FormatError{Format: data[1], Max: max}
		}
		return t, nil, fmt.Errorf("%w: codec version %d", ErrCorrupt, data[1])
	}
	payload, err := openEntry(data)
	if err != nil {
		return t, nil, err
	}
	d := newDecoder(payload, data[1], max)
	var cs []*Command
	switch t {
	case TypeNoop:
		if len(payload) != 0 { // none was ever written with one
			return t, nil, fmt.Errorf("%w: no-op entry with a payload", ErrCorrupt)
		}
		return t, nil, nil
	case TypeCommand:
		c := d.command()
		cs = []*Command{c}
	case TypeBatch:
		n := d.Count()
		cs = make([]*Command, 0, n)
		for i := 0; i < n && d.Err() == nil; i++ {
			size := d.Count()
			sub := newDecoder(d.Bytes(size), d.v, max)
			if d.Err() != nil {
				break
			}
			c := sub.command()
			if sub.Err() == nil && len(sub.B) != 0 {
				sub.Fail("trailing bytes in a batched command")
			}
			if sub.Err() != nil {
				d.SetErr(sub.Err())
				break
			}
			cs = append(cs, c)
		}
	default:
		if t&IgnoreUnknownFlag != 0 {
			return t, nil, nil
		}
		if data[1] >= CodecV2 { // the checksum vouches for the type byte
			return t, nil, &FormatError{Format: data[1], Max: max, What: fmt.Sprintf("unknown entry type %d", t)}
		}
		return t, nil, fmt.Errorf("%w: unknown entry type %d", ErrCorrupt, t)
	}
	if d.Err() == nil && len(d.B) != 0 {
		d.Fail("trailing bytes")
	}
	if d.Err() != nil {
		return t, nil, d.Err()
	}
	return t, cs, nil
}

func commandSize(c *Command, v byte, fields []field) int {
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
	if v >= CodecV3 {
		n += uvarintLen(uint64(len(fields)))
		for _, f := range fields {
			n += uvarintLen(fieldKey(f)) + uvarintLen(uint64(len(f.val))) + len(f.val)
		}
	}
	return n
}

func fieldKey(f field) uint64 {
	k := f.tag << 1
	if f.must {
		k |= fieldMust
	}
	return k
}

func hasChunk(c *Command) bool { return c.Iter != 0 || len(c.Data) != 0 }

func appendCommand(b []byte, c *Command, v byte, fields []field) []byte {
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
	if v >= CodecV3 {
		b = binary.AppendUvarint(b, uint64(len(fields)))
		for _, f := range fields {
			b = binary.AppendUvarint(b, fieldKey(f))
			b = binary.AppendUvarint(b, uint64(len(f.val)))
			b = append(b, f.val...)
		}
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decoder reads a payload; the first error sticks and later reads return zero
// values (wire.Reader, failing with ErrCorrupt).
type decoder struct {
	wire.Reader
	v     byte // the entry's log format
	max   byte // the highest log format the node reads
	spec  bool // the command being decoded has a spec
	sub   bool // it is one of an OpExec's commands
	watch bool // the watch field was read
}

func newDecoder(b []byte, v, max byte) *decoder {
	return &decoder{Reader: wire.Reader{B: b, Corrupt: ErrCorrupt}, v: v, max: max}
}

// newer fails with a *FormatError: the entry is intact (its checksum matched)
// but holds what only a newer build knows.
func (d *decoder) newer(what string) {
	d.SetErr(&FormatError{Format: d.v, Max: d.max, What: what})
}

// unknown fails on what this build does not know: a newer build's, if the
// entry's checksum vouches for its bytes (version 2 on), else damage.
func (d *decoder) unknown(what string) {
	if d.v >= CodecV2 {
		d.newer(what)
	} else {
		d.Fail(what)
	}
}

func (d *decoder) uint16() uint16 {
	v := d.Uvarint()
	if v > math.MaxUint16 {
		d.Fail("value out of range")
	}
	return uint16(v)
}

func (d *decoder) command() *Command {
	c := &Command{}
	c.Op = Op(d.Byte())
	c.Family = Family(d.Byte())
	flags := d.Byte()
	if d.Err() != nil {
		return nil
	}
	if c.Op == 0 {
		d.Fail("op 0")
		return nil
	}
	if c.Op > lastOp || opCodec(c.Op) > d.max {
		// (A node held at an older format knows no op of a later one, as
		// a build of that format would not.)
		d.unknown(fmt.Sprintf("unknown op %d", c.Op))
		return nil
	}
	if c.Family > FamilyCBF {
		d.unknown(fmt.Sprintf("unknown family %d", c.Family))
		return nil
	}
	if d.sub && !InExec(c.Op) {
		d.Fail(fmt.Sprintf("op %d inside a transaction", c.Op))
		return nil
	}
	if !d.sub && (c.Op == OpTest || c.Op == OpCount) {
		d.Fail(fmt.Sprintf("op %d outside a transaction", c.Op))
		return nil
	}
	if flags&^flagsKnown != 0 {
		d.unknown(fmt.Sprintf("unknown flags %#x", flags&^flagsKnown))
		return nil
	}
	c.NoCreate = flags&flagNoCreate != 0
	c.NX = flags&flagNX != 0
	c.Multi = flags&flagMulti != 0
	c.Key = string(d.Bytes(d.Count()))
	c.Time = d.Varint()
	if flags&flagSession != 0 {
		c.Session.ClientID = d.Uvarint()
		c.Session.Seq = d.Uvarint()
	}
	d.spec = flags&flagSpec != 0
	if d.spec {
		s := &c.Spec
		s.Kind = filters.Kind(d.Byte())
		s.Capacity = d.Uvarint()
		rate := d.Bytes(8)
		if len(rate) == 8 {
			s.ErrorRate = math.Float64frombits(binary.LittleEndian.Uint64(rate))
		}
		exp := d.Uvarint()
		if exp > math.MaxUint32 {
			d.Fail("expansion out of range")
		}
		s.Expansion = uint32(exp)
		s.BucketSize = d.uint16()
		s.MaxIterations = d.uint16()
		s.FingerprintBits = d.Byte()
		s.CounterBits = d.Byte()
		s.NonScaling = flags&flagNonScaling != 0
	} else if flags&flagNonScaling != 0 {
		d.Fail("nonscaling flag without a spec")
	}
	if n := d.Count(); n > 0 {
		c.Keys = make([]string, 0, n)
		for i := 0; i < n && d.Err() == nil; i++ {
			c.Keys = append(c.Keys, string(d.Bytes(d.Count())))
		}
	}
	if n := d.Count(); n > 0 {
		c.Items = make([][]byte, 0, n)
		for i := 0; i < n && d.Err() == nil; i++ {
			c.Items = append(c.Items, d.Bytes(d.Count()))
		}
	}
	if flags&flagChunk != 0 {
		c.Iter = d.Varint()
		c.Data = d.Bytes(d.Count())
	}
	expire := false
	if d.v >= CodecV3 {
		expire = d.fields(c)
	}
	switch {
	case d.Err() != nil:
	case c.Op == OpExpire && !expire:
		d.Fail("expire without its expire field")
	case c.Op != OpExpire && expire:
		d.Fail(fmt.Sprintf("expire field on op %d", c.Op))
	case d.sub && c.Session != (Session{}):
		d.Fail("session inside a transaction")
	case c.Op == OpExec:
		d.execCommands(c)
	case d.watch:
		d.Fail(fmt.Sprintf("watch field on op %d", c.Op))
	}
	if d.Err() != nil {
		return nil
	}
	return c
}

// execCommands decodes an OpExec's commands from its items.
func (d *decoder) execCommands(c *Command) {
	if !d.watch || len(c.Watch) != len(c.Keys) {
		d.Fail("exec without a watch index per watched key")
		return
	}
	c.Subs = make([]*Command, 0, len(c.Items))
	for _, it := range c.Items {
		sub := newDecoder(it, d.v, d.max)
		sub.sub = true
		sc := sub.command()
		if sub.Err() == nil && len(sub.B) != 0 {
			sub.Fail("trailing bytes in a transaction's command")
		}
		if sub.Err() != nil {
			d.SetErr(sub.Err())
			return
		}
		c.Subs = append(c.Subs, sc)
	}
	c.Items = nil
}

// fields reads a command's fields into c: it skips those it does not know
// that may be ignored and refuses the entry at one that may not. It reports
// whether the expire field was there.
func (d *decoder) fields(c *Command) (expire bool) {
	n := d.Count()
	var last uint64
	for i := 0; i < n && d.Err() == nil; i++ {
		key := d.Uvarint()
		val := d.Bytes(d.Count())
		if d.Err() != nil {
			return false
		}
		tag := key >> 1
		if i > 0 && tag <= last {
			d.Fail("fields out of order")
			return false
		}
		last = tag
		if knownField(tag, d.max) {
			switch tag {
			case tagExpire:
				d.expireField(c, val)
				expire = true
			case tagMaxFilters:
				d.maxFiltersField(c, key&fieldMust != 0, val)
			case tagWindow:
				d.windowField(c, key&fieldMust != 0, val)
			case tagMemLimit:
				d.memLimitField(c, key&fieldMust != 0, val)
			case tagWatch:
				d.watchField(c, key&fieldMust != 0, val)
			}
			continue
		}
		if key&fieldMust != 0 {
			d.newer(fmt.Sprintf("field %d it must understand", tag))
			return false
		}
		_ = val // an optional field this build does not know: skipped
	}
	return expire
}

// expireField decodes the expire field's value into c.
func (d *decoder) expireField(c *Command, val []byte) {
	f := newDecoder(val, d.v, d.max)
	cond := f.Byte()
	c.Expire = f.Varint()
	switch {
	case f.Err() != nil:
		d.Fail("bad expire field")
	case len(f.B) != 0:
		d.Fail("trailing bytes in the expire field")
	case cond&^(expireCondKnown|expireAbsolute) != 0:
		d.unknown(fmt.Sprintf("unknown expire conditions %#x", cond))
	}
	c.ExpireIf = ExpireCond(cond & expireCondKnown)
	c.ExpireAt = cond&expireAbsolute != 0
}

// maxFiltersField decodes the max filters field's value into c.
func (d *decoder) maxFiltersField(c *Command, must bool, val []byte) {
	v, n := binary.Uvarint(val)
	if !must || n != len(val) || v == 0 || v > math.MaxUint16 {
		d.Fail("bad max filters field")
		return
	}
	c.MaxFilters = uint32(v)
}

// windowField decodes the window field's value into c's spec, which the
// command must carry.
func (d *decoder) windowField(c *Command, must bool, val []byte) {
	f := newDecoder(val, d.v, d.max)
	window, last := f.Uvarint(), f.Uvarint()
	if !must || !d.spec || f.Err() != nil || len(f.B) != 0 || window == 0 && last == 0 {
		d.Fail("bad window field")
		return
	}
	c.Spec.Window, c.Spec.Last = int64(window), last
}

// memLimitField decodes the memory limit field's value into c.
func (d *decoder) memLimitField(c *Command, must bool, val []byte) {
	v, n := binary.Uvarint(val)
	if !must || n != len(val) || v == 0 {
		d.Fail("bad memory limit field")
		return
	}
	c.MemLimit = v
}

// watchField decodes the watch field's value into c.
func (d *decoder) watchField(c *Command, must bool, val []byte) {
	f := newDecoder(val, d.v, d.max)
	n := f.Count()
	if !must || f.Err() != nil {
		d.Fail("bad watch field")
		return
	}
	if n > 0 {
		c.Watch = make([]uint64, 0, n)
	}
	for i := 0; i < n && f.Err() == nil; i++ {
		c.Watch = append(c.Watch, f.Uvarint())
	}
	if f.Err() != nil || len(f.B) != 0 {
		d.Fail("bad watch field")
		return
	}
	d.watch = true
}

// Result encoding (a forwarded write's reply): error code, flags, uvarint count,
// zig-zag varints.

// resultErrs numbers the domain outcomes on the wire. Codes are never reused.
var resultErrs = []error{
	nil, ErrNotFound, ErrExists, ErrWrongType, ErrFull, ErrMaxExpansions,
	ErrNonScalingFull, ErrBadPosition, ErrBadData, ErrBadSpec, ErrSessionExpired,
	ErrBadExpire, ErrChunkOutside, ErrChunkTooBig, ErrBadHeader, ErrCannotGrow,
	ErrOutOfMemory, ErrStaleMap, ErrMapGroup, ErrHoldsFilters, ErrWatched,
	ErrACLRule, ErrNoUsers,
}

const (
	resultStopped = 1 << 0
	resultSubs    = 1 << 1 // an OpExec's: uvarint count, each length-prefixed
)

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
	if r.Subs != nil {
		flags |= resultSubs
	}
	b := make([]byte, 0, 3+len(r.Ints)*2)
	b = append(b, byte(code), flags)
	b = binary.AppendUvarint(b, uint64(len(r.Ints)))
	for _, v := range r.Ints {
		b = binary.AppendVarint(b, v)
	}
	if r.Subs != nil {
		b = binary.AppendUvarint(b, uint64(len(r.Subs)))
		for _, sub := range r.Subs {
			if sub.Subs != nil {
				panic("fsm: a transaction inside a transaction's result")
			}
			enc := EncodeResult(sub)
			b = binary.AppendUvarint(b, uint64(len(enc)))
			b = append(b, enc...)
		}
	}
	return b
}

// DecodeResult decodes what EncodeResult produced.
func DecodeResult(data []byte) (*Result, error) {
	d := newDecoder(data, 0, 0)
	code := d.Byte()
	flags := d.Byte()
	n := d.Count()
	if d.Err() != nil {
		return nil, d.Err()
	}
	if int(code) >= len(resultErrs) {
		return nil, fmt.Errorf("%w: unknown result code %d", ErrCorrupt, code)
	}
	if flags&^(resultStopped|resultSubs) != 0 {
		return nil, fmt.Errorf("%w: unknown result flags", ErrCorrupt)
	}
	r := &Result{Err: resultErrs[code], Stopped: flags&resultStopped != 0}
	if n > 0 {
		r.Ints = make([]int64, 0, n)
		for i := 0; i < n && d.Err() == nil; i++ {
			r.Ints = append(r.Ints, d.Varint())
		}
	}
	if flags&resultSubs != 0 && d.Err() == nil {
		n := d.Count()
		r.Subs = make([]*Result, 0, n)
		for i := 0; i < n && d.Err() == nil; i++ {
			b := d.Bytes(d.Count())
			if d.Err() != nil {
				break
			}
			if len(b) > 1 && b[1]&resultSubs != 0 {
				return nil, fmt.Errorf("%w: a transaction inside a transaction's result", ErrCorrupt)
			}
			sub, err := DecodeResult(b)
			if err != nil {
				return nil, err
			}
			r.Subs = append(r.Subs, sub)
		}
	}
	if d.Err() == nil && len(d.B) != 0 {
		d.Fail("trailing bytes")
	}
	if d.Err() != nil {
		return nil, d.Err()
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
