package acl

import "strings"

// Category is an ACL command category (@read, @bloom...), numbered in the
// order ACL CAT lists them.
type Category uint8

// Redis 7's categories, in its order (acl.c ACLCommandCategories), then the
// module categories in the order RedisBloom adds them, then ours. Many of
// Redis's have no command here (@hash, @stream...); they are known all the
// same, so rules and aclfiles written for Redis load (-@hash is a common
// rule), and ACL CAT lists what Redis lists.
const (
	CatKeyspace Category = iota
	CatRead
	CatWrite
	CatSet
	CatSortedSet
	CatList
	CatHash
	CatString
	CatBitmap
	CatHyperLogLog
	CatGeo
	CatStream
	CatPubSub
	CatAdmin
	CatFast
	CatSlow
	CatBlocking
	CatDangerous
	CatConnection
	CatTransaction
	CatScripting
	// RedisBloom's, added by its module in this order: bf, cf, then its CMS,
	// Top-K and t-digest families. Rookery has no CMS, Top-K or t-digest
	// commands; their categories are known (and empty) so that rules written
	// for Redis Stack load and RedisBloom's ACL CAT test finds them.
	CatBloom
	CatCuckoo
	CatCMS
	CatTopK
	CatTDigest
	// CatCBF is ours, for CBF.*: named after the commands' prefix, as
	// RedisBloom's later families are (cms, topk, tdigest), so that +@cbf
	// reads as what it grants. The counting filters are not in @bloom:
	// RedisBloom's ACL CAT bloom lists exactly the BF commands.
	CatCBF

	numCategories
)

var categoryNames = [numCategories]string{
	"keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
	"bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
	"blocking", "dangerous", "connection", "transaction", "scripting",
	"bloom", "cuckoo", "cms", "topk", "tdigest", "cbf",
}

// String is the category's name without the @.
func (c Category) String() string {
	if c >= numCategories {
		return "unknown"
	}
	return categoryNames[c]
}

// CategoryNames lists every category, as ACL CAT without an argument does.
func CategoryNames() []string {
	out := make([]string, numCategories)
	copy(out, categoryNames[:])
	return out
}

// CategoryByName finds a category by its name (without the @), ignoring case,
// as Redis does. "all" is not a category: +@all and -@all are rules of their
// own, and ACL CAT all is an unknown category.
func CategoryByName(name string) (Category, bool) {
	for i, n := range categoryNames {
		if strings.EqualFold(n, name) {
			return Category(i), true
		}
	}
	return 0, false
}

// CategorySet is a set of categories, one bit each.
type CategorySet uint64

// Cats builds a set.
func Cats(cs ...Category) CategorySet {
	var s CategorySet
	for _, c := range cs {
		s |= 1 << c
	}
	return s
}

// Has reports whether c is in s.
func (s CategorySet) Has(c Category) bool { return s&(1<<c) != 0 }

// List is s's categories in ACL CAT order.
func (s CategorySet) List() []Category {
	var out []Category
	for c := Category(0); c < numCategories; c++ {
		if s.Has(c) {
			out = append(out, c)
		}
	}
	return out
}

// Flags is s as COMMAND INFO shows it: "@read", "@bloom"..., in ACL CAT
// order (Redis's addReplyCommandCategories).
func (s CategorySet) Flags() []string {
	var out []string
	for _, c := range s.List() {
		out = append(out, "@"+c.String())
	}
	return out
}
