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

	"github.com/rookerydb/rookery/filters"
)

// wbSpec is a windowed Bloom filter's spec: a time window of window ns, or a
// count window of last insertions.
func wbSpec(capacity uint64, rate float64, window int64, last uint64) Spec {
	return Spec{Kind: filters.KindWindowBloom, Capacity: capacity, ErrorRate: rate, Window: window, Last: last}
}

// wcSpec is a windowed cuckoo filter's spec.
func wcSpec(capacity uint64, window int64) Spec {
	return Spec{Kind: filters.KindWindowCuckoo, Capacity: capacity, Window: window, MaxIterations: 500}
}

// windowSamples exercise every value the window field carries.
func windowSamples() []*Command {
	return []*Command{
		{Op: OpReserve, Family: FamilyBF, Key: "seen-urls", Spec: wbSpec(1e9, 0.001, 7*86400e9, 0), Time: 1700000000123456789},
		{Op: OpReserve, Family: FamilyBF, Key: "last", Spec: wbSpec(100, 0.01, 0, 1000), Session: Session{ClientID: 3, Seq: 4}},
		{Op: OpReserve, Family: FamilyCF, Key: "coupons", Spec: wcSpec(1e6, 30*86400e9)},
		{Op: OpReserve, Family: FamilyBF, Key: "odd", Spec: Spec{Window: math.MaxInt64, Last: math.MaxUint64}},
		{Op: OpReserve, Family: FamilyBF, Key: "neg", Spec: Spec{Kind: filters.KindWindowBloom, Window: -1}},
	}
}

func TestWindowCodecRoundTrip(t *testing.T) {
	for _, c := range windowSamples() {
		if MinCodec(c) != CodecV6 {
			t.Errorf("MinCodec(%+v) = %d, want %d", c.Spec, MinCodec(c), CodecV6)
		}
		_, got, err := DecodeEntry(EncodeCommand(c))
		if err != nil || len(got) != 1 {
			t.Fatalf("decode %+v: %v", c, err)
		}
		if a, b := normalize(c), normalize(got[0]); !reflect.DeepEqual(a, b) {
			t.Errorf("round trip:\n got %+v\nwant %+v", b, a)
		}
	}
	// A windowed kind without a window still needs format 6: the leader must
	// not hand it to a node that would build nothing and answer otherwise.
	if MinCodec(&Command{Op: OpReserve, Spec: Spec{Kind: filters.KindWindowCuckoo}}) != CodecV6 {
		t.Error("a windowed kind's spec without a window fits an older format")
	}
	// A node held at format 5 refuses the field as a newer build's.
	var fe *FormatError
	if _, _, err := decodeEntry(EncodeCommandVersion(windowSamples()[0], CodecV5), CodecV5); !errors.As(err, &fe) ||
		fe.What != "field 2 it must understand" {
		t.Errorf("window field on a format 5 node: %v", err)
	}
}

// TestWindowFieldRefusesDamage: a window field that is malformed, optional,
// empty or on a command without a spec is damage.
func TestWindowFieldRefusesDamage(t *testing.T) {
	withField := func(c *Command, f field) []byte { return encodeCommandFields(c, CodecV6, []field{f}) }
	reserve := &Command{Op: OpReserve, Family: FamilyBF, Key: "k", Spec: bfSpec(10, 0.01, 2)}
	bad := map[string][]byte{
		"on a command without a spec": withField(&Command{Op: OpDelete, Family: FamilyCF, Key: "k"}, field{tag: tagWindow, must: true, val: []byte{1, 0}}),
		"optional":                    withField(reserve, field{tag: tagWindow, val: []byte{1, 0}}),
		"both zero":                   withField(reserve, field{tag: tagWindow, must: true, val: []byte{0, 0}}),
		"one value":                   withField(reserve, field{tag: tagWindow, must: true, val: []byte{1}}),
		"trailing bytes":              withField(reserve, field{tag: tagWindow, must: true, val: []byte{1, 0, 0}}),
		"bad varint":                  withField(reserve, field{tag: tagWindow, must: true, val: []byte{0x80}}),
	}
	for what, e := range bad {
		if _, _, err := DecodeEntry(e); !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNewerFormat) {
			t.Errorf("%s: %v, want damage", what, err)
		}
	}
}

// TestCodecGoldenV6 pins log format 6 as TestCodecGolden pins the others.
func TestCodecGoldenV6(t *testing.T) {
	path := filepath.Join("testdata", "codec_golden_v6.txt")
	cs := append(append(sampleCommands(), expireSamples()...), windowSamples()...)
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(hex.EncodeToString(EncodeCommandVersion(c, CodecV6)) + "\n")
	}
	b.WriteString(hex.EncodeToString(EncodeBatchVersion(windowSamples(), CodecV6)) + "\n")
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
		t.Fatalf("version 6 log encoding changed:\n got %s\nwant %s", b.String(), want)
	}
	for i, line := range strings.Split(strings.TrimSpace(string(want)), "\n") {
		e, _ := hex.DecodeString(line)
		if _, _, err := DecodeEntry(e); err != nil {
			t.Fatalf("golden entry %d: %v", i, err)
		}
	}
}
