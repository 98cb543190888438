package errdetail

import (
	"errors"
	"fmt"
	"testing"
)

func TestDetailTravelsWithTheSentinel(t *testing.T) {
	errBad := errors.New("filters: bad parameter")
	errSpec := errors.New("bad spec")
	low := New(errBad, "capacity %d out of range", 0)
	if low.Error() != "filters: bad parameter: capacity 0 out of range" || !errors.Is(low, errBad) {
		t.Fatalf("%q", low)
	}
	if got := Of(low); got != "capacity 0 out of range" {
		t.Fatalf("detail %q", got)
	}
	// A layer above restates it under its own sentinel, without the lower
	// one's words.
	high := New(errSpec, "%s", Of(low))
	if high.Error() != "bad spec: capacity 0 out of range" || !errors.Is(high, errSpec) {
		t.Fatalf("%q", high)
	}
	// Wrapped with context, the outermost detail is found.
	if got := Of(fmt.Errorf("reserve k: %w", high)); got != "capacity 0 out of range" {
		t.Fatalf("wrapped detail %q", got)
	}
	// No detail anywhere: the whole text.
	if got := Of(errBad); got != "filters: bad parameter" {
		t.Fatalf("plain %q", got)
	}
}
