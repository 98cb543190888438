package filters

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// Helpers shared by the golden, fuzz and model tests of the RedisBloom
// layouts and by their cross-checks against a real RedisBloom (built with
// -tags redisbloom).

// rbChunk is one (cursor, data) pair of a dump.
type rbChunk struct {
	iter int64
	data []byte
}

// ourDump is the same loop over DumpChunk.
func ourDump(c *RBChain) []rbChunk {
	var out []rbChunk
	for iter := int64(0); ; {
		next, data := c.DumpChunk(iter)
		if next == 0 {
			return out
		}
		out = append(out, rbChunk{next, data})
		iter = next
	}
}

func sameDump(a, b []rbChunk) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d chunks vs %d", len(a), len(b))
	}
	for i := range a {
		if a[i].iter != b[i].iter || !bytes.Equal(a[i].data, b[i].data) {
			return fmt.Errorf("chunk %d: cursor %d, %d bytes vs cursor %d, %d bytes (first difference at %d)",
				i, a[i].iter, len(a[i].data), b[i].iter, len(b[i].data), firstDiff(a[i].data, b[i].data))
		}
	}
	return nil
}

// ourAdd is redisAdd on an RBChain, with RedisBloom's replies.
func ourAdd(c *RBChain, items [][]byte) []string {
	out := make([]string, 0, len(items))
	full := false
	for _, it := range items {
		if full {
			out = append(out, "not tried")
			continue
		}
		ok, err := c.Add(it)
		switch {
		case errors.Is(err, ErrFull):
			out = append(out, "ERR non scaling filter is full")
			full = true
		case err != nil:
			out = append(out, "ERR problem inserting into filter")
		case ok:
			out = append(out, "1")
		default:
			out = append(out, "0")
		}
	}
	return out
}

// rbLoadDump creates a chain from a dump as BF.LOADCHUNK does.
func rbLoadDump(t *testing.T, dump []rbChunk) *RBChain {
	t.Helper()
	if len(dump) == 0 || dump[0].iter != 1 {
		t.Fatalf("dump does not start with a header")
	}
	c, err := NewRBChainFromHeader(dump[0].data)
	if err != nil {
		t.Fatalf("NewRBChainFromHeader: %v", err)
	}
	for _, ch := range dump[1:] {
		if err := c.LoadChunk(ch.iter, ch.data); err != nil {
			t.Fatalf("LoadChunk(%d, %d bytes): %v", ch.iter, len(ch.data), err)
		}
	}
	return c
}

func equalStrings(a, b []string) bool { return firstDiffStrings(a, b) < 0 }

// rbBaseErr returns the RedisBloom error an error wraps.
func rbBaseErr(err error) error {
	for _, e := range []error{ErrRBBadData, ErrRBNoLink, ErrRBTooBig} {
		if errors.Is(err, e) {
			return e
		}
	}
	return err
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func firstDiffStrings(a, b []string) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

func rbcSameDump(a, b []rbcChunk) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].next != b[i].next || !bytes.Equal(a[i].data, b[i].data) {
			return false
		}
	}
	return true
}
