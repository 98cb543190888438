package filters

// Inserting into a cuckoo table whose two candidate buckets are both full.

// cuckooLookahead is the largest bucket size relocate handles; wider buckets go
// straight to the eviction walk.
const cuckooLookahead = 8

// victimBit returns the bit position of the slot of bucket i that kick j of the
// insert of k evicts. The choice is a function of the item and the kick number,
// not of a random generator, so every replica evicts the same victims, and the
// undo can recompute each choice instead of recording it.
func (t *cuckooTable) victimBit(k *cuckooKey, i uint64, j int) uint64 {
	return i*t.w + reduce(mix64(k.h2+uint64(j)), t.b)*t.f
}

// relocate tries to store fp in the full bucket i by moving one of i's
// fingerprints to a free slot of that fingerprint's other bucket: a one-level
// breadth-first look-ahead. The other buckets are all loaded before any is
// examined, so their cache misses overlap and the look-ahead costs about one
// miss, where the random walk pays one miss per eviction and succeeds, near full,
// far less often per step. It changes nothing unless it succeeds.
func (t *cuckooTable) relocate(i, fp uint64) bool {
	if t.wide || t.b > cuckooLookahead {
		return false
	}
	var alts, xs [cuckooLookahead]uint64
	x := t.load(i)
	for s := range t.b {
		alts[s] = t.altIndex(i, x>>(s*t.f)&t.fmask)
	}
	for s := range t.b {
		xs[s] = t.load(alts[s])
	}
	for s := range t.b {
		// A fingerprint whose other bucket is i itself finds i full.
		if flags := t.lanesEqual(xs[s], 0); flags != 0 {
			t.setLaneAt(t.laneBit(alts[s], flags), x>>(s*t.f)&t.fmask)
			t.setLaneAt(i*t.w+s*t.f, fp)
			return true
		}
	}
	return false
}

// kickInsert stores k's fingerprint when both its buckets are full. It first
// tries relocate on both, then the random walk of Fan et al.: evict a victim,
// move it to its other bucket (or relocate there), repeat, up to maxIter
// evictions. If no eviction ends in a free slot it undoes every one, in reverse,
// and reports false: the table is then exactly as it was. (Libraries that stop
// after the last eviction drop the last victim, a false negative for some item
// already added.)
//
// The undo needs no record of the walk. Kick j stored the fingerprint in hand in
// slot victimBit(j) of bucket B_j and took out the victim v, whose other bucket is
// B_(j+1) = altIndex(B_j, v); since altIndex is its own inverse, holding v at
// B_(j+1) gives back B_j, and swapping v into that slot again gives back the
// fingerprint kick j stored. A relocate that fails changes nothing, so it leaves
// no trace to undo.
func (t *cuckooTable) kickInsert(k *cuckooKey, maxIter int) bool {
	i1, i2 := t.indexes(k)
	if t.relocate(i1, k.fp) || t.relocate(i2, k.fp) {
		return true
	}
	cur := i1
	if k.h2&1 != 0 {
		cur = i2
	}
	fp := k.fp
	for j := 0; j < maxIter; j++ {
		p := t.victimBit(k, cur, j)
		victim := t.laneAt(p)
		t.setLaneAt(p, fp)
		fp = victim
		cur = t.altIndex(cur, fp)
		if t.replaceIn(cur, 0, fp) || t.relocate(cur, fp) {
			return true
		}
	}
	for j := maxIter - 1; j >= 0; j-- {
		cur = t.altIndex(cur, fp)
		p := t.victimBit(k, cur, j)
		stored := t.laneAt(p)
		t.setLaneAt(p, fp)
		fp = stored
	}
	return false
}
