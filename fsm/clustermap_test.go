package fsm

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/internal/slot"
)

// sampleMap is six shards of three replicas on six nodes.
func sampleMap() *Map {
	m := &Map{Version: 3, Replicas: 3, Draining: []string{"n6"}}
	nodes := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	for i, r := range slot.Ranges(6) {
		g := MapGroup{First: r.First, Last: r.Last, Creator: "n1", Created: i%2 == 0}
		for j := 0; j < 3; j++ {
			g.Replicas = append(g.Replicas, nodes[(i*3+j)%6])
		}
		g.Leader = g.Replicas[1]
		m.Groups = append(m.Groups, g)
	}
	return m
}

func TestMapRoundTrip(t *testing.T) {
	m := sampleMap()
	got, err := DecodeMap(EncodeMap(m))
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, got, m)
	}
	if c := m.Clone(); !reflect.DeepEqual(c, m) || &c.Groups[0].Replicas[0] == &m.Groups[0].Replicas[0] {
		t.Fatal("Clone is not a deep copy")
	}
	for s, want := range map[int]int{0: 0, 2730: 1, slot.Count - 1: 5} {
		if got := m.ShardOf(s); got != want {
			t.Errorf("slot %d in shard %d, want %d", s, got, want)
		}
	}
}

// TestMapCheck: a map a cluster could not run on is refused, whatever sent it.
func TestMapCheck(t *testing.T) {
	for name, change := range map[string]func(m *Map){
		"version 0":             func(m *Map) { m.Version = 0 },
		"no replicas":           func(m *Map) { m.Replicas = 0 },
		"no shards":             func(m *Map) { m.Groups = nil },
		"a gap in the slots":    func(m *Map) { m.Groups[1].First++ },
		"slots past the end":    func(m *Map) { m.Groups[5].Last = slot.Count },
		"slots left over":       func(m *Map) { m.Groups[5].Last-- },
		"a node twice":          func(m *Map) { m.Groups[0].Replicas[1] = m.Groups[0].Replicas[0] },
		"an empty node id":      func(m *Map) { m.Groups[2].Replicas[0] = "" },
		"a leader elsewhere":    func(m *Map) { m.Groups[3].Leader = "n9" },
		"draining out of order": func(m *Map) { m.Draining = []string{"n2", "n1"} },
		"a fenced replica":      func(m *Map) { m.Groups[0].Fenced = []string{m.Groups[0].Replicas[0]} },
		"fenced out of order":   func(m *Map) { m.Groups[0].Fenced = []string{"n9", "n8"} },
		"fenced twice":          func(m *Map) { m.Groups[0].Fenced = []string{"n8", "n8"} },
	} {
		m := sampleMap()
		change(m)
		if err := m.Check(); !errors.Is(err, ErrBadMap) {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := DecodeMap(EncodeMap(m)); !errors.Is(err, ErrBadMap) {
			t.Errorf("%s decoded: %v", name, err)
		}
	}
}

func FuzzDecodeMap(f *testing.F) {
	f.Add(EncodeMap(sampleMap()))
	one := &Map{Version: 1, Replicas: 1, Groups: []MapGroup{{First: 0, Last: slot.Count - 1, Replicas: []string{"a"}}}}
	f.Add(EncodeMap(one))
	fenced := sampleMap()
	fenced.Groups[1].Fenced = []string{"n8", "n9"}
	f.Add(EncodeMap(fenced))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMap(b)
		if err != nil {
			if !errors.Is(err, ErrBadMap) {
				t.Fatalf("error not ErrBadMap: %v", err)
			}
			return
		}
		if err := m.Check(); err != nil {
			t.Fatalf("decoded a map that fails its check: %v", err)
		}
		again, err := DecodeMap(EncodeMap(m))
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("re-encoding changed it: %v", err)
		}
	})
}

func setMap(m *Map) *Command { return &Command{Op: OpSetMap, Data: EncodeMap(m)} }

// TestApplySetMap: the map changes only to the next version (compare and
// set), a bad map changes nothing, and every change is heard of.
func TestApplySetMap(t *testing.T) {
	h := newHarness(t)
	var heard []uint64
	h.f.onMap = func(m *Map) { heard = append(heard, m.Version) }
	m := sampleMap()
	m.Version = 2
	if r := h.apply(setMap(m)); !errors.Is(r.Err, ErrStaleMap) || h.f.Map() != nil {
		t.Fatalf("version 2 as the first map: %v", r.Err)
	}
	m.Version = 1
	h.ok(setMap(m))
	if r := h.apply(setMap(m)); !errors.Is(r.Err, ErrStaleMap) {
		t.Fatalf("version 1 again: %v", r.Err)
	}
	bad := m.Clone()
	bad.Version, bad.Groups[0].Last = 2, 5
	if r := h.apply(&Command{Op: OpSetMap, Data: EncodeMap(bad)}); r.Err == nil {
		t.Fatal("a map with a gap in its slots was taken")
	}
	next := m.Clone()
	next.Version, next.Groups[1].Created = 2, true
	h.ok(setMap(next))
	if got := h.f.Map(); got.Version != 2 || !got.Groups[1].Created {
		t.Fatalf("map held: %+v", got)
	}
	if !reflect.DeepEqual(heard, []uint64{1, 2}) {
		t.Fatalf("heard of versions %v", heard)
	}

	// A snapshot carries the map; a restore hands it on.
	snap := snapshotBytes(t, h.f)
	g := New(Options{OnMap: func(m *Map) { heard = append(heard, 100+m.Version) }})
	if err := g.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.Map(), h.f.Map()) || heard[len(heard)-1] != 102 {
		t.Fatalf("restored map %+v, heard %v", g.Map(), heard)
	}
	// A state without a map keeps writing a snapshot older builds read.
	if v := snapshotBytes(t, New(Options{}))[len(snapMagic)]; v != snapV1 {
		t.Fatalf("a snapshot without a map is version %d", v)
	}
	if v := snap[len(snapMagic)]; v != snapV4 {
		t.Fatalf("a snapshot with a map is version %d", v)
	}
}

// TestMapGroupHoldsTheMapAlone: a group that holds filters never takes a
// first map (sharding them would hide them), and a group that holds the map
// refuses every filter write, changing nothing, whoever sent it.
func TestMapGroupHoldsTheMapAlone(t *testing.T) {
	legacy := newHarness(t)
	legacy.ok(add(FamilyBF, "kept", "x"))
	first := sampleMap()
	first.Version = 1
	if r := legacy.apply(setMap(first)); !errors.Is(r.Err, ErrHoldsFilters) || legacy.f.Map() != nil {
		t.Fatalf("first map over a group holding filters: %v, map %v", r.Err, legacy.f.Map())
	}
	if !legacy.exists(FamilyBF, "kept", "x") {
		t.Fatal("the refused map changed the filters")
	}

	h := newHarness(t)
	h.ok(setMap(first))
	writes := []*Command{
		add(FamilyBF, "k", "x"), add(FamilyCF, "c", "x"), reserve(FamilyBF, "r", bfSpec(100, 0.01, 2)),
		{Op: OpFlush}, {Op: OpDelKeys, Keys: []string{"k"}},
	}
	for _, c := range writes {
		c.Session = Session{ClientID: 7, Seq: 1}
		if r := h.apply(c); !errors.Is(r.Err, ErrMapGroup) {
			t.Fatalf("op %d on the map group: %v", c.Op, r.Err)
		}
	}
	if h.f.Len() != 0 || h.f.MemoryBytes() != 0 {
		t.Fatalf("the map group holds %d filters, %d bytes", h.f.Len(), h.f.MemoryBytes())
	}
	// The refusal travels between nodes as itself.
	if r, err := DecodeResult(EncodeResult(&Result{Err: ErrMapGroup})); err != nil || !errors.Is(r.Err, ErrMapGroup) {
		t.Fatalf("decoded %v %v", r, err)
	}
}

// TestCodecGoldenV9 pins log formats 8 and 9 for SET_MAP, the op they carry:
// a map of map codec 1 (no fences) in format 8, and one that fences replicas
// (map codec 2) in format 9. An old log must decode to the same maps.
func TestCodecGoldenV9(t *testing.T) {
	path := filepath.Join("testdata", "codec_golden_v9.txt")
	plain := &Map{Version: 3, Replicas: 3, Draining: []string{"n4"}, Groups: []MapGroup{
		{First: 0, Last: 8191, Replicas: []string{"n1", "n2", "n3"}, Leader: "n1", Creator: "n1", Created: true},
		{First: 8192, Last: 16383, Replicas: []string{"n2", "n3", "n5"}, Leader: "n2", Creator: "n2"},
	}}
	fenced := plain.Clone()
	fenced.Version = 4
	fenced.Groups[1].Replicas = []string{"n2"}
	fenced.Groups[1].Fenced = []string{"n3", "n5"}
	maps := []*Map{plain, fenced}
	var b strings.Builder
	for i, m := range maps {
		v := byte(CodecV8 + i)
		b.WriteString(hex.EncodeToString(EncodeCommandVersion(&Command{Op: OpSetMap, Data: EncodeMap(m)}, v)) + "\n")
	}
	if os.Getenv("ROOKERY_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with ROOKERY_UPDATE_GOLDEN=1 once to create it)", err)
	}
	if string(want) != b.String() {
		t.Fatalf("versions 8 and 9 of SET_MAP changed:\n got %s\nwant %s", b.String(), want)
	}
	for i, line := range strings.Split(strings.TrimSpace(string(want)), "\n") {
		e, _ := hex.DecodeString(line)
		_, cs, err := DecodeEntry(e)
		if err != nil || len(cs) != 1 {
			t.Fatalf("golden entry %d: %v", i, err)
		}
		m, err := DecodeMap(cs[0].Data)
		if err != nil || !reflect.DeepEqual(m, maps[i]) {
			t.Fatalf("golden entry %d decodes as %+v, %v; want %+v", i, m, err, maps[i])
		}
	}
}
