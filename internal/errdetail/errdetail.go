// Package errdetail gives a sentinel error a detail that travels with it, so
// that a layer above can say what went wrong in its own words without
// trimming the text of the layer below: errors.Is still finds the sentinel,
// and Of returns the detail alone.
//
//	err := errdetail.New(filters.ErrBadParam, "capacity %d out of range", c)
//	err.Error()          // "filters: bad parameter: capacity 0 out of range"
//	errdetail.Of(err)    // "capacity 0 out of range"
package errdetail

import (
	"errors"
	"fmt"
)

// Error is a sentinel (Kind) with a detail (Text).
type Error struct {
	Kind error
	Text string
}

// New returns kind with the formatted detail.
func New(kind error, format string, a ...any) error {
	return &Error{Kind: kind, Text: fmt.Sprintf(format, a...)}
}

// Error reads "kind: detail".
func (e *Error) Error() string { return e.Kind.Error() + ": " + e.Text }

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Kind }

// Detail returns the detail alone.
func (e *Error) Detail() string { return e.Text }

// Of returns the detail of the outermost error in err's chain that has one
// (any error with a Detail() string method), or err's whole text if none
// has.
func Of(err error) string {
	var d interface{ Detail() string }
	if errors.As(err, &d) {
		return d.Detail()
	}
	return err.Error()
}
