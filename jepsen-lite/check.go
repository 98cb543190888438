package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The histories are checked for linearizability against a model of the
// filters that is exact where the filter is, and nondeterministic where the
// truth is: an unknown write either happened or did not, and a filter may
// answer "present" for an item it never held (a false positive).
//
// Most operations are checked per item (each item's operations on one key are
// an independent history), since an item's answers depend only on its own
// writes, except where another item collides with it: in a cuckoo filter, one
// with the same fingerprint and bucket pair; in a counting Bloom filter, one
// that shares every counter. The checker works out which items of a run have
// such a collision (oracle.go); for every other item the model demands exact
// answers: CF.COUNT and CBF.COUNT equal to the copies held, EXISTS false once
// every copy is deleted, a DEL that finds nothing when nothing is held. That
// is what makes a delete or an add applied twice visible in the very next
// reads. The short-lived keys, created, dumped, loaded and deleted by one
// worker, are checked per key, their state being the set of items they hold.

// in is an operation's input as the model sees it.
type in struct {
	kind    kind
	key     string
	item    string
	items   string // keyLoad: the loaded items, sorted and joined by "\n"
	unknown bool
	whole   bool // checked per key (a short-lived key), not per item
	exact   bool // no other item collides with this one: no false positives
}

type out struct {
	b bool
	n int64
}

// state is one item's or one short-lived key's state.
type state struct {
	n      int64  // copies held; 1 for an item added to a Bloom filter
	exists bool   // per key: the key exists
	items  string // per key: the items it holds, sorted, joined by "\n"
}

func (s state) has(item string) bool {
	return s.items != "" && slices.Contains(strings.Split(s.items, "\n"), item)
}

func (s state) with(item string) state {
	if s.has(item) {
		return s
	}
	var its []string
	if s.items != "" {
		its = strings.Split(s.items, "\n")
	}
	its = append(its, item)
	slices.Sort(its)
	s.items = strings.Join(its, "\n")
	return s
}

func partitionOf(i in) string {
	if i.whole {
		return i.key
	}
	return i.key + "\x00" + i.item
}

func partition(history []porcupine.Operation) [][]porcupine.Operation {
	by := map[string][]porcupine.Operation{}
	var keys []string
	for _, o := range history {
		k := partitionOf(o.Input.(in))
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], o)
	}
	parts := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, by[k])
	}
	return parts
}

var model = porcupine.NondeterministicModel{
	Partition: partition,
	Init:      func() []any { return []any{state{}} },
	Step: func(st, input, output any) []any {
		s, i, o := st.(state), input.(in), output.(out)
		var next []state
		if i.whole {
			next = stepKey(s, i, o)
		} else {
			next = stepItem(s, i, o)
		}
		res := make([]any, len(next))
		for j, n := range next {
			res[j] = n
		}
		return res
	},
	DescribeOperation: func(input, output any) string {
		i, o := input.(in), output.(out)
		what := fmt.Sprintf("%s %s %s", i.kind, i.key, i.item)
		switch {
		case i.unknown:
			return what + " -> ?"
		case i.kind == cfCount || i.kind == cbfCount:
			return fmt.Sprintf("%s -> %d", what, o.n)
		case i.kind == keyLoad:
			return fmt.Sprintf("%s %s [%s] -> %v", i.kind, i.key, strings.ReplaceAll(i.items, "\n", " "), o.b)
		}
		return fmt.Sprintf("%s -> %v", what, o.b)
	},
	DescribeState: func(st any) string {
		s := st.(state)
		if s.exists || s.items != "" {
			return fmt.Sprintf("exists=%v {%s}", s.exists, strings.ReplaceAll(s.items, "\n", " "))
		}
		return fmt.Sprintf("%d held", s.n)
	},
}

// stepItem is one operation on one item of a long-lived filter. It returns the
// states the operation may lead to; none if its answer is impossible.
func stepItem(s state, i in, o out) []state {
	held := s.n > 0
	switch i.kind {
	case bfAdd, bfMAdd:
		if i.unknown {
			return []state{s, {n: 1}}
		}
		// An item already added has every bit set: it cannot be new.
		if held && o.b {
			return nil
		}
		return []state{{n: 1}}
	case bfExists:
		if held && !o.b {
			return nil // a false negative
		}
		return []state{s}
	case cfAdd, cfInsert, cbfAdd:
		if i.unknown {
			return []state{s, {n: s.n + 1}}
		}
		if i.kind == cfInsert && !o.b {
			return []state{s} // no room for it: not added
		}
		if i.kind == cbfAdd {
			// The answer is "absent before".
			if held && o.b || i.exact && !held && !o.b {
				return nil
			}
		}
		return []state{{n: s.n + 1}}
	case cfDel, cbfDel:
		if i.unknown {
			if held {
				return []state{s, {n: s.n - 1}}
			}
			return []state{s}
		}
		switch {
		case held && !o.b:
			return nil // a held copy not found
		case held:
			return []state{{n: s.n - 1}}
		case o.b && i.exact:
			return nil // found a copy where none is held: one was added twice or deleted too few times
		}
		return []state{s}
	case cfExists, cbfExists:
		if held && !o.b || !held && o.b && i.exact {
			return nil
		}
		return []state{s}
	case cfCount, cbfCount:
		if o.n < s.n || i.exact && o.n != s.n {
			return nil
		}
		return []state{s}
	}
	return nil
}

// stepKey is one operation on a short-lived Bloom filter, whose state is
// whether it exists and the items it holds.
func stepKey(s state, i in, o out) []state {
	empty := state{}
	switch i.kind {
	case keyReserve:
		created := state{exists: true}
		if i.unknown {
			if s.exists {
				return []state{s}
			}
			return []state{s, created}
		}
		// o.b: created; false: refused because the key exists.
		if o.b == s.exists {
			return nil
		}
		if o.b {
			return []state{created}
		}
		return []state{s}
	case bfAdd, bfMAdd:
		added := s.with(i.item)
		added.exists = true // BF.ADD creates a missing filter
		if i.unknown {
			return []state{s, added}
		}
		if s.has(i.item) && o.b {
			return nil
		}
		return []state{added}
	case bfExists:
		if !s.exists && o.b || s.has(i.item) && !o.b {
			return nil
		}
		return []state{s}
	case keyDel:
		if i.unknown {
			return []state{s, empty}
		}
		if o.b != s.exists {
			return nil
		}
		return []state{empty}
	case keyExists:
		if o.b != s.exists {
			return nil
		}
		return []state{s}
	case keyLoad:
		loaded := state{exists: true, items: i.items}
		if i.unknown {
			if s.exists {
				return []state{s}
			}
			return []state{s, loaded}
		}
		// o.b: loaded; false: refused, since the first chunk may not land
		// on an existing key.
		if o.b == s.exists {
			return nil
		}
		if o.b {
			return []state{loaded}
		}
		return []state{s}
	}
	return nil
}

// group is a set of keys whose histories are checked, and drawn, together.
type group struct {
	name string
	keys func(key string) bool
}

var groups = []group{
	{bloomKey, func(k string) bool { return k == bloomKey }},
	{scalableKey, func(k string) bool { return k == scalableKey }},
	{cuckooKey, func(k string) bool { return k == cuckooKey }},
	{countingKey, func(k string) bool { return k == countingKey }},
	{"short-lived", shortLived},
}

// toPorcupine turns operations into porcupine's form, marking those whose
// item has no collision as exact.
func toPorcupine(ops []op, exact map[string]map[string]bool) []porcupine.Operation {
	res := make([]porcupine.Operation, 0, len(ops))
	for _, o := range ops {
		if o.kind == roExists {
			continue
		}
		i := in{kind: o.kind, key: o.key, item: o.item, unknown: o.unknown, whole: shortLived(o.key),
			exact: exact[o.key][o.item]}
		if o.kind == keyLoad {
			its := slices.Clone(o.items)
			slices.Sort(its)
			i.items = strings.Join(its, "\n")
		}
		res = append(res, porcupine.Operation{ClientId: o.client, Call: o.call, Return: o.ret,
			Input: i, Output: out{b: o.out, n: o.n}})
	}
	return res
}

// keyCheck is the linearizability check of one group's history, with what
// porcupine needs to draw it.
type keyCheck struct {
	key    string
	ops    int
	result porcupine.CheckResult
	model  porcupine.Model
	info   porcupine.LinearizationInfo
}

// checkKeys checks each group's history.
func checkKeys(ops []op, exact map[string]map[string]bool, timeout time.Duration) []keyCheck {
	m := model.ToModel()
	var res []keyCheck
	for _, g := range groups {
		var mine []op
		for _, o := range ops {
			if g.keys(o.key) {
				mine = append(mine, o)
			}
		}
		h := toPorcupine(mine, exact)
		c := keyCheck{key: g.name, ops: len(h), result: porcupine.Ok, model: m}
		if len(h) > 0 { // porcupine waits out its timeout on an empty history
			c.result, c.info = porcupine.CheckOperationsVerbose(m, h, timeout)
		}
		res = append(res, c)
	}
	return res
}
