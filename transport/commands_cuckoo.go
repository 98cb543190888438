package transport

import (
	"errors"
	"fmt"

	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
)

// RedisBloom's cuckoo defaults and ranges.
const (
	cfDefaultCapacity      = 1024
	cfDefaultBucketSize    = 2
	cfDefaultMaxIterations = 20
	cfDefaultExpansion     = 1
	cfFingerprintBits      = 8
	cfMaxBucketSize        = 255
	cfMaxIterations        = 65535
)

func cuckooCommands() []*command {
	w, r := flagsWrite, flagsRead
	return []*command{
		{name: "cf.reserve", arity: -3, flags: w, firstKey: 1, lastKey: 1, step: 1, parse: parseCFReserve},
		{name: "cf.add", arity: 3, flags: w, firstKey: 1, lastKey: 1, step: 1, parse: parseCFAdd},
		{name: "cf.addnx", arity: 3, flags: w, firstKey: 1, lastKey: 1, step: 1, parse: parseCFAdd},
		{name: "cf.insert", arity: -4, flags: w, firstKey: 1, lastKey: 1, step: 1, parse: parseCFInsert},
		{name: "cf.insertnx", arity: -4, flags: w, firstKey: 1, lastKey: 1, step: 1, parse: parseCFInsert},
		{name: "cf.exists", arity: 3, flags: r, firstKey: 1, lastKey: 1, step: 1, parse: parseCFExists},
		{name: "cf.mexists", arity: -3, flags: r, firstKey: 1, lastKey: 1, step: 1, parse: parseCFExists},
		{name: "cf.count", arity: 3, flags: r, firstKey: 1, lastKey: 1, step: 1, parse: parseCFCount},
		{name: "cf.del", arity: 3, flags: w, firstKey: 1, lastKey: 1, step: 1, parse: parseCFDel},
		{name: "cf.info", arity: -2, flags: r, firstKey: 1, lastKey: 1, step: 1, parse: parseCFInfo},
		{name: "cf.scandump", arity: 3, flags: r, firstKey: 1, lastKey: 1, step: 1, parse: parseCFScanDump},
		{name: "cf.debug", arity: 2, flags: r, firstKey: 1, lastKey: 1, step: 1, parse: parseCFDebug},
		{name: "cf.compact", arity: 2, flags: w, firstKey: 1, lastKey: 1, step: 1, parse: parseCFCompact},
		{name: "cf.loadchunk", arity: 4, flags: w, firstKey: 1, lastKey: 1, step: 1, chunkArg: 3, parse: parseCFLoadChunk},
	}
}

// cfSpec describes a cuckoo filter. The expansion is rounded up to a power of two,
// as RedisBloom stores it (CF.INFO shows the rounded value).
func cfSpec(capacity uint64, bucketSize, maxIter uint16, expansion uint32) fsm.Spec {
	return fsm.Spec{Kind: filters.KindCuckoo, Capacity: capacity, BucketSize: bucketSize,
		MaxIterations: maxIter, Expansion: nextPow2(expansion), FingerprintBits: cfFingerprintBits}
}

// nextPow2 rounds up to a power of two; 0 stays 0 (never grows).
func nextPow2(v uint32) uint32 {
	if v == 0 {
		return 0
	}
	p := uint32(1)
	for p < v {
		p <<= 1
	}
	return p
}

// cfDefaultSpec is the filter CF.ADD and CF.INSERT create: the given capacity
// and the node's cf-bucket-size, cf-max-iterations and cf-expansion-factor.
func (bc *bloomConfig) cfDefaultSpec(capacity uint64) fsm.Spec {
	return cfSpec(capacity, uint16(bc.cfBucket.value), uint16(bc.cfMaxIter.value), uint32(bc.cfExpansion.value))
}

// parseCFReserve: CF.RESERVE key capacity [BUCKETSIZE b] [MAXITERATIONS m]
// [EXPANSION e], checked in RedisBloom's order (capacity's range last, since it
// depends on the bucket size). With WINDOW duration it makes a windowed filter
// (commands_window.go).
func parseCFReserve(s *Server, args [][]byte) (op, error) {
	if len(args)%2 == 0 {
		return op{}, arityError(args[0])
	}
	if err := s.cfg.checkKey(args[1]); err != nil {
		return op{}, err
	}
	if w, ok, err := s.windowArgs(args, 3, false); err != nil || ok {
		if err != nil {
			return op{}, err
		}
		return s.cfWindowReserve(args, w)
	}
	capacity, ok := parseInt64(args[2])
	if !ok {
		return op{}, redisError("Bad capacity")
	}
	bc := s.bloom.Load()
	maxIter, err := cfOption(args, "MAXITERATIONS", bc.cfMaxIter)
	if err != nil {
		return op{}, err
	}
	bucketSize, err := cfOption(args, "BUCKETSIZE", bc.cfBucket)
	if err != nil {
		return op{}, err
	}
	expansion, err := cfOption(args, "EXPANSION", bc.cfExpansion)
	if err != nil {
		return op{}, err
	}
	if bucketSize*2 > capacity || capacity > s.maxCap() {
		return op{}, redisError(fmt.Sprintf("Capacity must be in the range [2 * BUCKETSIZE, %d]", s.maxCap()))
	}
	spec := cfSpec(uint64(capacity), uint16(bucketSize), uint16(maxIter), uint32(expansion))
	if err := checkSpec(spec); err != nil {
		return op{}, err
	}
	cmd := &fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyCF, Key: string(args[1]), Spec: spec}
	return writeOp(cmd, renderOK), nil
}

// cfOption parses "NAME value" among CF.RESERVE's options: the setting's
// value when it is absent, else a value in the setting's range.
func cfOption(args [][]byte, name string, st intSetting) (int64, error) {
	lo, hi := st.min, st.max
	at := argIndex(args, 3, name)
	if at < 0 {
		return st.value, nil
	}
	if at+1 >= len(args) {
		return 0, arityError(args[0])
	}
	return intIn(args[at+1], lo, hi, redisError("Couldn't parse "+name),
		redisError(fmt.Sprintf("%s: value must be in the range [%d, %d]", name, lo, hi)))
}

// parseCFAdd: CF.ADD key item / CF.ADDNX key item (auto-create with defaults).
func parseCFAdd(s *Server, args [][]byte) (op, error) {
	if err := s.checkKeyItems(args[1], args[2:]); err != nil {
		return op{}, err
	}
	bc := s.bloom.Load()
	cmd := &fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyCF, Key: string(args[1]), Items: args[2:],
		NX: lower(args[0], len(args[0])-1) == 'x', Spec: bc.cfDefaultSpec(uint64(bc.cfInitial.value)),
		MaxFilters: bc.maxFilters()}
	return writeOp(cmd, renderBool), nil
}

// parseCFInsert: CF.INSERT / CF.INSERTNX key [CAPACITY c] [NOCREATE] ITEMS
// item..., options recognised by their first letter as RedisBloom does.
func parseCFInsert(s *Server, args [][]byte) (op, error) {
	bc := s.bloom.Load()
	capacity, noCreate, sized := bc.cfInitial.value, false, false
	pos, items := 2, -1
	for pos < len(args) && items < 0 {
		switch lower(args[pos], 0) {
		case 'c':
			pos++
			if pos == len(args) {
				return op{}, arityError(args[0])
			}
			v, ok := parseInt64(args[pos])
			if !ok {
				return op{}, redisError("Bad capacity")
			}
			if v < bc.cfInitial.min || v > s.maxCap() {
				return op{}, redisError(fmt.Sprintf("Capacity must be in the range [cf-bucket-size * 2, %d]", s.maxCap()))
			}
			capacity, sized = v, true
			pos++
		case 'i':
			pos++
			items = pos
		case 'n':
			noCreate = true
			pos++
		default:
			return op{}, redisError("Unknown argument received")
		}
	}
	if items < 0 || items == len(args) {
		return op{}, arityError(args[0])
	}
	if err := s.checkKeyItems(args[1], args[items:]); err != nil {
		return op{}, err
	}
	nx := lower(args[0], len(args[0])-1) == 'x'
	spec := bc.cfDefaultSpec(uint64(capacity))
	if sized && !noCreate {
		if err := checkSpec(spec); err != nil {
			return op{}, err
		}
	}
	cmd := &fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyCF, Key: string(args[1]), Items: args[items:],
		Multi: true, NX: nx, NoCreate: noCreate, Spec: spec, MaxFilters: bc.maxFilters()}
	if nx {
		return writeOp(cmd, renderInts), nil // integers even in RESP3
	}
	return writeOp(cmd, renderBools), nil
}

// parseCFExists: CF.EXISTS key item / CF.MEXISTS key item....
func parseCFExists(s *Server, args [][]byte) (op, error) {
	return parseExists(s, args, fsm.FamilyCF)
}

// parseCFCount: CF.COUNT key item, an integer in every protocol.
func parseCFCount(s *Server, args [][]byte) (op, error) {
	return parseCount(s, args, fsm.FamilyCF)
}

// parseCount serves CF.COUNT and CBF.COUNT (missing key or another kind: 0).
func parseCount(s *Server, args [][]byte, fam fsm.Family) (op, error) {
	if err := s.checkKeyItems(args[1], args[2:]); err != nil {
		return op{}, err
	}
	key, item := string(args[1]), args[2]
	return txRead(readOp(func(q queries, w *reply) { w.uint(q.Count(fam, key, item)) }),
		func() (*fsm.Command, func(*reply, *fsm.Result)) {
			return &fsm.Command{Op: fsm.OpCount, Family: fam, Key: key, Items: [][]byte{item}}, func(w *reply, r *fsm.Result) {
				if r.Err != nil {
					w.fail(r.Err)
					return
				}
				if len(r.Ints) != 1 {
					w.fail(errors.New("no count in the result"))
					return
				}
				w.int(r.Ints[0])
			}
		}), nil
}

// parseCFDel: CF.DEL key item. A missing key, or one of another kind, answers
// "Not found" (no ERR prefix), as RedisBloom does.
func parseCFDel(s *Server, args [][]byte) (op, error) {
	if err := s.checkKeyItems(args[1], args[2:]); err != nil {
		return op{}, err
	}
	cmd := &fsm.Command{Op: fsm.OpDelete, Family: fsm.FamilyCF, Key: string(args[1]), Items: args[2:]}
	return writeOp(cmd, renderCFDel), nil
}

func renderCFDel(w *reply, r *fsm.Result) {
	if errors.Is(r.Err, fsm.ErrNotFound) || errors.Is(r.Err, fsm.ErrWrongType) {
		w.fail(redisError("Not found"))
		return
	}
	renderBool(w, r)
}

// cfInfoLabels are CF.INFO's labels in order; go-redis accepts exactly these.
var cfInfoLabels = []string{"Size", "Number of buckets", "Number of filters",
	"Number of items inserted", "Number of items deleted", "Bucket size",
	"Expansion rate", "Max iterations"}

// parseCFInfo: CF.INFO key [WINDOW]. WINDOW describes a windowed filter's
// window apart, since go-redis refuses any field of the full reply but
// RedisBloom's eight.
func parseCFInfo(s *Server, args [][]byte) (op, error) {
	switch {
	case len(args) == 3 && keyword(args[2], "WINDOW"):
		return windowInfo(fsm.FamilyCF, string(args[1])), nil
	case len(args) != 2:
		return op{}, arityError(args[0])
	}
	key := string(args[1])
	return readOp(func(q queries, w *reply) {
		in, err := q.Info(fsm.FamilyCF, key)
		if err != nil {
			w.fail(err)
			return
		}
		values := []uint64{in.ReportedSize, in.Buckets, in.Filters, in.Items, in.Deleted,
			in.BucketSize, in.Expansion, in.MaxIter}
		w.mapHeader(len(cfInfoLabels))
		for i, l := range cfInfoLabels {
			w.simple(l)
			w.uint(values[i])
		}
	}), nil
}

// parseCFScanDump: CF.SCANDUMP key iterator; a non-numeric or negative iterator
// is refused before the key is looked up, as RedisBloom does.
func parseCFScanDump(s *Server, args [][]byte) (op, error) {
	if iter, ok := parseInt64(args[2]); !ok || iter < 0 {
		return op{}, redisError("Invalid position")
	}
	return scanDump(args, fsm.FamilyCF, parseInt64, nil), nil
}

// parseCFCompact: CF.COMPACT key moves fingerprints into older sub-filters and
// drops the newest ones it empties (after deletes made room); OK, or
// RedisBloom's "Cuckoo filter was not found" for a missing key or another kind.
func parseCFCompact(s *Server, args [][]byte) (op, error) {
	if err := s.cfg.checkKey(args[1]); err != nil {
		return op{}, err
	}
	cmd := &fsm.Command{Op: fsm.OpCompact, Family: fsm.FamilyCF, Key: string(args[1])}
	return writeOp(cmd, func(w *reply, r *fsm.Result) {
		if errors.Is(r.Err, fsm.ErrNotFound) || errors.Is(r.Err, fsm.ErrWrongType) {
			w.fail(redisError("Cuckoo filter was not found"))
			return
		}
		renderOK(w, r)
	}), nil
}

// parseCFDebug: CF.DEBUG key, the filter's shape in one line as RedisBloom
// shows it (buckets: of the first sub-filter).
func parseCFDebug(s *Server, args [][]byte) (op, error) {
	key := string(args[1])
	return readOp(func(q queries, w *reply) {
		in, err := q.Info(fsm.FamilyCF, key)
		if err != nil {
			w.fail(err)
			return
		}
		if len(in.Debug) == 1 {
			w.bulkString(in.Debug[0])
			return
		}
		w.bulkString(fmt.Sprintf("bktsize:%d buckets:%d items:%d deletes:%d filters:%d max_iterations:%d expansion:%d",
			in.BucketSize, in.Buckets, in.Items, in.Deleted, in.Filters, in.MaxIter, in.Expansion))
	}), nil
}

// parseCFLoadChunk: CF.LOADCHUNK key iterator data (iterator 0 is invalid).
func parseCFLoadChunk(s *Server, args [][]byte) (op, error) {
	iter, ok := parseInt64(args[2])
	if !ok || iter == 0 {
		return op{}, redisError("Invalid position")
	}
	if err := s.cfg.checkKey(args[1]); err != nil {
		return op{}, err
	}
	cmd := &fsm.Command{Op: fsm.OpLoadChunk, Family: fsm.FamilyCF, Key: string(args[1]),
		Iter: iter, Data: args[3]}
	return writeOp(cmd, func(w *reply, r *fsm.Result) { renderCFLoadChunk(w, r, iter == 1) }), nil
}

// renderCFLoadChunk answers CF.LOADCHUNK with RedisBloom's strings: a header
// chunk that is no header ("Invalid header") or describes no filter it can
// build ("Couldn't create filter!"), and a chunk it cannot take ("Couldn't load
// chunk!"); a missing key, an existing one and one of another type keep the
// usual replies.
func renderCFLoadChunk(w *reply, r *fsm.Result, header bool) {
	if t := cfChunkText(r.Err, header); t != "" {
		w.fail(redisError(t))
		return
	}
	renderOK(w, r)
}

// cfChunkText is CF.LOADCHUNK's refusal of a chunk (a header if header) in
// RedisBloom's words (and the sizes of one refused for its size), or "" for
// any other outcome.
func cfChunkText(err error, header bool) string {
	d := chunkSizes(err)
	switch {
	case errors.Is(err, fsm.ErrBadHeader):
		return "Invalid header" + d
	case header && errors.Is(err, fsm.ErrBadData):
		return "Couldn't create filter!" + d
	case errors.Is(err, fsm.ErrBadData), errors.Is(err, fsm.ErrBadPosition),
		errors.Is(err, fsm.ErrChunkOutside), errors.Is(err, fsm.ErrChunkTooBig):
		return "Couldn't load chunk!" + d
	}
	return ""
}
