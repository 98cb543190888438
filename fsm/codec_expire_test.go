package fsm

import (
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// expireSamples exercise every value the expiry ops carry.
func expireSamples() []*Command {
	return []*Command{
		{Op: OpExpire, Key: "seen:2026-11-25", Expire: 86400_000, Time: 1700000000123456789},
		// A codec value pinned by codec_golden_v5.txt, not a deadline: no clock reads it.
		{Op: OpExpire, Key: "k", Expire: 1795651200_000, ExpireAt: true, ExpireIf: ExpireNX, // codec value
			Session: Session{ClientID: 9, Seq: 3}},
		{Op: OpExpire, Key: "k", Expire: -1, ExpireIf: ExpireXX | ExpireGT},
		{Op: OpExpire, Key: "", Expire: math.MinInt64, ExpireIf: ExpireXX | ExpireLT},
		{Op: OpExpire, Key: "k", Expire: math.MaxInt64, ExpireAt: true, ExpireIf: ExpireLT},
		{Op: OpPersist, Key: "k", Time: 5},
		{Op: OpExpireTick, Time: 1700000001000000000},
	}
}

func TestExpireCodecRoundTrip(t *testing.T) {
	cs := append(expireSamples(), sampleCommands()...)
	for _, c := range cs {
		_, got, err := DecodeEntry(EncodeCommand(c))
		if err != nil || len(got) != 1 {
			t.Fatalf("decode %+v: %v", c, err)
		}
		if a, b := normalize(c), normalize(got[0]); !reflect.DeepEqual(a, b) {
			t.Errorf("round trip:\n got %+v\nwant %+v", b, a)
		}
	}
	_, got, err := DecodeEntry(EncodeBatch(cs))
	if err != nil || len(got) != len(cs) {
		t.Fatalf("batch: %v, %d commands", err, len(got))
	}
	for i := range cs {
		if a, b := normalize(cs[i]), normalize(got[i]); !reflect.DeepEqual(a, b) {
			t.Errorf("batched command %d:\n got %+v\nwant %+v", i, b, a)
		}
	}
	// Fields this build does not know travel beside the expire field, in tag
	// order, and are skipped.
	c := expireSamples()[1]
	_, got, err = DecodeEntry(encodeCommandFields(c, CodecV5, []field{{tag: 900, val: []byte("x")}, {tag: 3}}))
	if err != nil || !reflect.DeepEqual(normalize(got[0]), normalize(c)) {
		t.Fatalf("expire field among unknown optional fields: %v %+v", err, got)
	}
}

// TestExpireFieldRefusesDamage: an expire field that is malformed, on an op
// that carries none, or missing from an EXPIRE is damage; one with conditions
// this build does not know is a newer format.
func TestExpireFieldRefusesDamage(t *testing.T) {
	withField := func(c *Command, val []byte) []byte {
		c2 := *c
		c2.Op = OpAdd // so that commandFields adds nothing of its own
		e := encodeCommandFields(&c2, CodecV5, []field{{tag: tagExpire, must: true, val: val}})
		e = e[:len(e)-entryTrailer]
		e[2] = byte(c.Op)
		return sealEntry(e)
	}
	exp := &Command{Op: OpExpire, Key: "k"}
	bad := map[string][]byte{
		"no expire field":          EncodeCommandVersion(exp, CodecV2),
		"expire field on an add":   withField(add(FamilyBF, "k", "a"), []byte{0, 2}),
		"expire field on a tick":   withField(&Command{Op: OpExpireTick}, []byte{0, 2}),
		"empty expire field":       withField(exp, nil),
		"expire field without ttl": withField(exp, []byte{0}),
		"bad varint":               withField(exp, []byte{0, 0x80}),
		"trailing bytes":           withField(exp, []byte{0, 2, 0}),
	}
	for what, e := range bad {
		if _, _, err := DecodeEntry(e); !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNewerFormat) {
			t.Errorf("%s: %v, want damage", what, err)
		}
	}
	var fe *FormatError
	_, _, err := DecodeEntry(withField(exp, []byte{0x20, 2}))
	if !errors.As(err, &fe) || fe.What != "unknown expire conditions 0x20" {
		t.Errorf("unknown conditions: %v, want a FormatError", err)
	}
	// The expire field is must-understand: a node held at format 4 refuses
	// it on any op as a newer format's.
	if _, _, err := decodeEntry(withField(add(FamilyBF, "k", "a"), []byte{0, 2}), CodecV4); !errors.As(err, &fe) {
		t.Errorf("expire field on a format 4 node: %v", err)
	}
}

// TestCodecGoldenV4 pins log format 4 (RENAME, FLUSHALL, CF.COMPACT) as
// TestCodecGolden pins the others.
func TestCodecGoldenV4(t *testing.T) {
	path := filepath.Join("testdata", "codec_golden_v4.txt")
	v4 := []*Command{
		{Op: OpRename, Key: "from", Keys: []string{"to"}, Time: 1700000000123456789},
		{Op: OpRename, Key: "a", Keys: []string{"b"}, NX: true, Session: Session{ClientID: 7, Seq: 2}},
		{Op: OpFlush, Time: 5},
		{Op: OpCompact, Family: FamilyCF, Key: "coupons"},
	}
	cs := append(sampleCommands(), v4...)
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(hex.EncodeToString(EncodeCommandVersion(c, CodecV4)) + "\n")
	}
	b.WriteString(hex.EncodeToString(EncodeBatchVersion(v4, CodecV4)) + "\n")
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
		t.Fatalf("version 4 log encoding changed:\n got %s\nwant %s", b.String(), want)
	}
	for i, line := range strings.Split(strings.TrimSpace(string(want)), "\n") {
		e, _ := hex.DecodeString(line)
		_, got, err := DecodeEntry(e)
		if err != nil {
			t.Fatalf("golden entry %d: %v", i, err)
		}
		if i == len(cs) {
			if len(got) != len(v4) {
				t.Fatalf("golden batch decodes as %d commands, want %d", len(got), len(v4))
			}
		} else if i >= len(sampleCommands()) && !reflect.DeepEqual(normalize(got[0]), normalize(cs[i])) {
			t.Fatalf("golden entry %d decodes as %+v, want %+v", i, got[0], cs[i])
		}
	}
}

// TestCodecGoldenV5 pins log format 5 as TestCodecGolden pins the others.
func TestCodecGoldenV5(t *testing.T) {
	path := filepath.Join("testdata", "codec_golden_v5.txt")
	cs := append(sampleCommands(), expireSamples()...)
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(hex.EncodeToString(EncodeCommandVersion(c, CodecV5)) + "\n")
	}
	b.WriteString(hex.EncodeToString(EncodeBatchVersion(expireSamples()[:4], CodecV5)) + "\n")
	b.WriteString(hex.EncodeToString(EncodeResult(&Result{Err: ErrBadExpire})) + "\n")
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
		t.Fatalf("version 5 log encoding changed:\n got %s\nwant %s", b.String(), want)
	}
	lines := strings.Split(strings.TrimSpace(string(want)), "\n")
	for i, line := range lines[:len(cs)+1] {
		e, _ := hex.DecodeString(line)
		if _, _, err := DecodeEntry(e); err != nil {
			t.Fatalf("golden entry %d: %v", i, err)
		}
	}
	r, _ := hex.DecodeString(lines[len(lines)-1])
	if got, err := DecodeResult(r); err != nil || got.Err != ErrBadExpire {
		t.Fatalf("golden result: %+v %v", got, err)
	}
}

// TestMinCodec: each op needs the format that introduced it.
func TestMinCodec(t *testing.T) {
	for op, want := range map[Op]byte{OpReserve: CodecV1, OpLoadChunk: CodecV1, OpRename: CodecV4,
		OpCompact: CodecV4, OpExpire: CodecV5, OpPersist: CodecV5, OpExpireTick: CodecV5, OpSetMap: CodecV8,
		OpExec: CodecV10, OpTest: CodecV10, OpCount: CodecV10,
		OpACLSetUser: CodecV11, OpACLDelUser: CodecV11, OpACLLoad: CodecV11, OpACLRestore: CodecV11} {
		if got := MinCodec(&Command{Op: op}); got != want {
			t.Errorf("op %d: format %d, want %d", op, got, want)
		}
	}
	if lastOp != OpACLRestore || CodecVersion != CodecV11 {
		t.Errorf("a new op needs a row here")
	}
	// A map that fences a replica needs map codec 2, which log format 9
	// brought; one without stays readable by format 8.
	m := &Map{Version: 1, Replicas: 1, Groups: []MapGroup{{First: 0, Last: 16383, Replicas: []string{"n1"}}}}
	if got := MinCodec(&Command{Op: OpSetMap, Data: EncodeMap(m)}); got != CodecV8 {
		t.Errorf("a map without fences needs format %d, want 8", got)
	}
	m.Groups[0].Fenced = []string{"n2"}
	if got := MinCodec(&Command{Op: OpSetMap, Data: EncodeMap(m)}); got != CodecV9 {
		t.Errorf("a map with fences needs format %d, want 9", got)
	}
}
