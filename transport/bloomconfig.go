package transport

import (
	"fmt"
	"strconv"

	"github.com/rookerydb/rookery/filters"
)

// RedisBloom's settings, read and changed with CONFIG GET and CONFIG SET under
// the names Redis 8 gives them, with RedisBloom's defaults, ranges and errors.
// They are this node's, as a Redis server's are its own: a filter's parameters
// are fixed in the log entry that creates it (so every replica builds the same
// filter whichever node took the command), and cf-max-expansions travels in
// each cuckoo add that it limits. An operator who wants every node to create
// filters alike sets them on every node.

// intSetting is an integer setting: its value, its range, and the text CONFIG
// GET answers (as it was set).
type intSetting struct {
	value, min, max int64
	text            string
}

// bloomConfig is one version of the settings. CONFIG SET builds a new one
// and swaps it in; commands read whichever is current when they are parsed.
type bloomConfig struct {
	errorRate     float64
	errorRateText string
	bfInitial     intSetting // bf-initial-size
	bfExpansion   intSetting // bf-expansion-factor, 0: non-scaling
	cfBucket      intSetting // cf-bucket-size
	cfInitial     intSetting // cf-initial-size
	cfMaxIter     intSetting // cf-max-iterations
	cfExpansion   intSetting // cf-expansion-factor
	cfMaxExp      intSetting // cf-max-expansions
}

// RedisBloom's float range is open: (0, 1).
const (
	bfErrorRateMin = 0.0
	bfErrorRateMax = 1.0
)

func newIntSetting(v, lo, hi int64) intSetting {
	return intSetting{value: v, min: lo, max: hi, text: strconv.FormatInt(v, 10)}
}

// defaultBloomConfig is RedisBloom's defaults; maxCap bounds the initial
// sizes as it bounds RESERVE's capacity (--max-capacity, RedisBloom's 2^30
// by default).
func defaultBloomConfig(maxCap int64) *bloomConfig {
	return &bloomConfig{
		errorRate: bfDefaultErrorRate, errorRateText: "0.01",
		bfInitial:   newIntSetting(bfDefaultCapacity, 1, maxCap),
		bfExpansion: newIntSetting(bfDefaultExpansion, 0, maxExpansion),
		cfBucket:    newIntSetting(cfDefaultBucketSize, 1, cfMaxBucketSize),
		cfInitial:   newIntSetting(cfDefaultCapacity, 2*cfDefaultBucketSize, maxCap),
		cfMaxIter:   newIntSetting(cfDefaultMaxIterations, 1, cfMaxIterations),
		cfExpansion: newIntSetting(cfDefaultExpansion, 0, maxExpansion),
		cfMaxExp:    newIntSetting(filters.MaxCuckooFilters, 1, 65536),
	}
}

// bloomSetting names one setting and how to read and change it in a config.
type bloomSetting struct {
	name string
	get  func(bc *bloomConfig) string
	set  func(bc *bloomConfig, v []byte) error
}

var bloomSettings = []bloomSetting{
	{"bf-error-rate", func(bc *bloomConfig) string { return bc.errorRateText }, setErrorRate},
	intBloomSetting("bf-initial-size", func(bc *bloomConfig) *intSetting { return &bc.bfInitial }),
	intBloomSetting("bf-expansion-factor", func(bc *bloomConfig) *intSetting { return &bc.bfExpansion }),
	intBloomSetting("cf-bucket-size", func(bc *bloomConfig) *intSetting { return &bc.cfBucket }),
	intBloomSetting("cf-initial-size", func(bc *bloomConfig) *intSetting { return &bc.cfInitial }),
	intBloomSetting("cf-max-iterations", func(bc *bloomConfig) *intSetting { return &bc.cfMaxIter }),
	intBloomSetting("cf-expansion-factor", func(bc *bloomConfig) *intSetting { return &bc.cfExpansion }),
	intBloomSetting("cf-max-expansions", func(bc *bloomConfig) *intSetting { return &bc.cfMaxExp }),
}

// setErrorRate checks bf-error-rate as RedisBloom does: a number in (0, 1);
// above 0.25 it is capped to 0.25, and CONFIG GET then answers 0.25.
func setErrorRate(bc *bloomConfig, v []byte) error {
	f, ok := parseFloat(v)
	if !ok {
		return redisError("Invalid value for `bf-error-rate`")
	}
	if !(f > bfErrorRateMin && f < bfErrorRateMax) {
		return redisError(fmt.Sprintf("Value for `bf-error-rate` must be in the range (%f, %f)", bfErrorRateMin, bfErrorRateMax))
	}
	bc.errorRate, bc.errorRateText = f, string(v)
	if f > bfErrorRateCap {
		bc.errorRate = bfErrorRateCap
		bc.errorRateText = strconv.FormatFloat(bfErrorRateCap, 'g', 17, 64)
	}
	return nil
}

// intBloomSetting is an integer setting checked against its range, which
// cf-bucket-size and cf-initial-size move for each other as RedisBloom does:
// the initial size must hold two buckets, and a bucket at most half of it.
func intBloomSetting(name string, field func(bc *bloomConfig) *intSetting) bloomSetting {
	return bloomSetting{name: name,
		get: func(bc *bloomConfig) string { return field(bc).text },
		set: func(bc *bloomConfig, v []byte) error {
			st := field(bc)
			n, ok := parseInt64(v)
			if !ok {
				return redisError(fmt.Sprintf("Invalid value for `%s`", name))
			}
			if n < st.min || n > st.max {
				return redisError(fmt.Sprintf("Value for `%s` must be in the range [%d, %d]", name, st.min, st.max))
			}
			st.value, st.text = n, string(v)
			switch name {
			case "cf-bucket-size":
				bc.cfInitial.min = 2 * n
			case "cf-initial-size":
				bc.cfBucket.max = min(n/2, cfMaxBucketSize)
			}
			return nil
		}}
}

// maxFilters is what a cuckoo add carries to the state machine: the limit on
// sub-filters when cf-max-expansions is below the filters' own (32), else 0,
// which leaves the state machine's own limit.
func (bc *bloomConfig) maxFilters() uint32 {
	if v := bc.cfMaxExp.value; v < filters.MaxCuckooFilters {
		return uint32(v)
	}
	return 0
}

// bfDefaults are the parameters BF.ADD, BF.MADD and BF.INSERT create a filter
// with, and BF.RESERVE's expansion: an expansion factor of 0 makes
// non-scaling filters.
func (bc *bloomConfig) bfDefaults() (rate float64, capacity, expansion int64, nonScaling bool) {
	return bc.errorRate, bc.bfInitial.value, bc.bfExpansion.value, bc.bfExpansion.value == 0
}
