package fsm

import (
	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/internal/errdetail"
)

// Everything the state machine knows of a filter kind is its row here: the
// command family that owns it, how a Spec builds it and what that would take,
// how an add behaves, what INFO says of it, and how it grows. Reads, deletes
// and counts go through the interfaces of filters/ (Filter, Counter, Deleter),
// so adding a kind is adding a row.
type kindDesc struct {
	family Family
	// loadable: a LOADCHUNK of the family may create a filter of the kind.
	loadable bool
	build    func(s Spec) (filters.Filter, error)
	bytes    func(s Spec) (uint64, error)
	// add adds one item: its outcome (1 added, 0 may have been present, -1 no
	// room), or an error and whether that error stops a multi-item command.
	add func(flt filters.Filter, item []byte, nx, multi bool) (int64, error, bool)
	// refuse, if set, is checked before an add command touches the filter: a
	// refusal fails the whole command and changes nothing.
	refuse func(flt filters.Filter) error
	// info fills the kind's fields of in.
	info func(flt filters.Filter, in *Info)
	// growth is the memory adding n items could add to the filter; nil for a
	// kind that never grows.
	growth func(flt filters.Filter, n int) uint64
}

var kinds = map[filters.Kind]kindDesc{
	filters.KindBloom: {
		family: FamilyBF,
		build:  func(s Spec) (filters.Filter, error) { return filters.NewBloom(s.Capacity, s.ErrorRate) },
		bytes:  func(s Spec) (uint64, error) { return filters.BloomBytes(s.Capacity, s.ErrorRate) },
		add: func(flt filters.Filter, item []byte, _, _ bool) (int64, error, bool) {
			return b2i(flt.(*filters.Bloom).Add(item)), nil, false
		},
		info: func(flt filters.Filter, in *Info) {
			v := flt.(*filters.Bloom)
			in.Capacity, in.Items, in.NonScaling = v.Capacity(), v.Count(), true
			in.ErrorRate, in.EstimatedFPP = v.ErrorRate(), v.EstimatedFPP()
			in.Links = []Link{linkOf(v)}
			in.ReportedSize = bloomReportedSize(in.Links)
		},
	},
	filters.KindScalable: {
		loadable: true,
		family:   FamilyBF,
		build: func(s Spec) (filters.Filter, error) {
			return filters.NewScalable(s.Capacity, s.ErrorRate, s.Expansion, s.NonScaling)
		},
		bytes: func(s Spec) (uint64, error) {
			return filters.ScalableBytes(s.Capacity, s.ErrorRate, s.Expansion, s.NonScaling)
		},
		add: func(flt filters.Filter, item []byte, _, _ bool) (int64, error, bool) {
			v := flt.(*filters.Scalable)
			added, err := v.Add(item)
			if err != nil {
				if growthRefused(err) {
					return 0, ErrOutOfMemory, true
				}
				if v.NonScaling() {
					return 0, ErrNonScalingFull, true
				}
				return 0, ErrCannotGrow, true
			}
			return b2i(added), nil, false
		},
		info: func(flt filters.Filter, in *Info) {
			v := flt.(*filters.Scalable)
			in.Capacity, in.Items, in.Filters = v.Capacity(), v.Count(), uint64(v.Filters())
			in.Expansion, in.NonScaling = uint64(v.Expansion()), v.NonScaling()
			in.ErrorRate, in.EstimatedFPP = v.ErrorRate(), v.ErrorRate()
			for _, b := range v.Links() {
				in.Links = append(in.Links, linkOf(b))
			}
			in.ReportedSize = bloomReportedSize(in.Links)
		},
		growth: func(flt filters.Filter, n int) uint64 {
			if v := flt.(*filters.Scalable); v.Count()+uint64(n) > v.Capacity() {
				return v.NextGrowthBytes()
			}
			return 0
		},
	},
	filters.KindCounting: countingKind(filters.NewCounting, filters.CountingBytes),
	filters.KindDLeft:    countingKind(filters.NewDLeft, filters.DLeftBytes),
	filters.KindCuckoo: {
		loadable: true,
		family:   FamilyCF,
		build:    func(s Spec) (filters.Filter, error) { return filters.NewCuckoo(cuckooConfig(s)) },
		bytes:    func(s Spec) (uint64, error) { return filters.CuckooBytes(cuckooConfig(s)) },
		add:      addCuckoo,
		// RedisBloom refuses every add to a filter of 32 sub-filters (its
		// cf-max-expansions), before inserting, so that adding cannot keep a
		// filter growing; its newest sub-filter may still have room.
		refuse: func(flt filters.Filter) error {
			if flt.(*filters.Cuckoo).Filters() >= filters.MaxCuckooFilters {
				return ErrMaxExpansions
			}
			return nil
		},
		info: infoCuckoo,
		growth: func(flt filters.Filter, n int) uint64 {
			// Inserts start failing (and the filter growing) somewhere past half
			// of the slots, depending on bucket size and evictions.
			if v := flt.(*filters.Cuckoo); 2*(v.Items()+uint64(n)) > v.Slots() {
				return v.NextGrowthBytes()
			}
			return 0
		},
	},
	// Windowed filters (window.go): sized for a whole window when created,
	// they never grow.
	filters.KindWindowBloom: {
		loadable: true,
		family:   FamilyBF,
		build:    func(s Spec) (filters.Filter, error) { return filters.NewWindowBloom(windowConfig(s)) },
		bytes:    func(s Spec) (uint64, error) { return filters.WindowBloomBytes(windowConfig(s)) },
		add: func(flt filters.Filter, item []byte, _, _ bool) (int64, error, bool) {
			return b2i(flt.(*filters.WindowBloom).Add(item)), nil, false
		},
		info: infoWindowBloom,
	},
	filters.KindWindowCuckoo: {
		loadable: true,
		family:   FamilyCF,
		build:    func(s Spec) (filters.Filter, error) { return filters.NewWindowCuckoo(windowConfig(s)) },
		bytes:    func(s Spec) (uint64, error) { return filters.WindowCuckooBytes(windowConfig(s)) },
		add:      addWindowCuckoo,
		info:     infoWindowCuckoo,
	},
	filters.KindRBChain:  rbChainKind,
	filters.KindRBCuckoo: rbCuckooKind,
}

// countingFilter is what both counting Bloom layouts (filters.Counting and
// filters.DLeft) answer alike.
type countingFilter interface {
	filters.Filter
	Add(item []byte) bool
	Capacity() uint64
	Items() uint64
	ErrorRate() float64
	CounterBits() uint8
}

// countingKind is the row of a counting Bloom layout: the two differ only in
// how they are built and sized.
func countingKind[F countingFilter](build func(capacity uint64, rate float64, counterBits uint8) (F, error),
	bytes func(capacity uint64, rate float64, counterBits uint8) (uint64, error)) kindDesc {
	return kindDesc{
		loadable: true,
		family:   FamilyCBF,
		build: func(s Spec) (filters.Filter, error) {
			f, err := build(s.Capacity, s.ErrorRate, s.CounterBits)
			if err != nil {
				return nil, err
			}
			return f, nil
		},
		bytes: func(s Spec) (uint64, error) { return bytes(s.Capacity, s.ErrorRate, s.CounterBits) },
		add: func(flt filters.Filter, item []byte, _, _ bool) (int64, error, bool) {
			return b2i(flt.(F).Add(item)), nil, false
		},
		info: func(flt filters.Filter, in *Info) {
			v := flt.(F)
			in.Capacity, in.Items, in.CounterBits = v.Capacity(), v.Items(), uint64(v.CounterBits())
			in.ErrorRate, in.EstimatedFPP = v.ErrorRate(), v.ErrorRate()
		},
	}
}

// cuckooAdder is what both cuckoo layouts add with.
type cuckooAdder interface {
	Add(item []byte) error
	AddNX(item []byte) (bool, error)
	Filters() int
}

// addCuckoo adds a copy of item, or with nx only if it may not be there, to
// either cuckoo layout. A full filter, or one whose growth the memory limit
// refuses, fails the item alone in a multi-item command (answering -1 for it),
// as RedisBloom's CF.INSERT does when it has no room or cannot allocate; a
// single add answers ErrOutOfMemory for the latter, and for the former
// answers "Filter is full", or, for our layout at its limit of sub-filters,
// "Maximum expansions reached" (RedisBloom's own layout reaches its limit only
// within a multi-item command).
func addCuckoo(flt filters.Filter, item []byte, nx, multi bool) (int64, error, bool) {
	v := flt.(cuckooAdder)
	added, err := true, error(nil)
	if nx {
		added, err = v.AddNX(item)
	} else {
		err = v.Add(item)
	}
	if err != nil {
		if multi {
			return -1, nil, false
		}
		if growthRefused(err) {
			return 0, ErrOutOfMemory, false // RedisBloom: "ERR Insufficient memory"
		}
		if flt.Kind() == filters.KindCuckoo && v.Filters() >= filters.MaxCuckooFilters {
			return 0, ErrMaxExpansions, false
		}
		return 0, ErrFull, false
	}
	return b2i(added), nil, false
}

// RedisBloom's Size (its BFMemUsage and CFMemUsage): the chain or filter
// struct, one struct per link or sub-filter, and the arrays.
const (
	rbChainStruct  = 32 // SBChain
	rbLinkStruct   = 64 // SBLink: a struct bloom and its item count
	rbCuckooStruct = 40 // CuckooFilter
	rbSubCFStruct  = 16 // SubCF
)

// bloomReportedSize is BF.INFO's Size of a chain of links: RedisBloom's count,
// with our arrays.
func bloomReportedSize(links []Link) uint64 {
	n := uint64(rbChainStruct)
	for _, l := range links {
		n += rbLinkStruct + (l.Bytes+7)/8*8
	}
	return n
}

func infoCuckoo(flt filters.Filter, in *Info) {
	v := flt.(*filters.Cuckoo)
	in.ReportedSize = rbCuckooStruct + rbSubCFStruct*uint64(v.Filters()) + v.TableBytes()
	in.Capacity, in.Items, in.Deleted = v.Slots(), v.Items(), v.Deleted()
	in.Filters, in.Buckets, in.BucketSize = uint64(v.Filters()), v.Buckets(), uint64(v.BucketSize())
	in.Expansion, in.MaxIter = uint64(v.Expansion()), uint64(v.MaxIterations())
	// A lookup compares 2b fingerprints per sub-filter, each matching with
	// probability 2^-f when its slot is occupied.
	if slots := v.Slots(); slots > 0 {
		load := float64(v.Items()) / float64(slots)
		per := float64(2*v.BucketSize()) / float64(uint64(1)<<v.FingerprintBits())
		in.EstimatedFPP = min(1, load*per*float64(v.Filters()))
	}
}

func linkOf(b *filters.Bloom) Link {
	return Link{Bytes: b.Bits() / 8, Bits: b.Bits(), Hashes: b.Hashes(), Capacity: b.Capacity(), Items: b.Count(),
		ErrorRate: b.ErrorRate()}
}

// FamilyOf is the command family that owns a kind (FamilyNone for a kind
// this build does not know).
func FamilyOf(k filters.Kind) Family { return familyOf(k) }

// familyOf is the command family that owns a kind.
func familyOf(k filters.Kind) Family {
	if d, ok := kinds[k]; ok {
		return d.family
	}
	return FamilyNone
}

// newFilter builds an empty filter from s.
func newFilter(s Spec) (filters.Filter, error) {
	k, ok := kinds[s.Kind]
	if !ok {
		return nil, ErrBadSpec
	}
	f, err := k.build(s)
	if err != nil {
		return nil, ErrBadSpec
	}
	return f, nil
}

func cuckooConfig(s Spec) filters.CuckooConfig {
	return filters.CuckooConfig{Capacity: s.Capacity, BucketSize: int(s.BucketSize),
		FingerprintBits: int(s.FingerprintBits), MaxIterations: int(s.MaxIterations),
		Expansion: s.Expansion}
}

// EstimateBytes reports the memory a filter made from s would take when created,
// without creating it. It returns ErrBadSpec for parameters the filter refuses.
func EstimateBytes(s Spec) (uint64, error) {
	k, ok := kinds[s.Kind]
	if !ok {
		return 0, ErrBadSpec
	}
	n, err := k.bytes(s)
	if err != nil {
		return 0, ErrBadSpec
	}
	return n, nil
}

// CheckSpec reports whether a filter can be built from s, without building it:
// nil, or ErrBadSpec wrapped with the reason (a parameter out of range, or a
// filter larger than one filter may be, with the bytes it would need). It
// sizes the filter with overflow-checked arithmetic and allocates nothing, so
// transport calls it while parsing: a spec that Apply would refuse is answered
// at once and never takes a log entry. Apply still checks every spec itself.
func CheckSpec(s Spec) error {
	k, ok := kinds[s.Kind]
	if !ok {
		return errdetail.New(ErrBadSpec, "unknown filter kind %d", uint8(s.Kind))
	}
	if _, err := k.bytes(s); err != nil {
		return errdetail.New(ErrBadSpec, "%s", errdetail.Of(err))
	}
	return nil
}
