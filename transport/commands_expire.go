package transport

import (
	"errors"
	"math"
	"time"

	"github.com/rookerydb/rookery/fsm"
)

// Expiry of filter keys, as Redis 7 has it: EXPIRE, PEXPIRE, EXPIREAT and
// PEXPIREAT with NX, XX, GT and LT; TTL, PTTL, EXPIRETIME, PEXPIRETIME;
// PERSIST. The setters are writes through the log (log format 5: refused
// until every node reads it). A relative time to live is counted by the state
// machine from the log's clock, the leader's, never from this node's; only
// TTL and PTTL read this node's clock, to say how long is left.
func expireCommands() []*command {
	w := []string{"write", "fast"}
	r := flagsRead
	key := func(c *command) *command { c.firstKey, c.lastKey, c.step = 1, 1, 1; return c }
	return []*command{
		key(&command{name: "expire", arity: -3, flags: w, parse: parseExpire(false, false)}),
		key(&command{name: "pexpire", arity: -3, flags: w, parse: parseExpire(true, false)}),
		key(&command{name: "expireat", arity: -3, flags: w, parse: parseExpire(false, true)}),
		key(&command{name: "pexpireat", arity: -3, flags: w, parse: parseExpire(true, true)}),
		key(&command{name: "ttl", arity: 2, flags: r, parse: parseTTL(false, false)}),
		key(&command{name: "pttl", arity: 2, flags: r, parse: parseTTL(true, false)}),
		key(&command{name: "expiretime", arity: 2, flags: r, parse: parseTTL(false, true)}),
		key(&command{name: "pexpiretime", arity: 2, flags: r, parse: parseTTL(true, true)}),
		key(&command{name: "persist", arity: 2, flags: w, parse: parsePersist}),
	}
}

// parseExpire: EXPIRE key seconds [NX|XX|GT|LT ...] and its kin, checked in
// Redis's order (options, then the number, then overflow) with its errors.
// The reply is 1 when the deadline was set (or the key deleted, for one in
// the past), 0 when the key is missing or a condition failed.
func parseExpire(millis, at bool) func(s *Server, args [][]byte) (op, error) {
	return func(s *Server, args [][]byte) (op, error) {
		if err := s.cfg.checkKey(args[1]); err != nil {
			return op{}, err
		}
		cond, err := expireOptions(args[3:])
		if err != nil {
			return op{}, err
		}
		v, ok := parseInt64(args[2])
		if !ok {
			return op{}, errNotInteger
		}
		name := expireName(millis, at)
		badTime := redisError("ERR invalid expire time in '" + name + "' command")
		if !millis {
			if v > math.MaxInt64/1000 || v < math.MinInt64/1000 {
				return op{}, badTime
			}
			v *= 1000
		}
		// Redis adds the time to live to its clock and refuses an overflow;
		// the state machine checks again with the log's clock.
		if !at && v > math.MaxInt64-time.Now().UnixMilli() {
			return op{}, badTime
		}
		cmd := &fsm.Command{Op: fsm.OpExpire, Key: string(args[1]), Expire: v, ExpireAt: at, ExpireIf: cond}
		return writeOp(cmd, func(w *reply, r *fsm.Result) {
			switch {
			case errors.Is(r.Err, fsm.ErrBadExpire):
				w.fail(badTime)
			case r.Err != nil:
				w.fail(r.Err)
			default:
				w.int(r.Ints[0])
			}
		}), nil
	}
}

func expireName(millis, at bool) string {
	name := "expire"
	if at {
		name += "at"
	}
	if millis {
		name = "p" + name
	}
	return name
}

// expireOptions parses NX, XX, GT and LT as Redis 7 does: any number, in any
// case and order, repeats allowed; NX with any other, or GT with LT, refused.
func expireOptions(opts [][]byte) (fsm.ExpireCond, error) {
	var cond fsm.ExpireCond
	for _, o := range opts {
		switch {
		case keyword(o, "NX"):
			cond |= fsm.ExpireNX
		case keyword(o, "XX"):
			cond |= fsm.ExpireXX
		case keyword(o, "GT"):
			cond |= fsm.ExpireGT
		case keyword(o, "LT"):
			cond |= fsm.ExpireLT
		default:
			return 0, redisError("ERR Unsupported option " + string(o))
		}
	}
	if cond&fsm.ExpireNX != 0 && cond != fsm.ExpireNX {
		return 0, redisError("ERR NX and XX, GT or LT options at the same time are not compatible")
	}
	if cond&(fsm.ExpireGT|fsm.ExpireLT) == fsm.ExpireGT|fsm.ExpireLT {
		return 0, redisError("ERR GT and LT options at the same time are not compatible")
	}
	return cond, nil
}

// parseTTL: TTL and PTTL (time left, by this node's clock, never below 0 for
// a key still there), EXPIRETIME and PEXPIRETIME (the deadline); -2 for a
// missing key, -1 for one without a deadline. Seconds are rounded to the
// nearest, as Redis does.
func parseTTL(millis, abs bool) func(s *Server, args [][]byte) (op, error) {
	return func(s *Server, args [][]byte) (op, error) {
		key := string(args[1])
		return readOp(func(q queries, w *reply) {
			deadline, ok := q.Expiry(key)
			switch {
			case !ok:
				w.int(-2)
			case deadline == 0:
				w.int(-1)
			default:
				v := deadline
				if !abs {
					v = max(deadline-time.Now().UnixMilli(), 0)
				}
				if !millis {
					v = v/1000 + b2i(v%1000 >= 500)
				}
				w.int(v)
			}
		}), nil
	}
}

// parsePersist: PERSIST key drops its deadline: 1 if it had one, else 0.
func parsePersist(s *Server, args [][]byte) (op, error) {
	if err := s.cfg.checkKey(args[1]); err != nil {
		return op{}, err
	}
	return writeOp(&fsm.Command{Op: fsm.OpPersist, Key: string(args[1])}, renderInt), nil
}
