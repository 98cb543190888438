package client

import (
	"context"
	"fmt"
	"strconv"
)

// Bloom filters (BF.*). A filter that BF.ADD or BF.MADD creates has error rate
// 0.01, capacity 100 and expansion 2, as in RedisBloom.

// BFReserveOptions are BF.RESERVE's optional arguments.
type BFReserveOptions struct {
	Expansion  int  // growth factor of each new sub-filter; 0 keeps the server's default (2)
	NonScaling bool // refuse new items when full instead of growing
}

// BFReserve creates a Bloom filter for capacity items at errorRate.
func (c *Client) BFReserve(ctx context.Context, key string, errorRate float64, capacity int64, o *BFReserveOptions) error {
	args := []any{"BF.RESERVE", key, strconv.FormatFloat(errorRate, 'g', -1, 64), capacity}
	if o != nil && o.Expansion > 0 {
		args = append(args, "EXPANSION", o.Expansion)
	}
	if o != nil && o.NonScaling {
		args = append(args, "NONSCALING")
	}
	_, err := c.write(ctx, args...)
	return err
}

// BFAdd adds item and reports whether it was new (false: it, or a false
// positive, was there already).
func (c *Client) BFAdd(ctx context.Context, key, item string) (bool, error) {
	return asBool(c.write(ctx, "BF.ADD", key, item))
}

// BFMAdd adds items in one log entry and reports, per item, whether it was new.
// On a full non-scaling filter it returns the outcomes of the items added before
// it filled up, and ErrFull.
func (c *Client) BFMAdd(ctx context.Context, key string, items ...string) ([]bool, error) {
	return asBools(c.write(ctx, withItems([]any{"BF.MADD", key}, items)...))
}

// BFExists reports whether item may be in the filter (false for a missing key).
func (c *Client) BFExists(ctx context.Context, key, item string) (bool, error) {
	return asBool(c.read(ctx, "BF.EXISTS", key, item))
}

// BFMExists is BFExists for several items.
func (c *Client) BFMExists(ctx context.Context, key string, items ...string) ([]bool, error) {
	return asBools(c.read(ctx, withItems([]any{"BF.MEXISTS", key}, items)...))
}

// BFCard returns the number of items the filter has taken.
func (c *Client) BFCard(ctx context.Context, key string) (int64, error) {
	return asInt(c.read(ctx, "BF.CARD", key))
}

// Cuckoo filters (CF.*): a multiset; adding an item twice stores two copies.
// A filter that CF.ADD creates has capacity 1024, bucket size 2, 20 iterations
// and expansion 1.

// CFReserveOptions are CF.RESERVE's optional arguments; zero fields keep the
// server's defaults.
type CFReserveOptions struct {
	BucketSize    int
	MaxIterations int
	Expansion     int
}

// CFReserve creates a cuckoo filter of capacity slots.
func (c *Client) CFReserve(ctx context.Context, key string, capacity int64, o *CFReserveOptions) error {
	args := []any{"CF.RESERVE", key, capacity}
	if o != nil {
		if o.BucketSize > 0 {
			args = append(args, "BUCKETSIZE", o.BucketSize)
		}
		if o.MaxIterations > 0 {
			args = append(args, "MAXITERATIONS", o.MaxIterations)
		}
		if o.Expansion > 0 {
			args = append(args, "EXPANSION", o.Expansion)
		}
	}
	_, err := c.write(ctx, args...)
	return err
}

// CFAdd adds a copy of item; ErrFull if there is no room.
func (c *Client) CFAdd(ctx context.Context, key, item string) error {
	_, err := c.write(ctx, "CF.ADD", key, item)
	return err
}

// CFAddNX adds item unless it may be there already, and reports whether it did.
func (c *Client) CFAddNX(ctx context.Context, key, item string) (bool, error) {
	return asBool(c.write(ctx, "CF.ADDNX", key, item))
}

// CFInsert adds a copy of each item in one log entry; per item, false means
// there was no room for it.
func (c *Client) CFInsert(ctx context.Context, key string, items ...string) ([]bool, error) {
	return asBools(c.write(ctx, withItems([]any{"CF.INSERT", key, "ITEMS"}, items)...))
}

// CFDel deletes one copy of item and reports whether it found one; ErrNotFound
// for a missing filter. Delete only what was added.
func (c *Client) CFDel(ctx context.Context, key, item string) (bool, error) {
	return asBool(c.write(ctx, "CF.DEL", key, item))
}

// CFExists reports whether a copy of item may be in the filter.
func (c *Client) CFExists(ctx context.Context, key, item string) (bool, error) {
	return asBool(c.read(ctx, "CF.EXISTS", key, item))
}

// CFMExists is CFExists for several items.
func (c *Client) CFMExists(ctx context.Context, key string, items ...string) ([]bool, error) {
	return asBools(c.read(ctx, withItems([]any{"CF.MEXISTS", key}, items)...))
}

// CFCount returns an upper bound of the copies of item the filter holds.
func (c *Client) CFCount(ctx context.Context, key, item string) (int64, error) {
	return asInt(c.read(ctx, "CF.COUNT", key, item))
}

// Counting Bloom filters (CBF.*).

// CBFReserveOptions are CBF.RESERVE's optional arguments.
type CBFReserveOptions struct {
	CounterBits int    // 4 (default) or 8
	Layout      string // "standard" (default) or "dleft"
}

// CBFReserve creates a counting Bloom filter for capacity items at errorRate.
func (c *Client) CBFReserve(ctx context.Context, key string, errorRate float64, capacity int64, o *CBFReserveOptions) error {
	args := []any{"CBF.RESERVE", key, strconv.FormatFloat(errorRate, 'g', -1, 64), capacity}
	if o != nil && o.CounterBits > 0 {
		args = append(args, "COUNTERBITS", o.CounterBits)
	}
	if o != nil && o.Layout != "" {
		args = append(args, "LAYOUT", o.Layout)
	}
	_, err := c.write(ctx, args...)
	return err
}

// CBFAdd adds an occurrence of item and reports whether it was absent before.
func (c *Client) CBFAdd(ctx context.Context, key, item string) (bool, error) {
	return asBool(c.write(ctx, "CBF.ADD", key, item))
}

// CBFDel removes an occurrence of item and reports whether it was present.
func (c *Client) CBFDel(ctx context.Context, key, item string) (bool, error) {
	return asBool(c.write(ctx, "CBF.DEL", key, item))
}

// CBFExists reports whether item may be in the filter.
func (c *Client) CBFExists(ctx context.Context, key, item string) (bool, error) {
	return asBool(c.read(ctx, "CBF.EXISTS", key, item))
}

// CBFCount returns an upper bound of how often item was added (and not deleted).
func (c *Client) CBFCount(ctx context.Context, key, item string) (int64, error) {
	return asInt(c.read(ctx, "CBF.COUNT", key, item))
}

// Dumps (BF.SCANDUMP / BF.LOADCHUNK, and the CF.* equivalents).

// ScanDump returns the chunk of the dump of a Bloom ("BF") or cuckoo ("CF")
// filter at iter (0 for the first) and the iterator of the next; next is 0
// after the last chunk. The chunks of one dump must come from one node and no
// write may land in between for them to form one filter; a read at the
// client's level otherwise.
func (c *Client) ScanDump(ctx context.Context, family, key string, iter int64) (next int64, chunk []byte, err error) {
	v, err := c.read(ctx, family+".SCANDUMP", key, iter)
	if err != nil {
		return 0, nil, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		return 0, nil, fmt.Errorf("rookery: unexpected reply %T %v", v, v)
	}
	next, ok = arr[0].(int64)
	if !ok {
		return 0, nil, fmt.Errorf("rookery: unexpected iterator %T", arr[0])
	}
	switch d := arr[1].(type) {
	case string:
		chunk = []byte(d)
	case nil:
	default:
		return 0, nil, fmt.Errorf("rookery: unexpected chunk %T", arr[1])
	}
	return next, chunk, nil
}

// LoadChunk loads one chunk of a dump, as ScanDump returned it with iter, into
// key of family ("BF" or "CF"); the first chunk creates the filter.
func (c *Client) LoadChunk(ctx context.Context, family, key string, iter int64, chunk []byte) error {
	_, err := c.write(ctx, family+".LOADCHUNK", key, iter, chunk)
	return err
}

// Keyspace.

// Del deletes filters and returns how many existed.
func (c *Client) Del(ctx context.Context, keys ...string) (int64, error) {
	return asInt(c.write(ctx, withItems([]any{"DEL"}, keys)...))
}

// Exists reports whether a filter named key exists.
func (c *Client) Exists(ctx context.Context, key string) (bool, error) {
	return asBool(c.read(ctx, "EXISTS", key))
}

func withItems(args []any, items []string) []any {
	for _, it := range items {
		args = append(args, it)
	}
	return args
}

// Replies arrive in RESP2: integers for yes/no.

func asInt(v any, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("rookery: unexpected reply %T %v", v, v)
	}
	return n, nil
}

func asBool(v any, err error) (bool, error) {
	n, err := asInt(v, err)
	return n == 1, err
}

// asBools reads an array of integers, which may end in an error (a full
// non-scaling filter stopped the command): the outcomes before it, and it.
func asBools(v any, err error) ([]bool, error) {
	if err != nil {
		return nil, err
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("rookery: unexpected reply %T %v", v, v)
	}
	out := make([]bool, 0, len(arr))
	for _, x := range arr {
		switch y := x.(type) {
		case int64:
			out = append(out, y == 1)
		case error:
			return out, serverErr(y)
		default:
			return out, fmt.Errorf("rookery: unexpected reply element %T %v", x, x)
		}
	}
	return out, nil
}
