package filters

import "testing"

func mustNewRBChain(t testing.TB, capacity uint64, p float64, expansion uint32, nonScaling bool) *RBChain {
	t.Helper()
	c, err := NewRBChain(capacity, p, expansion, nonScaling)
	if err != nil {
		t.Fatalf("NewRBChain(%d, %v, %d, %v): %v", capacity, p, expansion, nonScaling, err)
	}
	return c
}
