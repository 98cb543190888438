package filters

import (
	"fmt"
	"math"
)

// SizeError reports parameters whose filter would take more memory than one
// filter may (its payload is bounded so that lengths never overflow). It wraps
// ErrBadParam, and says how much was asked for, so that a server can tell its
// client before anything is allocated or proposed.
type SizeError struct {
	// Need is the bytes the filter's arrays would take. It is a float64: at an
	// error rate of 1e-300 it exceeds every integer type.
	Need float64
	// Max is the most bytes one filter's arrays may take.
	Max uint64
}

// Error says what was asked for and the limit, in bytes.
func (e *SizeError) Error() string { return ErrBadParam.Error() + ": " + e.Detail() }

// Detail is the error without its sentinel's words (errdetail.Of).
func (e *SizeError) Detail() string {
	need := fmt.Sprintf("%.0f", e.Need)
	if !(e.Need < 1e18) {
		need = fmt.Sprintf("%.3g", e.Need)
	}
	return fmt.Sprintf("the filter would need %s bytes, more than the maximum of %d", need, e.Max)
}

// Unwrap returns ErrBadParam.
func (e *SizeError) Unwrap() error { return ErrBadParam }

// tooLarge is the SizeError for arrays of bits bits.
func tooLarge(bits float64) error {
	return &SizeError{Need: math.Ceil(bits/64) * 8, Max: maxPayloadBytes}
}
