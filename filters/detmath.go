package filters

import "math"

// Sizing a filter (bits from an error rate, hash counts, sub-filter growth) runs
// inside the replicated state machine: a scalable filter sizes a new sub-filter while
// applying a log entry. Every replica must therefore compute exactly the same numbers.
// math.Log and math.Exp use assembly on some platforms and not on others, and the Go
// compiler may fuse x*y+z into one FMA instruction on some architectures, so their
// last bits can differ between an amd64 and an arm64 replica. The functions below use
// only +, -, *, / (which IEEE 754 rounds exactly everywhere) and math.Frexp/Ldexp
// (pure bit manipulation), and every product is wrapped in an explicit float64
// conversion, which the Go spec says prevents fusion. They are accurate to a few
// ulps, which is all sizing needs; what matters is that they are the same everywhere.

const (
	ln2Hi = 6.93147180369123816490e-01 // high bits of ln 2
	ln2Lo = 1.90821492927058770002e-10 // ln 2 - ln2Hi
	ln2   = 0.693147180559945309417232121458176568
)

// detLn returns the natural logarithm of x > 0.
func detLn(x float64) float64 {
	if x <= 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return math.NaN()
	}
	f, e := math.Frexp(x) // x = f * 2^e, f in [0.5, 1)
	if f < math.Sqrt2/2 {
		f = float64(f * 2)
		e--
	}
	// ln f = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...), s = (f-1)/(f+1), |s| < 0.172.
	s := float64((f - 1) / (f + 1))
	s2 := float64(s * s)
	sum := 0.0
	for n := 25; n >= 1; n -= 2 {
		sum = float64(float64(sum*s2) + float64(1/float64(n)))
	}
	lnf := float64(float64(2*s) * sum)
	fe := float64(e)
	return float64(float64(fe*ln2Hi) + float64(float64(fe*ln2Lo)+lnf))
}

// detExp returns e^x.
func detExp(x float64) float64 {
	switch {
	case math.IsNaN(x):
		return x
	case x > 709.7:
		return math.Inf(1)
	case x < -745.2:
		return 0
	}
	k := math.Floor(float64(x/ln2) + 0.5)
	r := float64(float64(x-float64(k*ln2Hi)) - float64(k*ln2Lo)) // |r| <= ln2/2
	// Taylor series, Horner form, 20 terms: error far below an ulp for |r| < 0.35.
	sum := 1.0
	for n := 20; n >= 1; n-- {
		sum = float64(1 + float64(float64(r*sum)/float64(n)))
	}
	return math.Ldexp(sum, int(k))
}

// detPow returns x^y for x > 0.
func detPow(x, y float64) float64 {
	return detExp(float64(y * detLn(x)))
}
