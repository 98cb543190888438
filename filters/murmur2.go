package filters

import "encoding/binary"

// RedisBloom hashes with Austin Appleby's MurmurHash2 family rather than
// murmur3: MurmurHash64A for every filter it creates today (its Bloom filters
// with the FORCE64 option, its cuckoo filters always), and the 32-bit
// MurmurHash2 for Bloom filters written before FORCE64 existed. The layouts
// that reproduce RedisBloom's filters bit for bit (rbchain.go, rbcuckoo.go)
// need exactly these functions, byte order and all: RedisBloom reads the key
// as little-endian words on the machines it runs on.

const (
	murmur2M32 = 0x5bd1e995
	murmur2M64 = 0xc6a4a7935bd1e995
)

// murmurHash2 is MurmurHash2, 32-bit, of data with seed.
func murmurHash2(data []byte, seed uint32) uint32 {
	h := seed ^ uint32(len(data))
	for len(data) >= 4 {
		k := binary.LittleEndian.Uint32(data)
		k *= murmur2M32
		k ^= k >> 24
		k *= murmur2M32
		h *= murmur2M32
		h ^= k
		data = data[4:]
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= murmur2M32
	}
	h ^= h >> 13
	h *= murmur2M32
	h ^= h >> 15
	return h
}

// murmurHash64A is MurmurHash64A of data with seed.
func murmurHash64A(data []byte, seed uint64) uint64 {
	h := seed ^ (uint64(len(data)) * murmur2M64)
	for len(data) >= 8 {
		k := binary.LittleEndian.Uint64(data)
		k *= murmur2M64
		k ^= k >> 47
		k *= murmur2M64
		h ^= k
		h *= murmur2M64
		data = data[8:]
	}
	if len(data) > 0 {
		for i := len(data) - 1; i >= 0; i-- {
			h ^= uint64(data[i]) << (8 * uint(i))
		}
		h *= murmur2M64
	}
	h ^= h >> 47
	h *= murmur2M64
	h ^= h >> 47
	return h
}
