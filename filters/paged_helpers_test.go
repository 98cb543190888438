package filters

// Helpers that build paged arrays for tests.

// pagedOf returns an array holding a copy of s.
func pagedOf(s []uint64) paged {
	a := newPaged(uint64(len(s)))
	for p, pg := range a.pages {
		copy(pg.w, s[p*pageWords:])
	}
	return a
}

// fill sets every word to v.
func (a *paged) fill(v uint64) {
	for p := range a.pages {
		pg := a.page(uint64(p))
		for j := range pg {
			pg[j] = v
		}
	}
}
