package filters

// Helpers that build paged arrays for tests.

// pagedOf returns an array holding a copy of s.
func pagedOf(s []uint64) paged {
	a := newPaged(uint64(len(s)))
	for p := range a.pages {
		copy(a.page(uint64(p)), s[p*pageWords:])
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

// owned gives every page of f that no write has reached yet (the shared zero
// page, owned by nobody) a copy of its own, as a decoded filter's pages are,
// so that reflect.DeepEqual compares contents, and returns f.
func owned[F Filter](f F) F {
	for _, a := range f.payload() {
		for p := range a.pages {
			if a.pages[p].owner == noOwner {
				a.unshare(&a.pages[p])
			}
		}
	}
	return f
}
