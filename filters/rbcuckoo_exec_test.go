package filters

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// rbcExec runs one CF command on c as RedisBloom's command layer does (RESP2,
// the filter existing, the default cf-max-expansions of 32) and renders the
// reply as rbcRender renders a RESP reply, so that the two can be compared:
// integers as "N", simple strings as they are, errors as "ERR:text", nil as
// "nil", bulk strings in hex with an "x" before, arrays in brackets. Only what the tests send is handled.
func rbcExec(c *RBCuckoo, args []string) string {
	items := args[2:]
	switch cmd := strings.ToUpper(args[0]); cmd {
	case "CF.ADD", "CF.ADDNX":
		return rbcInsert(c, items, cmd == "CF.ADDNX", false)
	case "CF.INSERT", "CF.INSERTNX":
		return rbcInsert(c, items[1:], cmd == "CF.INSERTNX", true) // items[0] is ITEMS
	case "CF.EXISTS":
		return rbcBool(c.Test([]byte(items[0])))
	case "CF.MEXISTS":
		out := make([]string, len(items))
		for i, it := range items {
			out[i] = rbcBool(c.Test([]byte(it)))
		}
		return "[" + strings.Join(out, " ") + "]"
	case "CF.COUNT":
		return strconv.FormatUint(c.Count([]byte(items[0])), 10)
	case "CF.DEL":
		return rbcBool(c.Delete([]byte(items[0])))
	case "CF.COMPACT":
		c.Compact()
		return "OK"
	case "CF.DEBUG":
		return "x" + fmt.Sprintf("%x", c.Debug())
	case "CF.INFO":
		return fmt.Sprintf("[%s %d %s %d %s %d %s %d %s %d %s %d %s %d %s %d]",
			"Size", c.RedisBloomSize(), "Number of buckets", c.Buckets(), "Number of filters", c.Filters(),
			"Number of items inserted", c.Items(), "Number of items deleted", c.Deleted(),
			"Bucket size", c.BucketSize(), "Expansion rate", c.Expansion(), "Max iterations", c.MaxIterations())
	case "CF.SCANDUMP":
		pos, err := strconv.ParseInt(items[0], 10, 64)
		if err != nil || pos < 0 {
			return "ERR:Invalid position"
		}
		next, chunk := c.DumpChunk(pos)
		if chunk == nil {
			return fmt.Sprintf("[%d nil]", next)
		}
		return fmt.Sprintf("[%d x%x]", next, chunk)
	case "CF.LOADCHUNK":
		pos, err := strconv.ParseInt(items[0], 10, 64)
		if err != nil || pos == 0 {
			return "ERR:Invalid position"
		}
		if pos == 1 {
			return "ERR:ERR item exists" // the filter exists
		}
		if err := c.LoadChunk(pos, []byte(items[1])); err != nil {
			return "ERR:Couldn't load chunk!"
		}
		return "OK"
	}
	return "ERR:unknown command " + args[0]
}

func rbcBool(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// rbcInsert is RedisBloom's cfInsertCommon for an existing filter.
func rbcInsert(c *RBCuckoo, items []string, nx, multi bool) string {
	if err := c.CheckExpansions(RBCuckooMaxExpansions); err != nil {
		return "ERR:Maximum expansions reached"
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		var err error
		added := true
		if nx {
			added, err = c.AddNX([]byte(it))
		} else {
			err = c.Add([]byte(it))
		}
		switch {
		case err == nil && added:
			out = append(out, "1")
		case err == nil:
			out = append(out, "0")
		case !multi && errors.Is(err, ErrRBCuckooGrow):
			return "ERR:ERR Insufficient memory"
		case !multi:
			return "ERR:Filter is full"
		default:
			out = append(out, "-1")
		}
	}
	if !multi {
		return out[0]
	}
	return "[" + strings.Join(out, " ") + "]"
}

// rbcLoad makes a filter of a dump given as (cursor, chunk) pairs, the first
// the header, as CF.LOADCHUNK does.
func rbcLoad(chunks []rbcChunk) (*RBCuckoo, error) {
	c, err := NewRBCuckooFromHeader(chunks[0].data)
	if err != nil {
		return nil, err
	}
	for _, ch := range chunks[1:] {
		if err := c.LoadChunk(ch.next, ch.data); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// rbcChunk is one CF.SCANDUMP reply: the next cursor and the chunk.
type rbcChunk struct {
	next int64
	data []byte
}

// rbcDump returns c's whole dump, as CF.SCANDUMP from cursor 0 gives it.
func rbcDump(c *RBCuckoo) []rbcChunk {
	var out []rbcChunk
	for pos := int64(0); ; {
		next, data := c.DumpChunk(pos)
		if data == nil {
			return out
		}
		out = append(out, rbcChunk{next, data})
		pos = next
	}
}
