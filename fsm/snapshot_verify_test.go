package fsm

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// TestVerifySnapshotDescribes: VerifySnapshot reports what a restore would
// install (every filter as List shows it, the sessions, the applied index)
// and leaves no state behind.
func TestVerifySnapshotDescribes(t *testing.T) {
	h := newHarness(t)
	populate(h)
	data := snapshotBytes(t, h.f)
	sum, err := VerifySnapshot(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	want := h.f.List()
	if len(sum.Filters) != len(want) {
		t.Fatalf("%d filters described, state holds %d", len(sum.Filters), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(sum.Filters[i], want[i]) {
			t.Errorf("filter %d: described %+v, state %+v", i, sum.Filters[i], want[i])
		}
	}
	if sum.AppliedIndex != h.f.AppliedIndex() || sum.Sessions != 1 || sum.MemoryBytes != h.f.MemoryBytes() {
		t.Errorf("summary %+v; state applied %d, memory %d", sum, h.f.AppliedIndex(), h.f.MemoryBytes())
	}
}

// TestVerifySnapshotAgreesWithRestore: for a damaged stream, VerifySnapshot
// refuses exactly when Restore does (the cluster verifies an uploaded backup
// with it and then hands the stream to Restore, which must not fail), and its
// error names the part that is damaged.
func TestVerifySnapshotAgreesWithRestore(t *testing.T) {
	h := newHarness(t)
	populate(h)
	data := snapshotBytes(t, h.f)
	for pos := 0; pos < len(data); pos += 1 + len(data)/997 {
		bad := bytes.Clone(data)
		bad[pos] ^= 0x20
		_, verr := VerifySnapshot(bytes.NewReader(bad))
		rerr := New(Options{}).Restore(io.NopCloser(bytes.NewReader(bad)))
		if (verr == nil) != (rerr == nil) {
			t.Fatalf("byte %d flipped: verify says %v, restore says %v", pos, verr, rerr)
		}
		if verr == nil {
			t.Fatalf("byte %d flipped: accepted", pos)
		}
		if !errors.Is(verr, ErrBadSnapshot) {
			t.Fatalf("byte %d flipped: %v does not wrap ErrBadSnapshot", pos, verr)
		}
	}
	_, err := VerifySnapshot(bytes.NewReader(data[:len(data)-1]))
	if err == nil || !strings.Contains(err.Error(), "end section") {
		t.Fatalf("truncated stream: %v", err)
	}
	_, err = VerifySnapshot(bytes.NewReader(append(bytes.Clone(data), 0)))
	if err == nil || !strings.Contains(err.Error(), "data after the end") {
		t.Fatalf("extended stream: %v", err)
	}
}
