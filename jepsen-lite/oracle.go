package main

import (
	"fmt"

	"github.com/rookerydb/rookery/filters"
)

// The filters of a run are built with fixed parameters, so the checker can
// rebuild their geometry with the same code the nodes run and work out, for
// every item the run wrote, whether another item of the run collides with it.
// An item with no collision gets exact answers from a correct cluster: the
// model holds it to them (check.go).

// The long-lived filters' parameters, shared by the workload (which creates
// them) and the oracles (which rebuild their geometry).
const (
	bloomCapacity    = 1 << 20
	bloomErrorRate   = 0.001
	scalableCapacity = 200 // small, so the run pushes it through several expansions
	scalableRate     = 0.01
	cuckooCapacity   = 1 << 20
	cuckooBucketSize = 4
	cuckooFPBits     = 8 // what CF.RESERVE gives
	cuckooMaxIter    = 20
	countingCapacity = 1 << 20
	countingRate     = 0.0001
	countingBits     = 8
	ephCapacity      = 1000
	ephRate          = 0.01
)

// newCuckooOracle builds an empty cuckoo filter shaped as the run's.
func newCuckooOracle() (*filters.Cuckoo, error) {
	return filters.NewCuckoo(filters.CuckooConfig{Capacity: cuckooCapacity, BucketSize: cuckooBucketSize,
		FingerprintBits: cuckooFPBits, MaxIterations: cuckooMaxIter, Expansion: 1})
}

// exactItems returns, for the cuckoo and the counting Bloom filter, the items
// of the history that no other item of the history collides with.
//
// In the cuckoo filter an item's bucket pair is a function of either bucket
// and its fingerprint, so an item collides with another exactly when the two
// share fingerprint and pair; with every item of the run added once to an
// empty filter of the same shape, an item's Count is 1 exactly when none
// does. In the counting Bloom filter an item's count is the least of its
// counters; with every item added once, a count of 1 means one of its counters
// is its own alone, so its count in the real filter is exactly its copies.
func exactItems(ops []op) (map[string]map[string]bool, error) {
	universe := map[string][]string{}
	seen := map[string]map[string]bool{}
	for _, o := range ops {
		if o.key != cuckooKey && o.key != countingKey {
			continue
		}
		if seen[o.key] == nil {
			seen[o.key] = map[string]bool{}
		}
		if !seen[o.key][o.item] {
			seen[o.key][o.item] = true
			universe[o.key] = append(universe[o.key], o.item)
		}
	}
	cf, err := newCuckooOracle()
	if err != nil {
		return nil, err
	}
	cbf, err := filters.NewCounting(countingCapacity, countingRate, countingBits)
	if err != nil {
		return nil, err
	}
	for _, it := range universe[cuckooKey] {
		if err := cf.Add([]byte(it)); err != nil {
			return nil, fmt.Errorf("cuckoo oracle: %w", err)
		}
	}
	for _, it := range universe[countingKey] {
		cbf.Add([]byte(it))
	}
	exact := map[string]map[string]bool{cuckooKey: {}, countingKey: {}}
	for _, it := range universe[cuckooKey] {
		exact[cuckooKey][it] = cf.Count([]byte(it)) == 1
	}
	for _, it := range universe[countingKey] {
		exact[countingKey][it] = cbf.Count([]byte(it)) == 1
	}
	return exact, nil
}
