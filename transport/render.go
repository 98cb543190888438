package transport

import (
	"errors"
	"strconv"

	"github.com/tidwall/redcon"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/fsm"
)

// redisError is a reply error rendered verbatim: it carries its own prefix
// ("ERR ", "WRONGTYPE ", or none where RedisBloom uses none).
type redisError string

func (e redisError) Error() string { return string(e) }

// Reply errors shared by several commands.
const (
	errWrongType   = redisError("WRONGTYPE Operation against a key holding the wrong kind of value")
	errNotFound    = redisError("ERR not found")
	errSyntax      = redisError("ERR syntax error")
	errNotInteger  = redisError("ERR value is not an integer or out of range")
	errNoAuth      = redisError("NOAUTH Authentication required.")
	errWrongPass   = redisError("WRONGPASS invalid username-password pair or user is disabled.")
	errMaxClients  = redisError("ERR max number of clients reached")
	errUnknownFail = redisError("ERR could not create filter")
)

// arityError is Redis's arity error; it echoes the command name as typed.
func arityError(name []byte) error {
	return redisError("ERR wrong number of arguments for '" + string(name) + "' command")
}

// reply accumulates the RESP of replies in the protocol version the connection
// spoke when the request was read (HELLO changes it between requests).
type reply struct {
	b     []byte
	proto int
}

func (w *reply) resp3() bool         { return w.proto == 3 }
func (w *reply) ok()                 { w.b = redcon.AppendOK(w.b) }
func (w *reply) simple(s string)     { w.b = redcon.AppendString(w.b, s) }
func (w *reply) int(n int64)         { w.b = redcon.AppendInt(w.b, n) }
func (w *reply) uint(n uint64)       { w.b = redcon.AppendUint(w.b, n) }
func (w *reply) bulk(b []byte)       { w.b = redcon.AppendBulk(w.b, b) }
func (w *reply) bulkString(s string) { w.b = redcon.AppendBulkString(w.b, s) }
func (w *reply) array(n int)         { w.b = redcon.AppendArray(w.b, n) }

// fail writes err as an error reply: a redisError verbatim, anything else as the
// error class a client must act on (see renderErr).
func (w *reply) fail(err error) { w.b = redcon.AppendError(w.b, renderErr(err)) }

// null is RESP2's null bulk string or RESP3's null.
func (w *reply) null() {
	if w.resp3() {
		w.b = append(w.b, '_', '\r', '\n')
		return
	}
	w.b = redcon.AppendNull(w.b)
}

// bool is RESP3's boolean, or RESP2's integer 1/0, as RedisBloom replies yes/no.
func (w *reply) bool(v bool) {
	switch {
	case !w.resp3():
		w.b = redcon.AppendInt(w.b, b2i(v))
	case v:
		w.b = append(w.b, '#', 't', '\r', '\n')
	default:
		w.b = append(w.b, '#', 'f', '\r', '\n')
	}
}

// mapHeader starts a map of n pairs: RESP3 "%n", RESP2 a flat array of 2n.
func (w *reply) mapHeader(n int) {
	if w.resp3() {
		w.b = append(w.b, '%')
		w.b = strconv.AppendInt(w.b, int64(n), 10)
		w.b = append(w.b, '\r', '\n')
		return
	}
	w.array(2 * n)
}

// double is RESP3's double, or a bulk string in RESP2, as Redis renders floats.
func (w *reply) double(f float64) {
	s := strconv.FormatFloat(f, 'g', 17, 64)
	if w.resp3() {
		w.b = append(w.b, ',')
		w.b = append(w.b, s...)
		w.b = append(w.b, '\r', '\n')
		return
	}
	w.bulkString(s)
}

// verbatim is RESP3's verbatim text (as INFO replies), or a bulk string in RESP2.
func (w *reply) verbatim(s string) {
	if !w.resp3() {
		w.bulkString(s)
		return
	}
	w.b = append(w.b, '=')
	w.b = strconv.AppendInt(w.b, int64(len(s)+4), 10)
	w.b = append(w.b, "\r\ntxt:"...)
	w.b = append(w.b, s...)
	w.b = append(w.b, '\r', '\n')
}

func b2i(v bool) int64 {
	if v {
		return 1
	}
	return 0
}

// renderErr turns an error into the text of an error reply. Domain outcomes get
// RedisBloom's strings; cluster errors say whether the write was applied: every
// error but INDETERMINATE means "definitely not applied", and an unrecognised
// error from the write path is reported as indeterminate, never as a failure.
func renderErr(err error) string {
	var re redisError
	if errors.As(err, &re) {
		return string(re)
	}
	if s, ok := domainErr(err); ok {
		return s
	}
	k, ok := cluster.KindOf(err)
	if !ok || k.Class == cluster.ClassIndeterminate {
		return "INDETERMINATE " + err.Error() + ": the write may or may not have been applied"
	}
	if k.Text != "" {
		return k.RESP + " " + k.Text
	}
	return k.RESP + " " + err.Error()
}

// domainErr maps the state machine's outcomes to RedisBloom's strings.
func domainErr(err error) (string, bool) {
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		return string(errNotFound), true
	case errors.Is(err, fsm.ErrExists):
		return "ERR item exists", true
	case errors.Is(err, fsm.ErrWrongType):
		return string(errWrongType), true
	case errors.Is(err, fsm.ErrFull):
		return "Filter is full", true
	case errors.Is(err, fsm.ErrMaxExpansions):
		return "Maximum expansions reached", true
	case errors.Is(err, fsm.ErrNonScalingFull):
		return "ERR non scaling filter is full", true
	case errors.Is(err, fsm.ErrCannotGrow):
		return "ERR problem inserting into filter", true
	case errors.Is(err, fsm.ErrBadPosition):
		return "Invalid position", true
	case errors.Is(err, fsm.ErrBadData):
		return "ERR received bad data", true
	case errors.Is(err, fsm.ErrBadSpec):
		return string(errUnknownFail), true
	case errors.Is(err, fsm.ErrOutOfMemory):
		return "OOM command not allowed: " + fsm.ErrOutOfMemory.Error(), true
	case errors.Is(err, fsm.ErrSessionExpired):
		return "ERR IDEM sequence number too old: the write may have been applied and is not applied again", true
	}
	return "", false
}

// readErr renders a failed read barrier. A read changes nothing, so a timeout
// is simply "try again", never "indeterminate".
func readErr(err error) error {
	if cluster.ClassOf(err) == cluster.ClassNotApplied {
		return redisError(renderErr(err))
	}
	return redisError("TRYAGAIN read not served: " + err.Error())
}

// outcome classifies a reply error for metrics: "indeterminate", "unavailable"
// (not applied, for a passing or a lasting reason) or "error" (the
// command's own).
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var re redisError
	if errors.As(err, &re) {
		return "error"
	}
	if _, ok := domainErr(err); ok {
		return "error"
	}
	switch cluster.ClassOf(err) {
	case cluster.ClassNotApplied, cluster.ClassRefused:
		return "unavailable"
	}
	return "indeterminate"
}

// Result renderers for writes. Each gets the result of a successfully applied
// command; r.Err is a domain outcome.

// renderOK replies OK (RESERVE, LOADCHUNK).
func renderOK(w *reply, r *fsm.Result) {
	if r.Err != nil {
		w.fail(r.Err)
		return
	}
	w.ok()
}

// renderBool replies with the one outcome as a yes/no (BF.ADD, CF.ADD, CF.ADDNX).
func renderBool(w *reply, r *fsm.Result) {
	if r.Err != nil || len(r.Ints) == 0 {
		w.failResult(r)
		return
	}
	w.yesNo(r.Ints[0])
}

// yesNo renders a per-item outcome: RESP3 a boolean (true only for 1), RESP2 the
// integer itself, so CF.INSERT's -1 (no room) survives in RESP2.
func (w *reply) yesNo(v int64) {
	if w.resp3() {
		w.bool(v == 1)
		return
	}
	w.int(v)
}

// renderInt replies with the one outcome as an integer (DEL).
func renderInt(w *reply, r *fsm.Result) {
	if r.Err != nil || len(r.Ints) == 0 {
		w.failResult(r)
		return
	}
	w.int(r.Ints[0])
}

// renderBools replies with an array of yes/no outcomes, ending in the error that
// stopped the command if there is one (BF.MADD on a full non-scaling filter).
// RESP3 renders -1 (CF.INSERT: no room) as false, as RedisBloom does.
func renderBools(w *reply, r *fsm.Result) {
	renderArray(w, r, w.yesNo)
}

// renderInts is renderBools with integers in every protocol (CF.INSERTNX).
func renderInts(w *reply, r *fsm.Result) {
	renderArray(w, r, w.int)
}

func renderArray(w *reply, r *fsm.Result, item func(int64)) {
	if r.Err != nil && !r.Stopped {
		w.fail(r.Err)
		return
	}
	n := len(r.Ints)
	if r.Err != nil {
		n++
	}
	w.array(n)
	for _, v := range r.Ints {
		item(v)
	}
	if r.Err != nil {
		w.fail(r.Err)
	}
}

// failResult answers a single-outcome command whose result has no outcome.
func (w *reply) failResult(r *fsm.Result) {
	if r.Err != nil {
		w.fail(r.Err)
		return
	}
	w.fail(redisError("ERR internal error: empty result"))
}

// set starts a set of n elements: RESP3 "~n", RESP2 an array.
func (w *reply) set(n int) {
	if w.resp3() {
		w.b = append(w.b, '~')
		w.b = strconv.AppendInt(w.b, int64(n), 10)
		w.b = append(w.b, '\r', '\n')
		return
	}
	w.array(n)
}
