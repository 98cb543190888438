package transport

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
)

// The RedisBloom layouts end to end: what a node answers for filters created
// under --filter-layout redisbloom and for RedisBloom's own dumps loaded with
// LOADCHUNK. The filters' byte-for-byte agreement with RedisBloom is checked in
// filters/ (golden dumps, and a real RedisBloom where one is reachable); here
// the figures RedisBloom 2.6.28 and 8.8.0 answered to the same commands pin the
// node's replies.

// TestRedisBloomLayoutReplies: BF.INFO, BF.DEBUG, CF.INFO and CF.DEBUG of
// filters the node creates in RedisBloom's layout are RedisBloom's, figure for
// figure.
func TestRedisBloomLayoutReplies(t *testing.T) {
	ts := mustStartServer(t, Config{FilterLayout: LayoutRedisBloom})
	ctx := context.Background()
	c := newGoRedis(t, ts.addr, 2, "")
	res(c.BFReserve(ctx, "b", 0.01, 100).Result()).must(t)
	res(c.CFReserve(ctx, "c", 100).Result()).must(t)
	for i := 1; i <= 300; i++ {
		res(c.BFAdd(ctx, "b", fmt.Sprint("x", i)).Result()).must(t)
		if !res(c.CFAdd(ctx, "c", fmt.Sprint("x", i)).Result()).must(t) {
			t.Fatalf("CF.ADD x%d", i)
		}
	}
	// redis-cli against RedisBloom, the same commands:
	//   BF.INFO b -> Capacity 300 Size 616 Number of filters 2 Number of items inserted 299 Expansion rate 2
	//   CF.INFO c -> Size 472 Number of buckets 64 Number of filters 3 Number of items inserted 300 ...
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"BF.INFO", "b"}, "[Capacity 300 Size 616 Number of filters 2 Number of items inserted 299 Expansion rate 2]"},
		{[]any{"BF.DEBUG", "b"}, "[size:299 bytes:144 bits:1152 hashes:8 hashwidth:64 capacity:100 size:100 ratio:0.005 " +
			"bytes:312 bits:2496 hashes:9 hashwidth:64 capacity:200 size:199 ratio:0.0025]"},
		{[]any{"CF.INFO", "c"}, "[Size 472 Number of buckets 64 Number of filters 3 Number of items inserted 300 " +
			"Number of items deleted 0 Bucket size 2 Expansion rate 1 Max iterations 20]"},
		{[]any{"CF.DEBUG", "c"}, "bktsize:2 buckets:64 items:300 deletes:0 filters:3 max_iterations:20 expansion:1"},
		{[]any{"TYPE", "b"}, "MBbloom--"},
		{[]any{"TYPE", "c"}, "MBbloomCF"},
	} {
		got := fmt.Sprint(res(c.Do(ctx, tc.args...).Result()).must(t))
		if got != tc.want {
			t.Errorf("%v:\n got %s\nwant %s", tc.args, got, tc.want)
		}
	}
	// RedisBloom refuses every add to a cuckoo filter of 32 sub-filters.
	res(c.CFReserve(ctx, "small", 4).Result()).must(t)
	var refused int
	for i := 0; i < 400 && refused == 0; i++ {
		if err := c.CFAdd(ctx, "small", fmt.Sprint("s", i)).Err(); err != nil {
			if err.Error() != "Maximum expansions reached" {
				t.Fatalf("CF.ADD %d: %v", i, err)
			}
			refused = i
		}
	}
	if refused != 125 { // RedisBloom 2.6.28 refuses the 126th of these very adds
		t.Errorf("refused after %d adds, RedisBloom after 125", refused)
	}
}

// TestRedisBloomDumpsLoad: a dump in RedisBloom's format, as RedisBloom's
// SCANDUMP hands it out, loads into a node of the default layout as a filter
// of RedisBloom's layout that answers every lookup as the dumped filter does,
// reports the same INFO and dumps back the same bytes; a chunk larger than one
// log entry takes (a link of more than 1 MiB) goes into the log in pieces.
func TestRedisBloomDumpsLoad(t *testing.T) {
	ts := mustStartServer(t, Config{})
	ctx := context.Background()
	c := newGoRedis(t, ts.addr, 2, "")

	chain, err := filters.NewRBChain(1_500_000, 0.01, 2, false) // one link of 2.1 MB
	if err != nil {
		t.Fatal(err)
	}
	cf, err := filters.NewRBCuckoo(5000, 4, 20, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20000; i++ {
		if _, err := chain.Add([]byte(fmt.Sprint("u", i))); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if err := cf.Add([]byte(fmt.Sprint("u", i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	load := func(fam, key string, dump func(int64) (int64, []byte)) int {
		chunks := 0
		for iter := int64(0); ; {
			next, data := dump(iter)
			if next == 0 {
				return chunks
			}
			if err := c.Do(ctx, fam+".LOADCHUNK", key, next, data).Err(); err != nil {
				t.Fatalf("%s.LOADCHUNK %s %d (%d bytes): %v", fam, key, next, len(data), err)
			}
			chunks++
			iter = next
		}
	}
	if n := load("BF", "b", chain.DumpChunk); n != 2 {
		t.Errorf("the chain went in %d chunks, want the header and one 2.1 MB chunk", n)
	}
	load("CF", "c", cf.DumpChunk)

	for i := 0; i < 60000; i++ {
		it := fmt.Sprint("u", i)
		if got := res(c.BFExists(ctx, "b", it).Result()).must(t); got != chain.Test([]byte(it)) {
			t.Fatalf("BF.EXISTS %s = %v, the dumped chain says %v", it, got, chain.Test([]byte(it)))
		}
		if i%7 == 0 {
			if got := res(c.CFCount(ctx, "c", it).Result()).must(t); uint64(got) != cf.Count([]byte(it)) {
				t.Fatalf("CF.COUNT %s = %d, the dumped filter says %d", it, got, cf.Count([]byte(it)))
			}
		}
	}
	wantBF := fmt.Sprint("[size:", chain.Count(), " ", strings.Join(chain.Debug()[1:], " "), "]")
	if got := fmt.Sprint(res(c.Do(ctx, "BF.DEBUG", "b").Result()).must(t)); got != wantBF {
		t.Errorf("BF.DEBUG %s, want %s", got, wantBF)
	}
	if got := res(c.Do(ctx, "CF.DEBUG", "c").Result()).must(t); got != cf.Debug() {
		t.Errorf("CF.DEBUG %v, want %s", got, cf.Debug())
	}
	if got := fmt.Sprint(res(c.Do(ctx, "BF.INFO", "b", "SIZE").Result()).must(t)); got != fmt.Sprint("[", chain.RedisBloomSize(), "]") {
		t.Errorf("BF.INFO SIZE %s, want [%d]", got, chain.RedisBloomSize())
	}
	// The node's dump is RedisBloom's, byte for byte.
	for _, tc := range []struct {
		fam, key string
		dump     func(int64) (int64, []byte)
	}{{"BF", "b", chain.DumpChunk}, {"CF", "c", cf.DumpChunk}} {
		for iter := int64(0); ; {
			next, want := tc.dump(iter)
			r := res(c.Do(ctx, tc.fam+".SCANDUMP", tc.key, iter).Slice()).must(t)
			got, _ := r[1].(string)
			if r[0].(int64) != next || got != string(want) {
				t.Fatalf("%s.SCANDUMP %d: (%v, %d bytes), want (%d, %d bytes)", tc.fam, iter, r[0], len(got), next, len(want))
			}
			if next == 0 {
				break
			}
			iter = next
		}
	}
	// The loaded filters take writes as RedisBloom's do.
	if !res(c.BFAdd(ctx, "b", "new-item").Result()).must(t) {
		t.Error("BF.ADD of a new item to the loaded chain")
	}
	if !res(c.CFDel(ctx, "c", "u3").Result()).must(t) || res(c.CFCount(ctx, "c", "u3").Result()).must(t) != int64(cf.Count([]byte("u3")))-1 {
		t.Error("CF.DEL from the loaded filter")
	}
	// RedisBloom's LOADCHUNK errors, in RedisBloom's words.
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"BF.LOADCHUNK", "b", 1 << 40, "x"}, "ERR invalid offset - no link found"},
		{[]any{"BF.LOADCHUNK", "b", int64(chain.Links()[0].Bytes) + 1000, strings.Repeat("x", 2000)}, "ERR invalid chunk - Too big for current filter"},
		{[]any{"BF.LOADCHUNK", "b", 3, "xxxx"}, "ERR received bad data"},
		{[]any{"BF.LOADCHUNK", "fresh", 1, "not a header"}, "ERR received bad data"},
		{[]any{"CF.LOADCHUNK", "fresh", 1, "not a header"}, "Invalid header"},
		{[]any{"CF.LOADCHUNK", "fresh", 1, strings.Repeat("\xff", filters.RBCuckooHeaderBytes)}, "Couldn't create filter!"},
		{[]any{"CF.LOADCHUNK", "c", -5, "x"}, "Couldn't load chunk!"},
		{[]any{"CF.LOADCHUNK", "c", 1, "x"}, "ERR item exists"},
	} {
		err := c.Do(ctx, tc.args...).Err()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v, want %q", tc.args[:3], err, tc.want)
		}
	}
	if n := res(c.Exists(ctx, "fresh").Result()).must(t); n != 0 {
		t.Error("a refused header created the key")
	}
	// A chunk larger than its filter could take anywhere is refused from its
	// header, in RedisBloom's words, and the connection goes on; so is a
	// command that would make one log entry over maxEntryBytes.
	big := strings.Repeat("x", 16<<20) // more than any link or sub-filter here
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"BF.LOADCHUNK", "b", 32 << 20, big}, "ERR invalid offset - no link found"},
		{[]any{"BF.LOADCHUNK", "b", 2, big}, "ERR received bad data"},
		{[]any{"BF.LOADCHUNK", "fresh", 1, big}, "ERR received bad data"},
		{[]any{"CF.LOADCHUNK", "c", 32 << 20, big}, "Couldn't load chunk!"},
		{[]any{"CF.LOADCHUNK", "fresh", 1, big}, "Invalid header"},
		{[]any{"IDEM", 7, 1, "BF.LOADCHUNK", "b", 32 << 20, big}, "ERR invalid offset - no link found"},
	} {
		if err := c.Do(ctx, tc.args...).Err(); err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v, want %q", tc.args[:3], err, tc.want)
		}
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("after %v: %v", tc.args[:3], err)
		}
	}
	// Into a filter of our own format being loaded from its dump, the loader
	// is told both sizes.
	if err := c.Do(ctx, "BF.RESERVE", "ours", 0.01, 100000).Err(); err != nil {
		t.Fatal(err)
	}
	hdr, err := c.Do(ctx, "BF.SCANDUMP", "ours", 0).Slice()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "BF.LOADCHUNK", "ours2", hdr[0], hdr[1]).Err(); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("ERR received bad data (a chunk of %d bytes, and \"ours2\" takes at most %d bytes per chunk)", len(big), fsm.MaxOwnChunkBytes)
	if err := c.Do(ctx, "BF.LOADCHUNK", "ours2", 2, big).Err(); err == nil || err.Error() != want {
		t.Errorf("a chunk too big for a filter being loaded: %v, want %q", err, want)
	}
	madd := []any{"BF.MADD", "b"}
	for range 300 {
		madd = append(madd, strings.Repeat("y", 60<<10))
	}
	if err := c.Do(ctx, madd...).Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR command too large for one log entry") {
		t.Errorf("BF.MADD of 18 MB: %v", err)
	}
}

// TestSplitChunk: a RedisBloom chunk over loadPieceBytes goes into the log as
// pieces that write exactly its bytes, in order; others go whole.
func TestSplitChunk(t *testing.T) {
	data := make([]byte, 2*loadPieceBytes+5)
	for i := range data {
		data[i] = byte(i * 7)
	}
	mk := func() *fsm.Command {
		return &fsm.Command{Op: fsm.OpLoadChunk, Family: fsm.FamilyBF, Key: "k", Iter: 1000 + int64(len(data)), Data: data}
	}
	pieces := splitChunk(mk())
	if len(pieces) != 3 {
		t.Fatalf("%d pieces", len(pieces))
	}
	var joined []byte
	for i, p := range pieces {
		start := p.Iter - int64(len(p.Data)) // where LOADCHUNK writes it
		if start-1 != 1000+int64(len(joined))-1 {
			t.Errorf("piece %d starts at %d, want %d", i, start, 1000+len(joined))
		}
		joined = append(joined, p.Data...)
	}
	if string(joined) != string(data) {
		t.Error("the pieces do not make the chunk")
	}
	whole := mk()
	whole.Session.ClientID, whole.Session.Seq = 1, 1
	if len(splitChunk(whole)) != 1 {
		t.Error("a chunk under IDEM was split")
	}
	// Our own chunks are a full piece and a checksum: never split.
	own := mk()
	own.Data = data[:filters.DumpChunkBytes+4]
	if len(splitChunk(own)) != 1 {
		t.Error("a chunk of our own dump was split")
	}
}

// TestEmptyCuckooDumpsNothing: RedisBloom dumps no cuckoo filter without items:
// CF.SCANDUMP answers [0, nil] at once, whatever the cursor, in either layout.
func TestEmptyCuckooDumpsNothing(t *testing.T) {
	for _, layout := range []string{LayoutRookery, LayoutRedisBloom} {
		ts := mustStartServer(t, Config{FilterLayout: layout})
		ctx := context.Background()
		c := newGoRedis(t, ts.addr, 2, "")
		res(c.CFReserve(ctx, "e", 100).Result()).must(t)
		for _, iter := range []int64{0, 1, 77} {
			r := res(c.Do(ctx, "CF.SCANDUMP", "e", iter).Slice()).must(t)
			if len(r) != 2 || r[0] != int64(0) || r[1] != nil {
				t.Errorf("%s: CF.SCANDUMP e %d = %#v, want [0, nil]", layout, iter, r)
			}
		}
		res(c.CFAdd(ctx, "e", "x").Result()).must(t)
		if r := res(c.Do(ctx, "CF.SCANDUMP", "e", 0).Slice()).must(t); r[0] != int64(1) {
			t.Errorf("%s: CF.SCANDUMP of a filter with an item: %#v", layout, r)
		}
	}
}

// TestLargeDumpRoundTrip: a filter of several megabytes, in either layout,
// dumps and loads back through RESP (our chunks of 1 MiB and a checksum go
// whole; RedisBloom's of up to 16 MiB in pieces) and answers as before.
func TestLargeDumpRoundTrip(t *testing.T) {
	for _, layout := range []string{LayoutRookery, LayoutRedisBloom} {
		ts := mustStartServer(t, Config{FilterLayout: layout})
		ctx := context.Background()
		c := newGoRedis(t, ts.addr, 2, "")
		res(c.BFReserve(ctx, "b", 0.001, 2_000_000).Result()).must(t)
		res(c.CFReserve(ctx, "c", 3_000_000).Result()).must(t)
		var items []any
		for i := 0; i < 3000; i++ {
			items = append(items, fmt.Sprint("v", i))
		}
		res(c.BFMAdd(ctx, "b", items...).Result()).must(t)
		res(c.CFInsert(ctx, "c", nil, items...).Result()).must(t)
		for _, fam := range []string{"BF", "CF"} {
			key := strings.ToLower(fam[:1])
			var pairs [][2]any
			total := 0
			for iter := int64(0); ; {
				r := res(c.Do(ctx, fam+".SCANDUMP", key, iter).Slice()).must(t)
				next := r[0].(int64)
				if next == 0 {
					break
				}
				data, _ := r[1].(string)
				total += len(data)
				pairs = append(pairs, [2]any{next, data})
				iter = next
			}
			if total < 2<<20 {
				t.Fatalf("%s %s: a dump of %d bytes, want several MiB", layout, fam, total)
			}
			res(c.Del(ctx, key).Result()).must(t)
			for _, p := range pairs {
				if err := c.Do(ctx, fam+".LOADCHUNK", key, p[0], p[1]).Err(); err != nil {
					t.Fatalf("%s %s.LOADCHUNK %v (%d bytes): %v", layout, fam, p[0], len(p[1].(string)), err)
				}
			}
		}
		for _, it := range items {
			if !res(c.BFExists(ctx, "b", it).Result()).must(t) || !res(c.CFExists(ctx, "c", it).Result()).must(t) {
				t.Fatalf("%s: %v lost in the round trip", layout, it)
			}
		}
	}
}
