// Package slot maps keys to Redis Cluster's 16,384 hash slots and slots to
// shards, exactly as Redis Cluster clients do, so that a client routing by
// CLUSTER SLOTS and the node it reaches agree on every key.
//
// A key's slot is CRC16(key) mod 16384, with CRC16-CCITT (XMODEM: polynomial
// 0x1021, initial value 0), of the key's hash tag when it has one: the bytes
// between the first '{' and the first '}' after it, if there are any. "{user1000}.following"
// and "{user1000}.followers" share a slot; "foo{}{bar}" hashes whole.
package slot

// Count is the number of hash slots.
const Count = 16384

// table is CRC16-CCITT (XMODEM) by byte.
var table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// CRC16 is the checksum Redis Cluster hashes keys with.
func CRC16(b []byte) uint16 {
	var c uint16
	for _, x := range b {
		c = c<<8 ^ table[byte(c>>8)^x]
	}
	return c
}

// Of returns the slot of key.
func Of(key []byte) int { return int(CRC16(tag(key))) & (Count - 1) }

// OfString returns the slot of key.
func OfString(key string) int { return Of([]byte(key)) }

// tag returns the part of key that is hashed: its hash tag if it has a
// non-empty one, else all of it.
func tag(key []byte) []byte {
	for i, c := range key {
		if c != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j == i+1 {
					return key // "{}": no tag
				}
				return key[i+1 : j]
			}
		}
		return key
	}
	return key
}

// Range is the slots First to Last, both included.
type Range struct{ First, Last int }

// Ranges cuts the slots into n contiguous ranges of sizes within one of each
// other: range i is [⌊Count·i/n⌋, ⌊Count·(i+1)/n⌋).
func Ranges(n int) []Range {
	if n < 1 {
		n = 1
	}
	out := make([]Range, n)
	for i := range out {
		out[i] = Range{First: Count * i / n, Last: Count*(i+1)/n - 1}
	}
	return out
}

// Shard returns the index of the range holding slot s (ranges as Ranges
// returns them: sorted, contiguous, covering every slot), or -1.
func Shard(ranges []Range, s int) int {
	lo, hi := 0, len(ranges)
	for lo < hi {
		m := (lo + hi) / 2
		switch {
		case s < ranges[m].First:
			hi = m
		case s > ranges[m].Last:
			lo = m + 1
		default:
			return m
		}
	}
	return -1
}
