package fsm

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/rookerydb/rookery/filters"
)

// The RedisBloom layouts (filters.RBChain, filters.RBCuckoo): what BF.* and
// CF.* create under --filter-layout redisbloom, and what a LOADCHUNK of one of
// RedisBloom's own dumps creates. They answer, grow, dump and report exactly as
// RedisBloom does (INFO's Size and DEBUG included).
var (
	rbChainKind = kindDesc{
		loadable: true,
		family:   FamilyBF,
		build: func(s Spec) (filters.Filter, error) {
			return filters.NewRBChain(s.Capacity, s.ErrorRate, s.Expansion, s.NonScaling)
		},
		bytes: func(s Spec) (uint64, error) {
			return filters.RBChainBytes(s.Capacity, s.ErrorRate, s.Expansion, s.NonScaling)
		},
		add: func(flt filters.Filter, item []byte, _, _ bool) (int64, error, bool) {
			v := flt.(*filters.RBChain)
			added, err := v.Add(item)
			switch {
			case growthRefused(err):
				return 0, ErrOutOfMemory, true
			case errors.Is(err, filters.ErrFull):
				return 0, ErrNonScalingFull, true
			case err != nil:
				return 0, ErrCannotGrow, true
			}
			return b2i(added), nil, false
		},
		info: func(flt filters.Filter, in *Info) {
			v := flt.(*filters.RBChain)
			in.Capacity, in.Items, in.Filters = v.Capacity(), v.Count(), uint64(v.Filters())
			in.Expansion, in.NonScaling = uint64(v.Expansion()), v.NonScaling()
			in.ErrorRate, in.EstimatedFPP = v.ErrorRate(), v.ErrorRate()
			in.ReportedSize, in.Debug = v.RedisBloomSize(), v.Debug()
			for _, l := range v.Links() {
				in.Links = append(in.Links, Link{Bytes: l.Bytes, Bits: l.Bits, Hashes: int(l.Hashes),
					Capacity: l.Capacity, Items: l.Size, ErrorRate: l.ErrorRate})
			}
		},
		growth: func(flt filters.Filter, n int) uint64 {
			if v := flt.(*filters.RBChain); v.Count()+uint64(n) > v.Capacity() {
				return v.NextGrowthBytes()
			}
			return 0
		},
	}
	rbCuckooKind = kindDesc{
		loadable: true,
		family:   FamilyCF,
		build: func(s Spec) (filters.Filter, error) {
			bs, mi, ex, err := rbCuckooParams(s)
			if err != nil {
				return nil, err
			}
			return filters.NewRBCuckoo(s.Capacity, bs, mi, ex)
		},
		bytes: func(s Spec) (uint64, error) {
			bs, mi, ex, err := rbCuckooParams(s)
			if err != nil {
				return 0, err
			}
			return filters.RBCuckooBytes(s.Capacity, bs, mi, ex)
		},
		add: addCuckoo,
		refuse: func(flt filters.Filter) error {
			if flt.(*filters.RBCuckoo).CheckExpansions(filters.RBCuckooMaxExpansions) != nil {
				return ErrMaxExpansions
			}
			return nil
		},
		info: func(flt filters.Filter, in *Info) {
			v := flt.(*filters.RBCuckoo)
			in.Items, in.Deleted, in.Filters = v.Items(), v.Deleted(), uint64(v.Filters())
			in.Buckets, in.BucketSize = v.Buckets(), uint64(v.BucketSize())
			in.Expansion, in.MaxIter = uint64(v.Expansion()), uint64(v.MaxIterations())
			in.Capacity = rbCuckooSlots(v)
			in.ReportedSize, in.Debug = v.RedisBloomSize(), []string{v.Debug()}
			// 8-bit fingerprints from 255 values, 2b compared per sub-filter.
			if in.Capacity > 0 {
				load := float64(v.Items()) / float64(in.Capacity)
				in.EstimatedFPP = min(1, load*float64(2*in.BucketSize)/255*float64(v.Filters()))
			}
		},
		growth: func(flt filters.Filter, n int) uint64 {
			// RedisBloom's inserts start failing (and the filter growing) from
			// about a third of the slots on.
			if v := flt.(*filters.RBCuckoo); 10*(v.Items()+uint64(n)) > 3*rbCuckooSlots(v) {
				return v.NextGrowthBytes()
			}
			return 0
		},
	}
)

// rbCuckooParams narrows a cuckoo Spec to RedisBloom's 16-bit fields.
func rbCuckooParams(s Spec) (bucketSize, maxIter, expansion uint16, err error) {
	if s.Expansion > 32768 {
		return 0, 0, 0, fmt.Errorf("%w: expansion %d above 32768", filters.ErrBadParam, s.Expansion)
	}
	return s.BucketSize, s.MaxIterations, uint16(s.Expansion), nil
}

// rbCuckooSlots is the slots of every sub-filter of v: sub-filter i has the
// first one's buckets times expansion^i.
func rbCuckooSlots(v *filters.RBCuckoo) uint64 {
	n, shift := uint64(0), uint(0)
	if v.Expansion() > 1 {
		shift = uint(bits.TrailingZeros16(v.Expansion())) // a power of two
	}
	for i := 0; i < v.Filters(); i++ {
		n += v.Buckets() << (uint(i) * shift)
	}
	return n * uint64(v.BucketSize())
}
