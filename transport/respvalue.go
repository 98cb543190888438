package transport

import (
	"bytes"
	"errors"
	"strconv"
)

// respValue is a RESP reply read back, for combining the replies of a command
// fanned out over shards (DBSIZE, KEYS, SCAN, DEL...). Only the types such
// replies use are read.
type respValue struct {
	kind byte // ':' integer, '$' bulk, '+' simple, '-' error, '*' array ('~' set read as one), '_' null
	n    int64
	s    []byte
	arr  []respValue
}

var errBadReply = errors.New("unreadable reply from another node")

// parseRESP reads one reply from b and returns it and the bytes after it.
func parseRESP(b []byte, depth int) (respValue, []byte, error) {
	if len(b) < 3 || depth > 8 {
		return respValue{}, nil, errBadReply
	}
	i := bytes.Index(b, []byte("\r\n"))
	if i < 1 {
		return respValue{}, nil, errBadReply
	}
	head, rest := b[1:i], b[i+2:]
	v := respValue{kind: b[0]}
	switch b[0] {
	case ':':
		n, err := strconv.ParseInt(string(head), 10, 64)
		if err != nil {
			return v, nil, errBadReply
		}
		v.n = n
	case '+', '-':
		v.s = head
	case '_':
	case '$':
		n, err := strconv.Atoi(string(head))
		if err != nil || n < -1 {
			return v, nil, errBadReply
		}
		if n == -1 {
			v.kind = '_'
			return v, rest, nil
		}
		if len(rest) < n+2 {
			return v, nil, errBadReply
		}
		v.s, rest = rest[:n], rest[n+2:]
	case '*', '~':
		n, err := strconv.Atoi(string(head))
		if err != nil || n < -1 || n > len(rest) {
			return v, nil, errBadReply
		}
		v.kind = '*'
		for range max(n, 0) {
			var e respValue
			if e, rest, err = parseRESP(rest, depth+1); err != nil {
				return v, nil, err
			}
			v.arr = append(v.arr, e)
		}
	default:
		return v, nil, errBadReply
	}
	return v, rest, nil
}

// parseReply reads a whole reply.
func parseReply(b []byte) (respValue, error) {
	v, rest, err := parseRESP(b, 0)
	if err == nil && len(rest) != 0 {
		err = errBadReply
	}
	return v, err
}
