package fsm

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

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
	// Structural damage, in entries whose checksum matches (version 2) and in
	// entries with none (version 1): the decoder itself must refuse them.
	structural := [][]byte{
		{byte(TypeCommand), CodecV1, 0, 1, 0, 0, 0, 0, 0},        // op 0
		{byte(TypeCommand), CodecV1, 99, 1, 0, 0, 0, 0, 0},       // unknown op
		{byte(TypeCommand), CodecV1, 2, 9, 0, 0, 0, 0, 0},        // unknown family
		{byte(TypeCommand), CodecV1, 2, 1, 0x80, 0, 0, 0, 0},     // unknown flag
		{byte(TypeCommand), CodecV1, 2, 1, 0, 0xff, 0, 0, 0},     // key longer than input
		{byte(TypeBatch), CodecV1, 0xff, 0xff, 0xff, 0xff, 0x0f}, // count past the end
	}
	bad := [][]byte{
		nil,
		{byte(TypeCommand)},
		{byte(TypeCommand), 0, 1, 1, 0},
		{byte(TypeCommand), CodecVersion + 1, 1, 1, 0},
		{0x7f, CodecV1},                       // unknown type
		sealEntry([]byte{0x7f, CodecV2}),      // unknown type
		{byte(TypeNoop), CodecV2, 1, 2, 3, 4}, // checksum of other bytes
	}
	for _, b := range structural {
		bad = append(bad, b)
		v2 := bytes.Clone(b)
		v2[1] = CodecV2
		bad = append(bad, sealEntry(v2))
	}
	for _, b := range bad {
		if _, _, err := DecodeEntry(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%x: err %v, want ErrCorrupt", b, err)
		}
	}
	for _, b := range [][]byte{{byte(0x80 | 0x11), CodecV1, 1, 2, 3}, sealEntry([]byte{byte(0x80 | 0x11), CodecV2, 1, 2, 3}),
		{byte(0x80 | 0x11), 9}} {
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
	entries := [][]byte{EncodeBatch(sampleCommands()), EncodeNoop(CodecV2)}
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
	}{{CodecV1, "codec_golden.txt"}, {CodecV2, "codec_golden_v2.txt"}} {
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

// FuzzDecodeEntry: decoding never panics, and whatever decodes re-encodes to
// an entry that decodes to the same commands.
func FuzzDecodeEntry(f *testing.F) {
	for _, c := range sampleCommands() {
		f.Add(EncodeCommand(c))
	}
	f.Add(EncodeBatch(sampleCommands()))
	f.Add(EncodeNoop(CodecVersion))
	f.Add(EncodeCommandVersion(sampleCommands()[0], CodecV1))
	f.Fuzz(func(t *testing.T, data []byte) {
		typ, cs, err := DecodeEntry(data)
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
