package transport

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/errdetail"
)

// RedisBloom's Bloom defaults and ranges.
const (
	bfDefaultErrorRate = 0.01
	bfDefaultCapacity  = 100
	bfDefaultExpansion = 2
	bfErrorRateCap     = 0.25 // higher requested rates are capped, not refused
	maxExpansion       = 32768
)

func bloomCommands() []*command {
	w, r := flagsWrite, flagsRead
	return []*command{
		{name: "bf.reserve", arity: -4, flags: w, firstKey: 1, lastKey: 1, step: 1, parse: parseBFReserve},
		{name: "bf.add", arity: 3, flags: w, firstKey: 1, lastKey: 1, step: 1, parse: parseBFAdd},
		{name: "bf.madd", arity: -3, flags: w, firstKey: 1, lastKey: 1, step: 1, parse: parseBFAdd},
		{name: "bf.insert", arity: -4, flags: w, firstKey: 1, lastKey: 1, step: 1, parse: parseBFInsert},
		{name: "bf.exists", arity: 3, flags: r, firstKey: 1, lastKey: 1, step: 1, parse: parseBFExists},
		{name: "bf.mexists", arity: -3, flags: r, firstKey: 1, lastKey: 1, step: 1, parse: parseBFExists},
		{name: "bf.card", arity: 2, flags: r, firstKey: 1, lastKey: 1, step: 1, parse: parseBFCard},
		{name: "bf.info", arity: -2, flags: r, firstKey: 1, lastKey: 1, step: 1, parse: parseBFInfo},
		{name: "bf.debug", arity: 2, flags: r, firstKey: 1, lastKey: 1, step: 1, parse: parseBFDebug},
		{name: "bf.scandump", arity: 3, flags: r, firstKey: 1, lastKey: 1, step: 1, parse: parseBFScanDump},
		{name: "bf.loadchunk", arity: 4, flags: w, firstKey: 1, lastKey: 1, step: 1, chunkArg: 3, parse: parseBFLoadChunk},
	}
}

// bfSpec describes a Bloom filter as BF.* creates it: always a scalable chain,
// which is what makes NONSCALING answer "non scaling filter is full" when full.
func bfSpec(rate float64, capacity uint64, expansion uint32, nonScaling bool) fsm.Spec {
	if expansion == 0 {
		nonScaling = true
	}
	if nonScaling {
		expansion = 0
	}
	return fsm.Spec{Kind: filters.KindScalable, Capacity: capacity, ErrorRate: rate,
		Expansion: expansion, NonScaling: nonScaling}
}

// errorRate parses an error rate in (0, 1), capped at 0.25.
func errorRate(b []byte, bad, outOfRange error) (float64, error) {
	f, ok := parseFloat(b)
	if !ok {
		return 0, bad
	}
	if !(f > 0 && f < 1) {
		return 0, outOfRange
	}
	return min(f, bfErrorRateCap), nil
}

// intIn parses an integer in [lo, hi].
func intIn(b []byte, lo, hi int64, bad, outOfRange error) (int64, error) {
	v, ok := parseInt64(b)
	if !ok {
		return 0, bad
	}
	if v < lo || v > hi {
		return 0, outOfRange
	}
	return v, nil
}

func (s *Server) maxCap() int64 { return int64(min(s.cfg.MaxCapacity, 1<<62)) }

// parseBFReserve: BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING],
// checked in RedisBloom's order; unknown trailing words are ignored as there.
// With WINDOW duration or LAST n it makes a windowed filter (commands_window.go).
func parseBFReserve(s *Server, args [][]byte) (op, error) {
	if len(args) > 7 {
		return op{}, arityError(args[0])
	}
	rate, capacity, err := s.reserveArgs(args)
	if err != nil {
		return op{}, err
	}
	if w, ok, err := s.windowArgs(args, 4, true); err != nil || ok {
		if err != nil {
			return op{}, err
		}
		return bfWindowReserve(args, rate, capacity, w)
	}
	_, _, expansion, nonScaling := s.bloom.Load().bfDefaults()
	nonScaling = nonScaling || argIndex(args, 4, "NONSCALING") >= 0
	if at := argIndex(args, 4, "EXPANSION"); at >= 0 {
		if at+1 == len(args) {
			return op{}, redisError("ERR no expansion")
		}
		v, ok := parseInt64(args[at+1])
		if !ok {
			return op{}, redisError("ERR bad expansion")
		}
		if v == 0 {
			nonScaling = true
		} else if nonScaling {
			return op{}, redisError("Nonscaling filters cannot expand")
		}
		if v < 0 || v > maxExpansion {
			return op{}, redisError(fmt.Sprintf("ERR expansion must be in the range [0, %d]", maxExpansion))
		}
		expansion = v
	}
	spec := bfSpec(rate, uint64(capacity), uint32(expansion), nonScaling)
	if err := checkSpec(spec); err != nil {
		return op{}, err
	}
	cmd := &fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyBF, Key: string(args[1]), Spec: spec}
	return writeOp(cmd, renderOK), nil
}

// checkSpec refuses a filter that cannot be built from spec before anything is
// proposed: RedisBloom's "ERR could not create filter", then why (a filter
// larger than one filter may be, with the bytes it would need). RedisBloom
// answers this after looking the key up, so on an existing key it would answer
// "ERR item exists" instead; here the log entry is saved.
func checkSpec(spec fsm.Spec) error {
	if err := fsm.CheckSpec(spec); err != nil {
		return redisError(string(errUnknownFail) + ": " + errdetail.Of(err))
	}
	return nil
}

// reserveArgs checks the key, error rate and capacity of BF.RESERVE and
// CBF.RESERVE (key error_rate capacity ...), in RedisBloom's order and words.
func (s *Server) reserveArgs(args [][]byte) (float64, int64, error) {
	if err := s.cfg.checkKey(args[1]); err != nil {
		return 0, 0, err
	}
	rate, err := errorRate(args[2], redisError("ERR bad error rate"),
		redisError("ERR error rate must be in the range (0.000000, 1.000000)"))
	if err != nil {
		return 0, 0, err
	}
	capacity, err := intIn(args[3], 1, s.maxCap(), redisError("ERR bad capacity"),
		redisError(fmt.Sprintf("ERR capacity must be in the range [1, %d]", s.maxCap())))
	return rate, capacity, err
}

// parseBFAdd: BF.ADD key item / BF.MADD key item... (auto-create with defaults).
func parseBFAdd(s *Server, args [][]byte) (op, error) {
	multi := isMulti(args[0])
	if (!multi && len(args) != 3) || (multi && len(args) < 3) {
		return op{}, arityError(args[0])
	}
	items := args[2:]
	if err := s.checkKeyItems(args[1], items); err != nil {
		return op{}, err
	}
	rate, capacity, expansion, nonScaling := s.bloom.Load().bfDefaults()
	cmd := &fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyBF, Key: string(args[1]), Items: items,
		Multi: multi, Spec: bfSpec(rate, uint64(capacity), uint32(expansion), nonScaling)}
	if multi {
		return writeOp(cmd, renderBools), nil
	}
	return writeOp(cmd, renderBool), nil
}

// isMulti tells MADD from ADD (and MEXISTS from EXISTS) by the letter after the
// family's dot, as RedisBloom does.
func isMulti(name []byte) bool {
	i := bytes.IndexByte(name, '.')
	return i >= 0 && lower(name, i+1) == 'm'
}

func (s *Server) checkKeyItems(key []byte, items [][]byte) error {
	if err := s.cfg.checkKey(key); err != nil {
		return err
	}
	return s.cfg.checkItems(items)
}

// parseBFInsert: BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION n] [NOCREATE]
// [NONSCALING] ITEMS item... Options are recognised by their first letters, as
// RedisBloom does; the options only matter when the call creates the filter.
func parseBFInsert(s *Server, args [][]byte) (op, error) {
	if len(args) < 4 {
		return op{}, arityError(args[0])
	}
	rate, capacity, expansion, nonScaling := s.bloom.Load().bfDefaults()
	noCreate, sized := false, false
	pos, items := 2, -1
	for pos < len(args) && items < 0 {
		arg := args[pos]
		var err error
		switch lower(arg, 0) {
		case 'i':
			pos++
			items = pos
		case 'e':
			pos++
			if pos == len(args) {
				return op{}, arityError(args[0])
			}
			if lower(arg, 1) == 'r' {
				rate, err = errorRate(args[pos], redisError("Bad error rate"), redisError("Bad error rate"))
				sized = true
			} else {
				expansion, err = intIn(args[pos], 0, maxExpansion, redisError("Bad expansion"), redisError("Bad expansion"))
			}
			pos++
		case 'c':
			pos++
			if pos == len(args) {
				return op{}, arityError(args[0])
			}
			capacity, err = intIn(args[pos], 1, s.maxCap(), redisError("Bad capacity"), redisError("Bad capacity"))
			sized = true
			pos++
		case 'n':
			if lower(arg, 2) == 'c' {
				noCreate = true
			} else {
				nonScaling = true
			}
			pos++
		default:
			return op{}, redisError("Unknown argument received")
		}
		if err != nil {
			return op{}, err
		}
	}
	if items < 0 || items == len(args) {
		return op{}, arityError(args[0])
	}
	if err := s.checkKeyItems(args[1], args[items:]); err != nil {
		return op{}, err
	}
	spec := bfSpec(rate, uint64(capacity), uint32(expansion), nonScaling)
	// The defaults always build; options that never could are refused whether
	// or not the key exists, as options out of range are.
	if sized && !noCreate {
		if err := checkSpec(spec); err != nil {
			return op{}, err
		}
	}
	cmd := &fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyBF, Key: string(args[1]), Items: args[items:],
		Multi: true, NoCreate: noCreate, Spec: spec}
	return writeOp(cmd, renderBools), nil
}

// lower returns the i-th byte of b in lower case, or 0 past its end (C's NUL).
func lower(b []byte, i int) byte {
	if i >= len(b) {
		return 0
	}
	c := b[i]
	if c >= 'A' && c <= 'Z' {
		c += 'a' - 'A'
	}
	return c
}

// parseBFExists: BF.EXISTS key item / BF.MEXISTS key item...; a missing key or
// one of another kind answers no.
func parseBFExists(s *Server, args [][]byte) (op, error) {
	return parseExists(s, args, fsm.FamilyBF)
}

// parseExists serves BF, CF and CBF EXISTS / MEXISTS.
func parseExists(s *Server, args [][]byte, fam fsm.Family) (op, error) {
	multi := isMulti(args[0])
	if (!multi && len(args) != 3) || (multi && len(args) < 3) {
		return op{}, arityError(args[0])
	}
	key, items := string(args[1]), args[2:]
	if err := s.checkKeyItems(args[1], items); err != nil {
		return op{}, err
	}
	return txRead(readOp(func(q queries, w *reply) {
		found := q.Exists(fam, key, items)
		if multi {
			w.array(len(found))
		}
		for _, v := range found {
			w.bool(v)
		}
	}), func() (*fsm.Command, func(*reply, *fsm.Result)) {
		return &fsm.Command{Op: fsm.OpTest, Family: fam, Key: key, Items: items}, func(w *reply, r *fsm.Result) {
			if r.Err != nil {
				w.fail(r.Err)
				return
			}
			if multi {
				w.array(len(r.Ints))
			}
			for _, v := range r.Ints {
				w.bool(v == 1)
			}
		}
	}), nil
}

// parseBFCard: BF.CARD key (missing key: 0).
func parseBFCard(s *Server, args [][]byte) (op, error) {
	key := string(args[1])
	return readOp(func(q queries, w *reply) {
		n, err := q.Card(key)
		if err != nil {
			w.fail(err)
			return
		}
		w.uint(n)
	}), nil
}

// bfInfoFields are BF.INFO's optional field names and their reply labels; go-redis
// accepts exactly these five labels.
var bfInfoFields = []struct{ arg, label string }{
	{"CAPACITY", "Capacity"}, {"SIZE", "Size"}, {"FILTERS", "Number of filters"},
	{"ITEMS", "Number of items inserted"}, {"EXPANSION", "Expansion rate"},
}

// parseBFInfo: BF.INFO key [CAPACITY|SIZE|FILTERS|ITEMS|EXPANSION|WINDOW].
// The key is checked before the field, as RedisBloom does. WINDOW describes a
// windowed filter's window apart, since go-redis refuses any field of the
// full reply but RedisBloom's five.
func parseBFInfo(s *Server, args [][]byte) (op, error) {
	if len(args) > 3 {
		return op{}, arityError(args[0])
	}
	if len(args) == 3 && keyword(args[2], "WINDOW") {
		return windowInfo(fsm.FamilyBF, string(args[1])), nil
	}
	key, field := string(args[1]), -1
	if len(args) == 3 {
		for i, f := range bfInfoFields {
			if keyword(args[2], f.arg) {
				field = i
			}
		}
	}
	return readOp(func(q queries, w *reply) {
		in, err := q.Info(fsm.FamilyBF, key)
		if err != nil {
			w.fail(err)
			return
		}
		if len(args) == 3 && field < 0 {
			w.fail(redisError("Invalid information value"))
			return
		}
		renderBFInfo(w, in, field)
	}), nil
}

// renderBFInfo replies with all five fields as a map (a flat array in RESP2), or
// with one field: RESP3 a one-pair map, RESP2 a one-element array of the value.
func renderBFInfo(w *reply, in fsm.Info, field int) {
	value := func(i int) {
		switch i {
		case 0:
			w.uint(in.Capacity)
		case 1:
			w.uint(in.ReportedSize)
		case 2:
			w.uint(in.Filters)
		case 3:
			w.uint(in.Items)
		case 4:
			if in.NonScaling {
				w.null()
			} else {
				w.uint(in.Expansion)
			}
		}
	}
	if field >= 0 {
		if w.resp3() {
			w.mapHeader(1)
			w.simple(bfInfoFields[field].label)
		} else {
			w.array(1)
		}
		value(field)
		return
	}
	w.mapHeader(len(bfInfoFields))
	for i, f := range bfInfoFields {
		w.simple(f.label)
		value(i)
	}
}

// parseBFScanDump: BF.SCANDUMP key iterator. RedisBloom looks the key up before
// parsing the iterator, so a missing key wins over a bad iterator.
func parseBFScanDump(s *Server, args [][]byte) (op, error) {
	return scanDump(args, fsm.FamilyBF, func(b []byte) (int64, bool) { return parseInt64(b) },
		redisError("Second argument must be numeric")), nil
}

// parseBFDebug: BF.DEBUG key, the chain's layout as RedisBloom shows it: the
// items added, then one line per Bloom filter, oldest first.
func parseBFDebug(s *Server, args [][]byte) (op, error) {
	key := string(args[1])
	return readOp(func(q queries, w *reply) {
		in, err := q.Info(fsm.FamilyBF, key)
		if err != nil {
			w.fail(err)
			return
		}
		if in.Debug != nil {
			w.array(len(in.Debug))
			for _, l := range in.Debug {
				w.bulkString(l)
			}
			return
		}
		w.array(1 + len(in.Links))
		w.bulkString(fmt.Sprintf("size:%d", in.Items))
		for _, l := range in.Links {
			w.bulkString(fmt.Sprintf("bytes:%d bits:%d hashes:%d hashwidth:64 capacity:%d size:%d ratio:%s",
				l.Bytes, l.Bits, l.Hashes, l.Capacity, l.Items, formatG(l.ErrorRate)))
		}
	}), nil
}

// formatG formats f as C's printf %g does (six significant digits, no
// trailing zeros), as RedisBloom prints ratios.
func formatG(f float64) string { return strconv.FormatFloat(f, 'g', 6, 64) }

// scanDump serves BF.SCANDUMP and CF.SCANDUMP: [next iterator, chunk], and
// after the last chunk [0, ""] (BF) or [0, nil] (CF), as RedisBloom answers;
// a cuckoo filter with no items answers [0, nil] at once.
func scanDump(args [][]byte, fam fsm.Family, parseIter func([]byte) (int64, bool), badIter error) op {
	key := string(args[1])
	iter, ok := parseIter(args[2])
	return readOp(func(q queries, w *reply) {
		if !ok {
			if _, err := q.Info(fam, key); err != nil {
				w.fail(err)
			} else {
				w.fail(badIter)
			}
			return
		}
		if fam == fsm.FamilyCF {
			// RedisBloom dumps no cuckoo filter without items, and ends a
			// cuckoo dump with a null chunk where a Bloom dump has "".
			if in, err := q.Info(fam, key); err == nil && in.Items == 0 {
				w.array(2)
				w.int(0)
				w.null()
				return
			}
		}
		next, data, err := q.ScanDump(fam, key, iter)
		if err != nil {
			w.fail(err)
			return
		}
		w.array(2)
		w.int(next)
		if next == 0 && fam == fsm.FamilyCF {
			w.null()
			return
		}
		w.bulk(data)
	})
}

// parseBFLoadChunk: BF.LOADCHUNK key iterator data.
func parseBFLoadChunk(s *Server, args [][]byte) (op, error) {
	iter, ok := parseInt64(args[2])
	if !ok {
		return op{}, redisError("ERR Second argument must be numeric")
	}
	if err := s.cfg.checkKey(args[1]); err != nil {
		return op{}, err
	}
	cmd := &fsm.Command{Op: fsm.OpLoadChunk, Family: fsm.FamilyBF, Key: string(args[1]),
		Iter: iter, Data: args[3]}
	return writeOp(cmd, renderBFLoadChunk), nil
}

// renderBFLoadChunk answers BF.LOADCHUNK with RedisBloom's strings: a chunk
// past the end of the filter, one running past it, and anything else wrong
// with it ("received bad data") are told apart.
func renderBFLoadChunk(w *reply, r *fsm.Result) {
	if t := bfChunkText(r.Err); t != "" {
		w.fail(redisError(t))
		return
	}
	renderOK(w, r)
}

// bfChunkText is BF.LOADCHUNK's refusal of a chunk in RedisBloom's words (and
// the sizes of one refused for its size), or "" for any other outcome.
func bfChunkText(err error) string {
	d := chunkSizes(err)
	var size *fsm.ChunkSizeError
	switch {
	case errors.Is(err, fsm.ErrChunkOutside):
		return "ERR invalid offset - no link found" + d
	case errors.Is(err, fsm.ErrChunkTooBig):
		return "ERR invalid chunk - Too big for current filter" + d
	case errors.Is(err, fsm.ErrBadPosition), errors.Is(err, fsm.ErrBadHeader),
		errors.As(err, &size) && errors.Is(err, fsm.ErrBadData):
		return "ERR received bad data" + d
	}
	return ""
}
