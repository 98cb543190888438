package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/rookerydb/rookery/internal/errdetail"
	"github.com/rookerydb/rookery/internal/slot"
	"github.com/rookerydb/rookery/internal/wire"
)

// Map is the cluster map (docs/SHARDING.md): how many shards there are, which
// slots each owns, and where the controller wants each shard's replicas and
// leader. Group 0's state machine holds it; every change is a log entry that
// replaces it whole, and takes effect only if it names the version it
// replaces, so two controllers (a deposed leader and the new one) cannot
// both change it.
type Map struct {
	// Version is 1 for the first map and one more for each change.
	Version uint64
	// Replicas is R, the replicas each shard should have.
	Replicas int
	// Groups is one entry per shard, in slot order.
	Groups []MapGroup
	// Draining lists the nodes being emptied, sorted.
	Draining []string
}

// MapGroup is one shard in the map.
type MapGroup struct {
	// First and Last are the shard's slots (both included).
	First, Last int
	// Replicas are the nodes that should hold the shard.
	Replicas []string
	// Leader is the node that should lead it ("" no preference).
	Leader string
	// Creator is the one node that may bootstrap the shard's group.
	Creator string
	// Created is set once the group has been bootstrapped and leads.
	Created bool
	// Fenced are the nodes whose replica of the shard a recovery cut off
	// (rookery recover --shard): they hold state the shard may lack, so they
	// may never hold it again until their copy is gone. Sorted; never one of
	// Replicas. Written from map codec 2 (log format 9) on.
	Fenced []string
}

// Limits of a map, checked on decode.
const (
	mapCodecV1      = 1
	mapCodecV2      = 2 // MapGroup.Fenced
	mapCodecVersion = mapCodecV2
	maxMapReplicas  = 15
	maxNodeID       = 255
	maxDraining     = 1024
	maxFenced       = 64
)

// ErrBadMap reports a map that is malformed or inconsistent.
var ErrBadMap = errors.New("bad cluster map")

// Shards is the number of shards.
func (m *Map) Shards() int { return len(m.Groups) }

// ShardOf returns the shard that owns slot s, or -1.
func (m *Map) ShardOf(s int) int {
	i, ok := slices.BinarySearchFunc(m.Groups, s, func(g MapGroup, s int) int {
		switch {
		case g.Last < s:
			return -1
		case g.First > s:
			return 1
		}
		return 0
	})
	if !ok {
		return -1
	}
	return i
}

// Clone returns a deep copy.
func (m *Map) Clone() *Map {
	c := *m
	c.Groups = make([]MapGroup, len(m.Groups))
	for i, g := range m.Groups {
		g.Replicas = slices.Clone(g.Replicas)
		g.Fenced = slices.Clone(g.Fenced)
		c.Groups[i] = g
	}
	c.Draining = slices.Clone(m.Draining)
	return &c
}

// Check reports whether m is a map a cluster can run on: shards whose ranges
// cover every slot once, in order; replicas that are distinct, non-empty node
// ids; a preferred leader among the replicas.
func (m *Map) Check() error {
	bad := func(format string, a ...any) error { return errdetail.New(ErrBadMap, format, a...) }
	if m.Version == 0 {
		return bad("version 0")
	}
	if m.Replicas < 1 || m.Replicas > maxMapReplicas {
		return bad("%d replicas per shard, want 1 to %d", m.Replicas, maxMapReplicas)
	}
	if len(m.Groups) < 1 || len(m.Groups) > slot.Count {
		return bad("%d shards, want 1 to %d", len(m.Groups), slot.Count)
	}
	next := 0
	for i, g := range m.Groups {
		if g.First != next || g.Last < g.First || g.Last >= slot.Count {
			return bad("shard %d has slots %d-%d after slot %d", i, g.First, g.Last, next-1)
		}
		next = g.Last + 1
		if len(g.Replicas) > maxMapReplicas {
			return bad("shard %d has %d replicas", i, len(g.Replicas))
		}
		for j, r := range g.Replicas {
			if err := checkNodeID(r); err != nil {
				return bad("shard %d: %v", i, err)
			}
			if slices.Contains(g.Replicas[:j], r) {
				return bad("shard %d places two replicas on %s", i, r)
			}
		}
		if g.Leader != "" && !slices.Contains(g.Replicas, g.Leader) {
			return bad("shard %d prefers leader %s, not one of its replicas", i, g.Leader)
		}
		if g.Creator != "" {
			if err := checkNodeID(g.Creator); err != nil {
				return bad("shard %d creator: %v", i, err)
			}
		}
		if len(g.Fenced) > maxFenced || !slices.IsSorted(g.Fenced) {
			return bad("shard %d: fenced list not sorted or too long", i)
		}
		for j, f := range g.Fenced {
			if err := checkNodeID(f); err != nil {
				return bad("shard %d fenced: %v", i, err)
			}
			if j > 0 && g.Fenced[j-1] == f || slices.Contains(g.Replicas, f) {
				return bad("shard %d fences %s twice, or fences a replica", i, f)
			}
		}
	}
	if next != slot.Count {
		return bad("the shards' slots end at %d", next-1)
	}
	if len(m.Draining) > maxDraining || !slices.IsSorted(m.Draining) {
		return bad("draining list not sorted or too long")
	}
	for _, d := range m.Draining {
		if err := checkNodeID(d); err != nil {
			return bad("draining: %v", err)
		}
	}
	return nil
}

func checkNodeID(id string) error {
	if id == "" || len(id) > maxNodeID {
		return fmt.Errorf("node id of %d bytes", len(id))
	}
	return nil
}

// EncodeMap encodes m (any map; Check it before proposing it). A map
// without fences is written in map codec 1, which every build since shards
// reads; fences need codec 2 (log format 9, MinCodec).
func EncodeMap(m *Map) []byte {
	v := byte(mapCodecV1)
	if m.fenced() {
		v = mapCodecV2
	}
	b := []byte{v}
	b = binary.AppendUvarint(b, m.Version)
	b = binary.AppendUvarint(b, uint64(m.Replicas))
	b = binary.AppendUvarint(b, uint64(len(m.Groups)))
	for _, g := range m.Groups {
		b = binary.AppendUvarint(b, uint64(g.First))
		b = binary.AppendUvarint(b, uint64(g.Last))
		b = binary.AppendUvarint(b, uint64(len(g.Replicas)))
		for _, r := range g.Replicas {
			b = appendString(b, r)
		}
		b = appendString(b, g.Leader)
		b = appendString(b, g.Creator)
		if g.Created {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		if v >= mapCodecV2 {
			b = binary.AppendUvarint(b, uint64(len(g.Fenced)))
			for _, f := range g.Fenced {
				b = appendString(b, f)
			}
		}
	}
	b = binary.AppendUvarint(b, uint64(len(m.Draining)))
	for _, d := range m.Draining {
		b = appendString(b, d)
	}
	return b
}

// fenced reports whether any shard of m fences a node.
func (m *Map) fenced() bool {
	for _, g := range m.Groups {
		if len(g.Fenced) > 0 {
			return true
		}
	}
	return false
}

// mapNeedsV9 reports whether an encoded map needs log format 9 (map codec 2).
func mapNeedsV9(b []byte) bool { return len(b) > 0 && b[0] >= mapCodecV2 }

// DecodeMap decodes and checks a map.
func DecodeMap(b []byte) (*Map, error) {
	r := wire.NewReader(b, ErrBadMap)
	v := r.Byte()
	if r.Err() == nil && (v < mapCodecV1 || v > mapCodecVersion) {
		return nil, errdetail.New(ErrBadMap, "map codec version %d, this build reads 1 to %d", v, mapCodecVersion)
	}
	m := &Map{Version: r.Uvarint(), Replicas: int(min(r.Uvarint(), maxMapReplicas+1))}
	n := r.Count()
	if n > slot.Count {
		return nil, errdetail.New(ErrBadMap, "%d shards", n)
	}
	str := func() string { return string(r.Bytes(r.Count())) }
	for i := 0; i < n && r.Err() == nil; i++ {
		g := MapGroup{First: int(min(r.Uvarint(), slot.Count)), Last: int(min(r.Uvarint(), slot.Count))}
		reps := r.Count()
		if reps > maxMapReplicas {
			r.Fail("too many replicas")
			break
		}
		for j := 0; j < reps && r.Err() == nil; j++ {
			g.Replicas = append(g.Replicas, str())
		}
		g.Leader, g.Creator = str(), str()
		switch r.Byte() {
		case 0:
		case 1:
			g.Created = true
		default:
			r.Fail("bad created flag")
		}
		if v >= mapCodecV2 {
			nf := r.Count()
			if nf > maxFenced {
				r.Fail("too many fenced nodes")
				break
			}
			for j := 0; j < nf && r.Err() == nil; j++ {
				g.Fenced = append(g.Fenced, str())
			}
		}
		m.Groups = append(m.Groups, g)
	}
	nd := r.Count()
	for i := 0; i < nd && r.Err() == nil; i++ {
		m.Draining = append(m.Draining, str())
	}
	if r.Err() == nil && len(r.B) != 0 {
		r.Fail("trailing bytes")
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	if err := m.Check(); err != nil {
		return nil, err
	}
	return m, nil
}

// Map returns the cluster map this state machine holds (group 0's), nil
// before one. The map is shared: callers must not change it.
func (f *FSM) Map() *Map { return f.cmap.Load() }

// applySetMap replaces the map with the command's, if its version is one more
// than the map held (1 for the first): the compare-and-set that keeps two
// controllers from both changing it. A map that does not decode or check is
// refused the same way on every replica.
func (f *FSM) applySetMap(c *Command) *Result {
	m, err := DecodeMap(c.Data)
	if err != nil {
		return &Result{Err: ErrBadSpec}
	}
	cur := f.cmap.Load()
	want := uint64(1)
	if cur != nil {
		want = cur.Version + 1
	}
	if m.Version != want {
		return &Result{Err: ErrStaleMap}
	}
	if cur == nil && f.Len() > 0 {
		return &Result{Err: ErrHoldsFilters}
	}
	f.cmap.Store(m)
	if f.onMap != nil {
		f.onMap(m)
	}
	return &Result{Ints: []int64{int64(m.Version)}}
}
