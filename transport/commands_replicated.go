package transport

import (
	"errors"

	"github.com/rookerydb/rookery/fsm"
)

// Keyspace writes Redis tools call, replicated through the log like every
// other write (log format 4: a leader refuses them until every node reads it).
func replicatedKeyspaceCommands() []*command {
	w := flagsWrite
	return []*command{
		{name: "rename", arity: 3, flags: w, firstKey: 1, lastKey: 2, step: 1, parse: parseRename},
		{name: "renamenx", arity: 3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 2, step: 1, parse: parseRename},
		{name: "flushall", arity: -1, flags: []string{"write"}, parse: parseFlush},
		{name: "flushdb", arity: -1, flags: []string{"write"}, parse: parseFlush},
		// UNLINK is DEL: a filter is freed as soon as its key is gone.
		{name: "unlink", arity: -2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: -1, step: 1, parse: parseDel},
	}
}

// parseRename: RENAME key newkey (OK, replacing newkey) and RENAMENX key
// newkey (1, or 0 when newkey exists); "ERR no such key" for a missing key.
func parseRename(s *Server, args [][]byte) (op, error) {
	for _, k := range args[1:] {
		if err := s.cfg.checkKey(k); err != nil {
			return op{}, err
		}
	}
	nx := keyword(args[0], "RENAMENX")
	cmd := &fsm.Command{Op: fsm.OpRename, Key: string(args[1]), Keys: []string{string(args[2])}, NX: nx}
	return writeOp(cmd, func(w *reply, r *fsm.Result) {
		switch {
		case errors.Is(r.Err, fsm.ErrNotFound):
			w.fail(redisError("ERR no such key"))
		case r.Err != nil:
			w.fail(r.Err)
		case nx:
			w.int(r.Ints[0])
		default:
			w.ok()
		}
	}), nil
}

// parseFlush: FLUSHALL / FLUSHDB [ASYNC|SYNC] deletes every filter on every
// node (there is one database); either mode frees at once.
func parseFlush(s *Server, args [][]byte) (op, error) {
	if len(args) > 2 || len(args) == 2 && !keyword(args[1], "ASYNC") && !keyword(args[1], "SYNC") {
		return op{}, redisError("ERR syntax error")
	}
	return writeOp(&fsm.Command{Op: fsm.OpFlush}, renderOK), nil
}
