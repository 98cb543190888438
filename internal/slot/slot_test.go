package slot

import (
	"fmt"
	"testing"
)

// Slots Redis Cluster computes for these keys (CLUSTER KEYSLOT of Redis 7, and
// the examples of the Redis Cluster specification).
func TestSlotsAsRedisCluster(t *testing.T) {
	for key, want := range map[string]int{
		"":                     0,
		"foo":                  12182,
		"bar":                  5061,
		"hello":                866,
		"123456789":            12739, // CRC16-CCITT check value 0x31C3 mod 16384
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"user1000":             3443,
		"foo{}{bar}":           8363, // empty tag: the whole key
		"foo{{bar}}zap":        4015, // tag "{bar"
		"foo{bar}{zap}":        5061, // the first tag: "bar"
		"{":                    OfString("{"),
		"a{b":                  OfString("a{b"),
	} {
		if got := OfString(key); got != want {
			t.Errorf("slot of %q = %d, want %d", key, got, want)
		}
	}
	if CRC16([]byte("123456789")) != 0x31C3 {
		t.Fatalf("CRC16 check value %#x, want 0x31c3", CRC16([]byte("123456789")))
	}
}

func TestRangesCoverEverySlotOnce(t *testing.T) {
	for _, n := range []int{1, 2, 3, 6, 7, 64, 1000, Count} {
		rs := Ranges(n)
		next := 0
		for i, r := range rs {
			if r.First != next || r.Last < r.First {
				t.Fatalf("n=%d: range %d is %v after slot %d", n, i, r, next-1)
			}
			if size := r.Last - r.First + 1; size < Count/n || size > Count/n+1 {
				t.Fatalf("n=%d: range %d has %d slots", n, i, size)
			}
			next = r.Last + 1
		}
		if next != Count {
			t.Fatalf("n=%d: ranges end at %d", n, next)
		}
		for _, s := range []int{0, 1, Count / 2, Count - 1} {
			i := Shard(rs, s)
			if i < 0 || s < rs[i].First || s > rs[i].Last {
				t.Fatalf("n=%d: slot %d in shard %d", n, s, i)
			}
		}
	}
	if got := Ranges(6); fmt.Sprint(got[0], got[5]) != "{0 2729} {13653 16383}" {
		t.Fatalf("six ranges: %v", got)
	}
	if Shard(Ranges(4), Count) != -1 || Shard(Ranges(4), -1) != -1 {
		t.Fatal("a slot out of range has a shard")
	}
}

// FuzzSlot: every key has a slot, and a key with a hash tag shares its slot
// with any other key of the same tag.
func FuzzSlot(f *testing.F) {
	f.Add([]byte("{user}x"))
	f.Add([]byte("a{}b{c}"))
	f.Fuzz(func(t *testing.T, key []byte) {
		s := Of(key)
		if s < 0 || s >= Count {
			t.Fatalf("slot %d", s)
		}
		if tg := tag(key); len(tg) < len(key) {
			other := append(append([]byte("other{"), tg...), "}x"...)
			if Of(other) != s {
				t.Fatalf("%q (tag %q) and %q hash apart", key, tg, other)
			}
		}
	})
}
