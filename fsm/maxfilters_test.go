package fsm

import (
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/rookerydb/rookery/filters"
)

// TestMaxFiltersCodec pins field 1 (a cuckoo add's limit on sub-filters):
// log format 5 on, must be understood, absent when zero; a node held at
// format 4 refuses it as a newer build's entry; a bad value is damage.
func TestMaxFiltersCodec(t *testing.T) {
	c := &Command{Op: OpAdd, Family: FamilyCF, Key: "c", Items: items("x"), Spec: cfSpec(1024, 2, 1), MaxFilters: 5}
	if MinCodec(c) != CodecV5 {
		t.Fatalf("MinCodec %d, want %d", MinCodec(c), CodecV5)
	}
	if MinCodec(&Command{Op: OpAdd, Family: FamilyCF}) != CodecV1 {
		t.Fatal("an add without a limit needs a newer format")
	}
	data := EncodeCommandVersion(c, CodecV5)
	// [type 1][format 5] op 2, family 2, flags 08 (spec); key "c"; time 0;
	// spec (kind 5, capacity 1024, rate 0, expansion 1, bucket 2, 20
	// iterations, 8 bits, 0); no keys; one item "x"; one field: key 03 (tag 1,
	// must), 1 byte, 5; then the checksum.
	want := "010502020801630005800800000000000000000102140800000101780103010528538d5c"
	if got := hex.EncodeToString(data); got != want {
		t.Errorf("encoding\n got %s\nwant %s", got, want)
	}
	_, cs, err := DecodeEntry(data)
	if err != nil || len(cs) != 1 || cs[0].MaxFilters != 5 {
		t.Fatalf("decode: %v %+v", err, cs)
	}
	if again := EncodeCommandVersion(cs[0], CodecV5); hex.EncodeToString(again) != want {
		t.Errorf("re-encoded differently: %x", again)
	}
	// Zero is no field at all: the entry is what format 5 wrote before.
	c.MaxFilters = 0
	if a, b := EncodeCommandVersion(c, CodecV5), EncodeCommandVersion(c, CodecV4); hex.EncodeToString(a[2:len(a)-4]) != hex.EncodeToString(b[2:len(b)-4]) {
		t.Errorf("a command without a limit encodes differently in format 5:\n%x\n%x", a, b)
	}
	c.MaxFilters = 5

	// A node held at format 4 does not know the field.
	_, _, err = decodeEntry(data, CodecV4)
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Format != CodecV5 {
		t.Fatalf("format 5 entry on a format 4 node: %v", err)
	}
	// A field is known by what the node reads, not by the entry's label: a
	// follower forwards in the lowest format any member gossips, and a format 5
	// node reads the field there; one held at format 4 refuses it.
	early := encodeCommandFields(&Command{Op: OpAdd, Family: FamilyCF, Key: "c"}, CodecV4,
		[]field{{tag: tagMaxFilters, must: true, val: []byte{5}}})
	if _, cs, err := DecodeEntry(early); err != nil || len(cs) != 1 || cs[0].MaxFilters != 5 {
		t.Fatalf("field 1 in a format 4 entry, on a format 5 node: %v %+v", err, cs)
	}
	if _, _, err := decodeEntry(early, CodecV4); !errors.As(err, &fe) || fe.What != "field 1 it must understand" {
		t.Fatalf("field 1 in a format 4 entry, on a format 4 node: %v", err)
	}
	// Bad values are damage.
	for _, f := range []field{
		{tag: tagMaxFilters, must: true, val: []byte{0}},
		{tag: tagMaxFilters, must: true, val: []byte{5, 0}},
		{tag: tagMaxFilters, must: true, val: nil},
		{tag: tagMaxFilters, must: true, val: []byte{0x80, 0x80, 0x04}}, // 65536
		{tag: tagMaxFilters, must: false, val: []byte{5}},
	} {
		e := encodeCommandFields(&Command{Op: OpAdd, Family: FamilyCF, Key: "c"}, CodecV5, []field{f})
		if _, _, err := DecodeEntry(e); !errors.Is(err, ErrCorrupt) {
			t.Errorf("field %+v: %v, want damage", f, err)
		}
	}
}

// TestMaxFiltersApply: an add carrying a limit is refused once the filter has
// that many sub-filters, whole and before it touches the filter; without the
// limit the same filter takes it.
func TestMaxFiltersApply(t *testing.T) {
	h := newHarness(t)
	h.ok(reserve(FamilyCF, "c", cfSpec(4, 1, 1)))
	limited := func(item string) *Command {
		c := add(FamilyCF, "c", item)
		c.MaxFilters = 3
		return c
	}
	var last *Result
	for i := 0; i < 1000; i++ {
		if last = h.apply(limited(fmt.Sprint("i-", i))); last.Err != nil {
			break
		}
	}
	if !errors.Is(last.Err, ErrMaxExpansions) {
		t.Fatalf("limited adds ended with %v, want ErrMaxExpansions", last.Err)
	}
	in, _ := h.f.Info(FamilyCF, "c")
	if in.Filters != 3 {
		t.Fatalf("%d sub-filters, want 3", in.Filters)
	}
	multi := limited("a")
	multi.Items, multi.Multi = items("a", "b"), true
	if r := h.apply(multi); !errors.Is(r.Err, ErrMaxExpansions) || len(r.Ints) != 0 {
		t.Errorf("limited multi add: %+v", r)
	}
	if after, _ := h.f.Info(FamilyCF, "c"); after.Items != in.Items {
		t.Errorf("refused adds changed the items from %d to %d", in.Items, after.Items)
	}
	if r := h.apply(add(FamilyCF, "c", "free")); r.Err != nil {
		t.Errorf("unlimited add: %v", r.Err)
	}
	// Only cuckoo adds: a Bloom filter's sub-filters are not limited by it.
	h.ok(reserve(FamilyBF, "b", Spec{Kind: filters.KindScalable, Capacity: 1, ErrorRate: 0.01, Expansion: 2}))
	for i := 0; i < 20; i++ {
		c := add(FamilyBF, "b", fmt.Sprint("b-", i))
		c.MaxFilters = 1
		h.ok(c)
	}
}
