package main

import (
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
)

// The histories are checked per item: each item's operations must be
// linearizable against a model of one item in a filter. The models are
// nondeterministic where the truth is: an unknown write either happened or did
// not, and a filter may answer "present" for an item it never held (a false
// positive) but never "absent" for one it holds.

type opIn struct {
	kind    kind
	unknown bool
}

type opOut struct{ out bool }

// partition groups the operations of each item.
func partition(history []porcupine.Operation) [][]porcupine.Operation {
	by := map[string][]porcupine.Operation{}
	var keys []string
	for _, o := range history {
		k := o.Input.(itemIn).item
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], o)
	}
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, by[k])
	}
	return out
}

type itemIn struct {
	item string
	opIn
}

// bloomModel: the state is whether the item was added.
var bloomModel = porcupine.NondeterministicModel{
	Partition: partition,
	Init:      func() []any { return []any{false} },
	Step: func(state, input, output any) []any {
		present, in, out := state.(bool), input.(itemIn), output.(opOut)
		switch in.kind {
		case bfAdd:
			if in.unknown {
				return []any{present, true}
			}
			return []any{true}
		case bfExists:
			if present && !out.out {
				return nil // a false negative: an added item reads as absent
			}
			return []any{present}
		}
		return nil
	},
	DescribeOperation: describe,
	DescribeState: func(state any) string {
		if state.(bool) {
			return "added"
		}
		return "absent"
	},
}

// cuckooModel: the state is how many copies of the item the filter holds.
var cuckooModel = porcupine.NondeterministicModel{
	Partition: partition,
	Init:      func() []any { return []any{0} },
	Step: func(state, input, output any) []any {
		n, in, out := state.(int), input.(itemIn), output.(opOut)
		switch in.kind {
		case cfAdd:
			if in.unknown {
				return []any{n, n + 1}
			}
			return []any{n + 1}
		case cfDel:
			if in.unknown {
				if n > 0 {
					return []any{n, n - 1}
				}
				return []any{n}
			}
			// A delete finds the item's own fingerprint whenever a copy is held.
			if out.out != (n > 0) {
				return nil
			}
			return []any{max(n-1, 0)}
		case cfExists:
			if n > 0 && !out.out {
				return nil
			}
			return []any{n}
		}
		return nil
	},
	DescribeOperation: describe,
	DescribeState:     func(state any) string { return fmt.Sprintf("%d held", state.(int)) },
}

func describe(input, output any) string {
	in, out := input.(itemIn), output.(opOut)
	if in.unknown {
		return fmt.Sprintf("%s %s -> ?", in.kind, in.item)
	}
	return fmt.Sprintf("%s %s -> %v", in.kind, in.item, out.out)
}

// toPorcupine turns the operations of kinds into porcupine's form.
func toPorcupine(ops []op, kinds ...kind) []porcupine.Operation {
	var out []porcupine.Operation
	for _, o := range ops {
		for _, k := range kinds {
			if o.kind == k {
				out = append(out, porcupine.Operation{ClientId: o.client, Call: o.call, Return: o.ret,
					Input: itemIn{item: o.item, opIn: opIn{kind: o.kind, unknown: o.unknown}}, Output: opOut{o.out}})
			}
		}
	}
	return out
}

// keyCheck is the linearizability check of one filter's history, with what
// porcupine needs to draw it.
type keyCheck struct {
	key    string
	ops    int
	result porcupine.CheckResult
	model  porcupine.Model
	info   porcupine.LinearizationInfo
}

// checkKeys checks the Bloom and the cuckoo histories, in that order.
func checkKeys(ops []op, timeout time.Duration) []keyCheck {
	check := func(key string, m porcupine.NondeterministicModel, kinds ...kind) keyCheck {
		h := toPorcupine(ops, kinds...)
		c := keyCheck{key: key, ops: len(h), result: porcupine.Ok, model: m.ToModel()}
		if len(h) > 0 { // porcupine waits out its timeout on an empty history
			c.result, c.info = porcupine.CheckOperationsVerbose(c.model, h, timeout)
		}
		return c
	}
	return []keyCheck{check(bloomKey, bloomModel, bfAdd, bfExists), check(cuckooKey, cuckooModel, cfAdd, cfDel, cfExists)}
}

// linearizable checks the Bloom and the cuckoo histories.
func linearizable(ops []op, timeout time.Duration) (bloom, cuckoo porcupine.CheckResult) {
	c := checkKeys(ops, timeout)
	return c[0].result, c[1].result
}

// expectation is what the final state of the filters must satisfy.
type expectation struct {
	bloomPresent  []string // acknowledged BF.ADDs
	cuckooPresent []string // acknowledged CF.ADDs with no delete that may have landed
	// The cuckoo filter's item count lies in [minHeld, maxHeld]: acknowledged
	// adds less acknowledged deletes, widened by the unknown ones. Outside it, a
	// write was lost or applied twice.
	minHeld, maxHeld int64
}

func expect(ops []op) expectation {
	var e expectation
	addedCF := map[string]bool{}
	maybeDeleted := map[string]bool{}
	var ackedAdds, unknownAdds, ackedDels, unknownDels int64
	for _, o := range ops {
		switch {
		case o.kind == bfAdd && !o.unknown:
			e.bloomPresent = append(e.bloomPresent, o.item)
		case o.kind == cfAdd && o.unknown:
			unknownAdds++
		case o.kind == cfAdd:
			ackedAdds++
			addedCF[o.item] = true
		case o.kind == cfDel && o.unknown:
			unknownDels++
			maybeDeleted[o.item] = true
		case o.kind == cfDel && o.out:
			ackedDels++
			maybeDeleted[o.item] = true
		}
	}
	for item := range addedCF {
		if !maybeDeleted[item] {
			e.cuckooPresent = append(e.cuckooPresent, item)
		}
	}
	e.minHeld = ackedAdds - ackedDels - unknownDels
	e.maxHeld = ackedAdds + unknownAdds - ackedDels
	return e
}
