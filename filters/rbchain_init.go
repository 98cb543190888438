package filters

import (
	"math"
	"math/big"

	"github.com/rookerydb/rookery/internal/errdetail"
)

// Sizing a link of an RBChain exactly as RedisBloom sizes it.
//
// RedisBloom sizes a Bloom link from its capacity n and error rate p with
//
//	bpe    = -ln(p) / 0.480453013918201      bits per entry; the constant is ln(2)^2
//	bits   = trunc(n * bpe), at least 1      (option NOROUND, every filter made today)
//	bytes  = bits rounded up to whole 64-bit words, in bytes; bits = bytes * 8
//	hashes = ceil(0.693147180559945 * bpe)
//
// or, with other options, a power-of-two bit count 2^n2 (see rbInit). Every step
// but the logarithm is one IEEE operation, which Go rounds as C does. The
// logarithm is computed correctly rounded (rbLn), so it agrees with any C library
// whose log is correctly rounded for p: the bpe in a dump header is then bit for
// bit RedisBloom's, and so are the bits and hashes derived from it.

// RedisBloom's options, a chain's flags in its dump header.
const (
	rbOptNoRound    = 1 // size links to the bit (not to a power of two)
	rbOptEntsIsBits = 2 // the capacity given is log2 of the bits
	rbOptForce64    = 4 // hash with MurmurHash64A (else the 32-bit MurmurHash2)
	rbOptNoScaling  = 8 // the chain never grows
	rbOptAll        = rbOptNoRound | rbOptEntsIsBits | rbOptForce64 | rbOptNoScaling
)

const (
	// rbLn2Sq is RedisBloom's ln(2)^2, as it writes it.
	rbLn2Sq = 0.480453013918201
	// rbLn2 is RedisBloom's ln(2), as it writes it.
	rbLn2 = 0.693147180559945
	// rbTightening is the factor between consecutive links' error rates.
	rbTightening = 0.5
	// rbMaxBits is the most bits one link may have: all of maxPayloadBytes.
	rbMaxBits = maxPayloadBytes * 8
	// rbMaxN2 is the largest power-of-two exponent a link's bits can have here.
	rbMaxN2 = 39
	// rbMaxEntries bounds a link's capacity and its item count. A real link
	// holds at most about bits/bpe items, under 2^48 for any link that fits
	// maxPayloadBytes at an error rate up to 0.999; 2^53 keeps the sum over
	// rbMaxLinks links below 2^64, so Count and Capacity never overflow.
	rbMaxEntries = 1 << 53
)

// rbShape is a link's sizing: what bloom_init computes.
type rbShape struct {
	entries uint64 // capacity
	err     float64
	bpe     float64
	hashes  uint32
	bytes   uint64 // bits are bytes*8
	n2      uint8  // 0, or the link's bit positions are taken modulo 2^n2
}

// rbInit sizes a link for entries items at error rate p with RedisBloom's options,
// as RedisBloom's bloom_init does. It fails with ErrBadParam where bloom_init
// refuses its arguments or where C's behaviour is undefined, and with a
// *SizeError where the link would be larger than one filter may be.
func rbInit(entries uint64, p float64, options uint32) (rbShape, error) {
	if entries < 1 || !(p > 0 && p < 1) {
		return rbShape{}, errdetail.New(ErrBadParam, "link of capacity %d at error rate %v", entries, p)
	}
	s := rbShape{entries: entries, err: p, bpe: rbBPE(p)}
	var bits uint64
	switch {
	case options&rbOptEntsIsBits != 0:
		// entries is log2 of the bits; the capacity follows from them.
		if entries > 64 {
			return rbShape{}, errdetail.New(ErrBadParam, "2^%d bits", entries)
		}
		if entries > rbMaxN2 {
			return rbShape{}, tooLarge(math.Ldexp(1, int(entries)))
		}
		s.n2 = uint8(entries)
		bits = 1 << s.n2
		n := float64(float64(bits) / s.bpe)
		if !(n < rbMaxEntries) {
			return rbShape{}, errdetail.New(ErrBadParam, "link capacity %g", n)
		}
		s.entries = uint64(n)
	case options&rbOptNoRound != 0:
		x := float64(float64(entries) * s.bpe)
		if !(x < rbMaxBits) {
			return rbShape{}, tooLarge(x)
		}
		bits = max(uint64(x), 1)
	default:
		var err error
		if bits, err = s.roundUp(entries); err != nil {
			return rbShape{}, err
		}
	}
	if bits%64 != 0 {
		s.bytes = (bits/64 + 1) * 8
	} else {
		s.bytes = bits / 8
	}
	s.hashes = uint32(math.Ceil(float64(rbLn2 * s.bpe)))
	return s, nil
}

// roundUp is bloom_init without NOROUND: the bits are the power of two above
// n*bpe, and the capacity grows by what the extra bits hold. It returns the bits.
func (s *rbShape) roundUp(n uint64) (uint64, error) {
	x := float64(float64(n) * s.bpe)
	bn2 := math.Logb(x)
	switch {
	case bn2 > 63 || math.IsInf(bn2, 0):
		return 0, errdetail.New(ErrBadParam, "link of %g bits", x)
	case bn2 < -1:
		// C converts a negative exponent to the unsigned n2: undefined.
		return 0, errdetail.New(ErrBadParam, "link of %g bits", x)
	case bn2+1 > rbMaxN2:
		return 0, tooLarge(math.Ldexp(1, int(bn2+1)))
	}
	s.n2 = uint8(bn2 + 1)
	bits := uint64(1) << s.n2
	// Both conversions truncate, as C's to size_t do; bits > x, so the
	// difference is positive, and it is below 2^40.
	bitDiff := uint64(float64(float64(bits) - x))
	itemDiff := uint64(float64(float64(bitDiff) / s.bpe))
	if itemDiff > rbMaxEntries-n {
		return 0, errdetail.New(ErrBadParam, "link capacity overflows")
	}
	s.entries = n + itemDiff
	return bits, nil
}

// rbBPE returns RedisBloom's bits per entry for error rate p in (0, 1).
func rbBPE(p float64) float64 {
	bpe := -float64(rbLn(p) / rbLn2Sq)
	if bpe < 0 {
		bpe = -bpe
	}
	return bpe
}

// rbPrec is the precision, in bits, of rbLn's intermediate values. The
// logarithm of a double is never closer than about 2^-118 (relative) to a
// midpoint between two doubles (Lefèvre and Muller's worst cases), so 192 bits
// round every input correctly.
const rbPrec = 192

// rbLn2Big is ln 2 to rbPrec bits: 2 atanh(1/3). It is computed once and never
// written again.
var rbLn2Big = func() *big.Float {
	third := new(big.Float).SetPrec(rbPrec).Quo(big.NewFloat(1).SetPrec(rbPrec), big.NewFloat(3))
	ln2 := atanhBig(third, 130) // (1/9)^130 < 2^-400
	return ln2.Mul(ln2, big.NewFloat(2))
}()

// rbLn returns ln x, correctly rounded to the nearest float64, for a positive
// finite x. It uses math/big only, whose results are exact functions of their
// inputs on every platform, so every replica computes the same value; it costs
// tens of microseconds and runs only when a link is sized.
func rbLn(x float64) float64 {
	if !(x > 0) || math.IsInf(x, 0) {
		return math.NaN()
	}
	f, e := math.Frexp(x) // x = f * 2^e, f in [1/2, 1)
	if f < math.Sqrt2/2 {
		f *= 2 // exact
		e--
	}
	// ln f = 2 atanh(s), s = (f-1)/(f+1), |s| < 0.172: each term of the series
	// gains 5 bits, so 48 terms reach 2^-240.
	bf := new(big.Float).SetPrec(rbPrec).SetFloat64(f)
	num := new(big.Float).SetPrec(rbPrec).Sub(bf, big.NewFloat(1))
	den := new(big.Float).SetPrec(rbPrec).Add(bf, big.NewFloat(1))
	s := new(big.Float).SetPrec(rbPrec).Quo(num, den)
	ln := atanhBig(s, 48)
	ln.Mul(ln, big.NewFloat(2))
	ln.Add(ln, new(big.Float).SetPrec(rbPrec).Mul(rbLn2Big, new(big.Float).SetInt64(int64(e))))
	v, _ := ln.Float64() // rounds to nearest, ties to even
	return v
}

// atanhBig returns atanh(s) = s + s^3/3 + s^5/5 + ..., summing terms 0 to n in
// Horner form at rbPrec bits.
func atanhBig(s *big.Float, n int) *big.Float {
	s2 := new(big.Float).SetPrec(rbPrec).Mul(s, s)
	sum := new(big.Float).SetPrec(rbPrec)
	term := new(big.Float).SetPrec(rbPrec)
	for k := n; k >= 0; k-- {
		sum.Mul(sum, s2)
		term.Quo(big.NewFloat(1), new(big.Float).SetInt64(int64(2*k+1)))
		sum.Add(sum, term)
	}
	return sum.Mul(sum, s)
}
