package fsm

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/filters"
)

// sampleCommands exercise every field of the codec.
func sampleCommands() []*Command {
	return []*Command{
		{Op: OpReserve, Family: FamilyBF, Key: "users", Spec: bfSpec(1000, 0.001, 4), Time: 1700000000123456789},
		{Op: OpReserve, Family: FamilyBF, Key: "fixed", Spec: bfSpec(10, 0.25, 0)},
		{Op: OpAdd, Family: FamilyCF, Key: "coupons", Items: items("C-1", "", "C-3"), Multi: true, NX: true,
			NoCreate: true, Spec: cfSpec(4096, 4, 2), Session: Session{ClientID: 1 << 62, Seq: 77}, Time: -5},
		{Op: OpDelete, Family: FamilyCBF, Key: "", Items: items("x")},
		{Op: OpDelKeys, Keys: []string{"a", "", "ccc"}},
		{Op: OpLoadChunk, Family: FamilyCF, Key: "copy", Iter: 1 + 1<<40, Data: []byte{0, 1, 2, 255}},
		{Op: OpLoadChunk, Family: FamilyBF, Key: "copy", Iter: -3},
		{Op: OpReserve, Family: FamilyCBF, Key: "counts",
			Spec: Spec{Kind: filters.KindDLeft, Capacity: 1 << 30, ErrorRate: 1e-9, CounterBits: 8}},
	}
}

// normalize makes empty and nil slices compare equal.
func normalize(c *Command) Command {
	n := *c
	if len(n.Items) == 0 {
		n.Items = nil
	}
	for i, it := range n.Items {
		if len(it) == 0 {
			n.Items[i] = []byte{}
		}
	}
	if len(n.Keys) == 0 {
		n.Keys = nil
	}
	if len(n.Data) == 0 {
		n.Data = nil
	}
	return n
}

func TestCommandRoundTrip(t *testing.T) {
	for _, c := range sampleCommands() {
		data := EncodeCommand(c)
		if data[0] != byte(TypeCommand) || data[1] != CodecVersion {
			t.Fatalf("entry header %x", data[:2])
		}
		typ, got, err := DecodeEntry(data)
		if err != nil || typ != TypeCommand || len(got) != 1 {
			t.Fatalf("decode %+v: %v %v %d", c, typ, err, len(got))
		}
		if a, b := normalize(c), normalize(got[0]); !reflect.DeepEqual(a, b) {
			t.Errorf("round trip:\n got %+v\nwant %+v", b, a)
		}
	}
}

func TestBatchRoundTrip(t *testing.T) {
	cs := sampleCommands()
	typ, got, err := DecodeEntry(EncodeBatch(cs))
	if err != nil || typ != TypeBatch {
		t.Fatalf("decode: %v %v", typ, err)
	}
	if len(got) != len(cs) {
		t.Fatalf("%d commands, want %d", len(got), len(cs))
	}
	for i := range cs {
		if a, b := normalize(cs[i]), normalize(got[i]); !reflect.DeepEqual(a, b) {
			t.Errorf("command %d:\n got %+v\nwant %+v", i, b, a)
		}
	}
}

// TestDecodeEntryRefusesDamage: every truncation and several corruptions are
// errors, never panics, and nothing a newer node may skip is an error.
func TestDecodeEntryRefusesDamage(t *testing.T) {
	for _, data := range [][]byte{EncodeCommand(sampleCommands()[2]), EncodeBatch(sampleCommands())} {
		for n := 0; n < len(data); n++ {
			if _, _, err := DecodeEntry(data[:n]); err == nil {
				t.Fatalf("truncated to %d of %d bytes: no error", n, len(data))
			}
		}
		if _, _, err := DecodeEntry(append(bytes.Clone(data), 0)); err == nil {
			t.Error("trailing byte accepted")
		}
	}
	// Structural damage, in entries whose checksum matches (versions 2 and 3)
	// and in entries with none (version 1): the decoder itself must refuse them.
	structural := [][]byte{
		{byte(TypeCommand), CodecV1, 0, 1, 0, 0, 0, 0, 0},        // op 0
		{byte(TypeCommand), CodecV1, 2, 1, 0, 0xff, 0, 0, 0},     // key longer than input
		{byte(TypeBatch), CodecV1, 0xff, 0xff, 0xff, 0xff, 0x0f}, // count past the end
	}
	// What a newer build may write: damage without a checksum to vouch for
	// it, a newer format (never corruption) with one.
	unknown := [][]byte{
		{byte(TypeCommand), CodecV1, 99, 1, 0, 0, 0, 0, 0},            // unknown op
		{byte(TypeCommand), CodecV1, 2, 9, 0, 0, 0, 0, 0},             // unknown family
		{byte(TypeCommand), CodecV1, 2, 1, 0x80, 0, 0, 0, 0},          // unknown flag
		{byte(TypeCommand), CodecV1, 2, 1, 0, 0, 0, 0, 0, 1, 0x41, 0}, // must-understand field 32 (read as 3)
		{0x7f, CodecV1}, // unknown type
	}
	bad := [][]byte{
		nil,
		{byte(TypeCommand)},
		{byte(TypeCommand), 0, 1, 1, 0},
		{byte(TypeNoop), CodecV2, 1, 2, 3, 4}, // checksum of other bytes
		{byte(TypeNoop), CodecV3, 1, 2, 3, 4},
		{byte(TypeCommand), CodecVersion + 1, 1, 1, 0, 9, 9, 9, 9},                        // a newer format, damaged
		sealEntry([]byte{byte(TypeCommand), CodecV3, 2, 1, 0, 0, 0, 0, 0, 2, 2, 0, 2, 0}), // fields out of order
		sealEntry([]byte{byte(TypeCommand), CodecV3, 2, 1, 0, 0, 0, 0, 0, 1, 2, 5}),       // field longer than input
	}
	for _, b := range structural {
		bad = append(bad, b)
		for _, v := range []byte{CodecV2, CodecV3} {
			bv := bytes.Clone(b)
			bv[1] = v
			if v == CodecV3 && bv[0] == byte(TypeCommand) {
				bv = append(bv, 0) // no fields
			}
			bad = append(bad, sealEntry(bv))
		}
	}
	bad = append(bad, unknown[:len(unknown)-2]...)
	for _, b := range bad {
		if _, _, err := DecodeEntry(b); !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNewerFormat) {
			t.Errorf("%x: err %v, want ErrCorrupt", b, err)
		}
	}
	newer := [][]byte{sealEntry([]byte{byte(TypeCommand), CodecVersion + 1, 1, 1, 0})}
	for _, b := range unknown {
		for _, v := range []byte{CodecV2, CodecV3} {
			bv := bytes.Clone(b)
			bv[1] = v
			if v == CodecV3 && bv[0] == byte(TypeCommand) && len(bv) == 9 {
				bv = append(bv, 0) // no fields
			}
			if v == CodecV2 && len(bv) == 12 {
				continue // fields are version 3
			}
			newer = append(newer, sealEntry(bv))
		}
	}
	for _, b := range newer {
		_, _, err := DecodeEntry(b)
		var fe *FormatError
		if !errors.As(err, &fe) || errors.Is(err, ErrCorrupt) || fe.Max != CodecVersion || fe.Format != b[1] {
			t.Errorf("%x: err %v, want a FormatError", b, err)
		}
	}
	for _, b := range [][]byte{{byte(0x80 | 0x11), CodecV1, 1, 2, 3}, sealEntry([]byte{byte(0x80 | 0x11), CodecV2, 1, 2, 3}),
		{byte(0x80 | 0x11), CodecVersion + 1}} {
		typ, cs, err := DecodeEntry(b)
		if err != nil || len(cs) != 0 || typ&IgnoreUnknownFlag == 0 {
			t.Errorf("%x: skippable type gave %v %v %v", b, typ, cs, err)
		}
	}
}

// TestEntryChecksumCatchesEveryBitFlip: flipping any one bit of a version 2
// entry makes it undecodable (the damage the checksum exists for: a flipped
// bit in an item's name would otherwise decode, and apply, as another item).
func TestEntryChecksumCatchesEveryBitFlip(t *testing.T) {
	entries := [][]byte{EncodeBatch(sampleCommands()), EncodeNoop(CodecV2), EncodeNoop(CodecV3),
		EncodeBatchVersion(sampleCommands(), CodecV2)}
	for _, c := range sampleCommands() {
		entries = append(entries, EncodeCommand(c))
	}
	for _, e := range entries {
		for bit := 0; bit < 8*len(e); bit++ {
			d := bytes.Clone(e)
			d[bit/8] ^= 1 << (bit % 8)
			typ, cs, err := DecodeEntry(d)
			if bit/8 == 0 && Type(d[0])&IgnoreUnknownFlag != 0 && err == nil && len(cs) == 0 {
				continue // the type byte became one a newer node may skip: nothing applies
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("bit %d of %x flipped: decoded as type %d, %d commands, err %v", bit, e, typ, len(cs), err)
			}
		}
	}
	// A version 1 entry has no checksum: the same flip in an item decodes.
	v1 := EncodeCommandVersion(sampleCommands()[2], CodecV1)
	d := bytes.Clone(v1)
	d[len(d)-1] ^= 1
	if _, _, err := DecodeEntry(d); err != nil {
		t.Fatalf("version 1 entries are still read: %v", err)
	}
}

func TestResultRoundTrip(t *testing.T) {
	for _, r := range []*Result{
		{},
		{Ints: []int64{1, 0, -1, 1 << 40, -1 << 40}},
		{Err: ErrNonScalingFull, Ints: []int64{1, 1}, Stopped: true},
		{Err: ErrSessionExpired},
	} {
		got, err := DecodeResult(EncodeResult(r))
		if err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		if len(r.Ints) == 0 {
			r.Ints = nil
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("got %+v want %+v", got, r)
		}
	}
	for _, b := range [][]byte{nil, {0}, {0, 0}, {200, 0, 0}, {0, 2, 0}, {0, 0, 5, 1}, {0, 0, 0, 0}} {
		if _, err := DecodeResult(b); err == nil {
			t.Errorf("%x decoded", b)
		}
	}
}

// TestCodecGolden pins the log format: entries already in logs and snapshots
// must decode the same way forever, so a change here is a format change that
// needs a new codec version, not an edit of the golden file.
func TestCodecGolden(t *testing.T) {
	for _, v := range []struct {
		version byte
		file    string
	}{{CodecV1, "codec_golden.txt"}, {CodecV2, "codec_golden_v2.txt"}, {CodecV3, "codec_golden_v3.txt"}} {
		path := filepath.Join("testdata", v.file)
		var b strings.Builder
		for _, c := range sampleCommands() {
			b.WriteString(hex.EncodeToString(EncodeCommandVersion(c, v.version)) + "\n")
		}
		b.WriteString(hex.EncodeToString(EncodeBatchVersion(sampleCommands()[:3], v.version)) + "\n")
		b.WriteString(hex.EncodeToString(EncodeResult(&Result{Err: ErrNonScalingFull, Ints: []int64{1, 0, -1}, Stopped: true})) + "\n")
		if os.Getenv("ROOKERY_UPDATE_GOLDEN") != "" {
			if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with ROOKERY_UPDATE_GOLDEN=1 once to create it)", err)
		}
		if string(want) != b.String() {
			t.Fatalf("version %d log encoding changed:\n got %s\nwant %s", v.version, b.String(), want)
		}
		// And what is in the file still decodes.
		for i, line := range strings.Split(strings.TrimSpace(string(want)), "\n")[:len(sampleCommands())+1] {
			e, _ := hex.DecodeString(line)
			if _, _, err := DecodeEntry(e); err != nil {
				t.Fatalf("version %d golden entry %d: %v", v.version, i, err)
			}
		}
	}
}

// TestCommandFields: a field this build does not know is skipped when it may
// be ignored, alone or in a batch, and refuses the entry as one for a newer
// build (not as damage) when it must be understood.
func TestCommandFields(t *testing.T) {
	c := sampleCommands()[2]
	optional := []field{{tag: 3, val: []byte("hint")}, {tag: 900, val: nil}}
	for _, data := range [][]byte{
		encodeCommandFields(c, CodecV3, optional),
		encodeCommandFields(c, CodecV3, optional[:1]),
	} {
		typ, got, err := DecodeEntry(data)
		if err != nil || typ != TypeCommand || len(got) != 1 {
			t.Fatalf("optional fields: %v %v %d", typ, err, len(got))
		}
		if a, b := normalize(c), normalize(got[0]); !reflect.DeepEqual(a, b) {
			t.Errorf("optional fields changed the command:\n got %+v\nwant %+v", b, a)
		}
	}
	// In a batch: each command is length-prefixed, its fields inside.
	cmd := encodeCommandFields(c, CodecV3, optional)
	body := cmd[2 : len(cmd)-entryTrailer]
	batch := []byte{byte(TypeBatch), CodecV3, 2}
	for range 2 {
		batch = append(appendUvarintForTest(batch, len(body)), body...)
	}
	if _, got, err := DecodeEntry(sealEntry(batch)); err != nil || len(got) != 2 {
		t.Fatalf("batch with optional fields: %v %d", err, len(got))
	}

	must := encodeCommandFields(c, CodecV3, []field{{tag: 3, val: []byte("x")}, {tag: 7, must: true, val: []byte{1}}})
	_, got, err := DecodeEntry(must)
	var fe *FormatError
	if !errors.As(err, &fe) || errors.Is(err, ErrCorrupt) || len(got) != 0 {
		t.Fatalf("must-understand field: %v, %d commands; want a FormatError", err, len(got))
	}
	if want := fmt.Sprintf("log entry needs a newer rookery (log format 3, field 7 it must understand; this node reads up to %d)", CodecVersion); err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	// A node held at format 2 refuses a format 3 entry the same way, whatever
	// it holds, and still reads damage as damage.
	_, _, err = decodeEntry(EncodeCommand(c), CodecV2)
	if !errors.As(err, &fe) || fe.Format != CodecVersion || fe.Max != CodecV2 || fe.What != "" {
		t.Fatalf("format 3 entry on a format 2 node: %v", err)
	}
	damaged := EncodeCommand(c)
	damaged[5] ^= 1
	if _, _, err := decodeEntry(damaged, CodecV2); !errors.Is(err, ErrChecksum) {
		t.Fatalf("damaged format 3 entry on a format 2 node: %v, want ErrChecksum", err)
	}
	if _, got, err := decodeEntry(EncodeCommandVersion(c, CodecV2), CodecV2); err != nil || len(got) != 1 {
		t.Fatalf("format 2 entry on a format 2 node: %v", err)
	}
}

func appendUvarintForTest(b []byte, n int) []byte {
	for n >= 0x80 {
		b = append(b, byte(n)|0x80)
		n >>= 7
	}
	return append(b, byte(n))
}

// TestApplyHaltsOnNewerFormat: a state machine that reads up to format 2 (an
// older build, or a node held there) applies format 2 entries and stops before
// a format 3 one, saying the node needs upgrading rather than that the log is
// corrupt; one that reads format 3 applies both, ignoring an optional field.
func TestApplyHaltsOnNewerFormat(t *testing.T) {
	old := New(Options{MaxFormat: CodecV2})
	cur := New(Options{})
	log := []*raft.Log{
		{Index: 1, Type: raft.LogCommand, Data: EncodeCommandVersion(add(FamilyBF, "k", "a"), CodecV2)},
		{Index: 2, Type: raft.LogCommand, Data: encodeCommandFields(add(FamilyBF, "k", "b"), CodecV3, []field{{tag: 5, val: []byte("?")}})},
		{Index: 3, Type: raft.LogCommand, Data: EncodeCommandVersion(add(FamilyBF, "k", "c"), CodecV2)},
	}
	out := old.ApplyBatch(log)
	if r, ok := out[0].(*Result); !ok || r.Err != nil {
		t.Fatalf("format 2 entry: %v", out[0])
	}
	h := old.Halted()
	if h == nil || out[1] != h || out[2] != h || old.AppliedIndex() != 1 {
		t.Fatalf("format 3 entry on a format 2 node: %v %v, applied %d", out[1], out[2], old.AppliedIndex())
	}
	want := "log entry at index 2 needs a newer rookery (log format 3; this node reads up to 2): upgrade this node"
	if h.Error() != want || errors.Is(h, ErrCorrupt) || !errors.Is(h, ErrNewerFormat) {
		t.Fatalf("halt %q, want %q (and not ErrCorrupt)", h.Error(), want)
	}
	for i, r := range cur.ApplyBatch(log) {
		if r, ok := r.(*Result); !ok || r.Err != nil || r.Ints[0] != 1 {
			t.Fatalf("entry %d on a format 3 node: %v", i+1, r)
		}
	}
	if cur.Halted() != nil || cur.AppliedIndex() != 3 {
		t.Fatalf("format 3 node: halted %v, applied %d", cur.Halted(), cur.AppliedIndex())
	}
	// A must-understand field it does not know halts even a current node.
	r := cur.Apply(&raft.Log{Index: 4, Type: raft.LogCommand,
		Data: encodeCommandFields(add(FamilyBF, "k", "d"), CodecV3, []field{{tag: 32, must: true}})})
	want = fmt.Sprintf("log entry at index 4 needs a newer rookery (log format 3, field 32 it must understand; this node reads up to %d): upgrade this node", CodecVersion)
	if h, ok := r.(*Halt); !ok || h.Error() != want {
		t.Fatalf("must-understand field: %v, want %q", r, want)
	}
}

// FuzzDecodeEntry: decoding never panics, what fails is damage or a newer
// format and nothing else, a node held at an older format reads no more than
// a current one, and whatever decodes re-encodes to an entry that decodes to
// the same commands.
func FuzzDecodeEntry(f *testing.F) {
	for _, c := range sampleCommands() {
		f.Add(EncodeCommand(c))
	}
	f.Add(EncodeBatch(sampleCommands()))
	f.Add(EncodeNoop(CodecVersion))
	f.Add(EncodeCommandVersion(sampleCommands()[0], CodecV1))
	f.Add(EncodeBatchVersion(sampleCommands(), CodecV2))
	f.Add(encodeCommandFields(sampleCommands()[2], CodecV3, []field{{tag: 1, val: []byte("a")}, {tag: 9, must: true}}))
	f.Add(encodeCommandFields(sampleCommands()[5], CodecV3, []field{{tag: 4, val: []byte{0, 1}}}))
	for _, c := range expireSamples() {
		f.Add(EncodeCommand(c))
	}
	f.Add(EncodeBatch(expireSamples()))
	f.Add(encodeCommandFields(expireSamples()[2], CodecV5, []field{{tag: 3, val: []byte("a")}, {tag: 900}}))
	f.Add(EncodeCommand(&Command{Op: OpAdd, Family: FamilyCF, Key: "c", Items: items("x"), MaxFilters: 7}))
	for _, c := range windowSamples() {
		f.Add(EncodeCommand(c))
	}
	for _, c := range txSamples() {
		f.Add(EncodeCommand(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		typ, cs, err := DecodeEntry(data)
		if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNewerFormat) {
			t.Fatalf("error neither damage nor a newer format: %v", err)
		}
		for v := byte(CodecV1); v < CodecVersion; v++ {
			_, held, herr := decodeEntry(data, v)
			// (A type a newer node may skip is skipped whatever its version.)
			if herr == nil && len(held) > 0 && (err != nil || len(held) != len(cs)) {
				t.Fatalf("a node held at format %d read what a current one did not: %v", v, err)
			}
		}
		if err != nil || len(cs) == 0 {
			return
		}
		var again []byte
		if typ == TypeCommand {
			again = EncodeCommand(cs[0])
		} else {
			again = EncodeBatch(cs)
		}
		_, cs2, err := DecodeEntry(again)
		if err != nil {
			t.Fatalf("re-encoded entry does not decode: %v", err)
		}
		// Compare encodings rather than structs: a NaN error rate is itself
		// and still unequal to itself.
		for i := range cs {
			if a, b := EncodeCommand(cs[i]), EncodeCommand(cs2[i]); !bytes.Equal(a, b) {
				t.Fatalf("command %d changed through a round trip:\n%+v\n%+v", i, cs[i], cs2[i])
			}
		}
	})
}

// FuzzDecodeResult: decoding never panics and round-trips what it accepts.
func FuzzDecodeResult(f *testing.F) {
	f.Add(EncodeResult(&Result{Err: ErrFull, Ints: []int64{1, -1}, Stopped: true}))
	f.Add([]byte{0, 0, 0})
	f.Add(EncodeResult(&Result{Subs: []*Result{{Ints: []int64{1}}, {Err: ErrWrongType}}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeResult(data)
		if err != nil {
			return
		}
		r2, err := DecodeResult(EncodeResult(r))
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip: %+v -> %+v, %v", r, r2, err)
		}
	})
}
