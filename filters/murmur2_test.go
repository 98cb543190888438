package filters

import "testing"

// Vectors from RedisBloom's own MurmurHash2.c, compiled and run with the seeds
// its Bloom filters use (0x9747b28c, then the first hash, for 32-bit chains;
// 0xc6a4a7935bd1e995, then the first hash, for 64-bit ones) and its cuckoo
// filters' seed 0. A change here means dumps taken from RedisBloom no longer
// answer as they did there.
func TestMurmur2Vectors(t *testing.T) {
	for _, v := range []struct {
		in         string
		a, b       uint32
		c, d, zero uint64
	}{
		{"", 0x106e08d9, 0x456d9087, 0x1ab11ea5a7b2c56e, 0xbbddcb5ab56dd547, 0},
		{"a", 0xa2d0b27c, 0x2e36e8b4, 0x4292cee227b9150a, 0x7e9b527031f50c11, 0x071717d2d36b6b11},
		{"ab", 0x12d8262a, 0x87ae788a, 0x2db1bf3a2e66542c, 0x293d5ccc2e02cc02, 0x62be85b2fe53d1f8},
		{"abc", 0x1c94221b, 0x08e2b515, 0xca52f3863690cd7b, 0x492e507dc7ce3d23, 0x9cc9c33498a95efb},
		{"abcd", 0xb11ab5f4, 0x7796ea9c, 0xc19f5358d983a6bf, 0xe0cf7f46f508e46e, 0xec1044c45cc5097a},
		{"abcde", 0x1b897edd, 0x263bdc4f, 0xf27f6d3730b4f30f, 0x7c733ac54ddf1280, 0x1182974836d6dbb7},
		{"abcdef", 0x6f7fdafc, 0x6f42db29, 0x01ddc66cbc7b3e37, 0x1b348e32fa3fef62, 0xb78e3425fc996779},
		{"abcdefg", 0xeb595499, 0x3219f5ed, 0x9fa0b24601c1e9a9, 0x593e9b0945664832, 0x241aa52b0a62005d},
		{"abcdefgh", 0xc70d55dd, 0xd8fd56f3, 0xd435df7a565a8af1, 0xbf3d673c0b1029cf, 0xafdb0257ff41aa98},
		{"abcdefghi", 0xdb106fbe, 0x9cc85bc8, 0xa2c004e44bd0a465, 0x28459a22cef68950, 0xc9b9d84356146ac2},
		{"hello world, this is rookery", 0xad7032dd, 0x8d751b4a, 0x8e7819307d9ec3db, 0x4706d0afbadfece8, 0x1e022598a2ee1363},
		{"\xff\xfe\x80\x01", 0xa7e444f9, 0x738ecc8c, 0x9c314542b02b17ad, 0x4e5e946f3891b461, 0x3c460d6cb20bbadb},
	} {
		in := []byte(v.in)
		a := murmurHash2(in, 0x9747b28c)
		b := murmurHash2(in, a)
		c := murmurHash64A(in, murmur2M64)
		d := murmurHash64A(in, c)
		z := murmurHash64A(in, 0)
		if a != v.a || b != v.b || c != v.c || d != v.d || z != v.zero {
			t.Errorf("%q: got %08x %08x %016x %016x %016x, want %08x %08x %016x %016x %016x",
				v.in, a, b, c, d, z, v.a, v.b, v.c, v.d, v.zero)
		}
	}
}
