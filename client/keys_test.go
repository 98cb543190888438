package client

import (
	"encoding/json"
	"testing"
	"time"
)

// TestKeyText: a key survives String and ParseKey, and JSON through
// MarshalText and UnmarshalText.
func TestKeyText(t *testing.T) {
	c := &Client{}
	seen := map[uint64]bool{}
	for i := range 200 {
		k := c.NewKey()
		if k.Seq != uint64(i%perSession)+1 {
			t.Fatalf("key %d has sequence number %d", i, k.Seq)
		}
		seen[k.Session] = true
		back, err := ParseKey(k.String())
		if err != nil || back.Session != k.Session || back.Seq != k.Seq || back.Made.UnixMilli() != k.Made.UnixMilli() {
			t.Fatalf("%s read back as %+v, %v", k, back, err)
		}
	}
	if len(seen) != 4 {
		t.Fatalf("200 keys in %d sessions, want 4 of at most %d", len(seen), perSession)
	}
	k := Key{Session: 0xabc, Seq: 3, Made: time.UnixMilli(1700000000000)}
	b, err := json.Marshal(map[string]Key{"k": k})
	if err != nil || string(b) != `{"k":"abc-3-1700000000000"}` {
		t.Fatalf("%s %v", b, err)
	}
	var m map[string]Key
	if err := json.Unmarshal(b, &m); err != nil || m["k"] != k {
		t.Fatalf("%+v %v", m, err)
	}
	for _, bad := range []string{"", "abc-3", "0-3-1", "abc-0-1", "xyz-3-1", "abc-3-1-1", "abc--1"} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
}

// FuzzParseKey: any text is a key that reads back the same, or an error.
func FuzzParseKey(f *testing.F) {
	f.Add("abc-3-1700000000000")
	f.Add("ffffffffffffffff-18446744073709551615--1")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err != nil {
			return
		}
		if k.Session == 0 || k.Seq == 0 {
			t.Fatalf("%q gave a key without session or sequence number", s)
		}
		back, err := ParseKey(k.String())
		if err != nil || back != k {
			t.Fatalf("%q: %+v read back as %+v, %v", s, k, back, err)
		}
	})
}
