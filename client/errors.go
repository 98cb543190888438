package client

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Errors. A write that returns an error not wrapping ErrIndeterminate was not
// applied.
var (
	// ErrIndeterminate: the write may or may not have been applied; every retry
	// failed. Because the client retries with one session and sequence number,
	// it was applied at most once.
	ErrIndeterminate = errors.New("rookery: write outcome unknown")
	// ErrUnavailable: no node could serve the request (no leader, nodes down);
	// nothing was applied.
	ErrUnavailable = errors.New("rookery: cluster unavailable")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("rookery: client closed")

	// ErrNotFound: the filter does not exist.
	ErrNotFound = errors.New("rookery: not found")
	// ErrExists: a filter of that name exists already.
	ErrExists = errors.New("rookery: filter exists")
	// ErrWrongType: the name holds a filter of another kind.
	ErrWrongType = errors.New("rookery: wrong kind of filter")
	// ErrFull: the filter has no room and cannot grow (a full non-scaling Bloom
	// filter, a full cuckoo filter, or one at its most sub-filters).
	ErrFull = errors.New("rookery: filter is full")
	// ErrTooLarge: the node's memory limit refused the filter or its growth.
	ErrTooLarge = errors.New("rookery: memory limit exceeded")
)

// errClass says what an error from a node means for a retry.
type errClass int

const (
	final          errClass = iota // an answer: success or a domain error
	notApplied                     // safe to retry, nothing happened
	outcomeUnknown                 // retry with the same session only
)

func classify(err error) errClass {
	if err == nil || errors.Is(err, redis.Nil) {
		return final
	}
	var re redis.Error
	if errors.As(err, &re) {
		msg := re.Error()
		switch {
		case hasPrefix(msg, "CLUSTERDOWN"), hasPrefix(msg, "TRYAGAIN"), hasPrefix(msg, "SHUTDOWN"),
			hasPrefix(msg, "LOADING"):
			return notApplied
		case hasPrefix(msg, "INDETERMINATE"):
			return outcomeUnknown
		}
		return final
	}
	// A broken connection or a timeout: the request may have been sent.
	return outcomeUnknown
}

func hasPrefix(s, p string) bool { return strings.HasPrefix(s, p) }

// serverErr turns a node's error reply into one of the package's errors,
// keeping the node's text.
func serverErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, redis.Nil) {
		return nil
	}
	msg := err.Error()
	var kind error
	switch {
	case msg == "ERR not found" || msg == "Not found":
		kind = ErrNotFound
	case msg == "ERR item exists":
		kind = ErrExists
	case hasPrefix(msg, "WRONGTYPE"):
		kind = ErrWrongType
	case msg == "Filter is full" || msg == "Maximum expansions reached" || msg == "ERR non scaling filter is full":
		kind = ErrFull
	case hasPrefix(msg, "OOM"):
		kind = ErrTooLarge
	default:
		return fmt.Errorf("rookery: %s", msg)
	}
	return fmt.Errorf("%w (%s)", kind, msg)
}
