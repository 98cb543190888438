package transport

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
)

// TestRenderWrites renders applied results the way RedisBloom replies, in both
// protocols.
func TestRenderWrites(t *testing.T) {
	s := mustNewParser(t, Config{})
	full := fsm.ErrNonScalingFull
	cases := []struct {
		line         string
		res          fsm.Result
		resp2, resp3 string
	}{
		{"BF.RESERVE k 0.01 100", fsm.Result{}, "+OK\r\n", "+OK\r\n"},
		{"BF.RESERVE k 0.01 100", fsm.Result{Err: fsm.ErrExists}, "-ERR item exists\r\n", "-ERR item exists\r\n"},
		{"BF.ADD k a", fsm.Result{Ints: []int64{1}}, ":1\r\n", "#t\r\n"},
		{"BF.ADD k a", fsm.Result{Ints: []int64{0}}, ":0\r\n", "#f\r\n"},
		{"BF.ADD k a", fsm.Result{Err: fsm.ErrWrongType},
			"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
			"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
		{"BF.ADD k a", fsm.Result{Err: full}, "-ERR non scaling filter is full\r\n", "-ERR non scaling filter is full\r\n"},
		{"BF.MADD k a b c", fsm.Result{Ints: []int64{1, 0, 1}}, "*3\r\n:1\r\n:0\r\n:1\r\n", "*3\r\n#t\r\n#f\r\n#t\r\n"},
		{"BF.MADD k a b c", fsm.Result{Ints: []int64{1, 1}, Err: full, Stopped: true},
			"*3\r\n:1\r\n:1\r\n-ERR non scaling filter is full\r\n", "*3\r\n#t\r\n#t\r\n-ERR non scaling filter is full\r\n"},
		{"BF.MADD k a b", fsm.Result{Err: full, Stopped: true},
			"*1\r\n-ERR non scaling filter is full\r\n", "*1\r\n-ERR non scaling filter is full\r\n"},
		{"BF.INSERT k NOCREATE ITEMS a", fsm.Result{Err: fsm.ErrNotFound}, "-ERR not found\r\n", "-ERR not found\r\n"},
		{"CF.ADD k a", fsm.Result{Ints: []int64{1}}, ":1\r\n", "#t\r\n"},
		{"CF.ADD k a", fsm.Result{Err: fsm.ErrFull}, "-Filter is full\r\n", "-Filter is full\r\n"},
		{"CF.ADD k a", fsm.Result{Err: fsm.ErrMaxExpansions}, "-Maximum expansions reached\r\n", "-Maximum expansions reached\r\n"},
		{"CF.ADDNX k a", fsm.Result{Ints: []int64{0}}, ":0\r\n", "#f\r\n"},
		{"CF.INSERT k ITEMS a b", fsm.Result{Ints: []int64{1, -1}}, "*2\r\n:1\r\n:-1\r\n", "*2\r\n#t\r\n#f\r\n"},
		{"CF.INSERTNX k ITEMS a b c", fsm.Result{Ints: []int64{1, 0, -1}}, "*3\r\n:1\r\n:0\r\n:-1\r\n", "*3\r\n:1\r\n:0\r\n:-1\r\n"},
		{"CF.INSERT k ITEMS a", fsm.Result{Err: fsm.ErrMaxExpansions}, "-Maximum expansions reached\r\n", "-Maximum expansions reached\r\n"},
		{"CF.DEL k a", fsm.Result{Ints: []int64{1}}, ":1\r\n", "#t\r\n"},
		{"CF.DEL k a", fsm.Result{Ints: []int64{0}}, ":0\r\n", "#f\r\n"},
		{"CF.DEL k a", fsm.Result{Err: fsm.ErrNotFound}, "-Not found\r\n", "-Not found\r\n"},
		{"CF.DEL k a", fsm.Result{Err: fsm.ErrWrongType}, "-Not found\r\n", "-Not found\r\n"},
		// LOADCHUNK's errors are RedisBloom's, which differ by family.
		{"CF.LOADCHUNK k 9 x", fsm.Result{Err: fsm.ErrBadData}, "-Couldn't load chunk!\r\n", "-Couldn't load chunk!\r\n"},
		{"CF.LOADCHUNK k 9 x", fsm.Result{Err: fsm.ErrChunkOutside}, "-Couldn't load chunk!\r\n", "-Couldn't load chunk!\r\n"},
		{"CF.LOADCHUNK k 1 x", fsm.Result{Err: fsm.ErrBadData}, "-Couldn't create filter!\r\n", "-Couldn't create filter!\r\n"},
		{"CF.LOADCHUNK k 1 x", fsm.Result{Err: fsm.ErrBadHeader}, "-Invalid header\r\n", "-Invalid header\r\n"},
		{"CF.LOADCHUNK k 1 x", fsm.Result{Err: fsm.ErrExists}, "-ERR item exists\r\n", "-ERR item exists\r\n"},
		{"BF.LOADCHUNK k 9 x", fsm.Result{Err: fsm.ErrBadPosition}, "-ERR received bad data\r\n", "-ERR received bad data\r\n"},
		{"BF.LOADCHUNK k 9 x", fsm.Result{Err: fsm.ErrBadData}, "-ERR received bad data\r\n", "-ERR received bad data\r\n"},
		{"BF.LOADCHUNK k 9 x", fsm.Result{Err: fsm.ErrChunkOutside}, "-ERR invalid offset - no link found\r\n", "-ERR invalid offset - no link found\r\n"},
		{"BF.LOADCHUNK k 9 x", fsm.Result{Err: fsm.ErrChunkTooBig}, "-ERR invalid chunk - Too big for current filter\r\n", "-ERR invalid chunk - Too big for current filter\r\n"},
		{"BF.LOADCHUNK k 9 x", fsm.Result{Err: fsm.ErrNotFound}, "-ERR not found\r\n", "-ERR not found\r\n"},
		{"BF.ADD k a", fsm.Result{Err: fsm.ErrCannotGrow}, "-ERR problem inserting into filter\r\n", "-ERR problem inserting into filter\r\n"},
		{"CBF.DEL k a", fsm.Result{Err: fsm.ErrNotFound}, "-ERR not found\r\n", "-ERR not found\r\n"},
		{"CBF.DEL k a", fsm.Result{Ints: []int64{1}}, ":1\r\n", "#t\r\n"},
		{"CBF.RESERVE k 0.01 10", fsm.Result{Err: fsm.ErrBadSpec}, "-ERR could not create filter\r\n", "-ERR could not create filter\r\n"},
		{"DEL a b", fsm.Result{Ints: []int64{1}}, ":1\r\n", ":1\r\n"},
	}
	for _, c := range cases {
		o, err := parseLine(s, c.line)
		if err != nil {
			t.Fatalf("%s: %v", c.line, err)
		}
		if got := renderWrite(o, &c.res, 2); got != c.resp2 {
			t.Errorf("%s %+v RESP2: got %q want %q", c.line, c.res, got, c.resp2)
		}
		if got := renderWrite(o, &c.res, 3); got != c.resp3 {
			t.Errorf("%s %+v RESP3: got %q want %q", c.line, c.res, got, c.resp3)
		}
	}
}

// TestRenderClusterErrors: every error says whether the write was applied.
func TestRenderClusterErrors(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{cluster.ErrNoLeader, "CLUSTERDOWN no leader"},
		{fmt.Errorf("forward: %w", cluster.ErrNoLeader), "CLUSTERDOWN no leader"},
		{cluster.ErrNotLeader, "TRYAGAIN leadership changed, not applied"},
		{cluster.ErrShutdown, "SHUTDOWN node is shutting down"},
		{fmt.Errorf("%w: this node was removed; send requests to another node", cluster.ErrRemoved),
			"REMOVED not a member of the cluster: this node was removed; send requests to another node"},
		{fmt.Errorf("%w: filter needs 2 GiB", cluster.ErrTooLarge), "OOM command not allowed: memory limit exceeded: filter needs 2 GiB"},
		{fmt.Errorf("%w: %v", cluster.ErrIndeterminate, context.DeadlineExceeded),
			"INDETERMINATE outcome unknown: context deadline exceeded: the write may or may not have been applied"},
		{errors.New("connection reset"), "INDETERMINATE connection reset: the write may or may not have been applied"},
	}
	for _, c := range cases {
		if got := renderErr(c.err); got != c.want {
			t.Errorf("%v: got %q want %q", c.err, got, c.want)
		}
	}
	if got := readErr(fmt.Errorf("%w: x", cluster.ErrIndeterminate)).Error(); got != "TRYAGAIN read not served: outcome unknown: x" {
		t.Errorf("read barrier timeout: %q", got)
	}
	if readErr(fmt.Errorf("%w: read index from n1", cluster.ErrNoLeader)).Error() != "CLUSTERDOWN no leader" {
		t.Error("read without leader")
	}
	if got := readErr(cluster.ErrRemoved).Error(); got != "REMOVED not a member of the cluster" {
		t.Errorf("read on a removed node: %q", got)
	}
	for err, want := range map[error]string{
		nil: "ok", cluster.ErrNoLeader: "unavailable", cluster.ErrTooLarge: "unavailable", cluster.ErrRemoved: "unavailable",
		cluster.ErrIndeterminate: "indeterminate", errors.New("x"): "indeterminate", errSyntax: "error",
	} {
		if got := outcome(err); got != want {
			t.Errorf("outcome(%v) = %s, want %s", err, got, want)
		}
	}
}

func testQueries() *fakeQueries {
	return &fakeQueries{
		kinds: map[string]filters.Kind{"bf": filters.KindScalable, "ns": filters.KindScalable,
			"cf": filters.KindCuckoo, "cbf": filters.KindCounting, "dl": filters.KindDLeft},
		infos: map[string]fsm.Info{
			"bf": {Kind: filters.KindScalable, Capacity: 300, Size: 1360, ReportedSize: 1024, Filters: 2, Items: 150, Expansion: 2},
			"ns": {Kind: filters.KindScalable, Capacity: 100, Size: 512, Filters: 1, Items: 7, NonScaling: true},
			"cf": {Kind: filters.KindCuckoo, Size: 2300, ReportedSize: 2048, Buckets: 512, Filters: 1, Items: 9, Deleted: 2,
				BucketSize: 2, Expansion: 1, MaxIter: 20},
			"cbf": {Kind: filters.KindCounting, Capacity: 100, Size: 400, Items: 3, ErrorRate: 0.01, CounterBits: 4},
			"dl":  {Kind: filters.KindDLeft, Capacity: 100, Size: 200, Items: 1, ErrorRate: 0.5, CounterBits: 8},
		},
		exists: map[string]bool{"yes": true},
		count:  3, card: 150, dump: []byte("hdr"),
	}
}

// TestRenderReads renders reads against a fake state, in both protocols.
func TestRenderReads(t *testing.T) {
	s := mustNewParser(t, Config{})
	q := testQueries()
	wt := "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
	cases := []struct{ line, resp2, resp3 string }{
		{"BF.EXISTS bf yes", ":1\r\n", "#t\r\n"},
		{"BF.EXISTS bf no", ":0\r\n", "#f\r\n"},
		{"BF.EXISTS missing yes", ":0\r\n", "#f\r\n"},
		{"BF.EXISTS cf yes", ":0\r\n", "#f\r\n"},
		{"BF.MEXISTS bf yes no", "*2\r\n:1\r\n:0\r\n", "*2\r\n#t\r\n#f\r\n"},
		{"CF.EXISTS cf yes", ":1\r\n", "#t\r\n"},
		{"CF.MEXISTS cf no yes", "*2\r\n:0\r\n:1\r\n", "*2\r\n#f\r\n#t\r\n"},
		{"CF.COUNT cf yes", ":3\r\n", ":3\r\n"},
		{"CF.COUNT bf yes", ":0\r\n", ":0\r\n"},
		{"CBF.EXISTS cbf yes", ":1\r\n", "#t\r\n"},
		{"CBF.COUNT cbf yes", ":3\r\n", ":3\r\n"},
		{"BF.CARD bf", ":150\r\n", ":150\r\n"},
		{"BF.CARD missing", ":0\r\n", ":0\r\n"},
		{"BF.CARD cf", wt, wt},
		{"BF.INFO bf", "*10\r\n+Capacity\r\n:300\r\n+Size\r\n:1024\r\n+Number of filters\r\n:2\r\n" +
			"+Number of items inserted\r\n:150\r\n+Expansion rate\r\n:2\r\n",
			"%5\r\n+Capacity\r\n:300\r\n+Size\r\n:1024\r\n+Number of filters\r\n:2\r\n" +
				"+Number of items inserted\r\n:150\r\n+Expansion rate\r\n:2\r\n"},
		{"BF.INFO ns EXPANSION", "*1\r\n$-1\r\n", "%1\r\n+Expansion rate\r\n_\r\n"},
		{"BF.INFO bf capacity", "*1\r\n:300\r\n", "%1\r\n+Capacity\r\n:300\r\n"},
		{"BF.INFO bf Items", "*1\r\n:150\r\n", "%1\r\n+Number of items inserted\r\n:150\r\n"},
		{"BF.INFO bf nope", "-Invalid information value\r\n", "-Invalid information value\r\n"},
		{"BF.INFO missing nope", "-ERR not found\r\n", "-ERR not found\r\n"},
		{"BF.INFO cf", wt, wt},
		{"CF.INFO cf", "*16\r\n+Size\r\n:2048\r\n+Number of buckets\r\n:512\r\n+Number of filters\r\n:1\r\n" +
			"+Number of items inserted\r\n:9\r\n+Number of items deleted\r\n:2\r\n+Bucket size\r\n:2\r\n" +
			"+Expansion rate\r\n:1\r\n+Max iterations\r\n:20\r\n",
			"%8\r\n+Size\r\n:2048\r\n+Number of buckets\r\n:512\r\n+Number of filters\r\n:1\r\n" +
				"+Number of items inserted\r\n:9\r\n+Number of items deleted\r\n:2\r\n+Bucket size\r\n:2\r\n" +
				"+Expansion rate\r\n:1\r\n+Max iterations\r\n:20\r\n"},
		{"CF.INFO missing", "-ERR not found\r\n", "-ERR not found\r\n"},
		{"CBF.INFO dl", "*12\r\n+Capacity\r\n:100\r\n+Size\r\n:200\r\n+Number of items inserted\r\n:1\r\n" +
			"+Error rate\r\n$3\r\n0.5\r\n+Counter bits\r\n:8\r\n+Layout\r\n$5\r\ndleft\r\n",
			"%6\r\n+Capacity\r\n:100\r\n+Size\r\n:200\r\n+Number of items inserted\r\n:1\r\n" +
				"+Error rate\r\n,0.5\r\n+Counter bits\r\n:8\r\n+Layout\r\n$5\r\ndleft\r\n"},
		{"BF.SCANDUMP bf 0", "*2\r\n:1\r\n$3\r\nhdr\r\n", "*2\r\n:1\r\n$3\r\nhdr\r\n"},
		{"BF.SCANDUMP bf 5", "*2\r\n:0\r\n$0\r\n\r\n", "*2\r\n:0\r\n$0\r\n\r\n"},
		{"BF.SCANDUMP missing x", "-ERR not found\r\n", "-ERR not found\r\n"},
		{"BF.SCANDUMP bf x", "-Second argument must be numeric\r\n", "-Second argument must be numeric\r\n"},
		{"CF.SCANDUMP cf 0", "*2\r\n:1\r\n$3\r\nhdr\r\n", "*2\r\n:1\r\n$3\r\nhdr\r\n"},
		{"CF.SCANDUMP cf 5", "*2\r\n:0\r\n$-1\r\n", "*2\r\n:0\r\n_\r\n"},
		{"CF.SCANDUMP bf 0", wt, wt},
		{"TYPE bf", "+MBbloom--\r\n", "+MBbloom--\r\n"},
		{"TYPE cf", "+MBbloomCF\r\n", "+MBbloomCF\r\n"},
		{"TYPE dl", "+MBbloomCBF\r\n", "+MBbloomCBF\r\n"},
		{"TYPE missing", "+none\r\n", "+none\r\n"},
		{"EXISTS bf cf missing bf", ":3\r\n", ":3\r\n"},
		{"DBSIZE", ":5\r\n", ":5\r\n"},
		{"KEYS c*", "*2\r\n$3\r\ncbf\r\n$2\r\ncf\r\n", "*2\r\n$3\r\ncbf\r\n$2\r\ncf\r\n"},
		{"SCAN 0 TYPE mbbloomcbf", "*2\r\n$1\r\n0\r\n*2\r\n$3\r\ncbf\r\n$2\r\ndl\r\n",
			"*2\r\n$1\r\n0\r\n*2\r\n$3\r\ncbf\r\n$2\r\ndl\r\n"},
		{"SCAN 0 MATCH ?f COUNT 100", "*2\r\n$1\r\n0\r\n*2\r\n$2\r\nbf\r\n$2\r\ncf\r\n",
			"*2\r\n$1\r\n0\r\n*2\r\n$2\r\nbf\r\n$2\r\ncf\r\n"},
		{"SCAN 0 TYPE string", "*2\r\n$1\r\n0\r\n*0\r\n", "*2\r\n$1\r\n0\r\n*0\r\n"},
	}
	for _, c := range cases {
		o, err := parseLine(s, c.line)
		if err != nil {
			t.Fatalf("%s: %v", c.line, err)
		}
		if got := renderRead(o, q, 2); got != c.resp2 {
			t.Errorf("%s RESP2:\n got %q\nwant %q", c.line, got, c.resp2)
		}
		if got := renderRead(o, q, 3); got != c.resp3 {
			t.Errorf("%s RESP3:\n got %q\nwant %q", c.line, got, c.resp3)
		}
	}
}
