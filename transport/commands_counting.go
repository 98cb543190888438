package transport

import (
	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
)

// Counting filter defaults. CBF.ADD and CBF.MADD create a missing filter with the
// Bloom defaults (error rate 0.01, capacity 100) and the standard 4-bit layout.
const cbfDefaultCounterBits = 4

func countingCommands() []*command {
	w, r := flagsWrite, flagsRead
	return []*command{
		{name: "cbf.reserve", arity: -4, flags: w, firstKey: 1, lastKey: 1, step: 1, parse: parseCBFReserve},
		{name: "cbf.add", arity: 3, flags: w, firstKey: 1, lastKey: 1, step: 1, parse: parseCBFAdd},
		{name: "cbf.madd", arity: -3, flags: w, firstKey: 1, lastKey: 1, step: 1, parse: parseCBFAdd},
		{name: "cbf.del", arity: 3, flags: w, firstKey: 1, lastKey: 1, step: 1, parse: parseCBFDel},
		{name: "cbf.exists", arity: 3, flags: r, firstKey: 1, lastKey: 1, step: 1, parse: parseCBFExists},
		{name: "cbf.mexists", arity: -3, flags: r, firstKey: 1, lastKey: 1, step: 1, parse: parseCBFExists},
		{name: "cbf.count", arity: 3, flags: r, firstKey: 1, lastKey: 1, step: 1, parse: parseCBFCount},
		{name: "cbf.info", arity: 2, flags: r, firstKey: 1, lastKey: 1, step: 1, parse: parseCBFInfo},
	}
}

func cbfSpec(kind filters.Kind, rate float64, capacity uint64, counterBits uint8) fsm.Spec {
	return fsm.Spec{Kind: kind, Capacity: capacity, ErrorRate: rate, CounterBits: counterBits}
}

// parseCBFReserve: CBF.RESERVE key error_rate capacity [COUNTERBITS 4|8]
// [LAYOUT standard|dleft]. Rate and capacity are checked as BF.RESERVE checks
// them; being our own command, unknown words are a syntax error.
func parseCBFReserve(s *Server, args [][]byte) (op, error) {
	rate, capacity, err := s.reserveArgs(args)
	if err != nil {
		return op{}, err
	}
	kind, bits := filters.KindCounting, uint8(cbfDefaultCounterBits)
	for pos := 4; pos < len(args); pos += 2 {
		if pos+1 == len(args) {
			return op{}, arityError(args[0])
		}
		v := args[pos+1]
		switch {
		case keyword(args[pos], "COUNTERBITS"):
			switch {
			case keyword(v, "4"):
				bits = 4
			case keyword(v, "8"):
				bits = 8
			default:
				return op{}, redisError("ERR counter bits must be 4 or 8")
			}
		case keyword(args[pos], "LAYOUT"):
			switch {
			case keyword(v, "STANDARD"):
				kind = filters.KindCounting
			case keyword(v, "DLEFT"):
				kind = filters.KindDLeft
			default:
				return op{}, redisError("ERR layout must be standard or dleft")
			}
		default:
			return op{}, errSyntax
		}
	}
	spec := cbfSpec(kind, rate, uint64(capacity), bits)
	if err := checkSpec(spec); err != nil {
		return op{}, err
	}
	cmd := &fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyCBF, Key: string(args[1]), Spec: spec}
	return writeOp(cmd, renderOK), nil
}

// parseCBFAdd: CBF.ADD key item / CBF.MADD key item....
func parseCBFAdd(s *Server, args [][]byte) (op, error) {
	items := args[2:]
	if err := s.checkKeyItems(args[1], items); err != nil {
		return op{}, err
	}
	multi := isMulti(args[0])
	cmd := &fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyCBF, Key: string(args[1]), Items: items,
		Multi: multi, Spec: cbfSpec(filters.KindCounting, bfDefaultErrorRate, bfDefaultCapacity, cbfDefaultCounterBits)}
	if multi {
		return writeOp(cmd, renderBools), nil
	}
	return writeOp(cmd, renderBool), nil
}

// parseCBFDel: CBF.DEL key item; 1 if the item's counters were decremented.
func parseCBFDel(s *Server, args [][]byte) (op, error) {
	if err := s.checkKeyItems(args[1], args[2:]); err != nil {
		return op{}, err
	}
	cmd := &fsm.Command{Op: fsm.OpDelete, Family: fsm.FamilyCBF, Key: string(args[1]), Items: args[2:]}
	return writeOp(cmd, renderBool), nil
}

func parseCBFExists(s *Server, args [][]byte) (op, error) {
	return parseExists(s, args, fsm.FamilyCBF)
}

// parseCBFCount: CBF.COUNT key item, the minimum of the item's counters.
func parseCBFCount(s *Server, args [][]byte) (op, error) {
	return parseCount(s, args, fsm.FamilyCBF)
}

// parseCBFInfo: CBF.INFO key, a map like BF.INFO's.
func parseCBFInfo(s *Server, args [][]byte) (op, error) {
	key := string(args[1])
	return readOp(func(q queries, w *reply) {
		in, err := q.Info(fsm.FamilyCBF, key)
		if err != nil {
			w.fail(err)
			return
		}
		layout := "standard"
		if in.Kind == filters.KindDLeft {
			layout = "dleft"
		}
		w.mapHeader(6)
		w.simple("Capacity")
		w.uint(in.Capacity)
		w.simple("Size")
		w.uint(in.Size)
		w.simple("Number of items inserted")
		w.uint(in.Items)
		w.simple("Error rate")
		w.double(in.ErrorRate)
		w.simple("Counter bits")
		w.uint(in.CounterBits)
		w.simple("Layout")
		w.bulkString(layout)
	}), nil
}
