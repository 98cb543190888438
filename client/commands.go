package client

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Each command is built once, as an op, and either run on its own (the Client
// methods) or queued in a Pipeline.

// Bloom filters (BF.*). A filter that BF.ADD or BF.MADD creates has error rate
// 0.01, capacity 100 and expansion 2, as in RedisBloom.

// BFReserveOptions are BF.RESERVE's optional arguments.
type BFReserveOptions struct {
	Expansion  int  // growth factor of each new sub-filter; 0 keeps the server's default (2)
	NonScaling bool // refuse new items when full instead of growing
	// Window makes a windowed filter: items added more than Window ago
	// answer absent (after a slack of about a seventh of it). Whole
	// milliseconds; it never grows.
	Window time.Duration
	// Last makes a windowed filter of the most recent Last insertions.
	Last int64
}

func bfReserve(key string, errorRate float64, capacity int64, o *BFReserveOptions) op[struct{}] {
	args := []string{"BF.RESERVE", key, strconv.FormatFloat(errorRate, 'g', -1, 64), itoa(capacity)}
	if o != nil && o.Expansion > 0 {
		args = append(args, "EXPANSION", itoa(int64(o.Expansion)))
	}
	if o != nil && o.NonScaling {
		args = append(args, "NONSCALING")
	}
	if o != nil && o.Window > 0 {
		args = append(args, "WINDOW", itoa(o.Window.Milliseconds())+"ms")
	}
	if o != nil && o.Last > 0 {
		args = append(args, "LAST", itoa(o.Last))
	}
	return op[struct{}]{args: args, write: true, decode: asOK}
}

// BFReserve creates a Bloom filter for capacity items at errorRate.
func (c *Client) BFReserve(ctx context.Context, key string, errorRate float64, capacity int64, o *BFReserveOptions) error {
	_, err := do(ctx, c, bfReserve(key, errorRate, capacity, o))
	return err
}

func bfAdd(key, item string) op[bool] {
	return op[bool]{args: []string{"BF.ADD", key, item}, write: true, decode: asBool}
}

// BFAdd adds item and reports whether it was new (false: it, or a false
// positive, was there already).
func (c *Client) BFAdd(ctx context.Context, key, item string) (bool, error) {
	return do(ctx, c, bfAdd(key, item))
}

func bfMAdd(key string, items []string) op[[]bool] {
	return op[[]bool]{args: withItems([]string{"BF.MADD", key}, items), write: true, decode: asBools}
}

// BFMAdd adds items in one log entry and reports, per item, whether it was new.
// On a full non-scaling filter it returns the outcomes of the items added before
// it filled up, and ErrFull. For many items, see AddAll.
func (c *Client) BFMAdd(ctx context.Context, key string, items ...string) ([]bool, error) {
	return do(ctx, c, bfMAdd(key, items))
}

func bfExists(key, item string) op[bool] {
	return op[bool]{args: []string{"BF.EXISTS", key, item}, decode: asBool}
}

// BFExists reports whether item may be in the filter (false for a missing key).
func (c *Client) BFExists(ctx context.Context, key, item string) (bool, error) {
	return do(ctx, c, bfExists(key, item))
}

func bfMExists(key string, items []string) op[[]bool] {
	return op[[]bool]{args: withItems([]string{"BF.MEXISTS", key}, items), decode: asBools}
}

// BFMExists is BFExists for several items.
func (c *Client) BFMExists(ctx context.Context, key string, items ...string) ([]bool, error) {
	return do(ctx, c, bfMExists(key, items))
}

// BFCard returns the number of items the filter has taken.
func (c *Client) BFCard(ctx context.Context, key string) (int64, error) {
	return do(ctx, c, op[int64]{args: []string{"BF.CARD", key}, decode: asInt})
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
	// Window makes a windowed filter: a copy answers (and counts, and can be
	// deleted) for Window after its add, and not after a slack of about a
	// seventh of it. Whole milliseconds; it never grows, so it takes no
	// BucketSize or Expansion.
	Window time.Duration
}

func cfReserve(key string, capacity int64, o *CFReserveOptions) op[struct{}] {
	args := []string{"CF.RESERVE", key, itoa(capacity)}
	if o != nil {
		for _, kv := range []struct {
			name string
			v    int
		}{{"BUCKETSIZE", o.BucketSize}, {"MAXITERATIONS", o.MaxIterations}, {"EXPANSION", o.Expansion}} {
			if kv.v > 0 {
				args = append(args, kv.name, itoa(int64(kv.v)))
			}
		}
		if o.Window > 0 {
			args = append(args, "WINDOW", itoa(o.Window.Milliseconds())+"ms")
		}
	}
	return op[struct{}]{args: args, write: true, decode: asOK}
}

// CFReserve creates a cuckoo filter of capacity slots.
func (c *Client) CFReserve(ctx context.Context, key string, capacity int64, o *CFReserveOptions) error {
	_, err := do(ctx, c, cfReserve(key, capacity, o))
	return err
}

func cfAdd(key, item string) op[struct{}] {
	return op[struct{}]{args: []string{"CF.ADD", key, item}, write: true, decode: asOK}
}

// CFAdd adds a copy of item; ErrFull if there is no room.
func (c *Client) CFAdd(ctx context.Context, key, item string) error {
	_, err := do(ctx, c, cfAdd(key, item))
	return err
}

func cfAddNX(key, item string) op[bool] {
	return op[bool]{args: []string{"CF.ADDNX", key, item}, write: true, decode: asBool}
}

// CFAddNX adds item unless it may be there already, and reports whether it did.
func (c *Client) CFAddNX(ctx context.Context, key, item string) (bool, error) {
	return do(ctx, c, cfAddNX(key, item))
}

func cfInsert(key string, items []string) op[[]bool] {
	return op[[]bool]{args: withItems([]string{"CF.INSERT", key, "ITEMS"}, items), write: true, decode: asBools}
}

// CFInsert adds a copy of each item in one log entry; per item, false means
// there was no room for it. For many items, see AddAll.
func (c *Client) CFInsert(ctx context.Context, key string, items ...string) ([]bool, error) {
	return do(ctx, c, cfInsert(key, items))
}

func cfDel(key, item string) op[bool] {
	return op[bool]{args: []string{"CF.DEL", key, item}, write: true, decode: asBool}
}

// CFDel deletes one copy of item and reports whether it found one; ErrNotFound
// for a missing filter. Delete only what was added: a fingerprint shared with
// another item would delete that one's. To retry a delete across calls, send
// it under a Key (WithKey).
func (c *Client) CFDel(ctx context.Context, key, item string) (bool, error) {
	return do(ctx, c, cfDel(key, item))
}

func cfExists(key, item string) op[bool] {
	return op[bool]{args: []string{"CF.EXISTS", key, item}, decode: asBool}
}

// CFExists reports whether a copy of item may be in the filter.
func (c *Client) CFExists(ctx context.Context, key, item string) (bool, error) {
	return do(ctx, c, cfExists(key, item))
}

func cfMExists(key string, items []string) op[[]bool] {
	return op[[]bool]{args: withItems([]string{"CF.MEXISTS", key}, items), decode: asBools}
}

// CFMExists is CFExists for several items.
func (c *Client) CFMExists(ctx context.Context, key string, items ...string) ([]bool, error) {
	return do(ctx, c, cfMExists(key, items))
}

func cfCount(key, item string) op[int64] {
	return op[int64]{args: []string{"CF.COUNT", key, item}, decode: asInt}
}

// CFCount returns an upper bound of the copies of item the filter holds.
func (c *Client) CFCount(ctx context.Context, key, item string) (int64, error) {
	return do(ctx, c, cfCount(key, item))
}

// Counting Bloom filters (CBF.*).

// CBFReserveOptions are CBF.RESERVE's optional arguments.
type CBFReserveOptions struct {
	CounterBits int    // 4 (default) or 8
	Layout      string // "standard" (default) or "dleft"
}

// CBFReserve creates a counting Bloom filter for capacity items at errorRate.
func (c *Client) CBFReserve(ctx context.Context, key string, errorRate float64, capacity int64, o *CBFReserveOptions) error {
	args := []string{"CBF.RESERVE", key, strconv.FormatFloat(errorRate, 'g', -1, 64), itoa(capacity)}
	if o != nil && o.CounterBits > 0 {
		args = append(args, "COUNTERBITS", itoa(int64(o.CounterBits)))
	}
	if o != nil && o.Layout != "" {
		args = append(args, "LAYOUT", o.Layout)
	}
	_, err := do(ctx, c, op[struct{}]{args: args, write: true, decode: asOK})
	return err
}

func cbfAdd(key, item string) op[bool] {
	return op[bool]{args: []string{"CBF.ADD", key, item}, write: true, decode: asBool}
}

// CBFAdd adds an occurrence of item and reports whether it was absent before.
func (c *Client) CBFAdd(ctx context.Context, key, item string) (bool, error) {
	return do(ctx, c, cbfAdd(key, item))
}

func cbfMAdd(key string, items []string) op[[]bool] {
	return op[[]bool]{args: withItems([]string{"CBF.MADD", key}, items), write: true, decode: asBools}
}

// CBFMAdd adds an occurrence of each item in one log entry and reports, per
// item, whether it was absent before.
func (c *Client) CBFMAdd(ctx context.Context, key string, items ...string) ([]bool, error) {
	return do(ctx, c, cbfMAdd(key, items))
}

func cbfDel(key, item string) op[bool] {
	return op[bool]{args: []string{"CBF.DEL", key, item}, write: true, decode: asBool}
}

// CBFDel removes an occurrence of item and reports whether it was present.
func (c *Client) CBFDel(ctx context.Context, key, item string) (bool, error) {
	return do(ctx, c, cbfDel(key, item))
}

func cbfExists(key, item string) op[bool] {
	return op[bool]{args: []string{"CBF.EXISTS", key, item}, decode: asBool}
}

// CBFExists reports whether item may be in the filter.
func (c *Client) CBFExists(ctx context.Context, key, item string) (bool, error) {
	return do(ctx, c, cbfExists(key, item))
}

func cbfCount(key, item string) op[int64] {
	return op[int64]{args: []string{"CBF.COUNT", key, item}, decode: asInt}
}

// CBFCount returns an upper bound of how often item was added (and not deleted).
func (c *Client) CBFCount(ctx context.Context, key, item string) (int64, error) {
	return do(ctx, c, cbfCount(key, item))
}

// Dumps (BF.SCANDUMP / BF.LOADCHUNK, and the CF.* equivalents).

// ScanDump returns the chunk of the dump of a Bloom ("BF") or cuckoo ("CF")
// filter at iter (0 for the first) and the iterator of the next; next is 0
// after the last chunk. The chunks of one dump must come from one node and no
// write may land in between for them to form one filter; a read at the
// client's level otherwise.
func (c *Client) ScanDump(ctx context.Context, family, key string, iter int64) (next int64, chunk []byte, err error) {
	r, err := do(ctx, c, op[reply]{args: []string{family + ".SCANDUMP", key, itoa(iter)}, decode: asReply})
	if err != nil {
		return 0, nil, err
	}
	if r.kind != '*' || len(r.arr) != 2 || r.arr[0].kind != ':' || (r.arr[1].kind != '$' && r.arr[1].kind != 0) {
		return 0, nil, fmt.Errorf("rookery: unexpected %s.SCANDUMP reply", family)
	}
	if r.arr[1].kind == '$' {
		chunk = []byte(r.arr[1].str)
	}
	return r.arr[0].num, chunk, nil
}

// LoadChunk loads one chunk of a dump, as ScanDump returned it with iter, into
// key of family ("BF" or "CF"); the first chunk creates the filter.
func (c *Client) LoadChunk(ctx context.Context, family, key string, iter int64, chunk []byte) error {
	_, err := do(ctx, c, op[struct{}]{args: []string{family + ".LOADCHUNK", key, itoa(iter), string(chunk)},
		write: true, decode: asOK})
	return err
}

// Keyspace.

// Del deletes filters and returns how many existed.
func (c *Client) Del(ctx context.Context, keys ...string) (int64, error) {
	return do(ctx, c, op[int64]{args: withItems([]string{"DEL"}, keys), write: true, decode: asInt})
}

// Exists reports whether a filter named key exists.
func (c *Client) Exists(ctx context.Context, key string) (bool, error) {
	return do(ctx, c, op[bool]{args: []string{"EXISTS", key}, decode: asBool})
}

// Type returns the kind of the key, as TYPE names it: "MBbloom--" (Bloom),
// "MBbloomCF" (cuckoo), "MBbloomCBF" (counting Bloom), or "none" when there
// is no such key.
func (c *Client) Type(ctx context.Context, key string) (string, error) {
	r, err := do(ctx, c, op[reply]{args: []string{"TYPE", key}, decode: asReply})
	if err != nil {
		return "", err
	}
	if r.kind != '+' && r.kind != '$' {
		return "", unexpected(r)
	}
	return r.str, nil
}

// Info returns what BF.INFO, CF.INFO or CBF.INFO (family "BF", "CF" or
// "CBF") says of key, field by field ("Capacity", "Number of items
// inserted", ...), integers in decimal. A missing key is ErrNotFound.
func (c *Client) Info(ctx context.Context, family, key string) (map[string]string, error) {
	r, err := do(ctx, c, op[reply]{args: []string{family + ".INFO", key}, decode: asReply})
	if err != nil {
		return nil, err
	}
	if r.kind != '*' || len(r.arr)%2 != 0 {
		return nil, fmt.Errorf("rookery: unexpected %s.INFO reply", family)
	}
	out := make(map[string]string, len(r.arr)/2)
	for i := 0; i < len(r.arr); i += 2 {
		v := r.arr[i+1]
		switch v.kind {
		case ':':
			out[r.arr[i].str] = itoa(v.num)
		case '+', '$':
			out[r.arr[i].str] = v.str
		case 0:
			out[r.arr[i].str] = ""
		default:
			return nil, fmt.Errorf("rookery: unexpected %s.INFO reply", family)
		}
	}
	return out, nil
}

func withItems(args []string, items []string) []string {
	return append(args, items...)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Replies arrive in RESP2: integers for yes/no.

func asReply(r reply) (reply, error) {
	if r.isError() {
		return reply{}, serverErr(r.str)
	}
	return r, nil
}

func asOK(r reply) (struct{}, error) {
	switch {
	case r.isError():
		return struct{}{}, serverErr(r.str)
	case r.kind == '+' || r.kind == ':':
		return struct{}{}, nil
	}
	return struct{}{}, unexpected(r)
}

func asInt(r reply) (int64, error) {
	switch {
	case r.isError():
		return 0, serverErr(r.str)
	case r.kind == ':':
		return r.num, nil
	}
	return 0, unexpected(r)
}

func asBool(r reply) (bool, error) {
	n, err := asInt(r)
	return n == 1, err
}

// asBools reads an array of integers, which may end in an error (a full
// non-scaling filter stopped the command): the outcomes before it, and it.
func asBools(r reply) ([]bool, error) {
	if r.isError() {
		return nil, serverErr(r.str)
	}
	if r.kind != '*' {
		return nil, unexpected(r)
	}
	out := make([]bool, 0, len(r.arr))
	for _, e := range r.arr {
		switch e.kind {
		case ':':
			out = append(out, e.num == 1)
		case '-':
			return out, serverErr(e.str)
		default:
			return out, unexpected(e)
		}
	}
	return out, nil
}

func unexpected(r reply) error {
	return fmt.Errorf("rookery: unexpected reply of type %q: %.40q", r.kind, r.str)
}
