package filters

import (
	"math"
	"testing"
)

func TestDetMathMatchesMath(t *testing.T) {
	for _, x := range []float64{1e-300, 1e-12, 1e-4, 0.01, 0.3, 0.5, 0.7071, 1, 1.5, 2, 10, 12345.678, 1e30} {
		if got, want := detLn(x), math.Log(x); math.Abs(got-want) > 4e-16*math.Max(1, math.Abs(want)) {
			t.Errorf("detLn(%g) = %.17g, math.Log = %.17g", x, got, want)
		}
	}
	for _, x := range []float64{-700, -30, -1, -0.5, -1e-9, 0, 1e-9, 0.25, 1, 2.5, 30, 700} {
		if got, want := detExp(x), math.Exp(x); math.Abs(got-want) > 4e-16*math.Abs(want) {
			t.Errorf("detExp(%g) = %.17g, math.Exp = %.17g", x, got, want)
		}
	}
	if got := detPow(2, 10); math.Abs(got-1024) > 1e-12 {
		t.Errorf("detPow(2, 10) = %v", got)
	}
	if !math.IsNaN(detLn(0)) || !math.IsNaN(detLn(-1)) {
		t.Error("detLn of a non-positive number must be NaN")
	}
}
