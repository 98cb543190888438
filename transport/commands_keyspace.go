package transport

import (
	"strconv"
	"strings"

	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
)

// Type names as TYPE reports them: RedisBloom's module type names for Bloom and
// cuckoo filters, and ours for counting filters.
const (
	typeBloom    = "MBbloom--"
	typeCuckoo   = "MBbloomCF"
	typeCounting = "MBbloomCBF"
	maxScanCount = 100000 // bounds one SCAN call's work
)

func keyspaceCommands() []*command {
	w, r := flagsWrite, flagsRead
	return []*command{
		{name: "del", arity: -2, flags: w, firstKey: 1, lastKey: -1, step: 1, parse: parseDel},
		{name: "exists", arity: -2, flags: r, firstKey: 1, lastKey: -1, step: 1, parse: parseExistsKeys},
		{name: "type", arity: 2, flags: r, firstKey: 1, lastKey: 1, step: 1, parse: parseType},
		{name: "scan", arity: -2, flags: []string{"readonly"}, parse: parseScan},
		{name: "keys", arity: 2, flags: []string{"readonly"}, parse: parseKeys},
		{name: "dbsize", arity: 1, flags: r, parse: parseDBSize},
	}
}

// typeName is TYPE's answer for a filter kind: by the command family that
// owns it (the kind table, fsm/kinds.go), so a new kind is named by its row.
func typeName(k filters.Kind) string {
	switch fsm.FamilyOf(k) {
	case fsm.FamilyBF:
		return typeBloom
	case fsm.FamilyCF:
		return typeCuckoo
	case fsm.FamilyCBF:
		return typeCounting
	}
	return "none"
}

// parseDel: DEL key... answers how many of the keys existed.
func parseDel(s *Server, args [][]byte) (op, error) {
	if err := s.cfg.checkItems(args[1:]); err != nil {
		return op{}, err
	}
	keys := make([]string, len(args)-1)
	for i, k := range args[1:] {
		keys[i] = string(k)
	}
	return writeOp(&fsm.Command{Op: fsm.OpDelKeys, Keys: keys}, renderInt), nil
}

// parseExistsKeys: EXISTS key... counts existing keys, repeats included, as Redis.
func parseExistsKeys(s *Server, args [][]byte) (op, error) {
	if err := s.cfg.checkItems(args[1:]); err != nil {
		return op{}, err
	}
	keys := args[1:]
	return readOp(func(q queries, w *reply) {
		n := 0
		for _, k := range keys {
			if _, ok := q.KindOf(string(k)); ok {
				n++
			}
		}
		w.int(int64(n))
	}), nil
}

// parseType: TYPE key ("none" when missing).
func parseType(s *Server, args [][]byte) (op, error) {
	key := string(args[1])
	return readOp(func(q queries, w *reply) {
		k, ok := q.KindOf(key)
		if !ok {
			w.simple("none")
			return
		}
		w.simple(typeName(k))
	}), nil
}

// parseScan: SCAN cursor [MATCH pattern] [COUNT n] [TYPE type].
func parseScan(s *Server, args [][]byte) (op, error) {
	cursor, ok := parseUint64(args[1])
	if !ok {
		return op{}, redisError("ERR invalid cursor")
	}
	count, match := 10, keyFilter{}
	for i := 2; i < len(args); i += 2 {
		if i+1 == len(args) {
			return op{}, errSyntax
		}
		v := args[i+1]
		switch {
		case keyword(args[i], "COUNT"):
			n, ok := parseInt64(v)
			if !ok {
				return op{}, errNotInteger
			}
			if n < 1 {
				return op{}, errSyntax
			}
			count = int(min(n, maxScanCount))
		case keyword(args[i], "MATCH"):
			match.pattern = v
		case keyword(args[i], "TYPE"):
			match.typ, match.hasType = strings.ToLower(string(v)), true
		default:
			return op{}, errSyntax
		}
	}
	return readOp(func(q queries, w *reply) {
		next, keys := q.Scan(cursor, count, match.match)
		w.array(2)
		w.bulkString(strconv.FormatUint(next, 10))
		w.array(len(keys))
		for _, k := range keys {
			w.bulkString(k)
		}
	}), nil
}

// keyFilter selects keys for SCAN and KEYS.
type keyFilter struct {
	pattern []byte // nil: every key
	typ     string // lower-case type name
	hasType bool
}

func (f keyFilter) match(key string, k filters.Kind) bool {
	if f.hasType && strings.ToLower(typeName(k)) != f.typ {
		return false
	}
	return f.pattern == nil || globMatch(f.pattern, []byte(key))
}

// parseKeys: KEYS pattern, every matching key.
func parseKeys(s *Server, args [][]byte) (op, error) {
	f := keyFilter{pattern: args[1]}
	return readOp(func(q queries, w *reply) {
		var all []string
		cursor := uint64(0)
		for {
			next, keys := q.Scan(cursor, maxScanCount, f.match)
			all = append(all, keys...)
			if next == 0 {
				break
			}
			cursor = next
		}
		w.array(len(all))
		for _, k := range all {
			w.bulkString(k)
		}
	}), nil
}

// parseDBSize: DBSIZE, the number of filters.
func parseDBSize(s *Server, args [][]byte) (op, error) {
	return readOp(func(q queries, w *reply) { w.int(int64(q.Len())) }), nil
}

// globMatch matches s against a Redis glob pattern: * any run, ? any byte,
// [abc] [^abc] [a-z] sets, \x a literal x. Every token but * consumes exactly one
// byte, so one backtracking point (the last *) suffices: O(len(p) * len(s)),
// with none of the exponential blow-up of naive recursion.
func globMatch(p, s []byte) bool {
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) && p[pi] == '*' {
			starP, starS = pi, si
			pi++
			continue
		}
		if pi < len(p) {
			if n, ok := matchToken(p, pi, s[si]); ok {
				pi += n
				si++
				continue
			}
		}
		if starP < 0 {
			return false
		}
		starS++
		pi, si = starP+1, starS
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// matchToken matches one byte c against the token at p[i] and returns the
// token's length.
func matchToken(p []byte, i int, c byte) (int, bool) {
	switch p[i] {
	case '?':
		return 1, true
	case '\\':
		if i+1 < len(p) {
			return 2, p[i+1] == c
		}
		return 1, c == '\\'
	case '[':
		return matchSet(p, i, c)
	}
	return 1, p[i] == c
}

// matchSet matches c against the set starting at p[i] == '['. As in Redis, an
// unterminated set runs to the end of the pattern.
func matchSet(p []byte, i int, c byte) (int, bool) {
	j := i + 1
	not := j < len(p) && p[j] == '^'
	if not {
		j++
	}
	matched := false
	for j < len(p) && p[j] != ']' {
		switch {
		case p[j] == '\\' && j+1 < len(p):
			j++
			matched = matched || p[j] == c
		case j+2 < len(p) && p[j+1] == '-':
			lo, hi := p[j], p[j+2]
			if lo > hi {
				lo, hi = hi, lo
			}
			matched = matched || (c >= lo && c <= hi)
			j += 2
		default:
			matched = matched || p[j] == c
		}
		j++
	}
	if j < len(p) {
		j++ // the closing ]
	}
	return j - i, matched != not
}
