module github.com/rookerydb/rookery/bench

go 1.26

replace github.com/rookerydb/rookery => ../

require (
	github.com/bits-and-blooms/bitset v1.24.2 // indirect
	github.com/bits-and-blooms/bloom/v3 v3.7.1 // indirect
	github.com/dgryski/go-metro v0.0.0-20200812162917-85c65e2d0165 // indirect
	github.com/linvon/cuckoo-filter v0.4.0 // indirect
	github.com/panmari/cuckoofilter v1.0.6 // indirect
	github.com/rookerydb/rookery v0.0.0 // indirect
	github.com/twmb/murmur3 v1.1.8 // indirect
)
